#include "server/handlers.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <strings.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <optional>
#include <span>
#include <variant>

#include "sekka/secrets.h"
#include "server/commands.h"
#include "server/log.h"
#include "server/resp.h"
#include "server/ui_page.h"

namespace sekka::server {
namespace {

// ---------------------------------------------------------------------------------------------
// HTTP: a table of routes. Each route names its method and path, who may call it, how the request
// becomes a command's arguments, and how the command's Reply becomes the body its clients parse.

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::string extra_headers;
};

// The headers every error of `status` carries, whatever its body's shape: when to come back
// (503) and how to authenticate (401).
std::string_view ErrorHeaders(int status) {
  return status == 503 ? "Retry-After: 1\r\n" : status == 401 ? "WWW-Authenticate: Bearer\r\n" : "";
}

HttpReply JsonError(int status, std::string_view code, std::string_view message) {
  HttpReply r;
  r.status = status;
  r.body = fmt::format("{{\"error\":{{\"code\":\"{}\",\"message\":\"{}\"}}}}", code,
                       http::JsonEscape(RedactSecrets(message)));
  r.extra_headers = ErrorHeaders(status);
  return r;
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

// What a route sees of a request.
struct RouteInput {
  const http::Request& request;
  std::string_view path;
  std::string_view query;
  std::string_view rest;  // the path after a prefix route's prefix
};

bool WantsText(const RouteInput& in) {
  return in.request.accept.find("text/plain") != std::string::npos &&
         in.request.accept.find("application/json") == std::string::npos;
}

// A command's arguments, owned (query values and path segments are decoded copies).
using ArgList = std::vector<std::string>;

enum class Auth {
  kNone,     // health, readiness, metrics, Leaf's decode
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
};

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

// ?format=: an id format, or "opaque" (the opaque text form, with opaque.key_file).
struct TextForm {
  IdFormat format = IdFormat::kDec;
  const OpaqueCodec* opaque = nullptr;
};

// kRandom: for random ids (/v1/random), with the random layout's opaque codec.
template <bool kRandom = false>
Result<TextForm> FormatParam(Service& service, std::string_view query) {
  std::optional<std::string> f = http::QueryParam(query, "format");
  if (!f) return TextForm{};
  if (*f == "opaque") {
    const OpaqueCodec* codec = kRandom ? service.random_opaque() : service.opaque();
    if (codec == nullptr) {
      return InvalidArgument(
          "format opaque is off: set opaque.key_file (sekka opaque keygen); allowed dec, hex, "
          "base32, base62, friendly");
    }
    return TextForm{IdFormat::kDec, codec};
  }
  Result<IdFormat> format = ParseIdFormat(*f);
  if (!format.ok()) {
    return InvalidArgument(format.error().message + ", or opaque (with opaque.key_file)");
  }
  return TextForm{*format, nullptr};
}

// /v1/id: no arguments; ?format= is checked before an id is taken.
template <bool kRandom = false>
Status FormatArg(Service& service, const RouteInput& in, ArgList&) {
  Result<TextForm> form = FormatParam<kRandom>(service, in.query);
  return form.ok() ? Status::Ok() : Status(form.error());
}

// /v1/ids: ?count=, and ?format= as /v1/id.
template <bool kRandom = false>
Status CountArg(Service& service, const RouteInput& in, ArgList& out) {
  if (Status s = FormatArg<kRandom>(service, in, out); !s.ok()) return s;
  std::optional<std::string> c = http::QueryParam(in.query, "count");
  if (!c) {
    return InvalidArgument(
        fmt::format("count is required: allowed 1 to {}", service.config().max_batch));
  }
  out.push_back(std::move(*c));
  return Status::Ok();
}

Status TagAndCountArgs(Service& service, const RouteInput& in, ArgList& out) {
  if (Status s = PathArg(service, in, out); !s.ok()) return s;
  if (std::optional<std::string> c = http::QueryParam(in.query, "count"); c) {
    out.push_back(std::move(*c));
  }
  return Status::Ok();
}

// /v1/id and /v1/ids: {"id":"..."} / {"ids":[...]} (strings: JavaScript keeps every digit),
// or one id per line with Accept: text/plain; ?format= picks the id format. The same for
// /v1/random and /v1/randoms (kRandom: the random layout).
template <bool kRandom = false>
HttpReply IdsReply(Service& service, const RouteInput& in, Result<Reply>& reply) {
  if (!reply.ok()) return FromError(reply.error());
  const Result<TextForm> form =
      FormatParam<kRandom>(service, in.query);  // checked by the route's args
  const Layout& layout = kRandom ? service.random_layout() : service.layout();
  const bool single = std::holds_alternative<std::int64_t>(*reply);
  std::span<const std::int64_t> ids = single
                                          ? std::span(&std::get<std::int64_t>(*reply), 1)
                                          : std::span(std::get<std::vector<std::int64_t>>(*reply));
  HttpReply r;
  auto append = [&](Id id) {
    if (form->opaque != nullptr) {
      r.body += *form->opaque->EncodeText(id);  // the generator's ids are inside the layout
    } else if (form->format == IdFormat::kDec) {
      AppendDec(r.body, id);
    } else {
      r.body += FormatId(id, form->format, layout);
    }
  };
  if (WantsText(in)) {
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

HttpReply DecodeReply(Service&, const RouteInput&, Result<Reply>& reply) {
  if (!reply.ok()) return FromError(reply.error());
  const DecodedId& d = std::get<DecodedId>(*reply);
  return Json(fmt::format(
      "{{\"id\":\"{}\",\"time\":\"{}\",\"timestamp_ms\":{},\"datacenter\":{},\"worker\":{},"
      "\"sequence\":{}{}}}",
      d.id, FormatUtcMillis(d.timestamp_ms), d.timestamp_ms, d.datacenter, d.worker, d.sequence,
      d.sharded ? fmt::format(",\"shard\":{}", d.shard) : ""));
}

// /v1/segment/<tag>: {"id":"..."}, with ?count= {"ids":[...]}; one per line for text/plain.
HttpReply SegmentReply(Service&, const RouteInput& in, Result<Reply>& reply) {
  if (!reply.ok()) return FromError(reply.error());
  const bool single = std::holds_alternative<std::int64_t>(*reply);
  std::span<const std::int64_t> ids = single
                                          ? std::span(&std::get<std::int64_t>(*reply), 1)
                                          : std::span(std::get<std::vector<std::int64_t>>(*reply));
  HttpReply r;
  if (WantsText(in)) {
    r.content_type = "text/plain; charset=utf-8";
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) r.body += '\n';
      AppendDec(r.body, ids[i]);
    }
    return r;
  }
  r.body = single ? "{\"id\":" : "{\"ids\":[";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) r.body += ',';
    r.body += '"';
    AppendDec(r.body, ids[i]);
    r.body += '"';
  }
  r.body += single ? "}" : "]}";
  return r;
}

HttpReply HealthReply(Service&, const RouteInput&, Result<Reply>&) {
  return Json("{\"status\":\"ok\"}");
}

bool Authorized(Service& service, const http::Request& request);

// /readyz needs no token (probes), so with one set its reason (paths, addresses) is shown only
// to a request that sends it.
HttpReply ReadyReply(Service& service, const RouteInput& in, Result<Reply>&) {
  if (Status ready = service.Ready(); !ready.ok()) {
    const std::string_view code = MapError(ready.error().code).http_code;
    if (!Authorized(service, in.request)) {
      return JsonError(503, code, "not ready (send the token for the reason)");
    }
    return JsonError(503, code, ready.error().message);
  }
  return Json("{\"status\":\"ready\"}");
}

HttpReply MetricsReply(Service& service, const RouteInput&, Result<Reply>&) {
  HttpReply r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = service.MetricsText();
  return r;
}

HttpReply Html(std::string body) {
  HttpReply r;
  r.content_type = "text/html; charset=utf-8";
  r.body = std::move(body);
  return r;
}

