// backends/segment_tables.h
//
// The tables a SQL segment store can serve, chosen by the store URI's `schema` parameter, on
// MySQL/MariaDB and PostgreSQL alike. What a table means is here once; each store writes its
// own SQL for it:
//   sekka   sekka_segments (tag, next_id, step, delta, remainder): next_id is the next id no
//           range covered; a range is an UPDATE that moves it (the default)
//   leaf    Meituan Leaf's leaf_alloc (biz_tag, max_id, step, description, update_time): max_id
//           is the next id too (Leaf's servers issue [max_id - step, max_id) after their
//           UPDATE); no delta or remainder; step an INT
//   tinyid  didi tinyid's tiny_id_info (biz_type, begin_id, max_id, step, delta, remainder,
//           version, ...): max_id is the last id covered (tinyid's servers issue (max_id - step,
//           max_id]); a range is tinyid's optimistic UPDATE on the max_id and version read;
//           step, delta and remainder INTs
// A peer's table is served in place: the peer's own servers may draw from the same rows, and
// ranges never overlap because every allocation moves the row under the database's own row lock
// or compare.
//
// Deleting a tag keeps its row in sekka's table as a tombstone (deleted = 1, next_id as it was):
// every statement reads and moves live rows only, and a create brings a tombstone back only at
// its next id or above (CreateInTable). The peers' tables have no such column, and a tag in one
// is never deleted.

#ifndef SEKKA_BACKENDS_SEGMENT_TABLES_H_
#define SEKKA_BACKENDS_SEGMENT_TABLES_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

#include "sekka/segment.h"

namespace sekka {

struct SegmentTable {
  std::string_view schema;   // the URI's name for it
  std::string_view peer;     // "Leaf", "tinyid"; "" for sekka's own
  std::string_view name;     // the table
  std::string_view key;      // the tag's column
  std::string_view counter;  // the column a range moves
  // A TagInfo's columns in order (tag, the counter, step, delta, remainder), as SQL both
  // dialects read; NextIdOf turns the counter into the tag's next id.
  std::string_view columns;
  bool optimistic;         // read, then UPDATE on the counter and version read (tinyid)
  bool has_delta;          // delta and remainder columns
  std::int64_t first_gap;  // a range's first id is the counter's value before it + first_gap
  // A condition true for the rows of tags that exist: "deleted = 0" where tombstones are kept
  // (sekka's), "1 = 1" elsewhere.
  std::string_view live;
  bool tombstones() const { return peer.empty(); }
};

// tinyid's tokens beside its table (tiny_id_token: token, biz_type), read as tinyid's
// TinyIdTokenServiceImpl does, in both dialects; at most 100,000 rows.
inline constexpr std::string_view kTinyidTokensSql =
    "SELECT token, biz_type FROM tiny_id_token LIMIT 100000";

// The table of `schema` ("" = sekka); nullptr when there is none.
const SegmentTable* FindSegmentTable(std::string_view schema);
// "sekka, leaf, tinyid", for messages.
inline constexpr std::string_view kSegmentSchemas = "sekka, leaf, tinyid";

// The range an allocation of `step` gives when the counter was `before`.
inline IdRange RangeAfter(const SegmentTable& t, std::int64_t before, std::int64_t step) {
  return IdRange{before + t.first_gap, before + t.first_gap + step};
}
// A tag's next id from its counter (at most 2^63 - 1: a counter at the end is exhausted).
inline std::int64_t NextIdOf(const SegmentTable& t, std::int64_t counter) {
  return counter > INT64_MAX - t.first_gap ? INT64_MAX : counter + t.first_gap;
}
// The counter's value for a new tag whose first id is `next_id`.
inline std::int64_t CounterFor(const SegmentTable& t, std::int64_t next_id) {
  return next_id - t.first_gap;
}
// What the table can hold beyond ValidateNewTag: delta and remainder only where it has them, and
// the peers' INT columns. Errors: kInvalidArgument naming the table and what is allowed.
Status CheckNewTag(const SegmentTable& t, const TagInfo& tag);
// A step the table's column holds (ValidateTagStep's range fits every table). Errors:
// kInvalidArgument.
Status CheckStep(const SegmentTable& t, std::string_view tag, std::int64_t step);

// What a store does for CreateInTable, each in one statement (or transaction) of its own.
struct TableCreate {
  // Turns the tag's tombstone into the new row if CheckRevival allows it (its next id at most the
  // new one, the same delta and remainder); true when it did.
  std::function<Result<bool>()> revive;
  // Inserts the row if the tag has none, live or deleted; true when it did.
  std::function<Result<bool>()> insert;
  // The tag's tombstone (its row as it was deleted); nullopt when its row is live.
  std::function<Result<std::optional<TagInfo>>()> tombstone;
};
// CreateTag on a table, the rule written once: a tombstone comes back only as CheckRevival allows
// (at or above its next id, with its delta and remainder); with no row, one is inserted; a live
// row is TagExists. Errors: those and the steps' own.
Status CreateInTable(const SegmentTable& t, const TagInfo& tag, const TableCreate& steps);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_SEGMENT_TABLES_H_
