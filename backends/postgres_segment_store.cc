#include "backends/postgres_segment_store.h"

#include <fmt/format.h>
#include <libpq-fe.h>
#include <poll.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <optional>
#include <vector>

#include "backends/one_line.h"
#include "backends/segment_tables.h"
#include "sekka/secrets.h"

namespace sekka {
namespace {

constexpr const char* kSchema =
    "CREATE TABLE IF NOT EXISTS sekka_segments ("
    "  tag TEXT PRIMARY KEY,"
    "  next_id BIGINT NOT NULL CHECK (next_id >= 1),"
    "  step BIGINT NOT NULL CHECK (step >= 1),"
    "  updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),"
    "  delta BIGINT NOT NULL DEFAULT 1,"
    "  remainder BIGINT NOT NULL DEFAULT 0,"
    "  deleted SMALLINT NOT NULL DEFAULT 0)";
// Tables made before delta, remainder and tombstones existed get the columns, with the values
// that issue every id and keep every tag (what those tags always did).
constexpr const char* kColumns =
    "ALTER TABLE sekka_segments ADD COLUMN IF NOT EXISTS delta BIGINT NOT NULL DEFAULT 1, "
    "ADD COLUMN IF NOT EXISTS remainder BIGINT NOT NULL DEFAULT 0, "
    "ADD COLUMN IF NOT EXISTS deleted SMALLINT NOT NULL DEFAULT 0";

// Every call is bounded on the client side: a stopped server (SIGSTOP, a hung machine whose
// kernel still acknowledges TCP) sends nothing, so neither keepalives nor statement_timeout can
// end the wait. A call without an answer by then drops its connection and is kUnavailable.
constexpr std::chrono::milliseconds kCallTimeout{5000};

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultDeleter>;

class PostgresSegmentStore final : public SegmentStore {
 public:
  PostgresSegmentStore(std::string uri, const SegmentTable& table)
      : uri_(std::move(uri)), t_(table) {}
  ~PostgresSegmentStore() override {
    if (conn_ != nullptr) PQfinish(conn_);
  }

  Result<Allocation> Allocate(std::string_view tag, std::int64_t step) override {
    if (step < 1) return BadStep(step);
    std::lock_guard lock(mu_);
    return t_.optimistic ? CompareAndSet(tag, step) : Increment(tag, step);
  }

  Status CreateTag(const TagInfo& tag) override {
    std::lock_guard lock(mu_);
    return CreateInTable(
        t_, tag,
        {[&] { return Revive(tag); }, [&] { return Insert(tag); },
         [&]() -> Result<std::optional<TagInfo>> {
           SEKKA_ASSIGN_OR_RETURN(
               auto r, Exec("SELECT tag, next_id, step, delta, remainder FROM sekka_segments "
                            "WHERE tag = $1 AND deleted = 1",
                            {tag.tag.c_str()}, PGRES_TUPLES_OK));
           if (PQntuples(r.get()) == 0) return std::optional<TagInfo>();
           return std::optional<TagInfo>(Row(r.get(), 0));
         }});
  }

  Status SetStep(std::string_view tag, std::int64_t step) override {
    if (Status s = CheckStep(t_, tag, step); !s.ok()) return s;
    std::lock_guard lock(mu_);
    const std::string t(tag), n = std::to_string(step);
    const std::string sql = fmt::format("UPDATE {} SET step = $2::bigint WHERE {} = $1 AND {}",
                                        t_.name, t_.key, t_.live);
    SEKKA_ASSIGN_OR_RETURN(auto r, Exec(sql.c_str(), {t.c_str(), n.c_str()}, PGRES_COMMAND_OK));
    if (std::string_view(PQcmdTuples(r.get())) != "1") return TagNotFound(tag);
    return Status::Ok();
  }

  Result<TagInfo> DeleteTag(std::string_view tag) override {
    if (!t_.tombstones()) return NoDeleteOnPeerTable(tag, t_.peer);
    std::lock_guard lock(mu_);
    const std::string t(tag);
    SEKKA_ASSIGN_OR_RETURN(
        auto r, Exec("UPDATE sekka_segments SET deleted = 1, updated_at = now() WHERE tag = $1 AND "
                     "deleted = 0 RETURNING tag, next_id, step, delta, remainder",
                     {t.c_str()}, PGRES_TUPLES_OK));
    if (PQntuples(r.get()) == 0) return TagNotFound(tag);
    return Row(r.get(), 0);
  }

  Result<TagInfo> GetTag(std::string_view tag) override {
    std::lock_guard lock(mu_);
    return GetLocked(tag);
  }

