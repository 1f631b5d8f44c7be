#include "backends/postgres_segment_store.h"

#include <fmt/format.h>
#include <libpq-fe.h>
#include <poll.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <vector>

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
    "  remainder BIGINT NOT NULL DEFAULT 0)";
// Tables made before delta and remainder existed get the columns, with the values that issue
// every id (what those tags always did).
constexpr const char* kColumns =
    "ALTER TABLE sekka_segments ADD COLUMN IF NOT EXISTS delta BIGINT NOT NULL DEFAULT 1, "
    "ADD COLUMN IF NOT EXISTS remainder BIGINT NOT NULL DEFAULT 0";

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
  explicit PostgresSegmentStore(std::string uri) : uri_(std::move(uri)) {}
  ~PostgresSegmentStore() override {
    if (conn_ != nullptr) PQfinish(conn_);
  }

  Result<IdRange> Allocate(std::string_view tag, std::int64_t step) override {
    if (step < 1) return BadStep(step);
    std::lock_guard lock(mu_);
    const std::string t(tag),
        s = std::to_string(step),
        limit = std::to_string(std::numeric_limits<std::int64_t>::max() - step);
    Result<PgResult> r = Exec(
        "UPDATE sekka_segments SET next_id = next_id + $2::bigint, updated_at = now() "
        "WHERE tag = $1 AND next_id <= $3::bigint RETURNING next_id",
        {t.c_str(), s.c_str(), limit.c_str()}, PGRES_TUPLES_OK);
    if (!r.ok()) return std::move(r).error();
    if (PQntuples(r->get()) == 1) {
      const std::int64_t end = std::strtoll(PQgetvalue(r->get(), 0, 0), nullptr, 10);
      return IdRange{end - step, end};
    }
    Result<TagInfo> info = GetLocked(tag);
    if (!info.ok()) return std::move(info).error();
    return TagExhausted(tag, info->next_id, step);
  }

  Status CreateTag(const TagInfo& tag) override {
    if (Status s = ValidateNewTag(tag); !s.ok()) return s;
    std::lock_guard lock(mu_);
    const std::string start = std::to_string(tag.next_id), step = std::to_string(tag.step),
                      delta = std::to_string(tag.delta), remainder = std::to_string(tag.remainder);
    Result<PgResult> r = Exec(
        "INSERT INTO sekka_segments (tag, next_id, step, delta, remainder) "
        "VALUES ($1, $2::bigint, $3::bigint, $4::bigint, $5::bigint) "
        "ON CONFLICT (tag) DO NOTHING RETURNING tag",
        {tag.tag.c_str(), start.c_str(), step.c_str(), delta.c_str(), remainder.c_str()},
        PGRES_TUPLES_OK);
    if (!r.ok()) return std::move(r).error();
    if (PQntuples(r->get()) == 0) {
      return TagExists(tag.tag);
    }
    return Status::Ok();
  }

  Result<TagInfo> GetTag(std::string_view tag) override {
    std::lock_guard lock(mu_);
    return GetLocked(tag);
  }

  Result<std::vector<TagInfo>> ListTags() override {
    std::lock_guard lock(mu_);
    Result<PgResult> r =
        Exec("SELECT tag, next_id, step, delta, remainder FROM sekka_segments ORDER BY tag", {},
             PGRES_TUPLES_OK);
    if (!r.ok()) return std::move(r).error();
    std::vector<TagInfo> out;
    for (int i = 0; i < PQntuples(r->get()); ++i) out.push_back(Row(r->get(), i));
    return out;
  }

 private:
  static TagInfo Row(PGresult* r, int i) {
    TagInfo t;
    t.tag = PQgetvalue(r, i, 0);
    t.next_id = std::strtoll(PQgetvalue(r, i, 1), nullptr, 10);
    t.step = std::strtoll(PQgetvalue(r, i, 2), nullptr, 10);
    t.delta = std::strtoll(PQgetvalue(r, i, 3), nullptr, 10);
    t.remainder = std::strtoll(PQgetvalue(r, i, 4), nullptr, 10);
    return t;
  }

  Result<TagInfo> GetLocked(std::string_view tag) {
    const std::string t(tag);
    Result<PgResult> r =
        Exec("SELECT tag, next_id, step, delta, remainder FROM sekka_segments WHERE tag = $1",
             {t.c_str()}, PGRES_TUPLES_OK);
    if (!r.ok()) return std::move(r).error();
    if (PQntuples(r->get()) == 0) return TagNotFound(tag);
    return Row(r->get(), 0);
  }

  // A live connection with the schema in place, connecting (again) when needed.
  Status Connect() {
    if (conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK) return Status::Ok();
    if (conn_ != nullptr) PQfinish(conn_);
    conn_ = PQconnectdb(uri_.c_str());
    if (PQstatus(conn_) != CONNECTION_OK) {
      std::string why = PQerrorMessage(conn_);
      for (char& c : why) c = (c == '\n') ? ' ' : c;
      PQfinish(conn_);
      conn_ = nullptr;
      return Unavailable(fmt::format("segment store {} is unreachable: {}", Redacted(), why));
    }
    // Notices ("relation sekka_segments already exists, skipping") are not for the user's
    // terminal: libpq would print each one on stderr.
    PQsetNoticeProcessor(
        conn_, [](void*, const char*) {}, nullptr);
    // A server that holds a row lock for long ends the statement itself.
    for (const char* sql : {"SET statement_timeout = 5000", kSchema}) {
      if (Status s = Prepare(sql); !s.ok()) return s;
    }
    // ALTER TABLE locks the table even when there is nothing to add: only when a column is
    // missing (once per store), not on every connection.
    Result<PgResult> columns =
        Run("SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = 'sekka_segments' AND column_name IN ('delta', 'remainder')",
            {});
    if (!columns.ok()) return std::move(columns).error();
    if (PQresultStatus(columns->get()) != PGRES_TUPLES_OK || PQntuples(columns->get()) != 1) {
      return Unavailable(fmt::format("segment store {}: cannot read its table's columns: {}",
                                     Redacted(), PQresultErrorMessage(columns->get())));
    }
    if (std::string_view(PQgetvalue(columns->get(), 0, 0)) != "2") return Prepare(kColumns);
    return Status::Ok();
  }

  // Runs one statement of the table's set-up.
  Status Prepare(const char* sql) {
    Result<PgResult> r = Run(sql, {});
    if (!r.ok()) return std::move(r).error();
    if (PQresultStatus(r->get()) != PGRES_COMMAND_OK) {
      return Unavailable(fmt::format("segment store {}: cannot prepare its table: {}", Redacted(),
                                     PQresultErrorMessage(r->get())));
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

  static std::string OneLine(std::string text) {
    for (char& c : text) c = (c == '\n') ? ' ' : c;
    while (!text.empty() && text.back() == ' ') text.pop_back();
    return text;
  }

  Result<PgResult> Exec(const char* sql, std::initializer_list<const char*> params,
                        ExecStatusType want) {
    // One retry on a fresh connection: a server restart breaks the old one.
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (Status s = Connect(); !s.ok()) return std::move(s).error();
      Result<PgResult> run = Run(sql, std::vector<const char*>(params));
      if (!run.ok() && conn_ == nullptr) return std::move(run).error();  // timed out
      if (!run.ok()) continue;
      PgResult r = std::move(run).value();
      if (PQresultStatus(r.get()) == want) return r;
      if (PQstatus(conn_) == CONNECTION_OK) {
        std::string why = PQresultErrorMessage(r.get());
        for (char& c : why) c = (c == '\n') ? ' ' : c;
        return Unavailable(fmt::format("segment store {}: {}", Redacted(), why));
      }
    }
    return Unavailable(fmt::format("segment store {}: the connection was lost", Redacted()));
  }

  // The URI without a password, for messages.
  std::string Redacted() const { return RedactSecrets(uri_); }

  const std::string uri_;
  std::mutex mu_;           // one connection, used by one thread at a time
  PGconn* conn_ = nullptr;  // guarded by mu_
};

}  // namespace