// /ui: the status page; /ui/data: what it shows, refreshed every second.
HttpReply UiReply(Service&, const RouteInput&, Result<Reply>& reply) {
  if (!reply.ok()) {
    HttpReply r = FromError(reply.error());
    if (r.status == 401) r.extra_headers = "WWW-Authenticate: Basic realm=\"sekka\"\r\n";
    return r;
  }
  HttpReply r = Html(UiPage());
  // The page's script and style are inline (Chart.js included); it fetches /ui/data only, and
  // no other site may frame it.
  r.extra_headers =
      "Cache-Control: no-store\r\n"
      "Content-Security-Policy: default-src 'none'; script-src 'unsafe-inline'; "
      "style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; "
      "form-action 'none'; frame-ancestors 'none'\r\n"
      "X-Frame-Options: DENY\r\nX-Content-Type-Options: nosniff\r\n";
  return r;
}

HttpReply UiDataReply(Service& service, const RouteInput&, Result<Reply>& reply) {
  if (!reply.ok()) {
    HttpReply r = FromError(reply.error());
    if (r.status == 401) r.extra_headers = "WWW-Authenticate: Basic realm=\"sekka\"\r\n";
    return r;
  }
  HttpReply r = Json(service.UiJson());
  r.extra_headers = "Cache-Control: no-store\r\n";
  return r;
}

HttpReply InfoReply(Service& service, const RouteInput&, Result<Reply>& reply) {
  if (!reply.ok()) return FromError(reply.error());
  return Json(service.InfoJson());
}

// /v1/uuid, /v1/ulid: {"uuid":".."}; /v1/uuids, /v1/ulids: {"uuids":[..]}; one per line with
// Accept: text/plain.
template <bool kUlid>
HttpReply TimeOrderedReply(Service&, const RouteInput& in, Result<Reply>& reply) {
  if (!reply.ok()) return FromError(reply.error());
  const std::string_view key = kUlid ? "ulid" : "uuid";
  const auto* one = std::get_if<std::string>(&*reply);
  const std::vector<std::string> many =
      one != nullptr ? std::vector<std::string>{*one} : std::get<std::vector<std::string>>(*reply);
  if (WantsText(in)) {
    std::string body;
    for (const std::string& t : many) {
      if (!body.empty()) body += '\n';
      body += t;
    }
    return Text(std::move(body));
  }
  if (one != nullptr) return Json(fmt::format("{{\"{}\":\"{}\"}}", key, *one));
  std::string body = fmt::format("{{\"{}s\":[", key);
  for (std::size_t i = 0; i < many.size(); ++i) {
    if (i > 0) body += ',';
    body += '"';
    body += many[i];
    body += '"';
  }
  body += "]}";
  return Json(std::move(body));
}

// /v1/opaque/encode/<id> and /v1/opaque/decode/<opaque>: {"id":"..","opaque":".."}.
HttpReply OpaqueReply(Service&, const RouteInput& in, Result<Reply>& reply) {
  if (!reply.ok()) return FromError(reply.error());
  std::optional<std::string> given = http::PercentDecode(in.rest);
  std::string id, opaque;
  if (const auto* text = std::get_if<std::string>(&*reply)) {
    id = given.value_or("");
    opaque = *text;
  } else {
    AppendDec(id, std::get<std::int64_t>(*reply));
    opaque = given.value_or("");
  }
  return Json(fmt::format("{{\"id\":\"{}\",\"opaque\":\"{}\"}}", http::JsonEscape(id),
                          http::JsonEscape(opaque)));
}

// Leaf: /api/snowflake/get/<key> and /api/segment/get/<key> answer the id as plain text.
HttpReply LeafIdReply(Service&, const RouteInput&, Result<Reply>& reply) {
  if (!reply.ok()) return FromError(reply.error());
  std::string body;
  AppendDec(body, std::get<std::int64_t>(*reply));
  return Text(std::move(body));
}

Status LeafDecodeArgs(Service&, const RouteInput& in, ArgList& out) {
  std::optional<std::string> text = http::QueryParam(in.query, "snowflakeId");
  if (!text) return InvalidArgument("snowflakeId is required");
  out.push_back(std::move(*text));
  return Status::Ok();
}

// Leaf's /decodeSnowflakeId answer: string values, "timestamp" with the time in brackets.
HttpReply LeafDecodeReply(Service&, const RouteInput&, Result<Reply>& reply) {
  if (!reply.ok()) return FromError(reply.error());
  const DecodedId& d = std::get<DecodedId>(*reply);
  std::string time = FormatUtcMillis(d.timestamp_ms);  // 2026-01-02T03:04:05.678Z
  time[10] = ' ';
  time.pop_back();
  return Json(fmt::format(
      "{{\"timestamp\":\"{}({})\",\"datacenterId\":\"{}\",\"workerId\":\"{}\",\"sequenceId\":\"{}"
      "\"}}",
      d.timestamp_ms, time, d.datacenter, d.worker, d.sequence));
}

// Leaf's monitor pages (leaf-server's LeafMonitorController and its templates), for the
// operators who look at them: HTML tables in Leaf's columns. /cache: the two buffers of each tag
// served here (value: the next id; max: the end, not included); /db: a page of the store's rows
// (max: where the next range starts). Both behind the token.
std::string LeafPage(std::string_view columns, const std::vector<std::vector<std::string>>& rows) {
  std::string out =
      "<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"UTF-8\">\n<title>Leaf</title>\n"
      "</head>\n<body>\n<table class=\"table table-hover\">\n<thead>\n<tr>";
  for (std::size_t at = 0; at < columns.size();) {
    const std::size_t space = std::min(columns.find(' ', at), columns.size());
    out += fmt::format("<th>{}</th>", columns.substr(at, space - at));
    at = space + 1;
  }
  out += "</tr>\n</thead>\n<tbody>\n";
  for (const std::vector<std::string>& row : rows) {
    out += "<tr>";
    for (const std::string& cell : row) out += "<td>" + http::HtmlEscape(cell) + "</td>";
    out += "</tr>\n";
  }
  return out + "</tbody>\n</table>\n</body>\n</html>\n";
}

// GET /cache: answered from this process's buffers (no store call).
HttpReply LeafCacheReply(Service& service, const RouteInput&, Result<Reply>& reply) {
  if (!reply.ok()) return FromError(reply.error());
  std::vector<std::vector<std::string>> rows;
  for (const auto& [tag, st] : service.ServedSegments()) {
    std::vector<std::string> row = {tag, st.buffered.empty() ? "false" : "true",
                                    st.buffered.size() > 1 ? "true" : "false", "0"};
    for (std::size_t i = 0; i < 2; ++i) {
      const bool held = i < st.buffered.size();
      row.push_back(std::to_string(held ? st.buffered[i].begin : 0));
      row.push_back(std::to_string(held ? st.buffered[i].end : 0));
      row.push_back(std::to_string(held ? st.step : 0));
    }
    rows.push_back(std::move(row));
  }
  return Html(LeafPage("name init next pos value0 max0 step0 value1 max1 step1", rows));
}

// GET /db: the store's rows (it may wait for the store: run on the store lane).
Result<Reply> LeafDbCommand(Service& service, Args) {
  SEKKA_ASSIGN_OR_RETURN(auto page, service.SegmentTagRows(""));
  std::vector<std::vector<std::string>> rows;
  for (const TagInfo& t : page) {
    rows.push_back({t.tag, std::to_string(t.next_id), std::to_string(t.step), "-"});
  }
  return Reply(LeafPage("tag max step update", rows));
}
bool LeafDbMayBlock(Service&, Args) { return true; }
constexpr CommandSpec kLeafDb{Command::kSegmentAdmin, "GET /db",    0, 0, true, LeafDbMayBlock,
                              LeafDbCommand,          Lane::kStore, ""};

HttpReply LeafDbReply(Service&, const RouteInput&, Result<Reply>& reply) {
  if (!reply.ok()) return FromError(reply.error());
  return Html(std::get<std::string>(std::move(*reply)));
}