  Result<std::vector<TagInfo>> ListTagsAfter(std::string_view after, std::size_t limit) override {
    std::lock_guard lock(mu_);
    // COLLATE "C": byte order, as the other stores list (and as `after` continues).
    const std::string sql = fmt::format(
        "SELECT {0} FROM {1} WHERE {2} AND {3} > $1 COLLATE \"C\" ORDER BY {3} COLLATE \"C\" "
        "LIMIT $2::bigint",
        t_.columns, t_.name, t_.live, t_.key);
    const std::string from(after), n = std::to_string(limit == 0 ? INT64_MAX : limit);
    SEKKA_ASSIGN_OR_RETURN(auto r, Exec(sql.c_str(), {from.c_str(), n.c_str()}, PGRES_TUPLES_OK));
    std::vector<TagInfo> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) out.push_back(Row(r.get(), i));
    return out;
  }

  bool has_peer_tokens() const override { return t_.schema == "tinyid"; }

  Result<std::vector<PeerToken>> PeerTokens() override {
    if (!has_peer_tokens()) return SegmentStore::PeerTokens();
    std::lock_guard lock(mu_);
    const std::string sql(kTinyidTokensSql);
    SEKKA_ASSIGN_OR_RETURN(auto r, Exec(sql.c_str(), {}, PGRES_TUPLES_OK));
    std::vector<PeerToken> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      out.push_back({PQgetvalue(r.get(), i, 0), PQgetvalue(r.get(), i, 1)});
    }
    return out;
  }

 private:
  static std::int64_t Int(PGresult* r, int row, int column) {
    return std::strtoll(PQgetvalue(r, row, column), nullptr, 10);
  }

  // sekka's table: a tombstone at or below the new next id becomes the row.
  Result<bool> Revive(const TagInfo& tag) {
    const std::string next = std::to_string(tag.next_id), step = std::to_string(tag.step),
                      delta = std::to_string(tag.delta), remainder = std::to_string(tag.remainder);
    SEKKA_ASSIGN_OR_RETURN(
        auto r,
        Exec("UPDATE sekka_segments SET next_id = $2::bigint, step = $3::bigint, delta = "
             "$4::bigint, "
             "remainder = $5::bigint, deleted = 0, updated_at = now() WHERE tag = $1 AND deleted = "
             "1 "
             "AND next_id <= $2::bigint AND delta = $4::bigint AND remainder = $5::bigint",
             {tag.tag.c_str(), next.c_str(), step.c_str(), delta.c_str(), remainder.c_str()},
             PGRES_COMMAND_OK));
    return std::string_view(PQcmdTuples(r.get())) == "1";
  }

  // A new row where the tag has none.
  Result<bool> Insert(const TagInfo& tag) {
    const std::string counter = std::to_string(CounterFor(t_, tag.next_id)),
                      step = std::to_string(tag.step), delta = std::to_string(tag.delta),
                      remainder = std::to_string(tag.remainder);
    const char* sql =
        t_.schema == "leaf"
            ? "INSERT INTO leaf_alloc (biz_tag, max_id, step, description, update_time) "
              "VALUES ($1, $2::bigint, $3::int, 'sekka', now()) "
              "ON CONFLICT (biz_tag) DO NOTHING RETURNING biz_tag"
        : t_.schema == "tinyid"
            ? "INSERT INTO tiny_id_info (biz_type, begin_id, max_id, step, delta, remainder, "
              "create_time, update_time, version) VALUES ($1, $2::bigint, $2::bigint, $3::int, "
              "$4::int, $5::int, now(), now(), 0) ON CONFLICT (biz_type) DO NOTHING "
              "RETURNING biz_type"
            : "INSERT INTO sekka_segments (tag, next_id, step, delta, remainder) "
              "VALUES ($1, $2::bigint, $3::bigint, $4::bigint, $5::bigint) "
              "ON CONFLICT (tag) DO NOTHING RETURNING tag";
    // Leaf's table has no delta and remainder (CheckNewTag made sure they are 1 and 0).
    SEKKA_ASSIGN_OR_RETURN(
        auto r, t_.has_delta
                    ? Exec(sql,
                           {tag.tag.c_str(), counter.c_str(), step.c_str(), delta.c_str(),
                            remainder.c_str()},
                           PGRES_TUPLES_OK)
                    : Exec(sql, {tag.tag.c_str(), counter.c_str(), step.c_str()}, PGRES_TUPLES_OK));
    return PQntuples(r.get()) == 1;
  }

