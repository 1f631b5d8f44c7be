#include <fmt/format.h>
#include <libpq-fe.h>

#include <charconv>
#include <memory>

#include "backends/id_query.h"
#include "backends/postgres_segment_store.h"

namespace sekka {

Status QueryPostgresIds(const std::string& uri, const std::string& query, const IdQuerySink& sink) {
  // A connection that cannot be made in 10 s is an error, not a hang.
  const std::string conninfo = WithPostgresOption(uri, "connect_timeout=10");
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn(PQconnectdb(conninfo.c_str()), PQfinish);
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    return Unavailable(fmt::format("cannot connect to PostgreSQL: {}", PQerrorMessage(conn.get())));
  }
  if (PQsendQuery(conn.get(), query.c_str()) != 1) {
    return InvalidArgument(fmt::format("--query: {}", PQerrorMessage(conn.get())));
  }
  PQsetSingleRowMode(conn.get());  // rows stream in one at a time
  Status result = Status::Ok();
  while (PGresult* res = PQgetResult(conn.get())) {
    std::unique_ptr<PGresult, decltype(&PQclear)> guard(res, PQclear);
    const ExecStatusType st = PQresultStatus(res);
    if (st == PGRES_SINGLE_TUPLE) {
      if (PQnfields(res) < 1) continue;
      const char* value = PQgetvalue(res, 0, 0);
      const int length = PQgetlength(res, 0, 0);
      Id id = 0;
      const auto [end, ec] = std::from_chars(value, value + length, id);
      if (!PQgetisnull(res, 0, 0) && ec == std::errc() && end == value + length && length > 0) {
        sink.id(id);
      } else {
        sink.text(std::string_view(value, static_cast<std::size_t>(length)));
      }
    } else if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK && result.ok()) {
      result = InvalidArgument(fmt::format("--query: {}", PQresultErrorMessage(res)));
    }
  }
  return result;
}

}  // namespace sekka
