// sekka's own HTTP routes: ids, segments, strict ids, tags, UUIDs and ULIDs, random and opaque
// ids, health, readiness, metrics, the status page (docs/protocol.md, "HTTP").

#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

#include "sekka/secrets.h"
#include "server/commands.h"
#include "server/http_route.h"
#include "server/ui_page.h"

namespace sekka::server::routes {
namespace {

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

HttpReply MetricsReply(Service& service, const RouteInput&, Result<Reply>& reply) {
  if (!reply.ok()) return FromError(reply.error());  // no token
  HttpReply r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = service.MetricsText();
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

}  // namespace

// sekka's routes (docs/protocol.md).
const std::vector<HttpRoute>& SekkaRoutes() {
  static const std::vector<HttpRoute> routes = {
      {"GET", "/healthz", false, Auth::kNone, nullptr, Command::kHealth, NoArgs, HealthReply},
      {"GET", "/readyz", false, Auth::kNone, nullptr, Command::kReady, NoArgs, ReadyReply},
      // Rendered on a lane's pool (at most once a second: Service::MetricsText), never on a
      // loop: with 3,000 tags it took 14 ms, and clients pipelining it held up every other.
      {"GET", "/metrics", false, Auth::kMetrics, nullptr, Command::kMetrics, NoArgs, MetricsReply,
       Lane::kStore},
      {"GET", "/v1/id", false, Auth::kCommand, &Spec(CommandId::kIdNext), Command::kId, FormatArg,
       IdsReply},
      {"GET", "/v1/ids", false, Auth::kCommand, &Spec(CommandId::kIdBatch), Command::kIds, CountArg,
       IdsReply},
      {"GET", "/v1/decode/", true, Auth::kCommand, &Spec(CommandId::kIdDecode), Command::kDecode,
       PathArg, DecodeReply},
      {"GET", "/v1/info", false, Auth::kCommand, nullptr, Command::kInfo, NoArgs, InfoReply},
      {"GET", "/ui", false, Auth::kBrowser, nullptr, Command::kInfo, NoArgs, UiReply},
      {"GET", "/ui/data", false, Auth::kBrowser, nullptr, Command::kInfo, NoArgs, UiDataReply},
      {"GET", "/v1/segment/", true, Auth::kCommand, &SegNextOfExistingTag(), Command::kSegment,
       TagAndCountArgs, SegmentReply},
      // The same, creating an unknown tag with segment.auto_create (a GET never does).
      {"POST", "/v1/segment/", true, Auth::kCommand, &Spec(CommandId::kSegNext), Command::kSegment,
       TagAndCountArgs, SegmentReply},
      {"GET", "/v1/strict/", true, Auth::kCommand, &Spec(CommandId::kStrictNext), Command::kStrict,
       TagAndCountArgs, SegmentReply},
      // Tag administration: Leaf's /db (the rows) and /cache (the buffers) in one.
      {"GET", "/v1/tags", false, Auth::kCommand, &Spec(CommandId::kSegTags), Command::kSegmentAdmin,
       TagsPageArgs, TagsReply},
      {"GET", "/v1/tags/", true, Auth::kCommand, &Spec(CommandId::kSegTags), Command::kSegmentAdmin,
       TagArg, TagsReply},
      {"PATCH", "/v1/tags/", true, Auth::kCommand, &Spec(CommandId::kSegStep),
       Command::kSegmentAdmin, TagStepArgs, TagsReply},
      {"DELETE", "/v1/tags/", true, Auth::kCommand, &Spec(CommandId::kSegDelete),
       Command::kSegmentAdmin, TagArg, TagsReply},
      {"GET", "/v1/uuid", false, Auth::kCommand, &Spec(CommandId::kUuidNext), Command::kUuid,
       NoArgs, TimeOrderedReply<false>},
      {"GET", "/v1/uuids", false, Auth::kCommand, &Spec(CommandId::kUuidBatch), Command::kUuid,
       CountArg, TimeOrderedReply<false>},
      {"GET", "/v1/ulid", false, Auth::kCommand, &Spec(CommandId::kUlidNext), Command::kUlid,
       NoArgs, TimeOrderedReply<true>},
      {"GET", "/v1/ulids", false, Auth::kCommand, &Spec(CommandId::kUlidBatch), Command::kUlid,
       CountArg, TimeOrderedReply<true>},
      {"GET", "/v1/random", false, Auth::kCommand, &Spec(CommandId::kRandomNext), Command::kRandom,
       FormatArg<true>, IdsReply<true>},
      {"GET", "/v1/randoms", false, Auth::kCommand, &Spec(CommandId::kRandomBatch),
       Command::kRandom, CountArg<true>, IdsReply<true>},
      {"GET", "/v1/opaque/encode/", true, Auth::kCommand, &Spec(CommandId::kOpaqueEncode),
       Command::kOpaque, PathArg, OpaqueReply},
      {"GET", "/v1/opaque/decode/", true, Auth::kCommand, &Spec(CommandId::kOpaqueDecode),
       Command::kOpaque, PathArg, OpaqueReply},
  };
  return routes;
}

}  // namespace sekka::server::routes