  // sekka's table and Leaf's: the UPDATE takes the row's lock and returns what it wrote, so
  // nobody else (a Leaf server's UPDATE and read in one transaction included) moves the row
  // between the two.
  Result<Allocation> Increment(std::string_view tag, std::int64_t step) {
    const std::string t(tag),
        s = std::to_string(step),
        limit = std::to_string(std::numeric_limits<std::int64_t>::max() - step);
    const std::string sql = fmt::format(
        "UPDATE {0} SET {1} = {1} + $2::bigint, {2} = now() WHERE {3} = $1 AND {1} <= $3::bigint "
        "AND {4} RETURNING {1}, step",
        t_.name, t_.counter, t_.schema == "leaf" ? "update_time" : "updated_at", t_.key, t_.live);
    SEKKA_ASSIGN_OR_RETURN(
        auto r, Exec(sql.c_str(), {t.c_str(), s.c_str(), limit.c_str()}, PGRES_TUPLES_OK));
    if (PQntuples(r.get()) == 1) {
      const std::int64_t after = Int(r.get(), 0, 0);
      return Allocation{RangeAfter(t_, after - step, step), Int(r.get(), 0, 1)};
    }
    SEKKA_ASSIGN_OR_RETURN(auto info, GetLocked(tag));
    return TagExhausted(tag, info.next_id, step);
  }

  // tinyid's way: read the row, then move it only if nobody did meanwhile (its max_id and
  // version unchanged), and read again when somebody did, until the call's time is up.
  Result<Allocation> CompareAndSet(std::string_view tag, std::int64_t step) {
    const std::string t(tag);
    const auto deadline = std::chrono::steady_clock::now() + kCallTimeout;
    do {
      SEKKA_ASSIGN_OR_RETURN(
          auto read, Exec("SELECT max_id, version, step FROM tiny_id_info WHERE biz_type = $1",
                          {t.c_str()}, PGRES_TUPLES_OK));
      if (PQntuples(read.get()) == 0) return TagNotFound(tag);
      const std::int64_t old = std::strtoll(PQgetvalue(read.get(), 0, 0), nullptr, 10);
      if (old > std::numeric_limits<std::int64_t>::max() - 1 - step) {
        return TagExhausted(tag, NextIdOf(t_, old), step);
      }
      const std::string next = std::to_string(old + step), before = std::to_string(old);
      SEKKA_ASSIGN_OR_RETURN(
          auto moved,
          Exec("UPDATE tiny_id_info SET max_id = $2::bigint, update_time = now(), "
               "version = version + 1 WHERE biz_type = $1 AND max_id = $3::bigint AND version = $4 "
               "RETURNING max_id",
               {t.c_str(), next.c_str(), before.c_str(), PQgetvalue(read.get(), 0, 1)},
               PGRES_TUPLES_OK));
      if (PQntuples(moved.get()) == 1) {
        return Allocation{RangeAfter(t_, old, step), Int(read.get(), 0, 2)};
      }
    } while (std::chrono::steady_clock::now() < deadline);
    return Unavailable(fmt::format("segment store {}: tag {} kept changing under {} ms of tries",
                                   Redacted(), tag, kCallTimeout.count()));
  }

  TagInfo Row(PGresult* r, int i) const {
    TagInfo t;
    t.tag = PQgetvalue(r, i, 0);
    t.next_id = NextIdOf(t_, std::strtoll(PQgetvalue(r, i, 1), nullptr, 10));
    t.step = std::strtoll(PQgetvalue(r, i, 2), nullptr, 10);
    t.delta = std::strtoll(PQgetvalue(r, i, 3), nullptr, 10);
    t.remainder = std::strtoll(PQgetvalue(r, i, 4), nullptr, 10);
    return t;
  }

  Result<TagInfo> GetLocked(std::string_view tag) {
    const std::string t(tag);
    const std::string sql =
        fmt::format("SELECT {} FROM {} WHERE {} = $1 AND {}", t_.columns, t_.name, t_.key, t_.live);
    SEKKA_ASSIGN_OR_RETURN(auto r, Exec(sql.c_str(), {t.c_str()}, PGRES_TUPLES_OK));
    if (PQntuples(r.get()) == 0) return TagNotFound(tag);
    return Row(r.get(), 0);
  }

