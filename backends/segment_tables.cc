#include "backends/segment_tables.h"

#include <fmt/format.h>

#include <array>
#include <limits>

namespace sekka {
namespace {

constexpr std::array<SegmentTable, 3> kTables = {{
    {"sekka", "", "sekka_segments", "tag", "next_id", "tag, next_id, step, delta, remainder", false,
     true, 0, "deleted = 0"},
    {"leaf", "Leaf", "leaf_alloc", "biz_tag", "max_id", "biz_tag, max_id, step, 1, 0", false, false,
     0, "1 = 1"},
    {"tinyid", "tinyid", "tiny_id_info", "biz_type", "max_id",
     "biz_type, max_id, step, delta, remainder", true, true, 1, "1 = 1"},
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
  return CheckStep(t, tag.tag, tag.step);
}

// Every tag step fits the peers' INT step columns.
static_assert(kMaxTagStep <= kIntMax);

Status CheckStep(const SegmentTable&, std::string_view, std::int64_t step) {
  return ValidateTagStep(step);
}

Status CreateInTable(const SegmentTable& t, const TagInfo& tag, const TableCreate& steps) {
  if (Status s = CheckNewTag(t, tag); !s.ok()) return s;
  // 1. A tombstone that CheckRevival allows becomes the row (under the row's lock).
  if (t.tombstones()) {
    SEKKA_ASSIGN_OR_RETURN(auto revived, steps.revive());
    if (revived) return Status::Ok();
  }
  // 2. No row at all: a new one.
  SEKKA_ASSIGN_OR_RETURN(auto inserted, steps.insert());
  if (inserted) return Status::Ok();
  // 3. A row is there: live (it exists), or a tombstone CheckRevival refuses (a tombstone never
  //    moves down nor changes its delta, so this answer holds even if the row changed since).
  if (!t.tombstones()) return TagExists(tag.tag);
  SEKKA_ASSIGN_OR_RETURN(auto dead, steps.tombstone());
  if (dead) {
    if (Status s = CheckRevival(*dead, tag); !s.ok()) return s;
  }
  return TagExists(tag.tag);
}

}  // namespace sekka
