#include "backends/mysql_segment_store.h"

#include <fmt/format.h>
#include <mysql.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <optional>
#include <vector>

#include "backends/one_line.h"
#include "backends/segment_tables.h"
#include "backends/store_uri.h"
#include "sekka/secrets.h"

namespace sekka {
namespace {

// Each round trip is bounded by these (seconds): a stopped server (SIGSTOP, a hung machine whose
// kernel still acknowledges TCP) answers nothing, and the call fails instead of waiting.
constexpr unsigned kTimeoutSeconds = 5;
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

// sekka's own table on MySQL, made when missing (the peers' tables must be there).
constexpr const char* kSekkaTable =
    "CREATE TABLE IF NOT EXISTS sekka_segments ("
    "  tag VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin PRIMARY KEY,"
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

// One answer of a (multi-)statement: rows of text, or the rows it changed.
struct Answer {
  std::uint64_t affected = 0;
  std::vector<std::vector<std::string>> rows;
};

class MysqlSegmentStore final : public SegmentStore {
 public:
  explicit MysqlSegmentStore(Target target) : t_(std::move(target)) {}
  ~MysqlSegmentStore() override { Drop(); }

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
      Result<std::vector<Answer>> r = Run(sql);
      if (!r.ok()) return std::move(r).error();
      return r->at(0).affected == 1;
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
           Result<std::vector<Answer>> r =
               Run(fmt::format("SELECT {} FROM sekka_segments WHERE tag = {} AND deleted = 1",
                               t_.table.columns, name));
           if (!r.ok()) return std::move(r).error();
           if (r->at(0).rows.size() != 1) return std::optional<TagInfo>();
           return std::optional<TagInfo>(Row(r->at(0).rows[0]));
         }});
  }

  Status SetStep(std::string_view tag, std::int64_t step) override {
    if (Status s = CheckStep(t_.table, tag, step); !s.ok()) return s;
    if (!ValidateTag(tag).ok()) return TagNotFound(tag);
    std::lock_guard lock(mu_);
    // affected counts changed rows: a step set to what it was is found with the read.
    Result<std::vector<Answer>> r =
        Run(fmt::format("UPDATE {0} SET step = {1} WHERE {2} = {3} AND {4}; "
                        "SELECT COUNT(*) FROM {0} WHERE {2} = {3} AND {4}",
                        t_.table.name, step, t_.table.key, Quote(tag), t_.table.live));
    if (!r.ok()) return std::move(r).error();
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
    Result<std::vector<Answer>> r = Run(fmt::format(
        "START TRANSACTION; SELECT {0} FROM sekka_segments WHERE tag = {1} AND deleted = 0 "
        "FOR UPDATE; UPDATE sekka_segments SET deleted = 1 WHERE tag = {1} AND deleted = 0; "
        "COMMIT",
        t_.table.columns, name));
    if (!r.ok()) return std::move(r).error();
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
    if (Status s = ValidateTag(tag); !s.ok()) return std::move(s).error();
    std::lock_guard lock(mu_);
    // 1. Under the peer row's lock (and a lock on sekka's row, or on the gap where it would
    //    be): the peer's row, and whether sekka's table has the tag.
    const std::string name = Quote(tag);
    Result<std::vector<Answer>> read =
        Run(fmt::format("START TRANSACTION; SELECT {0} FROM {1} WHERE {2} = {3} FOR UPDATE; "
                        "SELECT COUNT(*) FROM sekka_segments WHERE tag = {3} FOR UPDATE",
                        peer->columns, peer->name, peer->key, name));
    if (!read.ok()) return std::move(read).error();
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
    Result<std::vector<Answer>> done = Run(fmt::format(
        "INSERT INTO sekka_segments (tag, next_id, step, delta, remainder) VALUES ({}, {}, {}, "
        "{}, {}); UPDATE {} SET {} WHERE {} = {}; COMMIT",
        name, moved.next_id, moved.step, moved.delta, moved.remainder, peer->name, fence, peer->key,
        name));
    if (!done.ok()) return std::move(done).error();
    return moved;
  }

  bool has_peer_tokens() const override { return t_.table.schema == "tinyid"; }

  Result<std::vector<PeerToken>> PeerTokens() override {
    if (!has_peer_tokens()) return SegmentStore::PeerTokens();
    std::lock_guard lock(mu_);
    Result<std::vector<Answer>> r = Run(std::string(kTinyidTokensSql));
    if (!r.ok()) return std::move(r).error();
    std::vector<PeerToken> out;
    for (const std::vector<std::string>& row : r->at(0).rows) out.push_back({row[0], row[1]});
    return out;
  }

  Result<std::vector<TagInfo>> ListTagsAfter(std::string_view after, std::size_t limit) override {
    if (!after.empty() && !ValidateTag(after).ok()) return std::vector<TagInfo>();
    std::lock_guard lock(mu_);
    // BINARY: byte order, as the other stores list (and as `after` continues).
    Result<std::vector<Answer>> r = Run(fmt::format(
        "SELECT {0} FROM {1} WHERE {2} AND BINARY {3} > BINARY {4} ORDER BY BINARY {3} LIMIT {5}",
        t_.table.columns, t_.table.name, t_.table.live, t_.table.key, Quote(after),
        limit == 0 ? std::string("18446744073709551615") : std::to_string(limit)));
    if (!r.ok()) return std::move(r).error();
    std::vector<TagInfo> out;
    for (const std::vector<std::string>& row : r->at(0).rows) out.push_back(Row(row));
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
    Result<std::vector<Answer>> r = Run(fmt::format(
        "START TRANSACTION; UPDATE {0} SET {1} = {1} + {2} WHERE {3} = {4} AND {1} <= {5} AND {6}; "
        "SELECT {1}, step FROM {0} WHERE {3} = {4} AND {6}; COMMIT",
        t.name, t.counter, step, t.key, name, kMax - step, t.live));
    if (!r.ok()) return std::move(r).error();
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
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kTimeoutSeconds);
    do {
      Result<std::vector<Answer>> read = Run(fmt::format(
          "SELECT {}, version, step FROM {} WHERE {} = {}", t.counter, t.name, t.key, name));
      if (!read.ok()) return std::move(read).error();
      if (read->at(0).rows.size() != 1) return TagNotFound(tag);
      const std::vector<std::string>& row = read->at(0).rows[0];
      const std::int64_t old = std::strtoll(row[0].c_str(), nullptr, 10);
      if (old > kMax - 1 - step) return TagExhausted(tag, NextIdOf(t, old), step);
      Result<std::vector<Answer>> moved =
          Run(fmt::format("UPDATE {0} SET {1} = {2}, update_time = now(), version = version + 1 "
                          "WHERE {3} = {4} AND {1} = {5} AND version = {6}",
                          t.name, t.counter, old + step, t.key, name, old, Quote(row[1])));
      if (!moved.ok()) return std::move(moved).error();
      if (moved->at(0).affected == 1) {
        return Allocation{RangeAfter(t, old, step), std::strtoll(row[2].c_str(), nullptr, 10)};
      }
    } while (std::chrono::steady_clock::now() < deadline);
    return Unavailable(fmt::format("segment store {}: tag {} kept changing under {} s of tries",
                                   t_.text, tag, kTimeoutSeconds));
  }

  Result<TagInfo> Get(std::string_view tag) {
    Result<std::vector<Answer>> r =
        Run(fmt::format("SELECT {} FROM {} WHERE {} = {} AND {}", t_.table.columns, t_.table.name,
                        t_.table.key, Quote(tag), t_.table.live));
    if (!r.ok()) return std::move(r).error();
    if (r->at(0).rows.size() != 1) return TagNotFound(tag);
    return Row(r->at(0).rows[0]);
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

  // A string literal. Tags are checked names already; this is the second wall (the session's
  // sql_mode, set at connect, keeps backslash escapes on).
  static std::string Quote(std::string_view text) {
    std::string out = "'";
    for (const char c : text) {
      if (c == '\0') {
        out += "\\0";
        continue;
      }
      if (c == '\'' || c == '\\' || c == '"' || c == '\n' || c == '\r' || c == '\x1a') out += '\\';
      out += c;
    }
    return out + "'";
  }

  // Runs one or more statements (`;`-separated) in one round trip and returns each one's answer.
  // Any failure drops the connection: the server rolls back what it had not committed, and the
  // next call connects again. Errors: kUnavailable.
  Result<std::vector<Answer>> Run(const std::string& sql) {
    if (Status s = Connect(); !s.ok()) return std::move(s).error();
    if (mysql_real_query(conn_, sql.data(), sql.size()) != 0) return Fail();
    std::vector<Answer> answers;
    for (;;) {
      Answer a;
      if (MYSQL_RES* res = mysql_store_result(conn_); res != nullptr) {
        const unsigned fields = mysql_num_fields(res);
        while (MYSQL_ROW row = mysql_fetch_row(res)) {
          std::vector<std::string>& out = a.rows.emplace_back();
          for (unsigned i = 0; i < fields; ++i) out.emplace_back(row[i] != nullptr ? row[i] : "");
        }
        mysql_free_result(res);
      } else if (mysql_field_count(conn_) != 0) {
        return Fail();  // a result set that did not arrive
      } else {
        a.affected = mysql_affected_rows(conn_);
      }
      answers.push_back(std::move(a));
      const int next = mysql_next_result(conn_);
      if (next > 0) return Fail();
      if (next < 0) return answers;
    }
  }

  Error Fail() {
    const std::string why = mysql_error(conn_);
    Drop();
    return Unavailable(fmt::format("segment store {}: {}", t_.text, OneLine(why)));
  }

  void Drop() {
    if (conn_ != nullptr) mysql_close(conn_);
    conn_ = nullptr;
  }

  // A live connection with the table checked, connecting (again) when needed.
  Status Connect() {
    if (conn_ != nullptr) return Status::Ok();
    static std::once_flag init;
    std::call_once(init, [] { mysql_library_init(0, nullptr, nullptr); });
    conn_ = mysql_init(nullptr);
    if (conn_ == nullptr) return Unavailable("segment store: out of memory for a connection");
    const unsigned timeout = kTimeoutSeconds;
    const my_bool no = 0;
    mysql_options(conn_, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    mysql_options(conn_, MYSQL_OPT_READ_TIMEOUT, &timeout);
    mysql_options(conn_, MYSQL_OPT_WRITE_TIMEOUT, &timeout);
    mysql_options(conn_, MYSQL_OPT_RECONNECT, &no);  // a silent reconnect would lose a transaction
    const StoreUri& u = t_.uri;
    const auto socket = u.params.find("socket");
    if (mysql_real_connect(conn_, u.host.c_str(), u.user.c_str(),
                           u.has_password ? u.password.c_str() : nullptr, u.path.c_str(),
                           static_cast<unsigned>(u.port),
                           socket != u.params.end() ? socket->second.c_str() : nullptr,
                           CLIENT_MULTI_STATEMENTS) == nullptr) {
      const std::string why = mysql_error(conn_);
      Drop();
      return Unavailable(fmt::format("segment store {} is unreachable: {}", t_.text, OneLine(why)));
    }
    // Out-of-range values are errors, not truncations; a lock held longer than a call ends the
    // statement that waits for it; and every statement outside START TRANSACTION commits on its
    // own, whatever the server's default (with autocommit off, tinyid's update and a new tag's
    // insert were never committed, and their ids were handed out again).
    std::string setup = fmt::format(
        "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION', "
        "innodb_lock_wait_timeout = {}, autocommit = 1",
        kTimeoutSeconds);
    if (mysql_real_query(conn_, setup.data(), setup.size()) != 0) return Fail();
    return CheckTable();
  }

  // sekka's table is made when missing; a peer's must be there, with the columns read.
  Status CheckTable() {
    const SegmentTable& t = t_.table;
    std::string sql = t.peer.empty() ? std::string(kSekkaTable)
                                     : fmt::format("SELECT {} FROM {} LIMIT 0", t.columns, t.name);
    if (mysql_real_query(conn_, sql.data(), sql.size()) == 0) {
      if (MYSQL_RES* res = mysql_store_result(conn_); res != nullptr) mysql_free_result(res);
      return t.peer.empty() ? AddTombstoneColumn() : Status::Ok();
    }
    const unsigned code = mysql_errno(conn_);
    Error e = Fail();
    if (code != 1146 && code != 1054) return e;  // ER_NO_SUCH_TABLE, ER_BAD_FIELD_ERROR
    return Unavailable(fmt::format(
        "segment store {}: schema={} uses {}'s table {} in place, and it is {} in database {}: "
        "create it as docs/operations.md shows",
        t_.text, t.schema, t.peer, t.name, code == 1146 ? "missing" : "missing a column",
        t_.uri.path));
  }

  // A table made before tombstones existed gets the column, with the value that keeps every tag.
  Status AddTombstoneColumn() {
    Result<std::vector<Answer>> r =
        Run("SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND "
            "table_name = 'sekka_segments' AND column_name = 'deleted'");
    if (!r.ok()) return std::move(r).error();
    if (r->at(0).rows.size() == 1 && r->at(0).rows[0][0] == "1") return Status::Ok();
    // Two processes may both find it missing: the second ALTER's "duplicate column" is success.
    constexpr std::string_view kAdd =
        "ALTER TABLE sekka_segments ADD COLUMN deleted TINYINT NOT NULL DEFAULT 0";
    if (mysql_real_query(conn_, kAdd.data(), kAdd.size()) == 0) return Status::Ok();
    if (mysql_errno(conn_) == 1060) return Status::Ok();  // ER_DUP_FIELDNAME
    return Fail();
  }

  const Target t_;
  std::mutex mu_;          // one connection, used by one thread at a time
  MYSQL* conn_ = nullptr;  // guarded by mu_
};

constexpr std::array<std::string_view, 2> kParams = {"schema", "socket"};

}  // namespace

