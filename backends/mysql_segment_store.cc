#include "backends/mysql_segment_store.h"

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <optional>
#include <vector>

#include "backends/mysql_connection.h"
#include "backends/one_line.h"
#include "backends/segment_tables.h"
#include "backends/store_uri.h"
#include "sekka/secrets.h"

namespace sekka {
namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

// sekka's own table on MySQL, made when missing (the peers' tables must be there). The tag is
// bytes (128 characters of UTF-8 at most): compared as they are, as every other store does; a
// character column would take "a" and "a " (PAD SPACE), or "a" and "A" (_ci), for one row.
constexpr const char* kSekkaTable =
    "CREATE TABLE IF NOT EXISTS sekka_segments ("
    "  tag VARBINARY(512) PRIMARY KEY,"
    "  next_id BIGINT NOT NULL CHECK (next_id >= 1),"
    "  step BIGINT NOT NULL CHECK (step >= 1),"
    "  delta BIGINT NOT NULL DEFAULT 1,"
    "  remainder BIGINT NOT NULL DEFAULT 0,"
    "  deleted TINYINT NOT NULL DEFAULT 0,"
    "  updated_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)"
    "    ON UPDATE CURRENT_TIMESTAMP(3)) ENGINE=InnoDB";

struct Target {
  StoreUri uri;
  std::string text;  // for messages, without a password
  const SegmentTable& table;
};

class MysqlSegmentStore final : public SegmentStore {
 public:
  explicit MysqlSegmentStore(Target target)
      : t_(std::move(target)),
        db_(t_.uri, t_.text, "segment store",
            [table = &t_.table](MysqlConnection& db) { return CheckTable(*table, db); }) {}

  Result<Allocation> Allocate(std::string_view tag, std::int64_t step) override {
    if (step < 1) return BadStep(step);
    if (!ValidateTag(tag).ok()) return TagNotFound(tag);
    std::lock_guard lock(mu_);
    return t_.table.optimistic ? CompareAndSet(tag, step) : Increment(tag, step);
  }

  Status CreateTag(const TagInfo& tag) override {
    std::lock_guard lock(mu_);
    const std::string name = Quote(tag.tag);  // CreateInTable checks the tag before any step
    auto changed = [&](const std::string& sql) -> Result<bool> {
      SEKKA_ASSIGN_OR_RETURN(auto r, Run(sql));
      return r.at(0).affected == 1;
    };
    return CreateInTable(
        t_.table, tag,
        {[&] {
           return changed(fmt::format(
               "UPDATE sekka_segments SET next_id = {1}, step = {2}, delta = {3}, remainder = {4}, "
               "deleted = 0 WHERE tag = {0} AND deleted = 1 AND next_id <= {1} AND delta = {3} AND "
               "remainder = {4}",
               name, tag.next_id, tag.step, tag.delta, tag.remainder));
         },
         [&] {
           return changed(fmt::format("INSERT INTO {} {} ON DUPLICATE KEY UPDATE {} = {}",
                                      t_.table.name, Values(tag), t_.table.key, t_.table.key));
         },
         [&]() -> Result<std::optional<TagInfo>> {
           SEKKA_ASSIGN_OR_RETURN(
               auto r,
               Run(fmt::format("SELECT {} FROM sekka_segments WHERE tag = {} AND deleted = 1",
                               t_.table.columns, name)));
           if (r.at(0).rows.size() != 1) return std::optional<TagInfo>();
           return std::optional<TagInfo>(Row(r.at(0).rows[0]));
         }});
  }

  Status SetStep(std::string_view tag, std::int64_t step) override {
    if (Status s = CheckStep(t_.table, tag, step); !s.ok()) return s;
    if (!ValidateTag(tag).ok()) return TagNotFound(tag);
    std::lock_guard lock(mu_);
    // affected counts changed rows: a step set to what it was is found with the read.
    Result<std::vector<MysqlAnswer>> r =
        Run(fmt::format("UPDATE {0} SET step = {1} WHERE {2} = {3} AND {4}; "
                        "SELECT COUNT(*) FROM {0} WHERE {2} = {3} AND {4}",
                        t_.table.name, step, t_.table.key, Quote(tag), t_.table.live));
    SEKKA_RETURN_IF_ERROR(r);
    if (r->size() != 2 || r->at(1).rows.size() != 1 || r->at(1).rows[0][0] != "1") {
      return TagNotFound(tag);
    }
    return Status::Ok();
  }