  // A live connection with the schema in place, connecting (again) when needed.
  Status Connect() {
    if (conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK) return Status::Ok();
    if (conn_ != nullptr) PQfinish(conn_);
    conn_ = PQconnectdb(uri_.c_str());
    if (PQstatus(conn_) != CONNECTION_OK) {
      const std::string why = OneLine(PQerrorMessage(conn_));
      PQfinish(conn_);
      conn_ = nullptr;
      return Unavailable(fmt::format("segment store {} is unreachable: {}", Redacted(), why));
    }
    // Notices ("relation sekka_segments already exists, skipping") are not for the user's
    // terminal: libpq would print each one on stderr.
    PQsetNoticeProcessor(
        conn_, [](void*, const char*) {}, nullptr);
    // A connection whose set-up failed is not kept: the next call sets it up again.
    Status s = Prepare("SET statement_timeout = 5000");  // a lock held long ends the statement
    if (s.ok()) s = t_.peer.empty() ? PrepareSekkaTable() : CheckPeerTable();
    if (!s.ok() && conn_ != nullptr) {
      PQfinish(conn_);
      conn_ = nullptr;
    }
    return s;
  }

  // sekka's table, made when missing, with the columns added since.
  Status PrepareSekkaTable() {
    if (Status s = Prepare(kSchema); !s.ok()) return s;
    // ALTER TABLE locks the table even when there is nothing to add: only when a column is
    // missing (once per store), not on every connection.
    SEKKA_ASSIGN_OR_RETURN(
        auto columns,
        Run("SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = 'sekka_segments' AND column_name IN ('delta', 'remainder', "
            "'deleted')",
            {}));
    if (PQresultStatus(columns.get()) != PGRES_TUPLES_OK || PQntuples(columns.get()) != 1) {
      return Unavailable(fmt::format("segment store {}: cannot read its table's columns: {}",
                                     Redacted(), PQresultErrorMessage(columns.get())));
    }
    if (std::string_view(PQgetvalue(columns.get(), 0, 0)) != "3") return Prepare(kColumns);
    return Status::Ok();
  }

  // A peer's table is used in place: it must be there, with the columns sekka reads.
  Status CheckPeerTable() {
    const std::string sql = fmt::format("SELECT {} FROM {} LIMIT 0", t_.columns, t_.name);
    SEKKA_ASSIGN_OR_RETURN(auto r, Run(sql.c_str(), {}));
    if (PQresultStatus(r.get()) == PGRES_TUPLES_OK) return Status::Ok();
    const char* state = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
    const std::string_view code = state != nullptr ? state : "";
    if (code != "42P01" && code != "42703") {  // undefined_table, undefined_column
      return Unavailable(
          fmt::format("segment store {}: {}", Redacted(), OneLine(PQresultErrorMessage(r.get()))));
    }
    return Unavailable(fmt::format(
        "segment store {}: schema={} uses {}'s table {} in place, and it is {}: create it as "
        "docs/operations.md shows",
        Redacted(), t_.schema, t_.peer, t_.name, code == "42P01" ? "missing" : "missing a column"));
  }

  // Runs one statement of the table's set-up.
  Status Prepare(const char* sql) {
    SEKKA_ASSIGN_OR_RETURN(auto r, Run(sql, {}));
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
      return Unavailable(fmt::format("segment store {}: cannot prepare its table: {}", Redacted(),
                                     PQresultErrorMessage(r.get())));
    }
    return Status::Ok();
  }

  // Sends one statement and waits for its result up to kCallTimeout. Errors: kUnavailable
  // (no answer in time: the connection is dropped; or the connection broke).
  Result<PgResult> Run(const char* sql, const std::vector<const char*>& values) {
    if (PQsendQueryParams(conn_, sql, static_cast<int>(values.size()), nullptr, values.data(),
                          nullptr, nullptr, 0) == 0) {
      return Unavailable(
          fmt::format("segment store {}: {}", Redacted(), OneLine(PQerrorMessage(conn_))));
    }
    const auto deadline = std::chrono::steady_clock::now() + kCallTimeout;
    PgResult last;
    for (;;) {
      while (PQisBusy(conn_) != 0) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        pollfd p{PQsocket(conn_), POLLIN, 0};
        const int ready = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
        if (ready == 0) {
          PQfinish(conn_);
          conn_ = nullptr;
          return Unavailable(fmt::format("segment store {} gave no answer within {} ms", Redacted(),
                                         kCallTimeout.count()));
        }
        if (ready < 0 && errno != EINTR) break;
        if (PQconsumeInput(conn_) == 0) break;
      }
      PGresult* r = PQgetResult(conn_);
      if (r == nullptr) break;
      last.reset(r);
    }
    if (!last) {
      return Unavailable(
          fmt::format("segment store {}: {}", Redacted(), OneLine(PQerrorMessage(conn_))));
    }
    return last;
  }

  Result<PgResult> Exec(const char* sql, std::initializer_list<const char*> params,
                        ExecStatusType want) {
    // One retry on a fresh connection: a server restart breaks the old one.
    for (int attempt = 0; attempt < 2; ++attempt) {
      SEKKA_RETURN_IF_ERROR(Connect());
      Result<PgResult> run = Run(sql, std::vector<const char*>(params));
      if (!run.ok() && conn_ == nullptr) return std::move(run).error();  // timed out
      if (!run.ok()) continue;
      PgResult r = std::move(run).value();
      if (PQresultStatus(r.get()) == want) return r;
      if (PQstatus(conn_) == CONNECTION_OK) {
        const std::string why = OneLine(PQresultErrorMessage(r.get()));
        // A database whose encoding has no character of a tag's name (22P05 untranslatable,
        // 22021 not in repertoire): no row can have that name; not a store error.
        const char* state = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
        const std::string_view code = state != nullptr ? state : "";
        if (code == "22P05" || code == "22021") {
          return NotFound(fmt::format(
              "segment store {}: {}: the database's encoding cannot hold that tag's name",
              Redacted(), why));
        }
        return Unavailable(fmt::format("segment store {}: {}", Redacted(), why));
      }
    }
    return Unavailable(fmt::format("segment store {}: the connection was lost", Redacted()));
  }

  // The URI without a password, for messages.
  std::string Redacted() const { return RedactSecrets(uri_); }

  const std::string uri_;
  const SegmentTable& t_;
  std::mutex mu_;           // one connection, used by one thread at a time
  PGconn* conn_ = nullptr;  // guarded by mu_
};

}  // namespace

