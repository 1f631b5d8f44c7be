// include/sekka/data_dir.h
//
// What a server keeps in its data dir for its worker ids: each worker id's state (the layout it
// was used with and its high-water mark, the hwm) and, for a coordinated process, the worker id
// it held last. An interface, so that the server is handed it: files in production
// (backends/state_file.h), memory in tests, a crashing disk in the simulation.
//
// Thread-safety: implementations allow calls from any thread.

#ifndef SEKKA_DATA_DIR_H_
#define SEKKA_DATA_DIR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "sekka/status.h"

namespace sekka {

struct StoredState {
  std::string layout;           // the layout's fingerprint (LayoutFingerprint)
  std::int64_t hwm_millis = 0;  // ms since the Unix epoch
};

class DataDir {
 public:
  virtual ~DataDir() = default;
  // nullopt when the worker id has no state yet. Errors: kInvalidArgument (corrupt), kInternal.
  virtual Result<std::optional<StoredState>> ReadState(std::int64_t datacenter_id,
                                                       std::int64_t worker_id) = 0;
  // Stores `state` durably, except that it never lowers a stored hwm of the same layout (that
  // write is skipped, and OK). Errors: kInternal (the disk).
  virtual Status WriteState(std::int64_t datacenter_id, std::int64_t worker_id,
                            const StoredState& state) = 0;
  // Where the state of a worker id is, for messages.
  virtual std::string StateName(std::int64_t datacenter_id, std::int64_t worker_id) const = 0;
  // The worker id a coordinated process held last (tried first next time); -1: none.
  virtual std::int64_t ReadPreferred() = 0;
  virtual void WritePreferred(std::int64_t worker_id) = 0;
};

// A DataDir in memory, with the same never-lower rule (tests).
std::unique_ptr<DataDir> NewMemoryDataDir();

}  // namespace sekka

#endif  // SEKKA_DATA_DIR_H_
