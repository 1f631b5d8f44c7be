#include "backends/segment_store_uri.h"

#include <fmt/format.h>

#include <filesystem>

#include "backends/mysql_segment_store.h"
#include "backends/postgres_segment_store.h"
#include "backends/redis_segment_store.h"
#include "backends/sqlite_segment_store.h"
#include "sekka/secrets.h"

namespace sekka {

Result<std::unique_ptr<SegmentStore>> OpenSegmentStore(const std::string& uri,
                                                       const std::string& data_dir) {
  if (uri.empty()) {
    std::error_code ec;
    // The data dir is one process's: 0700 when made here (as `sekka serve` makes it).
    if (std::filesystem::create_directories(data_dir, ec)) {
      std::filesystem::permissions(data_dir, std::filesystem::perms::owner_all, ec);
    }
    if (ec)
      return Unavailable(fmt::format("cannot create data dir {}: {}", data_dir, ec.message()));
    return OpenSqliteSegmentStore(data_dir + "/segments.db");
  }
  if (uri.rfind("sqlite:", 0) == 0) {
    const std::string path = uri.substr(7);
    if (path.empty()) return InvalidArgument("segment.store \"sqlite:\" needs a path: sqlite:PATH");
    return OpenSqliteSegmentStore(path);
  }
  if (uri.rfind("postgres://", 0) == 0 || uri.rfind("postgresql://", 0) == 0) {
    return OpenPostgresSegmentStore(uri);
  }
  if (uri.rfind("mysql://", 0) == 0 || uri.rfind("mariadb://", 0) == 0) {
    return OpenMysqlSegmentStore(uri);
  }
  if (uri.rfind("redis://", 0) == 0 || uri.rfind("rediss://", 0) == 0) {
    return OpenRedisSegmentStore(uri);
  }
  return InvalidArgument(fmt::format(
      "segment.store \"{}\" is not known: allowed \"\" (SQLite in the data dir), sqlite:PATH, "
      "postgres://USER@HOST:PORT/DB, mysql://USER@HOST:PORT/DB or redis://HOST:PORT/DB",
      RedactSecrets(uri).substr(0, 100)));
}

Status CheckSegmentStoreUri(const std::string& uri) {
  if (uri.empty() || uri.rfind("sqlite:", 0) == 0) {
    return uri == "sqlite:" ? InvalidArgument("segment.store \"sqlite:\" needs a path: sqlite:PATH")
                            : Status::Ok();
  }
  // The network stores check their URI when made and connect only at their first call.
  SEKKA_RETURN_IF_ERROR(OpenSegmentStore(uri, ""));
  return Status::Ok();
}

}  // namespace sekka