// didi's tinyid: /tinyid/id/nextId, nextIdSimple, nextSegmentId and nextSegmentIdSimple with
// ?bizType= (the tag), &batchSize= and &token=, on any method (tinyid's client POSTs). The JSON
// routes answer {"data":...,"code":200,"message":""} with code 5 for a bad token and 6 for any
// other failure (HTTP 200 either way, as tinyid); the Simple routes answer plain text, and an
// empty body on failure (as tinyid), with the reason in an X-Sekka-Error header.

Status TinyidTag(const RouteInput& in, ArgList& out) {
  std::optional<std::string> tag = http::QueryParam(in.query, "bizType");
  if (!tag || tag->empty()) return InvalidArgument("bizType is required");
  out.push_back(std::move(*tag));
  return Status::Ok();
}

// SEG.NEXT <bizType> <batchSize>: a missing batchSize is 1 and a larger one than
// server.max_batch is cut to it, as tinyid does with batch.size.max.
Status TinyidIdArgs(Service& service, const RouteInput& in, ArgList& out) {
  if (Status s = TinyidTag(in, out); !s.ok()) return s;
  std::int64_t n = 1;
  if (std::optional<std::string> b = http::QueryParam(in.query, "batchSize"); b) {
    const auto [p, ec] = std::from_chars(b->data(), b->data() + b->size(), n);
    if (ec == std::errc::result_out_of_range && !b->empty() && (*b)[0] != '-') {
      n = service.config().max_batch;
    } else if (ec != std::errc() || p != b->data() + b->size() || n < 1) {
      return InvalidArgument(
          fmt::format("batchSize \"{}\" is not valid: allowed 1 or more "
                      "(more than {} is cut to {})",
                      b->substr(0, 40), service.config().max_batch, service.config().max_batch));
    }
  }
  out.push_back(std::to_string(std::min(n, service.config().max_batch)));
  return Status::Ok();
}

Status TinyidSegmentArgs(Service&, const RouteInput& in, ArgList& out) {
  return TinyidTag(in, out);
}

HttpReply TinyidJson(const Result<Reply>& reply, const std::string& data) {
  if (reply.ok()) return Json(fmt::format("{{\"data\":{},\"code\":200,\"message\":\"\"}}", data));
  const int code = reply.error().code == ErrorCode::kUnauthenticated ? 5 : 6;
  return Json(fmt::format("{{\"data\":null,\"code\":{},\"message\":\"{}\"}}", code,
                          http::JsonEscape(RedactSecrets(reply.error().message))));
}

HttpReply TinyidText(const Result<Reply>& reply, std::string body) {
  if (reply.ok()) return Text(std::move(body));
  HttpReply r = Text("");
  std::string why = fmt::format("{}: {}", MapError(reply.error().code).http_code,
                                RedactSecrets(reply.error().message).substr(0, 300));
  for (char& c : why) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  r.extra_headers = fmt::format("X-Sekka-Error: {}\r\n", why);
  return r;
}

std::string JoinIds(const Result<Reply>& reply, char separator) {
  std::string out;
  if (!reply.ok()) return out;
  for (std::int64_t id : std::get<std::vector<std::int64_t>>(*reply)) {
    if (!out.empty()) out += separator;
    AppendDec(out, id);
  }
  return out;
}

HttpReply TinyidNextId(Service&, const RouteInput&, Result<Reply>& reply) {
  std::string list = "[";
  list += JoinIds(reply, ',');
  list += ']';
  return TinyidJson(reply, list);
}

HttpReply TinyidNextIdSimple(Service&, const RouteInput&, Result<Reply>& reply) {
  return TinyidText(reply, JoinIds(reply, ','));
}

// tinyid's SegmentId: ids in (currentId, maxId] with id % delta == remainder; the client asks
// for the next segment once it passes loadingId (20% of the way, tinyid's LOADING_PERCENT).
struct TinyidSegment {
  std::int64_t current, loading, max, delta, remainder;
};
TinyidSegment ToTinyid(const SegmentGrant& g) {
  const std::int64_t current = g.range.begin - 1;
  return {current, current + g.range.size() * 20 / 100, g.range.end - 1, g.delta, g.remainder};
}

HttpReply TinyidNextSegmentId(Service&, const RouteInput&, Result<Reply>& reply) {
  std::string data;
  if (reply.ok()) {
    const TinyidSegment t = ToTinyid(std::get<SegmentGrant>(*reply));
    data = fmt::format(
        "{{\"maxId\":{},\"loadingId\":{},\"currentId\":{},\"delta\":{},\"remainder\":{}}}", t.max,
        t.loading, t.current, t.delta, t.remainder);
  }
  return TinyidJson(reply, data);
}

HttpReply TinyidNextSegmentIdSimple(Service&, const RouteInput&, Result<Reply>& reply) {
  std::string body;
  if (reply.ok()) {
    const TinyidSegment t = ToTinyid(std::get<SegmentGrant>(*reply));
    body = fmt::format("{},{},{},{},{}", t.current, t.loading, t.max, t.delta, t.remainder);
  }
  return TinyidText(reply, std::move(body));
}

// The CosId proxy (cosid-proxy-server): machine ids for CosId's snowflake generators and
// segments for its segment generators. Replies as its controllers: 200 with
// {"machineId","lastTimeStamp"}, an empty body, or the new max id; errors as
// {"code","msg","errors"} with CosId's codes M-01 (no free machine id), M-02 (no machine id held)
// and M-03 (the machine id went to another instance), and else the HTTP status ("400", "503").

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

std::string StableParam(const RouteInput& in) {
  return http::QueryParam(in.query, "stable").value_or("false");
}

// /v1/tags[?after=<tag>]: a page of tags, from the first or after that one.
Status TagsPageArgs(Service&, const RouteInput& in, ArgList& out) {
  if (std::optional<std::string> after = http::QueryParam(in.query, "after"); after) {
    out.push_back("AFTER");
    out.push_back(std::move(*after));
  }
  return Status::Ok();
}

// /v1/tags/{tag}: the tag, one path segment.
Status TagArg(Service&, const RouteInput& in, ArgList& out) {
  return PathSegments(in, 1, "/v1/tags/{tag}", out);
}

// PATCH /v1/tags/{tag}?step=N: SEG.STEP tag N
Status TagStepArgs(Service& service, const RouteInput& in, ArgList& out) {
  if (Status s = TagArg(service, in, out); !s.ok()) return s;
  return RequiredParam(in, "step", out);
}

// /v1/tags...: the command's JSON text as the body.
HttpReply TagsReply(Service&, const RouteInput&, Result<Reply>& reply) {
  if (!reply.ok()) return FromError(reply.error());
  return Json(std::get<std::string>(std::move(*reply)));
}

// POST /machines/{namespace}: MACHINE.DISTRIBUTE ns bits instance stable guard
Status CosIdDistributeArgs(Service&, const RouteInput& in, ArgList& out) {
  if (Status s = PathSegments(in, 1, "/machines/{namespace}", out); !s.ok()) return s;
  if (Status s = RequiredParam(in, "machineBit", out); !s.ok()) return s;
  if (Status s = RequiredParam(in, "instanceId", out); !s.ok()) return s;
  out.push_back(StableParam(in));
  return RequiredParam(in, "safeGuardDuration", out);
}

// PATCH /machines/{namespace}: MACHINE.GUARD ns instance guard
Status CosIdGuardArgs(Service&, const RouteInput& in, ArgList& out) {
  if (Status s = PathSegments(in, 1, "/machines/{namespace}", out); !s.ok()) return s;
  if (Status s = RequiredParam(in, "instanceId", out); !s.ok()) return s;
  return RequiredParam(in, "safeGuardDuration", out);
}

// DELETE /machines/{namespace}: MACHINE.REVERT ns instance
Status CosIdRevertArgs(Service&, const RouteInput& in, ArgList& out) {
  if (Status s = PathSegments(in, 1, "/machines/{namespace}", out); !s.ok()) return s;
  return RequiredParam(in, "instanceId", out);
}

