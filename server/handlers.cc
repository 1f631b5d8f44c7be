#include "server/handlers.h"

#include <fmt/format.h>
#include <strings.h>

#include <algorithm>
#include <charconv>

#include "server/resp.h"

namespace sekka::server {
namespace {

constexpr const char* kVersion = SEKKA_VERSION;  // from CMakeLists.txt

// ---------------------------------------------------------------------------------------------
// HTTP

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::string extra_headers;
};

HttpReply JsonError(int status, std::string_view code, std::string_view message) {
  HttpReply r;
  r.status = status;
  r.body = fmt::format("{{\"error\":{{\"code\":\"{}\",\"message\":\"{}\"}}}}", code,
                       http::JsonEscape(message));
  if (status == 503) r.extra_headers = "Retry-After: 1\r\n";
  if (status == 401) r.extra_headers = "WWW-Authenticate: Bearer\r\n";
  return r;
}

HttpReply FromError(const Error& e) {
  const WireError w = MapError(e.code);
  return JsonError(w.http_status, w.http_code, e.message);
}

bool WantsText(const http::Request& request) {
  return request.accept.find("text/plain") != std::string::npos &&
         request.accept.find("application/json") == std::string::npos;
}

Result<IdFormat> FormatParam(std::string_view query) {
  std::optional<std::string> f = http::QueryParam(query, "format");
  if (!f) return IdFormat::kDec;
  return ParseIdFormat(*f);
}

Result<std::int64_t> CountParam(std::string_view text, std::int64_t max) {
  std::int64_t n = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || ptr != text.data() + text.size() || n < 1 || n > max) {
    return InvalidArgument(
        fmt::format("count \"{}\" is not valid: allowed 1 to {}", text.substr(0, 40), max));
  }
  return n;
}

HttpReply IdsReply(Service& service, const http::Request& request, std::string_view query,
                   bool single) {
  Result<IdFormat> format = FormatParam(query);
  if (!format.ok()) return FromError(format.error());
  std::int64_t count = 1;
  if (!single) {
    std::optional<std::string> c = http::QueryParam(query, "count");
    if (!c) {
      return JsonError(
          400, "invalid_argument",
          fmt::format("count is required: allowed 1 to {}", service.config().max_batch));
    }
    Result<std::int64_t> n = CountParam(*c, service.config().max_batch);
    if (!n.ok()) return FromError(n.error());
    count = *n;
  }
  std::vector<Id> ids(static_cast<std::size_t>(count));
  if (Status s = service.NextIds(std::span<Id>(ids)); !s.ok()) return FromError(s.error());
  const bool text = WantsText(request);
  HttpReply r;
  auto append = [&](Id id) {
    if (*format == IdFormat::kDec) {
      char buf[20];
      r.body.append(buf, FormatDec(id, buf));
    } else {
      r.body += FormatId(id, *format, service.layout());
    }
  };
  if (text) {
    r.content_type = "text/plain; charset=utf-8";
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) r.body += '\n';
      append(ids[i]);
    }
    return r;
  }
  r.body.reserve(ids.size() * 24 + 16);
  r.body += single ? "{\"id\":\"" : "{\"ids\":[";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (!single) r.body += i > 0 ? ",\"" : "\"";
    append(ids[i]);
    r.body += '"';
  }
  r.body += single ? "}" : "]}";
  return r;
}

HttpReply DecodeReply(Service& service, std::string_view text) {
  Result<Id> id = ParseId(text, IdFormat::kDec, service.layout());
  Result<DecodedId> d = id.ok() ? service.Decode(*id) : Result<DecodedId>(std::move(id).error());
  if (!d.ok()) return FromError(d.error());
  HttpReply r;
  r.body = fmt::format(
      "{{\"id\":\"{}\",\"time\":\"{}\",\"timestamp_ms\":{},\"datacenter\":{},\"worker\":{},"
      "\"sequence\":{}}}",
      d->id, FormatUtcMillis(d->timestamp_ms), d->timestamp_ms, d->datacenter, d->worker,
      d->sequence);
  return r;
}

