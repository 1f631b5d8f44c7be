// backends/postgres_segment_store.h
//
// A segment store in PostgreSQL, shared by many servers. Each allocation is one
// `UPDATE ... RETURNING` on the tag's row: PostgreSQL's row lock serializes concurrent updates
// and re-evaluates the row, so ranges never overlap whatever the number of servers (Leaf #151).
// The connection is made lazily and remade after a failure, so a server starts, and recovers,
// while the database is down.

#ifndef SEKKA_BACKENDS_POSTGRES_SEGMENT_STORE_H_
#define SEKKA_BACKENDS_POSTGRES_SEGMENT_STORE_H_

#include <memory>
#include <string>

#include "sekka/segment.h"

namespace sekka {

// `uri` is a libpq connection URI (postgres://user@host:port/db?...). Errors: kInvalidArgument
// (a URI libpq cannot parse). An unreachable database is not an error here: calls return
// kUnavailable until it answers.
Result<std::unique_ptr<SegmentStore>> OpenPostgresSegmentStore(const std::string& uri);

// `uri` with `option` ("connect_timeout=5") added as a query parameter, unless the URI sets it.
// The query begins at the first '?' after the user's password (libpq takes '?', '#' and '/' in
// an unencoded one), so a password never swallows the option.
std::string WithPostgresOption(const std::string& uri, std::string_view option);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_POSTGRES_SEGMENT_STORE_H_
