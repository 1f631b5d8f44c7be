// server/http_route.h
//
// What sekka's HTTP routes and the peers' share: a route's row (method, path, who may call it,
// how the request becomes a command's arguments, how the Reply becomes the body its clients
// parse), what a route sees of a request, and the reply shapes. Each wire's routes are a table
// in a file of their own (sekka_routes.cc, leaf_routes.cc, tinyid_routes.cc, cosid_routes.cc);
// the dispatcher (http_handler.cc) finds a request's route in them. Internal to server/.
//
// Thread-safety: the tables are immutable; the functions are reentrant.

#ifndef SEKKA_SERVER_HTTP_ROUTE_H_
#define SEKKA_SERVER_HTTP_ROUTE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/commands.h"
#include "server/http.h"
#include "server/service.h"

namespace sekka::server::routes {

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::string extra_headers;
};

// The headers every error of `status` carries, whatever its body's shape: when to come back
// (503) and how to authenticate (401).
std::string_view ErrorHeaders(int status);
// An error of `status` with `body` in its wire's shape, and the headers every error of that
// status carries (ErrorHeaders).
HttpReply ErrorReply(int status, std::string body);
// sekka's error shape: {"error":{"code":"..","message":".."}} (secrets redacted).
HttpReply JsonError(int status, std::string_view code, std::string_view message);
HttpReply FromError(const Error& e);
HttpReply Text(std::string body);
HttpReply Json(std::string body);
HttpReply Html(std::string body);
void AppendDec(std::string& out, std::int64_t v);

// What a route sees of a request.
struct RouteInput {
  const http::Request& request;
  std::string_view path;
  std::string_view query;
  std::string_view rest;  // the path after a prefix route's prefix
};

// Accept: text/plain without application/json.
bool WantsText(const RouteInput& in);

// A command's arguments, owned (query values and path segments are decoded copies).
using ArgList = std::vector<std::string>;

enum class Auth {
  kNone,     // health, readiness, Leaf's decode
  kMetrics,  // the bearer header, unless server.open_metrics (a scraper that cannot send one)
  kCommand,  // as the command says (CommandSpec::needs_auth), with Authorization: Bearer
  kTinyid,   // as kCommand, and tinyid's ?token= is as good as the bearer header
  kBrowser,  // the status page: the bearer header, or Basic with the token as the password
             // (a browser asks for it and sends it with the page's own requests)
};

// Routes of peers whose servers took any method (Spring's @RequestMapping).
constexpr std::string_view kAnyMethod = "*";

struct HttpRoute {
  std::string_view method;  // "GET", or kAnyMethod
  std::string_view path;
  bool prefix = false;         // path is a prefix; the rest is RouteInput::rest
  Auth auth = Auth::kCommand;  // a route without a command and kCommand always needs it
  // The command it runs, or null for a route that answers from the service alone (then
  // `format` gets an empty reply).
  const CommandSpec* command = nullptr;
  Command label = Command::kOther;  // its metrics label
  // Fills the command's arguments. Errors: a bad path or query.
  Status (*args)(Service& service, const RouteInput& in, ArgList& out) = nullptr;
  // The reply in the shape the route's clients parse: the command's result, or an error of
  // any step (authentication, arguments, the command), each peer's errors in its own shape.
  HttpReply (*format)(Service& service, const RouteInput& in, Result<Reply>& reply) = nullptr;
  // Where a route without a command runs (commands.h, Lane); one with a command runs where
  // the command says.
  Lane lane = Lane::kLoop;
};

// No arguments.
Status NoArgs(Service& service, const RouteInput& in, ArgList& out);
// The rest of the path, one segment, percent-decoded, as the first argument (a tag, an id).
Status PathArg(Service& service, const RouteInput& in, ArgList& out);
// Splits the rest of a path into `n` percent-decoded segments.
Status PathSegments(const RouteInput& in, std::size_t n, std::string_view shape, ArgList& out);
// The query parameter `key`, which must be there, as the next argument.
Status RequiredParam(const RouteInput& in, std::string_view key, ArgList& out);

// Authorization: Bearer <server.auth_token> (true when no token is set).
bool Authorized(Service& service, const http::Request& request);

// Each wire's routes, in the order the dispatcher tries them.
const std::vector<HttpRoute>& SekkaRoutes();
const std::vector<HttpRoute>& LeafRoutes();
const std::vector<HttpRoute>& TinyidRoutes();
const std::vector<HttpRoute>& CosIdRoutes();

// CosId's error shape: {"code","msg","errors"} (its routes' 405 too).
HttpReply CosIdReply(int status, std::string_view code, std::string_view message);

}  // namespace sekka::server::routes

#endif  // SEKKA_SERVER_HTTP_ROUTE_H_