// Leaf's /decodeSnowflakeId answer: string values, "timestamp" with the time in brackets.
HttpReply LeafDecodeReply(Service& service, std::string_view query) {
  std::optional<std::string> text = http::QueryParam(query, "snowflakeId");
  if (!text) return JsonError(400, "invalid_argument", "snowflakeId is required");
  Result<Id> id = ParseId(*text, IdFormat::kDec, service.layout());
  Result<DecodedId> d = id.ok() ? service.Decode(*id) : Result<DecodedId>(std::move(id).error());
  if (!d.ok()) return FromError(d.error());
  std::string time = FormatUtcMillis(d->timestamp_ms);  // 2026-01-02T03:04:05.678Z
  time[10] = ' ';
  time.pop_back();
  HttpReply r;
  r.body = fmt::format(
      "{{\"timestamp\":\"{}({})\",\"datacenterId\":\"{}\",\"workerId\":\"{}\",\"sequenceId\":\"{}"
      "\"}}",
      d->timestamp_ms, time, d->datacenter, d->worker, d->sequence);
  return r;
}

// A segment request: /v1/segment/<tag>[?count=N] (JSON, or text with Accept: text/plain) or
// Leaf's /api/segment/get/<key> (plain decimal, one id).
struct SegmentAsk {
  bool leaf = false;
  std::string tag;  // percent-decoded
  std::int64_t count = 1;
  bool count_given = false;  // ?count= present: the reply is an array
  Status error;              // a bad tag or count: answered with it
};

// nullopt when `path` is not a segment request.
std::optional<SegmentAsk> ParseSegmentAsk(const Service& service, std::string_view path,
                                          std::string_view query) {
  SegmentAsk ask;
  std::string_view tag_text;
  if (path.rfind("/v1/segment/", 0) == 0) {
    tag_text = path.substr(12);
  } else if (path.rfind("/api/segment/get/", 0) == 0) {
    tag_text = path.substr(17);
    ask.leaf = true;
    query = {};
  } else {
    return std::nullopt;
  }
  std::optional<std::string> tag = http::PercentDecode(tag_text);
  if (!tag) {
    ask.error = InvalidArgument("the tag in the path is not valid percent-encoding");
    return ask;
  }
  ask.tag = std::move(*tag);
  if (std::optional<std::string> c = http::QueryParam(query, "count"); c) {
    Result<std::int64_t> n = CountParam(*c, service.config().max_batch);
    if (!n.ok()) {
      ask.error = n.error();
      return ask;
    }
    ask.count = *n;
    ask.count_given = true;
  }
  return ask;
}

HttpReply SegmentReply(Service& service, const http::Request& request, const SegmentAsk& ask) {
  if (!ask.error.ok()) return FromError(ask.error.error());
  const bool leaf = ask.leaf;
  std::vector<std::int64_t> ids(static_cast<std::size_t>(ask.count));
  if (Status s = service.NextSegmentIds(ask.tag, std::span(ids)); !s.ok()) {
    return FromError(s.error());
  }
  HttpReply r;
  char buf[20];
  if (leaf || WantsText(request)) {
    r.content_type = "text/plain; charset=utf-8";
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) r.body += '\n';
      r.body.append(buf, FormatDec(ids[i], buf));
    }
    return r;
  }
  r.body = ask.count_given ? "{\"ids\":[" : "{\"id\":";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) r.body += ',';
    r.body += '"';
    r.body.append(buf, FormatDec(ids[i], buf));
    r.body += '"';
  }
  r.body += ask.count_given ? "]}" : "}";
  return r;
}

// Compares a presented secret with the token in time that depends only on their lengths, so
// that response times do not reveal how much of a guess was right.
bool TokenEquals(std::string_view presented, std::string_view token) {
  unsigned char diff = presented.size() == token.size() ? 0 : 1;
  for (std::size_t i = 0; i < presented.size(); ++i) {
    diff |= static_cast<unsigned char>(presented[i] ^
                                       token[i % std::max<std::size_t>(1, token.size())]);
  }
  return diff == 0 && !token.empty();
}

bool Authorized(Service& service, const http::Request& request) {
  const std::string& token = service.config().auth_token;
  if (token.empty()) return true;
  constexpr std::string_view kBearer = "Bearer ";
  const std::string& h = request.authorization;
  return h.size() >= kBearer.size() && strncasecmp(h.c_str(), "bearer ", 7) == 0 &&
         TokenEquals(std::string_view(h).substr(kBearer.size()), token);
}

