// backends/sqlite_segment_store.h
//
// The embedded default segment store: a SQLite database file (in the data dir). Safe for several
// processes on one machine (WAL, busy timeout); every allocation is durable (synchronous=FULL)
// before its range is returned.

#ifndef SEKKA_BACKENDS_SQLITE_SEGMENT_STORE_H_
#define SEKKA_BACKENDS_SQLITE_SEGMENT_STORE_H_

#include <memory>
#include <string>

#include "sekka/segment.h"

namespace sekka {

// Opens (creating if needed) the store at `path`.
// Errors: kUnavailable (the file cannot be opened or is not a sekka store).
Result<std::unique_ptr<SegmentStore>> OpenSqliteSegmentStore(const std::string& path);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_SQLITE_SEGMENT_STORE_H_
