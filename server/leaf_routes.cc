// Meituan Leaf's HTTP routes, as leaf-server answers them (docs/protocol.md, "Leaf").

#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

#include "sekka/secrets.h"
#include "server/commands.h"
#include "server/http_route.h"

namespace sekka::server::routes {
namespace {

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
  SEKKA_ASSIGN_OR_RETURN(auto page, service.SegmentTagRows("", Service::kTagsPage));
  std::vector<std::vector<std::string>> rows;
  for (const TagInfo& t : page) {
    rows.push_back({t.tag, std::to_string(t.next_id), std::to_string(t.step), "-"});
  }
  return Reply(LeafPage("tag max step update", rows));
}
bool LeafDbMayBlock(Service&, Args) { return true; }
// Not a row of the table (no RESP name): Leaf's page of the store's rows.
constexpr CommandSpec kLeafDb{
    CommandId::kRouteOnly, Command::kSegmentAdmin, "GET /db",    0,  0, true,
    LeafDbMayBlock,        LeafDbCommand,          Lane::kStore, "",
    /*changes=*/false};

HttpReply LeafDbReply(Service&, const RouteInput&, Result<Reply>& reply) {
  if (!reply.ok()) return FromError(reply.error());
  return Html(std::get<std::string>(std::move(*reply)));
}

}  // namespace

// leaf-server's LeafController and LeafMonitorController.
const std::vector<HttpRoute>& LeafRoutes() {
  static const std::vector<HttpRoute> routes = {
      {"GET", "/api/snowflake/get/", true, Auth::kCommand, &Spec(CommandId::kIdNext),
       Command::kLeafSnowflake, NoArgs, LeafIdReply},
      {"GET", "/api/segment/get/", true, Auth::kCommand, &SegNextOfExistingTag(),
       Command::kLeafSegment, PathArg, LeafIdReply},
      {"GET", "/decodeSnowflakeId", false, Auth::kNone, &Spec(CommandId::kIdDecode),
       Command::kLeafDecode, LeafDecodeArgs, LeafDecodeReply},
      {"GET", "/cache", false, Auth::kCommand, nullptr, Command::kSegmentAdmin, NoArgs,
       LeafCacheReply},
      {"GET", "/db", false, Auth::kCommand, &kLeafDb, Command::kSegmentAdmin, NoArgs, LeafDbReply},
  };
  return routes;
}

}  // namespace sekka::server::routes