  Result<TagInfo> DeleteTag(std::string_view tag) override {
    if (!t_.table.tombstones()) return NoDeleteOnPeerTable(tag, t_.table.peer);
    if (!ValidateTag(tag).ok()) return TagNotFound(tag);
    std::lock_guard lock(mu_);
    // The row as it was and its tombstone, in one transaction under the row's lock.
    const std::string name = Quote(tag);
    Result<std::vector<MysqlAnswer>> r = Run(fmt::format(
        "START TRANSACTION; SELECT {0} FROM sekka_segments WHERE tag = {1} AND deleted = 0 "
        "FOR UPDATE; UPDATE sekka_segments SET deleted = 1 WHERE tag = {1} AND deleted = 0; "
        "COMMIT",
        t_.table.columns, name));
    SEKKA_RETURN_IF_ERROR(r);
    if (r->size() != 4 || r->at(1).rows.size() != 1) return TagNotFound(tag);
    return Row(r->at(1).rows[0]);
  }

  Result<TagInfo> GetTag(std::string_view tag) override {
    if (!ValidateTag(tag).ok()) return TagNotFound(tag);
    std::lock_guard lock(mu_);
    return Get(tag);
  }

  Result<TagInfo> ImportTag(std::string_view tag, std::string_view from) override {
    const SegmentTable* peer = FindSegmentTable(from);
    if (peer == nullptr || peer->peer.empty()) {
      return InvalidArgument(
          fmt::format("segment import --from \"{}\" is not known: allowed leaf, "
                      "tinyid",
                      from.substr(0, 20)));
    }
    if (!t_.table.peer.empty()) return SegmentStore::ImportTag(tag, from);
    SEKKA_RETURN_IF_ERROR(ValidateTag(tag));
    std::lock_guard lock(mu_);
    // 1. Under the peer row's lock (and a lock on sekka's row, or on the gap where it would
    //    be): the peer's row, and whether sekka's table has the tag.
    const std::string name = Quote(tag);
    Result<std::vector<MysqlAnswer>> read =
        Run(fmt::format("START TRANSACTION; SELECT {0} FROM {1} WHERE {2} = {3} FOR UPDATE; "
                        "SELECT COUNT(*) FROM sekka_segments WHERE tag = {3} FOR UPDATE",
                        peer->columns, peer->name, peer->key, name));
    SEKKA_RETURN_IF_ERROR(read);
    auto refuse = [&](Error e) -> Result<TagInfo> {
      (void)Run("ROLLBACK");
      return e;
    };
    if (read->size() != 3 || read->at(1).rows.size() != 1) {
      return refuse(NotFound(fmt::format("tag {} is not in {}'s table {} of segment store {}", tag,
                                         peer->peer, peer->name, t_.text)));
    }
    const std::vector<std::string>& row = read->at(1).rows[0];
    const std::int64_t counter = std::strtoll(row[1].c_str(), nullptr, 10);
    if (counter >= kMax - peer->first_gap) {
      return refuse(AlreadyExists(fmt::format(
          "tag {}: {}'s row is at the end of the id space already (moved to sekka before?): "
          "nothing to move",
          tag, peer->peer)));
    }
    if (peer->has_delta && row[3] == "0") {
      return refuse(AlreadyExists(
          fmt::format("tag {}: {}'s row has delta 0, as a move to sekka leaves it: nothing to move",
                      tag, peer->peer)));
    }
    if (read->at(2).rows.size() != 1 || read->at(2).rows[0][0] != "0") {
      return refuse(AlreadyExists(fmt::format(
          "tag {} is in sekka's table already (live or deleted): the move would start it again",
          tag)));
    }
    // 2. sekka's row at the peer's next id; the peer's row past every id sekka will serve.
    TagInfo moved;
    moved.tag = std::string(tag);
    moved.next_id = NextIdOf(*peer, counter);
    moved.step = std::strtoll(row[2].c_str(), nullptr, 10);
    moved.delta = std::strtoll(row[3].c_str(), nullptr, 10);
    moved.remainder = std::strtoll(row[4].c_str(), nullptr, 10);
    if (Status s = ValidateNewTag(moved); !s.ok()) return refuse(std::move(s).error());
    // Leaf's servers add the step in SQL: past 2^63 - 1 their UPDATE fails. tinyid's add it in
    // Java, where it wraps; delta 0 makes every segment they take fail ("/ by zero"), and keeps
    // the row (and its name) so that nobody makes the tag again there at 1.
    const std::string fence =
        peer->schema == "tinyid"
            ? fmt::format("max_id = {}, delta = 0, update_time = now(), version = version + 1",
                          kMax)
            : fmt::format("{} = {}", peer->counter, kMax);
    Result<std::vector<MysqlAnswer>> done = Run(fmt::format(
        "INSERT INTO sekka_segments (tag, next_id, step, delta, remainder) VALUES ({}, {}, {}, "
        "{}, {}); UPDATE {} SET {} WHERE {} = {}; COMMIT",
        name, moved.next_id, moved.step, moved.delta, moved.remainder, peer->name, fence, peer->key,
        name));
    SEKKA_RETURN_IF_ERROR(done);
    return moved;
  }