Result<std::unique_ptr<SegmentStore>> OpenPostgresSegmentStore(const std::string& uri) {
  std::string full = uri;
  const std::string schema = TakePostgresOption(full, "schema");  // sekka's, not libpq's
  const SegmentTable* table = FindSegmentTable(schema);
  if (table == nullptr) {
    return InvalidArgument(
        fmt::format("segment.store parameter schema=\"{}\" is not known: "
                    "allowed {}",
                    schema.substr(0, 40), kSegmentSchemas));
  }
  char* err = nullptr;
  PQconninfoOption* options = PQconninfoParse(full.c_str(), &err);
  if (options == nullptr) {
    const std::string why = OneLine(err != nullptr ? err : "cannot parse it");
    PQfreemem(err);
    return InvalidArgument(fmt::format("segment.store is not a valid PostgreSQL URI: {}", why));
  }
  PQconninfoFree(options);
  // Bounded connects, dead peers noticed by TCP (keepalives, unacknowledged data), and tags
  // sent and read as UTF-8 whatever the database's encoding.
  for (const char* option :
       {"connect_timeout=5", "keepalives_idle=5", "keepalives_interval=2", "keepalives_count=2",
        "tcp_user_timeout=5000", "client_encoding=UTF8"}) {
    full = WithPostgresOption(full, option);
  }
  return std::unique_ptr<SegmentStore>(new PostgresSegmentStore(full, *table));
}

namespace {

// Where a libpq URI's query begins: the first '?' after the user's password (libpq takes '?',
// '#' and '/' in an unencoded one); npos when there is none.
std::size_t QueryStart(std::string_view uri) {
  const std::size_t scheme = uri.find("://");
  const std::size_t at = uri.rfind('@');
  const std::size_t from = at != std::string::npos ? at : scheme == std::string::npos ? 0 : scheme;
  return uri.find('?', from);
}

}  // namespace

std::string TakePostgresOption(std::string& uri, std::string_view name) {
  const std::size_t query = QueryStart(uri);
  if (query == std::string::npos) return "";
  const std::string key = std::string(name) + "=";
  for (std::size_t pos = query + 1; pos < uri.size();) {
    const std::size_t amp = std::min(uri.find('&', pos), uri.size());
    if (uri.compare(pos, key.size(), key) == 0) {
      std::string value = uri.substr(pos + key.size(), amp - pos - key.size());
      // The separator before it goes with it ('?' passes to the next pair, if any).
      const std::size_t cut_from = pos - 1, cut_to = amp;
      if (uri[cut_from] == '?' && cut_to < uri.size()) {
        uri.erase(pos, cut_to - pos + 1);
      } else {
        uri.erase(cut_from, cut_to - cut_from);
      }
      return value;
    }
    pos = amp + 1;
  }
  return "";
}

std::string WithPostgresOption(const std::string& uri, std::string_view option) {
  const std::size_t query = QueryStart(uri);
  const std::string name(option.substr(0, option.find('=') + 1));  // "connect_timeout="
  if (query != std::string::npos && (uri.find("?" + name, query) != std::string::npos ||
                                     uri.find("&" + name, query) != std::string::npos)) {
    return uri;
  }
  return uri + (query == std::string::npos ? "?" : "&") + std::string(option);
}

}  // namespace sekka