HttpReply Route(Service& service, const http::Request& request, Command& command) {
  std::string_view path, query;
  http::SplitTarget(request.target, path, query);
  command = Command::kOther;
  if (request.method != "GET") {
    HttpReply r = JsonError(405, "method_not_allowed",
                            fmt::format("method {} is not allowed: allowed GET", request.method));
    r.extra_headers += "Allow: GET\r\n";
    return r;
  }
  if (path == "/healthz") {
    command = Command::kHealth;
    HttpReply r;
    r.body = "{\"status\":\"ok\"}";
    return r;
  }
  if (path == "/readyz") {
    command = Command::kReady;
    if (Status ready = service.Ready(); !ready.ok()) {
      return JsonError(503, MapError(ready.error().code).http_code, ready.error().message);
    }
    HttpReply r;
    r.body = "{\"status\":\"ready\"}";
    return r;
  }
  if (path == "/metrics") {
    command = Command::kMetrics;
    HttpReply r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = service.MetricsText();
    return r;
  }
  const bool protected_path = path.rfind("/v1/", 0) == 0 || path.rfind("/api/", 0) == 0;
  if (protected_path && !Authorized(service, request)) {
    return JsonError(401, "unauthenticated",
                     "missing or wrong bearer token: send Authorization: Bearer <token>");
  }
  if (path == "/v1/id") {
    command = Command::kId;
    return IdsReply(service, request, query, true);
  }
  if (path == "/v1/ids") {
    command = Command::kIds;
    return IdsReply(service, request, query, false);
  }
  if (path.rfind("/v1/decode/", 0) == 0) {
    command = Command::kDecode;
    return DecodeReply(service, path.substr(11));
  }
  if (path == "/v1/info") {
    command = Command::kInfo;
    HttpReply r;
    r.body = service.InfoJson();
    return r;
  }
  if (path.rfind("/api/snowflake/get/", 0) == 0) {
    command = Command::kLeafSnowflake;
    Result<Id> id = service.NextId();
    if (!id.ok()) return FromError(id.error());
    HttpReply r;
    r.content_type = "text/plain; charset=utf-8";
    char buf[20];
    r.body.assign(buf, FormatDec(*id, buf));
    return r;
  }
  if (std::optional<SegmentAsk> ask = ParseSegmentAsk(service, path, query); ask) {
    command = ask->leaf ? Command::kLeafSegment : Command::kSegment;
    return SegmentReply(service, request, *ask);
  }
  if (path == "/decodeSnowflakeId") {
    command = Command::kLeafDecode;
    return LeafDecodeReply(service, query);
  }
  return JsonError(404, "not_found", fmt::format("no such path: {}", path.substr(0, 200)));
}

// ---------------------------------------------------------------------------------------------
// RESP

bool Is(std::string_view arg, std::string_view name) {
  return arg.size() == name.size() && strncasecmp(arg.data(), name.data(), name.size()) == 0;
}

std::string Lower(std::string_view s) {
  std::string out(s.substr(0, 64));
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

void WrongArgs(std::string& out, std::string_view name) {
  resp::AppendError(out,
                    fmt::format("ERR wrong number of arguments for '{}' command", Lower(name)));
}

void RespError(std::string& out, const Error& e) {
  resp::AppendError(out, fmt::format("{} {}", MapError(e.code).resp_prefix, e.message));
}

std::string InfoText(Service& service, std::string_view section) {
  std::string out;
  const bool all =
      section.empty() || Is(section, "all") || Is(section, "everything") || Is(section, "default");
  if (all || Is(section, "server")) {
    out += fmt::format(
        "# Server\r\nsekka_version:{}\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\n"
        "layout:{}\r\nworker_id:{}\r\ndatacenter_id:{}\r\n",
        kVersion, service.layout().name(), service.worker().worker_id,
        service.worker().datacenter_id);
  }
  if (all || Is(section, "sekka")) {
    out += fmt::format("# Sekka\r\nhwm:{}\r\nhwm_ms:{}\r\n", FormatUtcMillis(service.hwm_millis()),
                       service.hwm_millis());
  }
  return out;
}

}  // namespace

