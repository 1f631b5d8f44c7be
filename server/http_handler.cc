// HTTP: finds a request's route in the wires' tables (server/http_route.h), checks its Host,
// Origin and credentials, runs its command and formats the reply in its wire's shape.

#include <arpa/inet.h>
#include <fmt/format.h>
#include <strings.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "server/commands.h"
#include "server/handlers.h"
#include "server/http_route.h"

namespace sekka::server {
namespace {

using routes::ArgList;
using routes::Auth;
using routes::Authorized;
using routes::CosIdReply;
using routes::HttpReply;
using routes::HttpRoute;
using routes::JsonError;
using routes::kAnyMethod;
using routes::RouteInput;

// Every route, sekka's first, then the peers'.
const std::vector<HttpRoute>& Routes() {
  static const std::vector<HttpRoute> all = [] {
    std::vector<HttpRoute> out;
    for (const auto* table : {&routes::SekkaRoutes(), &routes::LeafRoutes(),
                              &routes::TinyidRoutes(), &routes::CosIdRoutes()}) {
      out.insert(out.end(), table->begin(), table->end());
    }
    return out;
  }();
  return all;
}

bool PathMatches(const HttpRoute& route, std::string_view path) {
  return route.prefix ? path.size() > route.path.size() && path.rfind(route.path, 0) == 0
                      : path == route.path;
}

// The route for `path` and `method`. When the path matches routes of other methods only,
// `allowed` lists them ("GET, POST").
const HttpRoute* FindRoute(std::string_view method, std::string_view path, std::string& allowed) {
  for (const HttpRoute& route : Routes()) {
    if (!PathMatches(route, path)) continue;
    if (route.method == method || route.method == kAnyMethod) return &route;
    // HEAD: a GET route that answers from the service alone (no command: none issues an id).
    if (method == "HEAD" && route.method == "GET" && route.command == nullptr) return &route;
    if (allowed.find(route.method) == std::string::npos) {
      if (!allowed.empty()) allowed += ", ";
      allowed += route.method;
    }
  }
  return nullptr;
}

// The route's arguments as views, ready for the command.
std::vector<std::string_view> Views(const ArgList& args) {
  return std::vector<std::string_view>(args.begin(), args.end());
}

// "Basic base64(user:password)" with the token as the password (any user).
bool BasicAuthorized(Service& service, const http::Request& request) {
  const std::string& h = request.authorization;
  if (h.size() < 6 || strncasecmp(h.c_str(), "basic ", 6) != 0) return false;
  const Result<std::string> credentials = Base64Decode(std::string_view(h).substr(6));
  if (!credentials.ok()) return false;
  const std::string& decoded = *credentials;
  const std::size_t colon = decoded.find(':');
  return colon != std::string::npos &&
         TokenEquals(std::string_view(decoded).substr(colon + 1), service.config().auth_token);
}

// tinyid's routes on a store that keeps tinyid's tokens: tinyid's own rule (?token= is one that
// tiny_id_token lets ask for ?bizType=), beside the server token where one is set.
bool TinyidAuthorized(Service& service, const RouteInput& in) {
  const std::string& server_token = service.config().auth_token;
  const std::optional<std::string> token = http::QueryParam(in.query, "token");
  if (!server_token.empty() &&
      (Authorized(service, in.request) || (token && TokenEquals(*token, server_token)))) {
    return true;
  }
  const std::optional<std::string> tag = http::QueryParam(in.query, "bizType");
  return token && tag && service.TinyidTokenAllows(*tag, *token);
}

bool RouteAuthorized(Service& service, const HttpRoute& route, const RouteInput& in) {
  if (route.auth == Auth::kTinyid && service.tinyid_tokens_on()) {
    return TinyidAuthorized(service, in);
  }
  const bool open =
      route.auth == Auth::kNone || (route.auth == Auth::kMetrics && service.config().open_metrics);
  const bool needs_auth = !open && (route.command == nullptr || route.command->needs_auth);
  if (!needs_auth || Authorized(service, in.request)) return true;
  if (route.auth == Auth::kBrowser) return BasicAuthorized(service, in.request);
  if (route.auth != Auth::kTinyid) return false;
  const std::optional<std::string> token = http::QueryParam(in.query, "token");
  return token && TokenEquals(*token, service.config().auth_token);
}

// What a caller refused by RouteAuthorized is told: how this route takes its token.
std::string_view AuthRefusal(const Service& service, Auth auth) {
  switch (auth) {
    case Auth::kTinyid:
      return service.tinyid_tokens_on()
                 ? "token is error: send ?token= a token that tiny_id_token gives this bizType "
                   "(or server.auth_token)"
                 : "token is error: send ?token=<server.auth_token>";
    case Auth::kBrowser:
      return "the status page needs the token: as the password (any user), or Authorization: "
             "Bearer <token>";
    case Auth::kMetrics:
      return "missing or wrong bearer token: send Authorization: Bearer <token> (Prometheus: "
             "authorization.credentials_file), or set server.open_metrics";
    case Auth::kNone:
    case Auth::kCommand:
      break;
  }
  return "missing or wrong bearer token: send Authorization: Bearer <token>";
}

HttpReply RunRoute(Service& service, const HttpRoute& route, const RouteInput& in) {
  Result<Reply> reply = Reply(std::int64_t{0});
  ArgList args;
  if (!RouteAuthorized(service, route, in)) {
    reply = Unauthenticated(std::string(AuthRefusal(service, route.auth)));
  } else if (!http::PercentDecode(in.query)) {  // never a raw "%zz" taken for a name
    reply = InvalidArgument(
        "the query is not valid percent-encoding: allowed %XX with two hex "
        "digits, and %25 for a %");
  } else if (Status s = route.args(service, in, args); !s.ok()) {
    reply = s.error();
  } else if (route.command != nullptr) {
    const std::vector<std::string_view> views = Views(args);
    reply = Execute(service, *route.command, views);
  }
  return route.format(service, in, reply);
}

// The host of a Host header or an Origin's authority, lower-cased, without its port and
// IPv6 brackets ("[::1]:8080" -> "::1"); "" when it is not host[:port] (a user part, anything
// after the brackets, a port that is not digits: no browser sends those).
std::string HostName(std::string_view authority) {
  std::string_view host = authority, port;
  if (host.starts_with('[')) {
    const std::size_t close = host.find(']');
    if (close == std::string_view::npos) return "";
    port = host.substr(close + 1);
    host = host.substr(1, close - 1);
    if (!port.empty() && !port.starts_with(':')) return "";
    if (!port.empty()) port.remove_prefix(1);
  } else if (const std::size_t colon = host.rfind(':'); colon != std::string_view::npos) {
    port = host.substr(colon + 1);
    host = host.substr(0, colon);
  }
  constexpr std::string_view kHostChars =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:";
  if (host.empty() || host.find_first_not_of(kHostChars) != std::string_view::npos ||
      port.find_first_not_of("0123456789") != std::string_view::npos) {
    return "";
  }
  return Lower(host, std::string_view::npos);
}

// A Host a request may name: an IP address (a browser reaching it by address is not a DNS
// rebinding), localhost, or a name of server.allowed_hosts.
bool AllowedHost(Service& service, std::string_view host_header) {
  if (host_header.empty()) return true;  // HTTP/1.0
  const std::string host = HostName(host_header);
  if (host.empty()) return false;
  unsigned char address[16];
  if (inet_pton(AF_INET, host.c_str(), address) == 1 ||
      inet_pton(AF_INET6, host.c_str(), address) == 1 || host == "localhost") {
    return true;
  }
  const std::vector<std::string>& names = service.config().allowed_hosts;
  return std::find_if(names.begin(), names.end(), [&](const std::string& name) {
           return name == host || name == "*";
         }) != names.end();
}

// A Host that is not the server's: a web page reaching it through DNS rebinding (issue 24,
// finding 5).
std::optional<HttpReply> RefuseForeignHost(Service& service, const http::Request& request) {
  if (AllowedHost(service, request.host)) return std::nullopt;
  return JsonError(403, "forbidden",
                   fmt::format("Host \"{}\" is not allowed: allowed IP addresses, localhost and "
                               "server.allowed_hosts",
                               request.host.substr(0, 100)));
}

// "host[:port]" of an Origin or Referer ("https://a.example:8080/page" -> "a.example:8080"),
// lower case; "" when it has none ("null").
std::string OriginHost(std::string_view url) {
  const std::size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return "";
  url.remove_prefix(scheme + 3);
  return Lower(url.substr(0, url.find('/')), std::string::npos);
}

// What says that a browser sent the request for a page of another origin, or "" when nothing
// does: Sec-Fetch-Site (Fetch Metadata) when the browser sends it (anything but "same-origin"
// and "none", a typed URL or bookmark), else an Origin, else a Referer, whose host:port is not
// the request's Host. A request with none of them is no browser's cross-site request (curl,
// the peers' clients).
std::string CrossSite(const http::Request& request) {
  if (!request.fetch_site.empty()) {
    const std::string site = Lower(request.fetch_site, std::string::npos);
    if (site == "same-origin" || site == "none") return "";
    return fmt::format("Sec-Fetch-Site: {}", request.fetch_site.substr(0, 20));
  }
  const std::string host = Lower(request.host, std::string::npos);
  if (!request.origin.empty()) {
    if (OriginHost(request.origin) == host) return "";
    return fmt::format("Origin: {}", request.origin.substr(0, 100));
  }
  if (!request.referer.empty() && OriginHost(request.referer) != host) {
    return fmt::format("Referer: {}", request.referer.substr(0, 100));
  }
  return "";
}

// A route that issues ids or ranges or changes state (CommandSpec::changes), on any method,
// GET included, refuses a request a browser sent for a page of another site (issue 42: an
// <img src> created tags and took ranges).
std::optional<HttpReply> RefuseCrossSite(const HttpRoute& route, const http::Request& request) {
  if (route.command == nullptr || !route.command->changes) return std::nullopt;
  const std::string why = CrossSite(request);
  if (why.empty()) return std::nullopt;
  return JsonError(403, "forbidden",
                   fmt::format("a {} from another site ({}) is not allowed: a web page may not "
                               "issue ids or change this server's state",
                               request.method.substr(0, 10), why));
}

HttpReply Dispatch(Service& service, const http::Request& request, Command& command) {
  std::string_view path, query;
  http::SplitTarget(request.target, path, query);
  command = Command::kOther;
  if (std::optional<HttpReply> refused = RefuseForeignHost(service, request)) return *refused;
  std::string allowed;
  const HttpRoute* route = FindRoute(request.method, path, allowed);
  if (route == nullptr) {
    if (allowed.empty()) {
      return JsonError(404, "not_found", fmt::format("no such path: {}", path.substr(0, 200)));
    }
    const std::string why =
        fmt::format("method {} is not allowed: allowed {}", request.method.substr(0, 20), allowed);
    // The CosId proxy's routes answer in CosId's shape, as its own server's 405 does.
    const bool cosid = path.starts_with("/machines/") || path.starts_with("/segments/");
    HttpReply r = cosid ? CosIdReply(405, "405", why) : JsonError(405, "method_not_allowed", why);
    r.extra_headers += fmt::format("Allow: {}\r\n", allowed);
    return r;
  }
  command = route->label;
  if (std::optional<HttpReply> refused = RefuseCrossSite(*route, request)) return *refused;
  const RouteInput in{request, path, query,
                      route->prefix ? path.substr(route->path.size()) : std::string_view()};
  return RunRoute(service, *route, in);
}

}  // namespace

Lane LaneOf(Service& service, const http::Request& request) {
  std::string_view path, query;
  http::SplitTarget(request.target, path, query);
  std::string allowed;
  const HttpRoute* route = FindRoute(request.method, path, allowed);
  if (route == nullptr) return Lane::kLoop;
  if (route->command == nullptr) return route->lane;
  const RouteInput in{request, path, query,
                      route->prefix ? path.substr(route->path.size()) : std::string_view()};
  ArgList args;
  // A request with bad arguments is answered at once.
  if (!route->args(service, in, args).ok()) return Lane::kLoop;
  const std::vector<std::string_view> views = Views(args);
  return LaneOf(service, *route->command, views);
}

// The credentials a request sent, when a token is set: an Authorization header (the bearer
// token or a Basic password of it) and tinyid's ?token=. Any that are not the token make it
// kWrong, whatever the route, even one that needs none: each is a guess (answered late, and the
// last on its connection), however the route answers (tinyid's refusals are 200s in its shape).
enum class Credentials { kNone, kRight, kWrong };
Credentials HttpCredentials(Service& service, const http::Request& request) {
  const std::string& token = service.config().auth_token;
  if (token.empty()) return Credentials::kNone;
  Credentials seen = Credentials::kNone;
  if (!request.authorization.empty()) {
    if (!Authorized(service, request) && !BasicAuthorized(service, request)) {
      return Credentials::kWrong;
    }
    seen = Credentials::kRight;
  }
  std::string_view path, query;
  http::SplitTarget(request.target, path, query);
  if (const std::optional<std::string> param = http::QueryParam(query, "token")) {
    if (!TokenEquals(*param, token)) return Credentials::kWrong;
    seen = Credentials::kRight;
  }
  return seen;
}

void HandleHttp(Service& service, Session& session, const http::Request& request, std::string& out,
                bool& close) {
  Command command = Command::kOther;
  HttpReply r = Dispatch(service, request, command);
  service.CountRequest(Protocol::kHttp, command, r.status < 400);
  close = !request.keep_alive;
  switch (HttpCredentials(service, request)) {
    case Credentials::kWrong:
      session.auth_failed = close = true;  // a guess: answered late, and the last on it
      break;
    case Credentials::kRight:
      session.Authenticate();
      break;
    case Credentials::kNone:
      break;
  }
  const std::string response =
      http::Response(r.status, r.content_type, r.body, !close, r.extra_headers);
  if (request.method == "HEAD") {
    // The GET answer's status and headers (its Content-Length too), without the body.
    out.append(response, 0, response.find("\r\n\r\n") + 4);
  } else {
    out += response;
  }
}

std::string HttpParseError(int status, std::string_view message) {
  // 400 bad input; 408 a request too slow to arrive; 503 a limit of the server's (too many
  // connections); else a request too large.
  const std::string_view code = status == 400   ? "invalid_argument"
                                : status == 408 ? "request_timeout"
                                : status == 503 ? "unavailable"
                                                : "too_large";
  const HttpReply r = JsonError(status, code, message);
  return http::Response(r.status, r.content_type, r.body, false, r.extra_headers);
}

}  // namespace sekka::server