  bool has_peer_tokens() const override { return t_.table.schema == "tinyid"; }

  Result<std::vector<PeerToken>> PeerTokens() override {
    if (!has_peer_tokens()) return SegmentStore::PeerTokens();
    std::lock_guard lock(mu_);
    SEKKA_ASSIGN_OR_RETURN(auto r, Run(std::string(kTinyidTokensSql)));
    std::vector<PeerToken> out;
    for (const std::vector<std::string>& row : r.at(0).rows) out.push_back({row[0], row[1]});
    return out;
  }

  Result<std::vector<TagInfo>> ListTagsAfter(std::string_view after, std::size_t limit) override {
    if (!after.empty() && !ValidateTag(after).ok()) return std::vector<TagInfo>();
    std::lock_guard lock(mu_);
    // Byte order of UTF-8, as the other stores list (and as `after` continues): sekka's key is
    // those bytes; a peer's column may be in another character set (latin1 holds é as E9, where
    // the cursor, sent as UTF-8, holds C3 A9: compared so, a page came back for ever), so its
    // names are compared as UTF-8.
    const std::string key =
        t_.table.peer.empty()
            ? std::string(t_.table.key)
            : fmt::format("CAST(CONVERT({} USING utf8mb4) AS BINARY)", t_.table.key);
    SEKKA_ASSIGN_OR_RETURN(
        auto r,
        Run(fmt::format(
            "SELECT {0} FROM {1} WHERE {2} AND {3} > CAST({4} AS BINARY) ORDER BY {3} LIMIT {5}",
            t_.table.columns, t_.table.name, t_.table.live, key, Quote(after),
            limit == 0 ? std::string("18446744073709551615") : std::to_string(limit))));
    std::vector<TagInfo> out;
    for (const std::vector<std::string>& row : r.at(0).rows) out.push_back(Row(row));
    return out;
  }

 private:
  // The VALUES of a new row: the tag's first id is next_id (sekka, Leaf) or max_id + 1 (tinyid,
  // whose begin_id and max_id start equal).
  std::string Values(const TagInfo& tag) const {
    const std::string name = Quote(tag.tag);
    if (t_.table.schema == "leaf") {
      return fmt::format("(biz_tag, max_id, step, description) VALUES ({}, {}, {}, 'sekka')", name,
                         tag.next_id, tag.step);
    }
    if (t_.table.schema == "tinyid") {
      return fmt::format(
          "(biz_type, begin_id, max_id, step, delta, remainder, create_time, update_time, "
          "version) VALUES ({0}, {1}, {1}, {2}, {3}, {4}, now(), now(), 0)",
          name, CounterFor(t_.table, tag.next_id), tag.step, tag.delta, tag.remainder);
    }
    return fmt::format("(tag, next_id, step, delta, remainder) VALUES ({}, {}, {}, {}, {})", name,
                       tag.next_id, tag.step, tag.delta, tag.remainder);
  }

