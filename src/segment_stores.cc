// The table of segment store kinds (include/sekka/segment_stores.h).

#include "sekka/segment_stores.h"

#include <array>

namespace sekka {
namespace {

// name, scheme, form
constexpr std::array<SegmentStoreKind, 8> kKinds = {{
    {"data-dir", "", "\"\" (SQLite in the data dir)"},
    {"sqlite", "sqlite:", "sqlite:PATH"},
    {"postgres", "postgres://", "postgres://USER@HOST:PORT/DB"},
    {"postgres", "postgresql://", "postgresql://USER@HOST:PORT/DB"},
    {"mysql", "mysql://", "mysql://USER@HOST:PORT/DB"},
    {"mysql", "mariadb://", "mariadb://USER@HOST:PORT/DB"},
    {"redis", "redis://", "redis://HOST:PORT/DB"},
    {"redis", "rediss://", "rediss://HOST:PORT/DB"},
}};

}  // namespace

std::span<const SegmentStoreKind> SegmentStoreKinds() { return kKinds; }

const SegmentStoreKind* FindSegmentStoreKind(std::string_view uri) {
  if (uri.empty()) return &kKinds[0];
  for (const SegmentStoreKind& k : kKinds) {
    if (!k.scheme.empty() && uri.starts_with(k.scheme)) return &k;
  }
  return nullptr;
}

std::string SegmentStoreForms() {
  std::string forms;
  std::string_view last;
  for (const SegmentStoreKind& k : kKinds) {
    if (k.name == last) continue;  // an alias: the first row of a name stands for it
    last = k.name;
    const bool final = &k == &kKinds.back() || kKinds.back().name == k.name;
    forms += forms.empty() ? "" : final ? " or " : ", ";
    forms += k.form;
  }
  return forms;
}

}  // namespace sekka
