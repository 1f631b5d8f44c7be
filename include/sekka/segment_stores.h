// include/sekka/segment_stores.h
//
// The kinds of segment store: one row per `segment.store` URI scheme. The configuration, the
// command line and their messages read this table, and backends/segment_store_uri.cc opens each
// kind by its name, so a new store is a row here, its opener there and its files in backends/,
// nothing in server/ or cli/.

#ifndef SEKKA_SEGMENT_STORES_H_
#define SEKKA_SEGMENT_STORES_H_

#include <span>
#include <string>
#include <string_view>

namespace sekka {

struct SegmentStoreKind {
  std::string_view name;    // "postgres": the opener's name (backends/segment_store_uri.cc)
  std::string_view scheme;  // the URI's prefix: "postgres://"; "" for the data dir's default
  std::string_view form;    // as messages show it: "postgres://USER@HOST:PORT/DB"
};

// Every kind, one row per scheme (an alias such as postgresql:// is a row of the same name),
// in the order messages list them.
std::span<const SegmentStoreKind> SegmentStoreKinds();
// The kind a segment.store URI names by its prefix ("" is the data dir's SQLite), or null.
const SegmentStoreKind* FindSegmentStoreKind(std::string_view uri);
// Every kind's form, once per name, as a message lists them: "\"\" (SQLite in the data dir),
// sqlite:PATH, postgres://USER@HOST:PORT/DB, ... or redis://HOST:PORT/DB".
std::string SegmentStoreForms();

}  // namespace sekka

#endif  // SEKKA_SEGMENT_STORES_H_