  // Leaf's way (and sekka's table): the UPDATE takes the row's lock, the read in the same
  // transaction sees what it wrote, and nobody else can move the row until the commit.
  Result<Allocation> Increment(std::string_view tag, std::int64_t step) {
    const SegmentTable& t = t_.table;
    const std::string name = Quote(tag);
    Result<std::vector<MysqlAnswer>> r = Run(fmt::format(
        "START TRANSACTION; UPDATE {0} SET {1} = {1} + {2} WHERE {3} = {4} AND {1} <= {5} AND {6}; "
        "SELECT {1}, step FROM {0} WHERE {3} = {4} AND {6}; COMMIT",
        t.name, t.counter, step, t.key, name, kMax - step, t.live));
    SEKKA_RETURN_IF_ERROR(r);
    if (r->size() != 4 || r->at(2).rows.size() != 1) return TagNotFound(tag);
    const std::vector<std::string>& row = r->at(2).rows[0];
    const std::int64_t counter = std::strtoll(row[0].c_str(), nullptr, 10);
    if (r->at(1).affected != 1) return TagExhausted(tag, counter, step);
    return Allocation{RangeAfter(t, counter - step, step),
                      std::strtoll(row[1].c_str(), nullptr, 10)};
  }

  // tinyid's way: read the row, then move it only if nobody did meanwhile (its max_id and
  // version unchanged), and read again when somebody did, until the call's time is up.
  Result<Allocation> CompareAndSet(std::string_view tag, std::int64_t step) {
    const SegmentTable& t = t_.table;
    const std::string name = Quote(tag);
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(MysqlConnection::kTimeoutSeconds);
    do {
      SEKKA_ASSIGN_OR_RETURN(
          auto read, Run(fmt::format("SELECT {}, version, step FROM {} WHERE {} = {}", t.counter,
                                     t.name, t.key, name)));
      if (read.at(0).rows.size() != 1) return TagNotFound(tag);
      const std::vector<std::string>& row = read.at(0).rows[0];
      const std::int64_t old = std::strtoll(row[0].c_str(), nullptr, 10);
      if (old > kMax - 1 - step) return TagExhausted(tag, NextIdOf(t, old), step);
      SEKKA_ASSIGN_OR_RETURN(
          auto moved,
          Run(fmt::format("UPDATE {0} SET {1} = {2}, update_time = now(), version = version + 1 "
                          "WHERE {3} = {4} AND {1} = {5} AND version = {6}",
                          t.name, t.counter, old + step, t.key, name, old, Quote(row[1]))));
      if (moved.at(0).affected == 1) {
        return Allocation{RangeAfter(t, old, step), std::strtoll(row[2].c_str(), nullptr, 10)};
      }
    } while (std::chrono::steady_clock::now() < deadline);
    return Unavailable(fmt::format("segment store {}: tag {} kept changing under {} s of tries",
                                   t_.text, tag, MysqlConnection::kTimeoutSeconds));
  }

  Result<TagInfo> Get(std::string_view tag) {
    SEKKA_ASSIGN_OR_RETURN(
        auto r, Run(fmt::format("SELECT {} FROM {} WHERE {} = {} AND {}", t_.table.columns,
                                t_.table.name, t_.table.key, Quote(tag), t_.table.live)));
    if (r.at(0).rows.size() != 1) return TagNotFound(tag);
    return Row(r.at(0).rows[0]);
  }

  TagInfo Row(const std::vector<std::string>& row) const {
    TagInfo t;
    t.tag = row[0];
    t.next_id = NextIdOf(t_.table, std::strtoll(row[1].c_str(), nullptr, 10));
    t.step = std::strtoll(row[2].c_str(), nullptr, 10);
    t.delta = std::strtoll(row[3].c_str(), nullptr, 10);
    t.remainder = std::strtoll(row[4].c_str(), nullptr, 10);
    return t;
  }

  static std::string Quote(std::string_view text) { return MysqlConnection::Quote(text); }

  // A statement refused because the table's character set has no character of a tag's name
  // (1267, 1271: illegal mix of collations; 1366: incorrect string value; Leaf's table in latin1
  // asked for 订单): no row can have that name. Not found, then, rather than a store error that
  // anyone could raise by asking for such names.
  Result<std::vector<MysqlAnswer>> Run(const std::string& sql) {
    Result<std::vector<MysqlAnswer>> r = db_.Run(sql);
    const unsigned code = r.ok() ? 0 : db_.error_number();
    if (code != 1267 && code != 1271 && code != 1366) return r;
    return NotFound(fmt::format("{}: table {} cannot hold that tag's name (its character set)",
                                r.error().message, t_.table.name));
  }

