// backends/mysql_segment_store.h
//
// A segment store in MySQL or MariaDB, shared by many servers, on one of three tables chosen by
// the URI's `schema` parameter:
//   sekka   sekka_segments, made when missing (the default)
//   leaf    Meituan Leaf's leaf_alloc, in place: a range is `UPDATE ... SET max_id = max_id +
//           step` and a read of the row in one transaction, as Leaf's servers take theirs, so
//           that both can draw from one row at once; ids are [max_id - step, max_id)
//   tinyid  didi tinyid's tiny_id_info, in place: read the row, then an `UPDATE` on the max_id
//           and version read (tinyid's optimistic update); ids are (old max_id, new max_id],
//           only those with id % delta == remainder
// Ranges of one tag never overlap, whoever else draws from the row by its own rules. Every
// call is bounded (connect, read and write timeouts of 5 s; a lock held longer ends the
// statement); a call that fails drops its connection, so no transaction is left open, and a
// range whose commit was not seen is never used. The connection is made lazily and remade
// after a failure, so a server starts, and recovers, while the database is down.

#ifndef SEKKA_BACKENDS_MYSQL_SEGMENT_STORE_H_
#define SEKKA_BACKENDS_MYSQL_SEGMENT_STORE_H_

#include <memory>
#include <string>

#include "sekka/segment.h"

namespace sekka {

// `uri` is mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?schema=sekka|leaf|tinyid][&socket=PATH]
// (mariadb:// alike; user and password percent-encoded). Errors: kInvalidArgument (a malformed
// URI or an unknown parameter, naming the allowed ones). An unreachable database is not an
// error here: calls return kUnavailable until it answers.
Result<std::unique_ptr<SegmentStore>> OpenMysqlSegmentStore(const std::string& uri);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_MYSQL_SEGMENT_STORE_H_
