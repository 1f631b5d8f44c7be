// backends/id_query.h
//
// Ids from a database, for `sekka check` and `sekka stats`: runs one query and hands the first
// column of each row to a sink, streaming (PostgreSQL in single-row mode; SQLite step by step),
// so 100 million rows need no more memory than the caller keeps.
//   sqlite:PATH                 opened read-only
//   postgres://USER@HOST:PORT/DB (or postgresql://), libpq's URI with its options
//
// Thread-safety: a call is self-contained.

#ifndef SEKKA_BACKENDS_ID_QUERY_H_
#define SEKKA_BACKENDS_ID_QUERY_H_

#include <functional>
#include <string>
#include <string_view>

#include "sekka/layout.h"
#include "sekka/status.h"

namespace sekka {

struct IdQuerySink {
  std::function<void(Id)> id;                  // an integer value
  std::function<void(std::string_view)> text;  // any other value (NULL as ""), as text
};

// Errors: kInvalidArgument (an unknown URI scheme, a query the database refuses, naming its
// message), kUnavailable (the database cannot be opened or reached).
Status QueryIds(const std::string& uri, const std::string& query, const IdQuerySink& sink);

// One per database (backends/sqlite_id_query.cc, backends/postgres_id_query.cc).
Status QuerySqliteIds(const std::string& path, const std::string& query, const IdQuerySink& sink);
Status QueryPostgresIds(const std::string& uri, const std::string& query, const IdQuerySink& sink);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_ID_QUERY_H_
