#include "server/http_route.h"

#include <fmt/format.h>
#include <strings.h>

#include <optional>

#include "sekka/secrets.h"

namespace sekka::server::routes {

std::string_view ErrorHeaders(int status) {
  return status == 503 ? "Retry-After: 1\r\n" : status == 401 ? "WWW-Authenticate: Bearer\r\n" : "";
}

HttpReply ErrorReply(int status, std::string body) {
  HttpReply r;
  r.status = status;
  r.body = std::move(body);
  r.extra_headers = ErrorHeaders(status);
  return r;
}

HttpReply JsonError(int status, std::string_view code, std::string_view message) {
  return ErrorReply(status, fmt::format("{{\"error\":{{\"code\":\"{}\",\"message\":\"{}\"}}}}",
                                        code, http::JsonEscape(RedactSecrets(message))));
}

HttpReply FromError(const Error& e) {
  const WireError w = MapError(e.code);
  return JsonError(w.http_status, w.http_code, e.message);
}

HttpReply Text(std::string body) {
  HttpReply r;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(body);
  return r;
}

HttpReply Json(std::string body) {
  HttpReply r;
  r.body = std::move(body);
  return r;
}

void AppendDec(std::string& out, std::int64_t v) {
  char buf[20];
  out.append(buf, FormatDec(v, buf));
}

bool WantsText(const RouteInput& in) {
  return in.request.accept.find("text/plain") != std::string::npos &&
         in.request.accept.find("application/json") == std::string::npos;
}

Status NoArgs(Service&, const RouteInput&, ArgList&) { return Status::Ok(); }

// The rest of the path, one segment, percent-decoded, as the first argument (a tag, an id).
Status PathArg(Service&, const RouteInput& in, ArgList& out) {
  if (in.rest.find('/') != std::string_view::npos) {
    return InvalidArgument("the path has a / after the route: a / in a tag is spelled %2F");
  }
  std::optional<std::string> v = http::PercentDecode(in.rest);
  if (!v) return InvalidArgument("the path is not valid percent-encoding");
  out.push_back(std::move(*v));
  return Status::Ok();
}

HttpReply Html(std::string body) {
  HttpReply r;
  r.content_type = "text/html; charset=utf-8";
  r.body = std::move(body);
  return r;
}

// Splits the rest of a path into `n` percent-decoded segments.
Status PathSegments(const RouteInput& in, std::size_t n, std::string_view shape, ArgList& out) {
  std::string_view rest = in.rest;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t slash = rest.find('/');
    if ((slash == std::string_view::npos) != (i + 1 == n)) {
      return InvalidArgument(fmt::format("the path is not {}", shape));
    }
    std::optional<std::string> v = http::PercentDecode(rest.substr(0, slash));
    if (!v || v->empty()) return InvalidArgument(fmt::format("the path is not {}", shape));
    out.push_back(std::move(*v));
    if (slash != std::string_view::npos) rest.remove_prefix(slash + 1);
  }
  return Status::Ok();
}

Status RequiredParam(const RouteInput& in, std::string_view key, ArgList& out) {
  std::optional<std::string> v = http::QueryParam(in.query, key);
  if (!v) return InvalidArgument(fmt::format("{} is required", key));
  out.push_back(std::move(*v));
  return Status::Ok();
}

bool Authorized(Service& service, const http::Request& request) {
  const std::string& token = service.config().auth_token;
  if (token.empty()) return true;
  constexpr std::string_view kBearer = "Bearer ";
  const std::string& h = request.authorization;
  return h.size() >= kBearer.size() && strncasecmp(h.c_str(), "bearer ", 7) == 0 &&
         TokenEquals(std::string_view(h).substr(kBearer.size()), token);
}

}  // namespace sekka::server::routes
