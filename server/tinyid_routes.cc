// didi tinyid's HTTP routes, as tinyid-server answers them (docs/protocol.md, "tinyid").

#include <fmt/format.h>

#include <charconv>
#include <optional>
#include <string>
#include <vector>

#include "sekka/secrets.h"
#include "server/commands.h"
#include "server/http_route.h"

namespace sekka::server::routes {
namespace {

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

}  // namespace

// tinyid-server's IdContronller, on any method.
const std::vector<HttpRoute>& TinyidRoutes() {
  static const std::vector<HttpRoute> routes = {
      {kAnyMethod, "/tinyid/id/nextId", false, Auth::kTinyid, &SegNextOfExistingTag(),
       Command::kSegment, TinyidIdArgs, TinyidNextId},
      {kAnyMethod, "/tinyid/id/nextIdSimple", false, Auth::kTinyid, &SegNextOfExistingTag(),
       Command::kSegment, TinyidIdArgs, TinyidNextIdSimple},
      {kAnyMethod, "/tinyid/id/nextSegmentId", false, Auth::kTinyid, &Spec(CommandId::kSegRange),
       Command::kSegmentRange, TinyidSegmentArgs, TinyidNextSegmentId},
      {kAnyMethod, "/tinyid/id/nextSegmentIdSimple", false, Auth::kTinyid,
       &Spec(CommandId::kSegRange), Command::kSegmentRange, TinyidSegmentArgs,
       TinyidNextSegmentIdSimple},
  };
  return routes;
}

}  // namespace sekka::server::routes
