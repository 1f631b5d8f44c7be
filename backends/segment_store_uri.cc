#include "backends/segment_store_uri.h"

#include <fmt/format.h>

#include <filesystem>

#include "backends/mysql_segment_store.h"
#include "backends/postgres_segment_store.h"
#include "backends/redis_segment_store.h"
#include "backends/sqlite_segment_store.h"
#include "sekka/secrets.h"
#include "sekka/segment_stores.h"

namespace sekka {

namespace {

using Opener = Result<std::unique_ptr<SegmentStore>> (*)(const std::string& uri,
                                                         const std::string& data_dir);

Result<std::unique_ptr<SegmentStore>> OpenInDataDir(const std::string&,
                                                    const std::string& data_dir) {
  std::error_code ec;
  // The data dir is one process's: 0700 when made here (as `sekka serve` makes it).
  if (std::filesystem::create_directories(data_dir, ec)) {
    std::filesystem::permissions(data_dir, std::filesystem::perms::owner_all, ec);
  }
  if (ec) return Unavailable(fmt::format("cannot create data dir {}: {}", data_dir, ec.message()));
  return OpenSqliteSegmentStore(data_dir + "/segments.db");
}

Result<std::unique_ptr<SegmentStore>> OpenSqlite(const std::string& uri, const std::string&) {
  const std::string path = uri.substr(std::string_view("sqlite:").size());
  if (path.empty()) return InvalidArgument("segment.store \"sqlite:\" needs a path: sqlite:PATH");
  return OpenSqliteSegmentStore(path);
}

template <Result<std::unique_ptr<SegmentStore>> (*kOpen)(const std::string&)>
Result<std::unique_ptr<SegmentStore>> OpenNetwork(const std::string& uri, const std::string&) {
  return kOpen(uri);
}

// Each kind's opener, by the name of its rows in sekka/segment_stores.h.
struct KindOpener {
  std::string_view name;
  Opener open;
};
constexpr KindOpener kOpeners[] = {
    {"data-dir", OpenInDataDir},
    {"sqlite", OpenSqlite},
    {"postgres", OpenNetwork<OpenPostgresSegmentStore>},
    {"mysql", OpenNetwork<OpenMysqlSegmentStore>},
    {"redis", OpenNetwork<OpenRedisSegmentStore>},
};

}  // namespace

Result<std::unique_ptr<SegmentStore>> OpenSegmentStore(const std::string& uri,
                                                       const std::string& data_dir) {
  const SegmentStoreKind* kind = FindSegmentStoreKind(uri);
  for (const KindOpener& o : kOpeners) {
    if (kind != nullptr && o.name == kind->name) return o.open(uri, data_dir);
  }
  return InvalidArgument(fmt::format("segment.store \"{}\" is not known: allowed {}",
                                     RedactSecrets(uri).substr(0, 100), SegmentStoreForms()));
}

Status CheckSegmentStoreUri(const std::string& uri) {
  // The file stores are opened only by serve (a file would be made); the network stores check
  // their URI when made and connect only at their first call.
  const SegmentStoreKind* kind = FindSegmentStoreKind(uri);
  if (kind != nullptr && kind->name == "data-dir") return Status::Ok();
  if (kind != nullptr && kind->name == "sqlite") {
    return uri.size() > kind->scheme.size()
               ? Status::Ok()
               : InvalidArgument("segment.store \"sqlite:\" needs a path: sqlite:PATH");
  }
  SEKKA_RETURN_IF_ERROR(OpenSegmentStore(uri, ""));
  return Status::Ok();
}

}  // namespace sekka
