// backends/state_file.h
//
// The high-water mark (docs/contract.md section 3): the highest time a worker id may have used,
// stored with the layout it was made with in `<data>/workers/<dc>-<worker>.state`. It is written
// (write, fsync, atomic rename, fsync of the directory) before any id of a later time is issued, in
// reservations ahead of the clock, so the disk is touched about once a second.
//
// Thread-safety: pure functions, and a file written by one process.

#ifndef SEKKA_BACKENDS_STATE_FILE_H_
#define SEKKA_BACKENDS_STATE_FILE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sekka/layout.h"
#include "sekka/status.h"

namespace sekka {

struct StoredState {
  std::string layout;           // the layout's fingerprint (LayoutFingerprint)
  std::int64_t hwm_millis = 0;  // ms since the Unix epoch
};

// A one-line description of everything that gives an id its meaning: bits, tick, epoch, order.
std::string LayoutFingerprint(const Layout& layout);

// The file's text, and its parser. Errors: kInvalidArgument naming what is wrong.
std::string FormatState(const StoredState& state);
Result<StoredState> ParseState(std::string_view text);

// Reads the state file; nullopt when there is none yet. Errors: kInvalidArgument (corrupt),
// kInternal (unreadable).
Result<std::optional<StoredState>> ReadStateFile(const std::string& path);
// Writes `text` to `path` durably: temp file, fsync, rename, fsync of the directory. A crash
// leaves the old file or the new one, never a mix. Errors: kInternal (the disk).
Status WriteFileDurably(const std::string& path, std::string_view text);
// Writes it durably (WriteFileDurably).
Status WriteStateFile(const std::string& path, const StoredState& state);

// What the service keeps in its data dir: each worker id's state (layout and hwm) and, for a
// coordinated process, the worker id it held last. An interface so that the simulation can
// keep it in memory (and lose what was not written when a process crashes).
//
// Thread-safety: implementations allow calls from any thread.
class DataDir {
 public:
  virtual ~DataDir() = default;
  // nullopt when the worker id has no state yet. Errors: as ReadStateFile.
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

// The files under `dir`: `workers/<dc>-<worker>.state` and `workers/coordinator.last`.
std::unique_ptr<DataDir> NewFileDataDir(std::string dir);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_STATE_FILE_H_