Result<std::unique_ptr<SegmentStore>> OpenMysqlSegmentStore(const std::string& uri) {
  Result<StoreUri> parsed = ParseStoreUri(uri, "segment.store", kParams);
  if (!parsed.ok()) return std::move(parsed).error();
  if (parsed->scheme != "mysql" && parsed->scheme != "mariadb") {
    return InvalidArgument("segment.store for MySQL begins mysql:// or mariadb://");
  }
  if (parsed->path.empty() || parsed->path.find('/') != std::string::npos) {
    return InvalidArgument(fmt::format(
        "segment.store \"{}\" names no database: allowed mysql://USER@HOST:PORT/DATABASE",
        RedactSecrets(uri).substr(0, 200)));
  }
  const auto schema = parsed->params.find("schema");
  const SegmentTable* table =
      FindSegmentTable(schema == parsed->params.end() ? "" : schema->second);
  if (table == nullptr) {
    return InvalidArgument(
        fmt::format("segment.store parameter schema=\"{}\" is not known: allowed {}",
                    schema->second.substr(0, 40), kSegmentSchemas));
  }
  Target target{std::move(parsed).value(), RedactSecrets(uri), *table};
  return std::unique_ptr<SegmentStore>(new MysqlSegmentStore(std::move(target)));
}

}  // namespace sekka