bool MayBlock(Service& service, const http::Request& request) {
  std::string_view path, query;
  http::SplitTarget(request.target, path, query);
  std::optional<SegmentAsk> ask = ParseSegmentAsk(service, path, query);
  // A request that is not a segment one, or a bad one (answered at once), never waits.
  if (!ask || !ask->error.ok()) return false;
  return !service.SegmentBuffered(ask->tag, ask->count);
}

bool MayBlock(Service& service, const std::vector<std::string_view>& args) {
  if (args.size() < 2) return false;
  const std::string_view name = args[0];
  if (!Is(name, "SEG.NEXT") && !Is(name, "INCR") && !Is(name, "INCRBY")) return false;
  std::int64_t n = 1;
  if (Is(name, "SEG.NEXT") && args.size() == 3) {
    Result<std::int64_t> count = CountParam(args[2], service.config().max_batch);
    if (!count.ok()) return false;
    n = *count;
  }
  return !service.SegmentBuffered(args[1], n);
}

void HandleHttp(Service& service, const http::Request& request, std::string& out, bool& close) {
  Command command = Command::kOther;
  HttpReply r = Route(service, request, command);
  service.CountRequest(Protocol::kHttp, command, r.status < 400);
  close = !request.keep_alive;
  out += http::Response(r.status, r.content_type, r.body, !close, r.extra_headers);
}

std::string HttpParseError(int status, std::string_view message) {
  const std::string_view code = status == 400 ? "invalid_argument" : "too_large";
  const std::string body = fmt::format("{{\"error\":{{\"code\":\"{}\",\"message\":\"{}\"}}}}", code,
                                       http::JsonEscape(message));
  return http::Response(status, "application/json", body, false);
}

