#include "backends/segment_tables.h"

#include <fmt/format.h>

#include <array>
#include <limits>

namespace sekka {
namespace {

constexpr std::array<SegmentTable, 3> kTables = {{
    {"sekka", "", "sekka_segments", "tag", "next_id", "tag, next_id, step, delta, remainder", false,
     true, 0},
    {"leaf", "Leaf", "leaf_alloc", "biz_tag", "max_id", "biz_tag, max_id, step, 1, 0", false, false,
     0},
    {"tinyid", "tinyid", "tiny_id_info", "biz_type", "max_id",
     "biz_type, max_id, step, delta, remainder", true, true, 1},
}};

constexpr std::int64_t kIntMax = std::numeric_limits<std::int32_t>::max();

}  // namespace

const SegmentTable* FindSegmentTable(std::string_view schema) {
  for (const SegmentTable& t : kTables) {
    if (t.schema == (schema.empty() ? "sekka" : schema)) return &t;
  }
  return nullptr;
}

Status CheckNewTag(const SegmentTable& t, const TagInfo& tag) {
  if (Status s = ValidateNewTag(tag); !s.ok()) return s;
  if (!t.has_delta && (tag.delta != 1 || tag.remainder != 0)) {
    return InvalidArgument(fmt::format(
        "tag {}: {}'s table has no delta or remainder: allowed delta 1 and remainder 0 with "
        "schema={}",
        tag.tag, t.peer, t.schema));
  }
  if (!t.peer.empty() && tag.step > kIntMax) {
    return InvalidArgument(
        fmt::format("tag {}: step {} does not fit {}'s INT column: allowed 1 to {}", tag.tag,
                    tag.step, t.name, kIntMax));
  }
  return Status::Ok();
}

}  // namespace sekka
