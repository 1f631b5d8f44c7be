#include <fmt/format.h>
#include <sqlite3.h>

#include "backends/id_query.h"
#include "sekka/secrets.h"

namespace sekka {

Status QueryIds(const std::string& uri, const std::string& query, const IdQuerySink& sink) {
  if (uri.rfind("sqlite:", 0) == 0 && uri.size() > 7) {
    return QuerySqliteIds(uri.substr(7), query, sink);
  }
  if (uri.rfind("postgres://", 0) == 0 || uri.rfind("postgresql://", 0) == 0) {
    return QueryPostgresIds(uri, query, sink);
  }
  return InvalidArgument(
      fmt::format("--db \"{}\" is not known: allowed sqlite:PATH or postgres://USER@HOST:PORT/DB",
                  RedactSecrets(uri).substr(0, 100)));
}

Status QuerySqliteIds(const std::string& path, const std::string& query, const IdQuerySink& sink) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    std::string why = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Unavailable(fmt::format("cannot open SQLite database {}: {}", path, why));
  }
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, query.c_str(), -1, &stmt, nullptr) != SQLITE_OK || stmt == nullptr) {
    std::string why = sqlite3_errmsg(db);
    sqlite3_close(db);
    return InvalidArgument(fmt::format("--query on {}: {}", path, why));
  }
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    if (sqlite3_column_count(stmt) < 1) break;
    if (sqlite3_column_type(stmt, 0) == SQLITE_INTEGER) {
      sink.id(sqlite3_column_int64(stmt, 0));
    } else {
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
      sink.text(text != nullptr ? std::string_view(text) : std::string_view());
    }
  }
  Status result = Status::Ok();
  if (rc != SQLITE_DONE) {
    result = InvalidArgument(fmt::format("--query on {}: {}", path, sqlite3_errmsg(db)));
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return result;
}

}  // namespace sekka
