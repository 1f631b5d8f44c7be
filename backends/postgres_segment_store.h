// backends/postgres_segment_store.h
//
// A segment store in PostgreSQL, shared by many servers, on the table the URI's `schema`
// parameter chooses (backends/segment_tables.h: sekka's own, or Leaf's or tinyid's in place).
// An allocation is one `UPDATE ... RETURNING` on the tag's row (tinyid's table: tinyid's read and
// update on the max_id and version read): PostgreSQL's row lock serializes concurrent updates
// and re-evaluates the row, so ranges never overlap whatever the number of servers (Leaf #151),
// the peers' own servers included.
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

// The value of the query parameter `name` in `uri`, taken out of it ("" when absent): sekka's
// own parameters (schema) are not libpq's. The query begins as WithPostgresOption says.
std::string TakePostgresOption(std::string& uri, std::string_view name);

// `uri` with `option` ("connect_timeout=5") added as a query parameter, unless the URI sets it.
// The query begins at the first '?' after the user's password (libpq takes '?', '#' and '/' in
// an unencoded one), so a password never swallows the option.
std::string WithPostgresOption(const std::string& uri, std::string_view option);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_POSTGRES_SEGMENT_STORE_H_
