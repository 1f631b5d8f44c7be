// backends/segment_store_uri.h
//
// The one place where a segment store is chosen from its URI (docs/contract.md section 7,
// segment.store):
//   ""               SQLite in the data dir: <data_dir>/segments.db (the embedded default)
//   sqlite:PATH      SQLite at PATH
//   postgres://...   PostgreSQL (also postgresql://), a libpq connection URI
//   mysql://...      MySQL or MariaDB (also mariadb://), backends/mysql_segment_store.h
//   redis://...      Redis (rediss:// with TLS), backends/redis_segment_store.h

#ifndef SEKKA_BACKENDS_SEGMENT_STORE_URI_H_
#define SEKKA_BACKENDS_SEGMENT_STORE_URI_H_

#include <memory>
#include <string>

#include "sekka/segment.h"

namespace sekka {

// Errors: kInvalidArgument (a URI of no known kind, naming the allowed ones), kUnavailable (the
// store cannot be opened).
Result<std::unique_ptr<SegmentStore>> OpenSegmentStore(const std::string& uri,
                                                       const std::string& data_dir);

// The checks OpenSegmentStore makes of the URI itself, without opening anything (no file made,
// no connection), for `serve --print-config`. Errors: kInvalidArgument, as OpenSegmentStore.
Status CheckSegmentStoreUri(const std::string& uri);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_SEGMENT_STORE_URI_H_
