#include "backends/sqlite_segment_store.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <limits>
#include <mutex>
#include <optional>

#include "backends/segment_tables.h"

namespace sekka {
namespace {

constexpr const char* kSchema =
    "CREATE TABLE IF NOT EXISTS sekka_segments ("
    "  tag TEXT PRIMARY KEY,"
    "  next_id INTEGER NOT NULL CHECK (next_id >= 1),"
    "  step INTEGER NOT NULL CHECK (step >= 1),"
    "  updated_ms INTEGER NOT NULL DEFAULT 0,"
    "  delta INTEGER NOT NULL DEFAULT 1,"
    "  remainder INTEGER NOT NULL DEFAULT 0,"
    "  deleted INTEGER NOT NULL DEFAULT 0)";

// Stores made before delta, remainder and tombstones existed get the columns, with the values
// that issue every id and keep every tag (what those tags always did).
constexpr const char* kColumns[] = {
    "ALTER TABLE sekka_segments ADD COLUMN delta INTEGER NOT NULL DEFAULT 1",
    "ALTER TABLE sekka_segments ADD COLUMN remainder INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE sekka_segments ADD COLUMN deleted INTEGER NOT NULL DEFAULT 0",
};

class Statement {
 public:
  Statement(sqlite3* db, const char* sql) { sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  ~Statement() { sqlite3_finalize(stmt_); }
  sqlite3_stmt* get() { return stmt_; }
  bool ok() const { return stmt_ != nullptr; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

class SqliteSegmentStore final : public SegmentStore {
 public:
  SqliteSegmentStore(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  ~SqliteSegmentStore() override { sqlite3_close_v2(db_); }

  Result<Allocation> Allocate(std::string_view tag, std::int64_t step) override {
    if (step < 1) return BadStep(step);
    std::lock_guard lock(mu_);
    // One statement: the row is updated and read back atomically, whatever other connections
    // (threads or processes) do at the same time.
    Statement update(db_,
                     "UPDATE sekka_segments SET next_id = next_id + ?2, "
                     "updated_ms = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) "
                     "WHERE tag = ?1 AND next_id <= ?3 AND deleted = 0 RETURNING next_id, step");
    if (!update.ok()) return Failure("prepare allocate");
    BindText(update.get(), 1, tag);
    sqlite3_bind_int64(update.get(), 2, step);
    sqlite3_bind_int64(update.get(), 3, std::numeric_limits<std::int64_t>::max() - step);
    const int rc = sqlite3_step(update.get());
    if (rc == SQLITE_ROW) {
      const std::int64_t end = sqlite3_column_int64(update.get(), 0);
      const std::int64_t tag_step = sqlite3_column_int64(update.get(), 1);
      if (sqlite3_step(update.get()) != SQLITE_DONE) return Failure("allocate");
      return Allocation{{end - step, end}, tag_step};
    }
    if (rc != SQLITE_DONE) return Failure("allocate");
    // No row changed: an unknown tag, or one whose ids would pass 2^63 - 1.
    SEKKA_ASSIGN_OR_RETURN(auto t, GetLocked(tag));
    return TagExhausted(tag, t.next_id, step);
  }

  Status CreateTag(const TagInfo& tag) override {
    std::lock_guard lock(mu_);
    // Each step binds the same five values: ?1 tag, ?2 next_id, ?3 step, ?4 delta, ?5 remainder.
    auto changes = [&](const char* sql, const char* what) -> Result<bool> {
      Statement st(db_, sql);
      if (!st.ok()) return Failure(what);
      BindText(st.get(), 1, tag.tag);
      for (int i = 0; const std::int64_t v : {tag.next_id, tag.step, tag.delta, tag.remainder}) {
        sqlite3_bind_int64(st.get(), 2 + i++, v);
      }
      if (sqlite3_step(st.get()) != SQLITE_DONE) return Failure(what);
      return sqlite3_changes(db_) == 1;
    };
    return CreateInTable(
        *FindSegmentTable("sekka"), tag,
        {[&] {
           return changes(
               "UPDATE sekka_segments SET next_id = ?2, step = ?3, delta = ?4, remainder = ?5, "
               "deleted = 0 WHERE tag = ?1 AND deleted = 1 AND next_id <= ?2 AND delta = ?4 AND "
               "remainder = ?5",
               "revive");
         },
         [&] {
           return changes(
               "INSERT INTO sekka_segments (tag, next_id, step, delta, remainder) "
               "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (tag) DO NOTHING",
               "create");
         },
         [&]() -> Result<std::optional<TagInfo>> {
           Statement st(db_,
                        "SELECT tag, next_id, step, delta, remainder FROM sekka_segments "
                        "WHERE tag = ?1 AND deleted = 1");
           if (!st.ok()) return Failure("show");
           BindText(st.get(), 1, tag.tag);
           const int rc = sqlite3_step(st.get());
           if (rc == SQLITE_ROW) return std::optional<TagInfo>(Row(st.get()));
           if (rc != SQLITE_DONE) return Failure("show");
           return std::optional<TagInfo>();
         }});
  }

  Status SetStep(std::string_view tag, std::int64_t step) override {
    if (Status s = ValidateTagStep(step); !s.ok()) return s;
    std::lock_guard lock(mu_);
    Statement update(db_, "UPDATE sekka_segments SET step = ?2 WHERE tag = ?1 AND deleted = 0");
    if (!update.ok()) return Failure("prepare step");
    BindText(update.get(), 1, tag);
    sqlite3_bind_int64(update.get(), 2, step);
    if (sqlite3_step(update.get()) != SQLITE_DONE) return Failure("step");
    if (sqlite3_changes(db_) == 0) return TagNotFound(tag);
    return Status::Ok();
  }

  Result<TagInfo> DeleteTag(std::string_view tag) override {
    std::lock_guard lock(mu_);
    Statement update(db_,
                     "UPDATE sekka_segments SET deleted = 1 WHERE tag = ?1 AND deleted = 0 "
                     "RETURNING tag, next_id, step, delta, remainder");
    if (!update.ok()) return Failure("prepare delete");
    BindText(update.get(), 1, tag);
    const int rc = sqlite3_step(update.get());
    if (rc == SQLITE_DONE) return TagNotFound(tag);
    if (rc != SQLITE_ROW) return Failure("delete");
    TagInfo was = Row(update.get());
    if (sqlite3_step(update.get()) != SQLITE_DONE) return Failure("delete");
    return was;
  }

  Result<TagInfo> GetTag(std::string_view tag) override {
    std::lock_guard lock(mu_);
    return GetLocked(tag);
  }

  Result<std::vector<TagInfo>> ListTagsAfter(std::string_view after, std::size_t limit) override {
    std::lock_guard lock(mu_);
    Statement select(db_,
                     "SELECT tag, next_id, step, delta, remainder FROM sekka_segments WHERE "
                     "deleted = 0 AND tag > ?1 ORDER BY tag LIMIT ?2");
    if (!select.ok()) return Failure("prepare list");
    BindText(select.get(), 1, after);
    sqlite3_bind_int64(select.get(), 2, limit == 0 ? -1 : static_cast<std::int64_t>(limit));
    std::vector<TagInfo> out;
    int rc;
    while ((rc = sqlite3_step(select.get())) == SQLITE_ROW) out.push_back(Row(select.get()));
    if (rc != SQLITE_DONE) return Failure("list");
    return out;
  }

 private:
  static TagInfo Row(sqlite3_stmt* s) {
    TagInfo t;
    t.tag = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    t.next_id = sqlite3_column_int64(s, 1);
    t.step = sqlite3_column_int64(s, 2);
    t.delta = sqlite3_column_int64(s, 3);
    t.remainder = sqlite3_column_int64(s, 4);
    return t;
  }

  Result<TagInfo> GetLocked(std::string_view tag) {
    Statement select(
        db_,
        "SELECT tag, next_id, step, delta, remainder FROM sekka_segments WHERE tag = ?1 AND "
        "deleted = 0");
    if (!select.ok()) return Failure("prepare show");
    BindText(select.get(), 1, tag);
    const int rc = sqlite3_step(select.get());
    if (rc == SQLITE_ROW) return Row(select.get());
    if (rc != SQLITE_DONE) return Failure("show");
    return TagNotFound(tag);
  }

  static void BindText(sqlite3_stmt* s, int i, std::string_view text) {
    sqlite3_bind_text(s, i, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  }

  Error Failure(std::string_view what) {
    return Unavailable(
        fmt::format("segment store sqlite:{}: {} failed: {}", path_, what, sqlite3_errmsg(db_)));
  }

  std::mutex mu_;  // one connection, used by one thread at a time
  sqlite3* db_;    // guarded by mu_
  const std::string path_;
};

}  // namespace

Result<std::unique_ptr<SegmentStore>> OpenSqliteSegmentStore(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string why = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return Unavailable(fmt::format("cannot open segment store sqlite:{}: {}", path, why));
  }
  sqlite3_busy_timeout(db, 10'000);
  for (const char* sql : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", kSchema}) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string why = err != nullptr ? err : "unknown error";
      sqlite3_free(err);
      sqlite3_close_v2(db);
      return Unavailable(fmt::format("cannot open segment store sqlite:{}: {}", path, why));
    }
  }
  for (const char* sql : kColumns) {
    // Fails with "duplicate column name" where the column is there already.
    char* err = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      const std::string why = err != nullptr ? err : "unknown error";
      sqlite3_free(err);
      if (why.find("duplicate column") == std::string::npos) {
        sqlite3_close_v2(db);
        return Unavailable(fmt::format("cannot open segment store sqlite:{}: {}", path, why));
      }
    }
  }
  return std::unique_ptr<SegmentStore>(new SqliteSegmentStore(db, path));
}

}  // namespace sekka