// A CosId segment "{namespace}/{name}" is the tag "{namespace}.{name}".
Status CosIdTag(const RouteInput& in, std::string_view shape, ArgList& out) {
  ArgList parts;
  if (Status s = PathSegments(in, 2, shape, parts); !s.ok()) return s;
  out.push_back(parts[0] + "." + parts[1]);
  return Status::Ok();
}

// POST /segments/distributor/{namespace}/{name}?offset=&step=: SEG.CREATE tag offset+1 step
Status CosIdCreateArgs(Service&, const RouteInput& in, ArgList& out) {
  if (Status s = CosIdTag(in, "/segments/distributor/{namespace}/{name}", out); !s.ok()) return s;
  std::int64_t offset = 0;
  if (std::optional<std::string> o = http::QueryParam(in.query, "offset"); o) {
    const auto [p, ec] = std::from_chars(o->data(), o->data() + o->size(), offset);
    if (ec != std::errc() || p != o->data() + o->size() || offset < 0 || offset == INT64_MAX) {
      return InvalidArgument(fmt::format("offset \"{}\" is not valid: allowed 0 to {}",
                                         o->substr(0, 40), INT64_MAX - 1));
    }
  }
  out.push_back(std::to_string(offset + 1));  // CosId's first id is offset + 1
  return RequiredParam(in, "step", out);
}

// PATCH /segments/{namespace}/{name}?step=: SEG.RANGE tag step
Status CosIdNextMaxIdArgs(Service&, const RouteInput& in, ArgList& out) {
  if (Status s = CosIdTag(in, "/segments/{namespace}/{name}", out); !s.ok()) return s;
  if (Status s = RequiredParam(in, "step", out); !s.ok()) return s;
  out.push_back("DENSE");  // CosId issues every id of its segment
  return Status::Ok();
}

// CosId's error shape: {"code","msg","errors"}.
HttpReply CosIdReply(int status, std::string_view code, std::string_view message) {
  HttpReply r;
  r.status = status;
  r.body = fmt::format("{{\"code\":\"{}\",\"msg\":\"{}\",\"errors\":[]}}", code,
                       http::JsonEscape(RedactSecrets(message)));
  r.extra_headers = ErrorHeaders(status);
  return r;
}

HttpReply CosIdError(const Error& e, bool machine) {
  int status = MapError(e.code).http_status;
  std::string code = std::to_string(status);  // "400", "404", "503", ...
  if (machine && e.code == ErrorCode::kExhausted) {
    code = "M-01";
    status = 400;
  } else if (machine && e.code == ErrorCode::kNotFound) {
    code = "M-02";
    status = 400;
  } else if (machine && e.code == ErrorCode::kLeaseLost) {
    code = "M-03";
    status = 400;
  }
  return CosIdReply(status, code, e.message);
}

HttpReply CosIdMachineReply(Service&, const RouteInput&, Result<Reply>& reply) {
  if (!reply.ok()) return CosIdError(reply.error(), true);
  if (const auto* m = std::get_if<MachineGrant>(&*reply)) {
    return Json(fmt::format("{{\"machineId\":{},\"lastTimeStamp\":{}}}", m->machine_id,
                            m->last_timestamp_ms));
  }
  return Json("");  // guard and revert answer nothing, as CosId's void handlers
}

HttpReply CosIdCreateReply(Service&, const RouteInput&, Result<Reply>& reply) {
  if (!reply.ok()) return CosIdError(reply.error(), false);
  return Json("");  // created, or there already: CosId's create is idempotent
}

HttpReply CosIdNextMaxIdReply(Service&, const RouteInput&, Result<Reply>& reply) {
  if (!reply.ok()) return CosIdError(reply.error(), false);
  const SegmentGrant& g = std::get<SegmentGrant>(*reply);  // dense: delta 1
  std::string body;
  AppendDec(body, g.range.end - 1);  // CosId's segment is (maxId - step, maxId]
  return Json(std::move(body));
}

const CommandSpec* const kIdNext = FindCommand("ID.NEXT");
const CommandSpec* const kIdBatch = FindCommand("ID.BATCH");
const CommandSpec* const kIdDecode = FindCommand("ID.DECODE");
const CommandSpec* const kSegNext = FindCommand("SEG.NEXT");
const CommandSpec* const kOpaqueEncode = FindCommand("OPAQUE.ENCODE");
const CommandSpec* const kUuidNext = FindCommand("UUID.NEXT");
const CommandSpec* const kUuidBatch = FindCommand("UUID.BATCH");
const CommandSpec* const kUlidNext = FindCommand("ULID.NEXT");
const CommandSpec* const kUlidBatch = FindCommand("ULID.BATCH");
const CommandSpec* const kOpaqueDecode = FindCommand("OPAQUE.DECODE");
const CommandSpec* const kRandomNext = FindCommand("RANDOM.NEXT");
const CommandSpec* const kRandomBatch = FindCommand("RANDOM.BATCH");
const CommandSpec* const kSegRange = FindCommand("SEG.RANGE");
const CommandSpec* const kSegCreate = FindCommand("SEG.CREATE");
const CommandSpec* const kStrictNext = FindCommand("STRICT.NEXT");
const CommandSpec* const kSegTags = FindCommand("SEG.TAGS");
const CommandSpec* const kSegStep = FindCommand("SEG.STEP");
const CommandSpec* const kSegDelete = FindCommand("SEG.DELETE");
const CommandSpec* const kMachineDistribute = FindCommand("MACHINE.DISTRIBUTE");
const CommandSpec* const kMachineGuard = FindCommand("MACHINE.GUARD");
const CommandSpec* const kMachineRevert = FindCommand("MACHINE.REVERT");