  // sekka's table is made when missing (or brought up to date); a peer's must be there, with the
  // columns read.
  static Status CheckTable(const SegmentTable& t, MysqlConnection& db) {
    if (t.peer.empty()) return PrepareSekkaTable(db);
    Result<std::vector<MysqlAnswer>> r =
        db.Run(fmt::format("SELECT {} FROM {} LIMIT 0", t.columns, t.name));
    if (r.ok()) return Status::Ok();
    const unsigned code = db.error_number();
    if (code != 1146 && code != 1054)
      return std::move(r).error();  // ER_NO_SUCH_TABLE, ER_BAD_FIELD_ERROR
    return Unavailable(fmt::format(
        "segment store {}: schema={} uses {}'s table {} in place, and it is {} in database {}: "
        "create it as docs/operations.md shows",
        db.text(), t.schema, t.peer, t.name, code == 1146 ? "missing" : "missing a column",
        db.database()));
  }

  // Steps: 1. the table is made when missing; 2. one made before tombstones existed gets the
  // column, with the value that keeps every tag; 3. one made when tags were ASCII (VARCHAR
  // ascii_bin) takes them as bytes: the same names in the same order, and room for UTF-8. Two
  // processes may run this at once: a second ALTER's "duplicate column" is success (its
  // connection is gone then: MysqlConnection connects again), and a second MODIFY changes nothing.
  static Status PrepareSekkaTable(MysqlConnection& db) {
    SEKKA_RETURN_IF_ERROR(db.Run(kSekkaTable));
    // Both columns' types in one read (this runs at every connect).
    SEKKA_ASSIGN_OR_RETURN(
        auto r, db.Run("SELECT column_name, data_type FROM information_schema.columns WHERE "
                       "table_schema = DATABASE() AND table_name = 'sekka_segments' AND "
                       "column_name IN ('deleted', 'tag')"));
    std::string deleted, tag;
    for (const std::vector<std::string>& row : r.at(0).rows)
      (row[0] == "tag" ? tag : deleted) = row[1];
    if (deleted.empty()) {
      SEKKA_RETURN_IF_ERROR(
          db.RunAllowing("ALTER TABLE sekka_segments ADD COLUMN deleted TINYINT NOT NULL DEFAULT 0",
                         {1060}));  // ER_DUP_FIELDNAME
    }
    if (tag == "varbinary") return Status::Ok();
    SEKKA_RETURN_IF_ERROR(db.Run("ALTER TABLE sekka_segments MODIFY tag VARBINARY(512) NOT NULL"));
    return Status::Ok();
  }

  const Target t_;
  std::mutex mu_;       // one connection, used by one thread at a time
  MysqlConnection db_;  // guarded by mu_
};

constexpr std::array<std::string_view, 2> kParams = {"schema", "socket"};

}  // namespace

Result<std::unique_ptr<SegmentStore>> OpenMysqlSegmentStore(const std::string& uri) {
  SEKKA_ASSIGN_OR_RETURN(auto parsed, ParseStoreUri(uri, "segment.store", kParams));
  if (parsed.scheme != "mysql" && parsed.scheme != "mariadb") {
    return InvalidArgument("segment.store for MySQL begins mysql:// or mariadb://");
  }
  if (parsed.path.empty() || parsed.path.find('/') != std::string::npos) {
    return InvalidArgument(fmt::format(
        "segment.store \"{}\" names no database: allowed mysql://USER@HOST:PORT/DATABASE",
        RedactSecrets(uri).substr(0, 200)));
  }
  const auto schema = parsed.params.find("schema");
  const SegmentTable* table = FindSegmentTable(schema == parsed.params.end() ? "" : schema->second);
  if (table == nullptr) {
    return InvalidArgument(
        fmt::format("segment.store parameter schema=\"{}\" is not known: allowed {}",
                    schema->second.substr(0, 40), kSegmentSchemas));
  }
  Target target{std::move(parsed), RedactSecrets(uri), *table};
  return std::unique_ptr<SegmentStore>(new MysqlSegmentStore(std::move(target)));
}

}  // namespace sekka