Result<std::unique_ptr<SegmentStore>> OpenPostgresSegmentStore(const std::string& uri) {
  char* err = nullptr;
  PQconninfoOption* options = PQconninfoParse(uri.c_str(), &err);
  if (options == nullptr) {
    std::string why = err != nullptr ? err : "cannot parse it";
    PQfreemem(err);
    for (char& c : why) c = (c == '\n') ? ' ' : c;
    return InvalidArgument(fmt::format("segment.store is not a valid PostgreSQL URI: {}", why));
  }
  PQconninfoFree(options);
  std::string full = uri;
  // Bounded connects, and dead peers noticed by TCP (keepalives, unacknowledged data).
  for (const char* option : {"connect_timeout=5", "keepalives_idle=5", "keepalives_interval=2",
                             "keepalives_count=2", "tcp_user_timeout=5000"}) {
    full = WithPostgresOption(full, option);
  }
  return std::unique_ptr<SegmentStore>(new PostgresSegmentStore(full));
}

std::string WithPostgresOption(const std::string& uri, std::string_view option) {
  const std::size_t scheme = uri.find("://");
  const std::size_t at = uri.rfind('@');
  const std::size_t from = at != std::string::npos ? at : scheme == std::string::npos ? 0 : scheme;
  const std::size_t query = uri.find('?', from);
  const std::string name(option.substr(0, option.find('=') + 1));  // "connect_timeout="
  if (query != std::string::npos && (uri.find("?" + name, query) != std::string::npos ||
                                     uri.find("&" + name, query) != std::string::npos)) {
    return uri;
  }
  return uri + (query == std::string::npos ? "?" : "&") + std::string(option);
}

}  // namespace sekka
