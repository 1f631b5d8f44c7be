// backends/state_file.h
//
// The high-water mark (docs/contract.md section 3): the highest time a worker id may have used,
// stored with the layout it was made with in `<data>/workers/<dc>-<worker>.state`. It is written
// (write, fsync, atomic rename, fsync of the directory) before any id of a later time is issued,
// in steps ahead of the clock, so the disk is touched about once a second.
//
// Thread-safety: pure functions, and a file written by one process.

#ifndef SEKKA_BACKENDS_STATE_FILE_H_
#define SEKKA_BACKENDS_STATE_FILE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sekka/data_dir.h"
#include "sekka/layout.h"
#include "sekka/status.h"

namespace sekka {

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

// The files under `dir`: `workers/<dc>-<worker>.state` and `workers/coordinator.last`.
std::unique_ptr<DataDir> NewFileDataDir(std::string dir);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_STATE_FILE_H_