const std::vector<HttpRoute>& Routes() {
  static const std::vector<HttpRoute> routes = {
      // sekka's own
      {"GET", "/healthz", false, Auth::kNone, nullptr, Command::kHealth, NoArgs, HealthReply},
      {"GET", "/readyz", false, Auth::kNone, nullptr, Command::kReady, NoArgs, ReadyReply},
      {"GET", "/metrics", false, Auth::kNone, nullptr, Command::kMetrics, NoArgs, MetricsReply},
      {"GET", "/v1/id", false, Auth::kCommand, kIdNext, Command::kId, FormatArg, IdsReply},
      {"GET", "/v1/ids", false, Auth::kCommand, kIdBatch, Command::kIds, CountArg, IdsReply},
      {"GET", "/v1/decode/", true, Auth::kCommand, kIdDecode, Command::kDecode, PathArg,
       DecodeReply},
      {"GET", "/v1/info", false, Auth::kCommand, nullptr, Command::kInfo, NoArgs, InfoReply},
      {"GET", "/ui", false, Auth::kBrowser, nullptr, Command::kInfo, NoArgs, UiReply},
      {"GET", "/ui/data", false, Auth::kBrowser, nullptr, Command::kInfo, NoArgs, UiDataReply},
      {"GET", "/v1/segment/", true, Auth::kCommand, kSegNext, Command::kSegment, TagAndCountArgs,
       SegmentReply},
      {"GET", "/v1/strict/", true, Auth::kCommand, kStrictNext, Command::kStrict, TagAndCountArgs,
       SegmentReply},
      // Tag administration: Leaf's /db (the rows) and /cache (the buffers) in one.
      {"GET", "/v1/tags", false, Auth::kCommand, kSegTags, Command::kSegmentAdmin, TagsPageArgs,
       TagsReply},
      {"GET", "/v1/tags/", true, Auth::kCommand, kSegTags, Command::kSegmentAdmin, TagArg,
       TagsReply},
      {"PATCH", "/v1/tags/", true, Auth::kCommand, kSegStep, Command::kSegmentAdmin, TagStepArgs,
       TagsReply},
      {"DELETE", "/v1/tags/", true, Auth::kCommand, kSegDelete, Command::kSegmentAdmin, TagArg,
       TagsReply},
      {"GET", "/v1/uuid", false, Auth::kCommand, kUuidNext, Command::kUuid, NoArgs,
       TimeOrderedReply<false>},
      {"GET", "/v1/uuids", false, Auth::kCommand, kUuidBatch, Command::kUuid, CountArg,
       TimeOrderedReply<false>},
      {"GET", "/v1/ulid", false, Auth::kCommand, kUlidNext, Command::kUlid, NoArgs,
       TimeOrderedReply<true>},
      {"GET", "/v1/ulids", false, Auth::kCommand, kUlidBatch, Command::kUlid, CountArg,
       TimeOrderedReply<true>},
      {"GET", "/v1/random", false, Auth::kCommand, kRandomNext, Command::kRandom, FormatArg<true>,
       IdsReply<true>},
      {"GET", "/v1/randoms", false, Auth::kCommand, kRandomBatch, Command::kRandom, CountArg<true>,
       IdsReply<true>},
      {"GET", "/v1/opaque/encode/", true, Auth::kCommand, kOpaqueEncode, Command::kOpaque, PathArg,
       OpaqueReply},
      {"GET", "/v1/opaque/decode/", true, Auth::kCommand, kOpaqueDecode, Command::kOpaque, PathArg,
       OpaqueReply},
      // Meituan Leaf's
      {"GET", "/api/snowflake/get/", true, Auth::kCommand, kIdNext, Command::kLeafSnowflake, NoArgs,
       LeafIdReply},
      {"GET", "/api/segment/get/", true, Auth::kCommand, kSegNext, Command::kLeafSegment, PathArg,
       LeafIdReply},
      {"GET", "/decodeSnowflakeId", false, Auth::kNone, kIdDecode, Command::kLeafDecode,
       LeafDecodeArgs, LeafDecodeReply},
      {"GET", "/cache", false, Auth::kCommand, nullptr, Command::kSegmentAdmin, NoArgs,
       LeafCacheReply},
      {"GET", "/db", false, Auth::kCommand, &kLeafDb, Command::kSegmentAdmin, NoArgs, LeafDbReply},
      // didi's tinyid
      {kAnyMethod, "/tinyid/id/nextId", false, Auth::kTinyid, kSegNext, Command::kSegment,
       TinyidIdArgs, TinyidNextId},
      {kAnyMethod, "/tinyid/id/nextIdSimple", false, Auth::kTinyid, kSegNext, Command::kSegment,
       TinyidIdArgs, TinyidNextIdSimple},
      {kAnyMethod, "/tinyid/id/nextSegmentId", false, Auth::kTinyid, kSegRange,
       Command::kSegmentRange, TinyidSegmentArgs, TinyidNextSegmentId},
      {kAnyMethod, "/tinyid/id/nextSegmentIdSimple", false, Auth::kTinyid, kSegRange,
       Command::kSegmentRange, TinyidSegmentArgs, TinyidNextSegmentIdSimple},
      // the CosId proxy
      {"POST", "/machines/", true, Auth::kCommand, kMachineDistribute, Command::kMachine,
       CosIdDistributeArgs, CosIdMachineReply},
      {"PATCH", "/machines/", true, Auth::kCommand, kMachineGuard, Command::kMachine,
       CosIdGuardArgs, CosIdMachineReply},
      {"DELETE", "/machines/", true, Auth::kCommand, kMachineRevert, Command::kMachine,
       CosIdRevertArgs, CosIdMachineReply},
      {"POST", "/segments/distributor/", true, Auth::kCommand, kSegCreate, Command::kSegmentCreate,
       CosIdCreateArgs, CosIdCreateReply},
      {"PATCH", "/segments/", true, Auth::kCommand, kSegRange, Command::kSegmentRange,
       CosIdNextMaxIdArgs, CosIdNextMaxIdReply},
  };
  return routes;
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

bool Authorized(Service& service, const http::Request& request) {
  const std::string& token = service.config().auth_token;
  if (token.empty()) return true;
  constexpr std::string_view kBearer = "Bearer ";
  const std::string& h = request.authorization;
  return h.size() >= kBearer.size() && strncasecmp(h.c_str(), "bearer ", 7) == 0 &&
         TokenEquals(std::string_view(h).substr(kBearer.size()), token);
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
  const bool needs_auth =
      route.auth != Auth::kNone && (route.command == nullptr || route.command->needs_auth);
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

// Requests a web page may have sent to a server it should not reach (issue 24, finding 5): a
// Host that is not the server's (DNS rebinding), or, on a request that can change state (every
// method but GET and HEAD), an Origin of another site.
std::optional<HttpReply> RefuseForeign(Service& service, const http::Request& request) {
  if (!AllowedHost(service, request.host)) {
    return JsonError(403, "forbidden",
                     fmt::format("Host \"{}\" is not allowed: allowed IP addresses, localhost and "
                                 "server.allowed_hosts",
                                 request.host.substr(0, 100)));
  }
  if (request.origin.empty() || request.method == "GET" || request.method == "HEAD") {
    return std::nullopt;
  }
  const std::size_t scheme = request.origin.find("://");
  const std::string origin = scheme == std::string::npos
                                 ? ""
                                 : Lower(request.origin.substr(scheme + 3), std::string::npos);
  if (origin.empty() || origin != Lower(request.host, std::string::npos)) {
    return JsonError(403, "forbidden",
                     fmt::format("a {} from Origin \"{}\" is not allowed: a page of another site "
                                 "may not change this server's state",
                                 request.method.substr(0, 10), request.origin.substr(0, 100)));
  }
  return std::nullopt;
}

HttpReply Dispatch(Service& service, const http::Request& request, Command& command) {
  std::string_view path, query;
  http::SplitTarget(request.target, path, query);
  command = Command::kOther;
  if (std::optional<HttpReply> refused = RefuseForeign(service, request)) return *refused;
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
  const RouteInput in{request, path, query,
                      route->prefix ? path.substr(route->path.size()) : std::string_view()};
  return RunRoute(service, *route, in);
}

// ---------------------------------------------------------------------------------------------
// RESP

bool Is(std::string_view arg, std::string_view name) {
  return arg.size() == name.size() && strncasecmp(arg.data(), name.data(), name.size()) == 0;
}

// AUTH's and HELLO's one rule, as Redis's single default user: the user "default" (AUTH with no
// user means it) and the server's token.
bool CredentialsMatch(Service& service, std::string_view user, std::string_view password) {
  return TokenEquals(password, service.config().auth_token) && Is(user, "default");
}

// A client name as Redis takes one: printable, no spaces ("" clears it).
constexpr std::string_view kBadClientName =
    "ERR Client names cannot contain spaces, newlines or special characters.";
bool ValidClientName(std::string_view name) {
  return std::all_of(name.begin(), name.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

void WrongArgs(std::string& out, std::string_view name) {
  resp::AppendError(out,
                    fmt::format("ERR wrong number of arguments for '{}' command", Lower(name)));
}

void RespError(std::string& out, const Error& e) {
  resp::AppendError(out,
                    fmt::format("{} {}", MapError(e.code).resp_prefix, RedactSecrets(e.message)));
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

// The table's command a RESP request runs, with its arguments in `command_args`; null for a
// connection command (AUTH, PING, ...) or an unknown one. INCR <tag> and INCRBY <tag> 1 are
// Redis clients' names for SEG.NEXT <tag>.
const CommandSpec* RespCommand(Args args, Args& command_args) {
  static const CommandSpec* const seg_next = FindCommand("SEG.NEXT");
  const std::string_view name = args[0];
  if ((Is(name, "INCR") && args.size() == 2) ||
      (Is(name, "INCRBY") && args.size() == 3 && args[2] == "1")) {
    command_args = args.subspan(1, 1);
    return seg_next;
  }
  const CommandSpec* spec = FindCommand(name);
  if (spec != nullptr) command_args = args.subspan(1);
  return spec;
}

// An id as a RESP integer, or as a decimal bulk string (ID.REPLY STRING).
void AppendId(std::string& out, std::int64_t id, bool as_string) {
  if (!as_string) {
    resp::AppendInteger(out, id);
    return;
  }
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, id);
  resp::AppendBulk(out, std::string_view(buf, static_cast<std::size_t>(end - buf)));
}

// `string_ids`: ids (an integer or a list of integers: ID.NEXT, ID.BATCH, SEG.NEXT, INCR,
// RANDOM.*, OPAQUE.DECODE) as decimal bulk strings.
void AppendReply(std::string& out, const Reply& reply, bool string_ids) {
  if (const auto* id = std::get_if<std::int64_t>(&reply)) {
    AppendId(out, *id, string_ids);
  } else if (const auto* ids = std::get_if<std::vector<std::int64_t>>(&reply)) {
    out.reserve(out.size() + ids->size() * 27 + 16);
    resp::AppendArrayHeader(out, ids->size());
    for (std::int64_t v : *ids) AppendId(out, v, string_ids);
  } else if (const auto* d = std::get_if<DecodedId>(&reply)) {
    resp::AppendArrayHeader(out, d->sharded ? 12 : 10);
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
    if (d->sharded) {
      resp::AppendBulk(out, "shard");
      resp::AppendInteger(out, d->shard);
    }
  } else if (const auto* texts = std::get_if<std::vector<std::string>>(&reply)) {
    resp::AppendArrayHeader(out, texts->size());
    for (const std::string& t : *texts) resp::AppendBulk(out, t);
  } else if (const auto* m = std::get_if<MachineGrant>(&reply)) {
    // MACHINE.DISTRIBUTE: the machine id and the time to wait past.
    resp::AppendArrayHeader(out, 2);
    resp::AppendInteger(out, m->machine_id);
    resp::AppendInteger(out, m->last_timestamp_ms);
  } else if (const auto* g = std::get_if<SegmentGrant>(&reply)) {
    // SEG.RANGE: begin, end (exclusive), delta, remainder.
    resp::AppendArrayHeader(out, 4);
    resp::AppendInteger(out, g->range.begin);
    resp::AppendInteger(out, g->range.end);
    resp::AppendInteger(out, g->delta);
    resp::AppendInteger(out, g->remainder);
  } else if (const auto* word = std::get_if<Word>(&reply)) {
    resp::AppendSimple(out, word->text);
  } else {
    resp::AppendBulk(out, std::get<std::string>(reply));
  }
}

}  // namespace

Lane LaneOf(Service& service, const http::Request& request) {
  std::string_view path, query;
  http::SplitTarget(request.target, path, query);
  std::string allowed;
  const HttpRoute* route = FindRoute(request.method, path, allowed);
  if (route == nullptr || route->command == nullptr) return Lane::kLoop;
  const RouteInput in{request, path, query,
                      route->prefix ? path.substr(route->path.size()) : std::string_view()};
  ArgList args;
  // A request with bad arguments is answered at once.
  if (!route->args(service, in, args).ok()) return Lane::kLoop;
  const std::vector<std::string_view> views = Views(args);
  return LaneOf(service, *route->command, views);
}

Lane LaneOf(Service& service, const std::vector<std::string_view>& args) {
  if (args.empty()) return Lane::kLoop;
  Args command_args;
  const CommandSpec* spec = RespCommand(args, command_args);
  return spec == nullptr ? Lane::kLoop : LaneOf(service, *spec, command_args);
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

namespace {

// One RESP command of a connection: what the connection commands below get.
struct RespCall {
  Service& service;
  Session& session;
  const std::vector<std::string_view>& args;
  std::string& out;
  bool& close;
  std::string_view name() const { return args[0]; }
  std::size_t argc() const { return args.size(); }
  bool Error(std::string_view text) {  // always false: the command failed
    resp::AppendError(out, text);
    return false;
  }
  bool WrongArgs() {
    ::sekka::server::WrongArgs(out, name());
    return false;
  }
  // Wrong credentials: the connection's last reply, answered late (server.cc).
  bool WrongPass() {
    session.auth_failed = close = true;
    return Error("WRONGPASS invalid username-password pair or user is disabled.");
  }
};

// The commands about the connection itself (Redis's, for its clients and tools), each true
// when it succeeded. The ids are the command table's (server/commands.h).
bool AuthCommand(RespCall& c) {
  if (c.argc() < 2 || c.argc() > 3) return c.WrongArgs();
  if (c.service.config().auth_token.empty()) {
    return c.Error(
        "ERR AUTH <password> called without any password configured for the default user. Are "
        "you sure your configuration is correct?");
  }
  if (!CredentialsMatch(c.service, c.argc() == 3 ? c.args[1] : "default", c.args.back())) {
    return c.WrongPass();
  }
  c.session.Authenticate();
  resp::AppendSimple(c.out, "OK");
  return true;
}

// A browser's request on the RESP port (a web page's fetch or form aimed at 127.0.0.1:6380): its
// request line or Host header closes the connection unanswered, before the request's body can
// run as commands (Redis's securityWarningCommand does the same).
// The warning is logged at most once a second (a page can open connections in a loop).
bool HttpOnRespCommand(RespCall& c) {
  static std::atomic<std::int64_t> last_logged_s{0};
  const std::int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count();
  if (std::int64_t last = last_logged_s.load();
      now_s != last && last_logged_s.compare_exchange_strong(last, now_s)) {
    Log(LogLevel::kWarn, "closed a connection that sent HTTP to the Redis-protocol port",
        "hint=\"a web page may be trying to reach it\" limit=\"one such line a second\"");
  }
  c.close = true;
  return false;
}

bool QuitCommand(RespCall& c) {
  resp::AppendSimple(c.out, "OK");
  c.close = true;
  return true;
}

void AppendHelloReply(std::string& out) {
  resp::AppendArrayHeader(out, 14);
  for (const char* word : {"server", "sekka", "version"}) resp::AppendBulk(out, word);
  resp::AppendBulk(out, kVersion);
  resp::AppendBulk(out, "proto");
  resp::AppendInteger(out, 2);
  resp::AppendBulk(out, "id");
  resp::AppendInteger(out, 0);
  for (const char* word : {"mode", "standalone", "role", "master", "modules"}) {
    resp::AppendBulk(out, word);
  }
  resp::AppendArrayHeader(out, 0);
}

// HELLO [2 [AUTH user pass] [SETNAME name]]: RESP2 only.
bool HelloCommand(RespCall& c) {
  const std::vector<std::string_view>& a = c.args;
  if (c.argc() > 1 && a[1] != "2") {
    const bool number = !a[1].empty() && a[1].size() < 10 &&
                        a[1].find_first_not_of("0123456789") == std::string_view::npos;
    return c.Error(number ? "NOPROTO sorry, this protocol version is not supported"
                          : "ERR Protocol version is not an integer or out of range");
  }
  for (std::size_t i = 2; i < c.argc();) {
    if (Is(a[i], "AUTH") && i + 2 < c.argc()) {
      if (!CredentialsMatch(c.service, a[i + 1], a[i + 2])) return c.WrongPass();
      c.session.Authenticate();
      i += 3;
    } else if (Is(a[i], "SETNAME") && i + 1 < c.argc()) {
      if (!ValidClientName(a[i + 1])) return c.Error(kBadClientName);
      c.session.name = std::string(a[i + 1].substr(0, 128));
      i += 2;
    } else {
      return c.Error("ERR Syntax error in HELLO option");
    }
  }
  if (!c.service.config().auth_token.empty() && !c.session.authenticated) {
    return c.Error(
        "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
        "HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and "
        "select the RESP protocol version at the same time");
  }
  AppendHelloReply(c.out);
  return true;
}

// INCR and INCRBY forms the command table did not take (RespCommand maps the valid ones).
bool IncrCommand(RespCall& c) {
  if (Is(c.name(), "INCRBY") && c.argc() == 3) {
    // Redis clients send INCRBY <key> 1 for INCR; a larger step would promise contiguous ids.
    return c.Error(
        "ERR INCRBY on a segment tag takes an increment of 1 only (ids of a batch need not be "
        "contiguous): use SEG.NEXT <tag> <n>");
  }
  return c.WrongArgs();
}

bool PingCommand(RespCall& c) {
  if (c.argc() > 2) return c.WrongArgs();
  if (c.argc() == 1) {
    resp::AppendSimple(c.out, "PONG");
  } else {
    resp::AppendBulk(c.out, c.args[1]);
  }
  return true;
}

bool EchoCommand(RespCall& c) {
  if (c.argc() != 2) return c.WrongArgs();
  resp::AppendBulk(c.out, c.args[1]);
  return true;
}

bool InfoCommand(RespCall& c) {
  resp::AppendBulk(c.out, InfoText(c.service, c.argc() > 1 ? c.args[1] : std::string_view()));
  return true;
}

bool CommandCommand(RespCall& c);  // after the table of connection commands

// redis-benchmark asks CONFIG GET save / appendonly: sekka keeps no Redis data.
bool ConfigCommand(RespCall& c) {
  const std::vector<std::string_view>& a = c.args;
  if (c.argc() == 3 && Is(a[1], "GET") && (Is(a[2], "save") || Is(a[2], "appendonly"))) {
    resp::AppendArrayHeader(c.out, 2);
    resp::AppendBulk(c.out, Lower(a[2]));
    resp::AppendBulk(c.out, Is(a[2], "save") ? "" : "no");
  } else {
    resp::AppendArrayHeader(c.out, 0);
  }
  return true;
}

// ID.REPLY STRING | INTEGER: how this connection gets ids (server.resp_ids by default).
bool IdReplyCommand(RespCall& c) {
  if (c.argc() != 2) return c.WrongArgs();
  if (!Is(c.args[1], "STRING") && !Is(c.args[1], "INTEGER")) {
    std::string shown(c.args[1].substr(0, 40));
    for (char& ch : shown) {
      if (ch < 0x20 || ch > 0x7e) ch = '?';  // one line, whatever the client sent
    }
    return c.Error(fmt::format("ERR ID.REPLY {}: allowed STRING or INTEGER", shown));
  }
  c.session.id_reply = Is(c.args[1], "STRING") ? IdReply::kString : IdReply::kInteger;
  resp::AppendSimple(c.out, "OK");
  return true;
}

bool ClientCommand(RespCall& c) {
  const std::vector<std::string_view>& a = c.args;
  if (c.argc() == 3 && Is(a[1], "SETNAME")) {
    if (!ValidClientName(a[2])) return c.Error(kBadClientName);
    c.session.name = std::string(a[2].substr(0, 128));
  } else if (c.argc() == 2 && Is(a[1], "GETNAME")) {
    if (c.session.name.empty()) {
      resp::AppendNull(c.out);
    } else {
      resp::AppendBulk(c.out, c.session.name);
    }
    return true;
  } else if (c.argc() < 2 ||
             !(Is(a[1], "SETINFO") || Is(a[1], "NO-EVICT") || Is(a[1], "NO-TOUCH"))) {
    return c.Error("ERR unknown subcommand or wrong number of arguments for 'client'");
  }
  resp::AppendSimple(c.out, "OK");
  return true;
}

bool SelectCommand(RespCall& c) {
  if (c.argc() != 2 || c.args[1] != "0") return c.Error("ERR DB index is out of range");
  resp::AppendSimple(c.out, "OK");
  return true;
}

struct ConnectionCommand {
  std::string_view name;
  Command label;    // its metrics label
  bool needs_auth;  // false: AUTH, HELLO and QUIT work before authentication
  bool (*run)(RespCall& call);
  int arity;               // Redis's: the words with the name, negative for "at least"; 0: no
                           // command (an HTTP request sent to the RESP port)
  std::string_view usage;  // its arguments, as COMMAND DOCS and docs/protocol.md show them
};

// Every RESP command that is not in the command table (server/commands.h).
constexpr ConnectionCommand kConnectionCommands[] = {
    {"AUTH", Command::kAuth, false, AuthCommand, -2, "[<user>] <password>"},
    {"HELLO", Command::kHello, false, HelloCommand, -1,
     "[2] [AUTH <user> <password>] [SETNAME <name>]"},
    {"QUIT", Command::kQuit, false, QuitCommand, -1, ""},
    {"INCR", Command::kSegment, true, IncrCommand, 2, "<tag>"},
    {"INCRBY", Command::kSegment, true, IncrCommand, 3, "<tag> 1"},
    {"PING", Command::kPing, true, PingCommand, -1, "[<message>]"},
    {"ECHO", Command::kEcho, true, EchoCommand, 2, "<message>"},
    {"INFO", Command::kInfo, true, InfoCommand, -1, "[<section>]"},
    {"COMMAND", Command::kCommand, true, CommandCommand, -1,
     "[COUNT | LIST | INFO <name>... | DOCS [<name>...]]"},
    {"CONFIG", Command::kOther, true, ConfigCommand, -2, "GET save | GET appendonly"},
    {"ID.REPLY", Command::kClient, true, IdReplyCommand, 2, "STRING | INTEGER"},
    {"CLIENT", Command::kClient, true, ClientCommand, -2, "SETNAME <name> | GETNAME | SETINFO ..."},
    {"SELECT", Command::kOther, true, SelectCommand, 2, "0"},
    {"POST", Command::kOther, false, HttpOnRespCommand, 0, ""},
    {"HOST:", Command::kOther, false, HttpOnRespCommand, 0, ""},
};

// What COMMAND tells of one command: Redis 7's shapes, from the two tables.
struct CommandEntry {
  std::string_view name;
  int arity;
  bool needs_auth;
  std::string_view usage;
};

std::vector<CommandEntry> CommandEntries() {
  std::vector<CommandEntry> out;
  for (const CommandSpec& spec : Commands()) {
    const int words = static_cast<int>(spec.min_args) + 1;
    out.push_back(
        {spec.name, spec.min_args == spec.max_args ? words : -words, spec.needs_auth, spec.usage});
  }
  for (const ConnectionCommand& c : kConnectionCommands) {
    if (c.arity != 0) out.push_back({c.name, c.arity, c.needs_auth, c.usage});
  }
  return out;
}

// COMMAND INFO's entry: name, arity, flags, first/last key and step (no keys), ACL categories,
// tips, key specs, subcommands.
void AppendCommandInfo(std::string& out, const CommandEntry& e) {
  resp::AppendArrayHeader(out, 10);
  resp::AppendBulk(out, Lower(e.name));
  resp::AppendInteger(out, e.arity);
  resp::AppendArrayHeader(out, e.needs_auth ? 0 : 1);
  if (!e.needs_auth) resp::AppendSimple(out, "no_auth");
  for (int i = 0; i < 3; ++i) resp::AppendInteger(out, 0);
  for (int i = 0; i < 4; ++i) resp::AppendArrayHeader(out, 0);
}

// COMMAND DOCS's entry: the name, then its doc as a flat map (RESP2).
void AppendCommandDoc(std::string& out, const CommandEntry& e) {
  resp::AppendBulk(out, Lower(e.name));
  resp::AppendArrayHeader(out, 6);
  resp::AppendBulk(out, "summary");
  resp::AppendBulk(out,
                   e.usage.empty() ? std::string(e.name) : fmt::format("{} {}", e.name, e.usage));
  resp::AppendBulk(out, "since");
  resp::AppendBulk(out, "0.1.0");
  resp::AppendBulk(out, "group");
  resp::AppendBulk(out, "generic");
}

// COMMAND [COUNT | LIST | INFO name... | DOCS [name...]], as Redis 7 answers them, so that
// redis-cli and client libraries learn the commands (docs/protocol.md lists the same).
bool CommandCommand(RespCall& c) {
  const std::vector<CommandEntry> entries = CommandEntries();
  const std::string_view sub = c.argc() > 1 ? c.args[1] : std::string_view();
  auto find = [&](std::string_view name) -> const CommandEntry* {
    for (const CommandEntry& e : entries) {
      if (Is(name, e.name)) return &e;
    }
    return nullptr;
  };
  if (Is(sub, "COUNT") && c.argc() == 2) {
    resp::AppendInteger(c.out, static_cast<std::int64_t>(entries.size()));
  } else if (Is(sub, "LIST") && c.argc() == 2) {
    resp::AppendArrayHeader(c.out, entries.size());
    for (const CommandEntry& e : entries) resp::AppendBulk(c.out, Lower(e.name));
  } else if (c.argc() <= 2 && (c.argc() == 1 || Is(sub, "INFO"))) {  // every command
    resp::AppendArrayHeader(c.out, entries.size());
    for (const CommandEntry& e : entries) AppendCommandInfo(c.out, e);
  } else if (Is(sub, "INFO")) {
    resp::AppendArrayHeader(c.out, c.argc() - 2);
    for (std::size_t i = 2; i < c.argc(); ++i) {
      if (const CommandEntry* e = find(c.args[i])) {
        AppendCommandInfo(c.out, *e);
      } else {
        resp::AppendNull(c.out);
      }
    }
  } else if (Is(sub, "DOCS")) {
    std::vector<const CommandEntry*> asked;
    for (std::size_t i = 2; i < c.argc(); ++i) {
      if (const CommandEntry* e = find(c.args[i])) asked.push_back(e);
    }
    if (c.argc() == 2) {
      for (const CommandEntry& e : entries) asked.push_back(&e);
    }
    resp::AppendArrayHeader(c.out, 2 * asked.size());
    for (const CommandEntry* e : asked) AppendCommandDoc(c.out, *e);
  } else {
    return c.Error(fmt::format(
        "ERR unknown subcommand or wrong number of arguments for 'command': allowed COUNT, "
        "LIST, INFO <name>..., DOCS [<name>...]"));
  }
  return true;
}

const ConnectionCommand* FindConnectionCommand(std::string_view name) {
  for (const ConnectionCommand& c : kConnectionCommands) {
    if (Is(name, c.name)) return &c;
  }
  return nullptr;
}

bool UnknownCommand(RespCall& c) {
  std::string with;
  for (std::size_t i = 1; i < c.argc() && i < 4; ++i) {
    with += fmt::format("'{}' ", c.args[i].substr(0, 40));
  }
  return c.Error(fmt::format("ERR unknown command '{}', with args beginning with: {}",
                             c.name().substr(0, 100), with));
}

bool StringIds(Service& service, const Session& session) {
  return session.id_reply == IdReply::kServerDefault ? service.config().resp_string_ids
                                                     : session.id_reply == IdReply::kString;
}

}  // namespace

void HandleResp(Service& service, Session& session, const std::vector<std::string_view>& args,
                std::string& out, bool& close) {
  if (args.empty()) return;
  const bool needs_auth = !service.config().auth_token.empty() && !session.authenticated;
  // The hot command first, so that it skips the look-ups below.
  static const CommandSpec* const id_next = FindCommand("ID.NEXT");
  if (!needs_auth && args.size() == 1 && Is(args[0], "ID.NEXT")) {
    const Result<Reply> reply = Execute(service, *id_next, {});
    if (reply.ok()) {
      AppendId(out, std::get<std::int64_t>(*reply), StringIds(service, session));
    } else {
      RespError(out, reply.error());
    }
    service.CountRequest(Protocol::kResp, Command::kId, reply.ok());
    return;
  }
  RespCall call{service, session, args, out, close};
  Command label = Command::kOther;
  bool ok = false;
  Args command_args;
  if (const CommandSpec* spec = RespCommand(args, command_args)) {
    label = spec->command;
    if (needs_auth && spec->needs_auth) {
      call.Error("NOAUTH Authentication required.");
    } else if (const Result<Reply> reply = Execute(service, *spec, command_args); reply.ok()) {
      AppendReply(out, *reply, StringIds(service, session));
      ok = true;
    } else {
      RespError(out, reply.error());
    }
  } else if (const ConnectionCommand* c = FindConnectionCommand(args[0])) {
    label = c->label;
    ok = needs_auth && c->needs_auth ? call.Error("NOAUTH Authentication required.") : c->run(call);
  } else {
    ok = needs_auth ? call.Error("NOAUTH Authentication required.") : UnknownCommand(call);
  }
  service.CountRequest(Protocol::kResp, label, ok);
}

// ---------------------------------------------------------------------------------------------
// Thrift: Twitter Snowflake's IDL, service Snowflake { i64 get_worker_id(); i64 get_timestamp();
// i64 get_id(1:string useragent); i64 get_datacenter_id() }. The IDL declares no exceptions, so
// failures travel as TApplicationException with the message, as Twitter's server sent them.

namespace {

// Twitter's check: the whole user agent matches [a-zA-Z][a-zA-Z\-0-9]*.
bool ValidUserAgent(std::string_view agent) {
  if (agent.empty() || !std::isalpha(static_cast<unsigned char>(agent[0]))) return false;
  return std::all_of(agent.begin(), agent.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-';
  });
}

}  // namespace

void HandleThrift(Service& service, const thrift::Call& call, std::string& out) {
  using thrift::ExceptionType;
  if (call.type == thrift::MessageType::kOneway) {
    service.CountRequest(Protocol::kThrift, Command::kOther, false);
    return;
  }
  if (call.type != thrift::MessageType::kCall) {
    thrift::AppendException(
        out, call.name, call.seqid, ExceptionType::kInvalidMessageType,
        fmt::format("message type {}: allowed 1 (call)", static_cast<int>(call.type)));
    service.CountRequest(Protocol::kThrift, Command::kOther, false);
    return;
  }
  auto answer = [&](Command command, std::int64_t value) {
    thrift::AppendI64Reply(out, call.name, call.seqid, value);
    service.CountRequest(Protocol::kThrift, command, true);
  };
  auto fail = [&](Command command, ExceptionType type, std::string_view message) {
    thrift::AppendException(out, call.name, call.seqid, type, message);
    service.CountRequest(Protocol::kThrift, command, false);
  };
  if (call.name == "get_id") {
    // A view of the argument itself (a conditional with "" would make it a view of a
    // temporary copy).
    std::string_view text;
    if (auto agent = call.strings.find(1); agent != call.strings.end()) text = agent->second;
    if (!ValidUserAgent(text)) {
      fail(Command::kId, ExceptionType::kInternalError,
           fmt::format("invalid_argument: useragent \"{}\" is not valid: allowed a letter, then "
                       "letters, digits and '-'",
                       http::JsonEscape(text.substr(0, 64))));
      return;
    }
    static const CommandSpec* const id_next = FindCommand("ID.NEXT");
    const Result<Reply> reply = Execute(service, *id_next, {});
    if (reply.ok()) {
      answer(Command::kId, std::get<std::int64_t>(*reply));
    } else {
      fail(Command::kId, ExceptionType::kInternalError,
           fmt::format("{}: {}", MapError(reply.error().code).http_code,
                       RedactSecrets(reply.error().message)));
    }
  } else if (call.name == "get_worker_id") {
    answer(Command::kWorker, service.worker().worker_id);
  } else if (call.name == "get_datacenter_id") {
    answer(Command::kWorker, service.worker().datacenter_id);
  } else if (call.name == "get_timestamp") {
    answer(Command::kWorker, service.now_millis());
  } else {
    fail(Command::kOther, ExceptionType::kUnknownMethod,
         fmt::format("Unknown function {}: allowed get_id, get_worker_id, get_timestamp, "
                     "get_datacenter_id",
                     http::JsonEscape(std::string_view(call.name).substr(0, 64))));
  }
}

}  // namespace sekka::server