void HandleResp(Service& service, RespSession& session, const std::vector<std::string_view>& args,
                std::string& out, bool& close) {
  if (args.empty()) return;
  const std::string_view name = args[0];
  const std::size_t argc = args.size();
  Command command = Command::kOther;
  bool ok = true;
  auto fail = [&](const Error& e) {
    RespError(out, e);
    ok = false;
  };
  const bool needs_auth = !service.config().auth_token.empty() && !session.authenticated;

  // The hot command first, so that it skips the comparisons below.
  if (!needs_auth && argc == 1 && Is(name, "ID.NEXT")) {
    if (Result<Id> id = service.NextId(); id.ok()) {
      resp::AppendInteger(out, *id);
      service.CountRequest(Protocol::kResp, Command::kId, true);
    } else {
      RespError(out, id.error());
      service.CountRequest(Protocol::kResp, Command::kId, false);
    }
    return;
  }
  if (Is(name, "AUTH")) {
    command = Command::kAuth;
    if (argc < 2 || argc > 3) {
      WrongArgs(out, name);
      ok = false;
    } else if (service.config().auth_token.empty()) {
      resp::AppendError(out,
                        "ERR AUTH <password> called without any password configured for "
                        "the default user. Are you sure your configuration is correct?");
      ok = false;
    } else if (TokenEquals(args[argc - 1], service.config().auth_token) &&
               (argc == 2 || Is(args[1], "default"))) {
      session.authenticated = true;
      resp::AppendSimple(out, "OK");
    } else {
      resp::AppendError(out, "WRONGPASS invalid username-password pair or user is disabled.");
      ok = false;
    }
  } else if (Is(name, "QUIT")) {
    command = Command::kQuit;
    resp::AppendSimple(out, "OK");
    close = true;
  } else if (Is(name, "HELLO")) {
    command = Command::kHello;
    std::size_t i = 1;
    if (argc > 1) {
      if (args[1] != "2") {
        resp::AppendError(out, "NOPROTO sorry, this protocol version is not supported");
        service.CountRequest(Protocol::kResp, command, false);
        return;
      }
      i = 2;
    }
    while (i < argc) {
      if (Is(args[i], "AUTH") && i + 2 < argc) {
        if (!TokenEquals(args[i + 2], service.config().auth_token)) {
          resp::AppendError(out, "WRONGPASS invalid username-password pair or user is disabled.");
          service.CountRequest(Protocol::kResp, command, false);
          return;
        }
        session.authenticated = true;
        i += 3;
      } else if (Is(args[i], "SETNAME") && i + 1 < argc) {
        session.name = std::string(args[i + 1].substr(0, 128));
        i += 2;
      } else {
        resp::AppendError(out, "ERR Syntax error in HELLO option");
        service.CountRequest(Protocol::kResp, command, false);
        return;
      }
    }
    if (!service.config().auth_token.empty() && !session.authenticated) {
      resp::AppendError(out,
                        "NOAUTH HELLO must be called with the client already authenticated, "
                        "otherwise the HELLO <proto> AUTH <user> <pass> option can be used "
                        "to authenticate the client and select the RESP protocol version at "
                        "the same time");
      service.CountRequest(Protocol::kResp, command, false);
      return;
    }
    resp::AppendArrayHeader(out, 14);
    resp::AppendBulk(out, "server");
    resp::AppendBulk(out, "sekka");
    resp::AppendBulk(out, "version");
    resp::AppendBulk(out, kVersion);
    resp::AppendBulk(out, "proto");
    resp::AppendInteger(out, 2);
    resp::AppendBulk(out, "id");
    resp::AppendInteger(out, 0);
    resp::AppendBulk(out, "mode");
    resp::AppendBulk(out, "standalone");
    resp::AppendBulk(out, "role");
    resp::AppendBulk(out, "master");
    resp::AppendBulk(out, "modules");
    resp::AppendArrayHeader(out, 0);
  } else if (needs_auth) {
    resp::AppendError(out, "NOAUTH Authentication required.");
    ok = false;
  } else if (Is(name, "ID.NEXT")) {  // with arguments: the fast path above took the rest
    command = Command::kId;
    WrongArgs(out, name);
    ok = false;
  } else if (Is(name, "ID.BATCH")) {
    command = Command::kIds;
    if (argc != 2) {
      WrongArgs(out, name);
      ok = false;
    } else if (Result<std::int64_t> n = CountParam(args[1], service.config().max_batch); !n.ok()) {
      fail(n.error());
    } else {
      std::vector<Id> ids(static_cast<std::size_t>(*n));
      if (Status s = service.NextIds(std::span<Id>(ids)); !s.ok()) {
        fail(s.error());
      } else {
        out.reserve(out.size() + ids.size() * 23 + 16);
        resp::AppendArrayHeader(out, ids.size());
        for (Id id : ids) resp::AppendInteger(out, id);
      }
    }
  } else if (Is(name, "ID.DECODE")) {
    command = Command::kDecode;
    if (argc != 2) {
      WrongArgs(out, name);
      ok = false;
    } else {
      Result<Id> id = ParseId(args[1], IdFormat::kDec, service.layout());
      Result<DecodedId> d =
          id.ok() ? service.Decode(*id) : Result<DecodedId>(std::move(id).error());
      if (!d.ok()) {
        fail(d.error());
      } else {
        resp::AppendArrayHeader(out, 10);
        resp::AppendBulk(out, "time");
        resp::AppendBulk(out, FormatUtcMillis(d->timestamp_ms));
        resp::AppendBulk(out, "timestamp_ms");
        resp::AppendInteger(out, d->timestamp_ms);
        resp::AppendBulk(out, "datacenter");
        resp::AppendInteger(out, d->datacenter);
        resp::AppendBulk(out, "worker");
        resp::AppendInteger(out, d->worker);
        resp::AppendBulk(out, "sequence");
        resp::AppendInteger(out, d->sequence);
      }
    }
  } else if (Is(name, "SEG.NEXT") || Is(name, "INCR") || Is(name, "INCRBY")) {
    command = Command::kSegment;
    const bool incr = Is(name, "INCR");
    const bool incrby = Is(name, "INCRBY");
    if (argc < 2 || argc > (incr ? 2u : 3u) || (incrby && argc != 3)) {
      WrongArgs(out, name);
      ok = false;
    } else if (incrby && args[2] != "1") {
      // Redis clients send INCRBY <key> 1 for INCR; a larger step would promise contiguous ids.
      resp::AppendError(out,
                        "ERR INCRBY on a segment tag takes an increment of 1 only (ids of "
                        "a batch need not be contiguous): use SEG.NEXT <tag> <n>");
      ok = false;
    } else {
      // INCR, INCRBY <tag> 1 and SEG.NEXT <tag> answer one integer; SEG.NEXT <tag> <n> an array.
      const bool array = !incr && !incrby && argc == 3;
      Result<std::int64_t> n = array ? CountParam(args[2], service.config().max_batch)
                                     : Result<std::int64_t>(std::int64_t{1});
      std::vector<std::int64_t> ids(n.ok() ? static_cast<std::size_t>(*n) : 0);
      Status st = n.ok() ? service.NextSegmentIds(args[1], std::span(ids)) : Status(n.error());
      if (!st.ok()) {
        fail(st.error());
      } else if (array) {
        resp::AppendArrayHeader(out, ids.size());
        for (std::int64_t id : ids) resp::AppendInteger(out, id);
      } else {
        resp::AppendInteger(out, ids[0]);
      }
    }
  } else if (Is(name, "PING")) {
    command = Command::kPing;
    if (argc == 1) {
      resp::AppendSimple(out, "PONG");
    } else if (argc == 2) {
      resp::AppendBulk(out, args[1]);
    } else {
      WrongArgs(out, name);
      ok = false;
    }
  } else if (Is(name, "ECHO")) {
    command = Command::kEcho;
    if (argc != 2) {
      WrongArgs(out, name);
      ok = false;
    } else {
      resp::AppendBulk(out, args[1]);
    }
  } else if (Is(name, "INFO")) {
    command = Command::kInfo;
    resp::AppendBulk(out, InfoText(service, argc > 1 ? args[1] : std::string_view()));
  } else if (Is(name, "COMMAND")) {
    command = Command::kCommand;
    if (argc > 1 && Is(args[1], "COUNT")) {
      resp::AppendInteger(out, 0);
    } else {
      resp::AppendArrayHeader(out, 0);  // COMMAND, COMMAND DOCS: nothing to describe
    }
  } else if (Is(name, "CONFIG")) {
    command = Command::kOther;
    // redis-benchmark asks CONFIG GET save / appendonly: sekka keeps no Redis data.
    if (argc == 3 && Is(args[1], "GET") && (Is(args[2], "save") || Is(args[2], "appendonly"))) {
      resp::AppendArrayHeader(out, 2);
      resp::AppendBulk(out, Lower(args[2]));
      resp::AppendBulk(out, Is(args[2], "save") ? "" : "no");
    } else {
      resp::AppendArrayHeader(out, 0);
    }
  } else if (Is(name, "CLIENT")) {
    command = Command::kClient;
    if (argc >= 3 && Is(args[1], "SETNAME")) {
      session.name = std::string(args[2].substr(0, 128));
      resp::AppendSimple(out, "OK");
    } else if (argc >= 2 &&
               (Is(args[1], "SETINFO") || Is(args[1], "NO-EVICT") || Is(args[1], "NO-TOUCH"))) {
      resp::AppendSimple(out, "OK");
    } else if (argc == 2 && Is(args[1], "GETNAME")) {
      if (session.name.empty()) {
        resp::AppendNull(out);
      } else {
        resp::AppendBulk(out, session.name);
      }
    } else {
      resp::AppendError(out, "ERR unknown subcommand or wrong number of arguments for 'client'");
      ok = false;
    }
  } else if (Is(name, "SELECT")) {
    command = Command::kOther;
    if (argc == 2 && args[1] == "0") {
      resp::AppendSimple(out, "OK");
    } else {
      resp::AppendError(out, "ERR DB index is out of range");
      ok = false;
    }
  } else {
    std::string with;
    for (std::size_t i = 1; i < argc && i < 4; ++i)
      with += fmt::format("'{}' ", args[i].substr(0, 40));
    resp::AppendError(out, fmt::format("ERR unknown command '{}', with args beginning with: {}",
                                       name.substr(0, 100), with));
    ok = false;
  }
  service.CountRequest(Protocol::kResp, command, ok);
}

}  // namespace sekka::server
