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

// Reads a small regular file whole; nullopt when there is none. Never follows a symbolic link
// and never blocks (on a FIFO planted in a shared dir). Errors: kInvalidArgument (a link, a
// directory, a FIFO or anything but a regular file, or one over `max_bytes`: the message says
// to remove it), kInternal (unreadable, naming what to do for a permission error).
Result<std::optional<std::string>> ReadRegularFile(const std::string& path, std::size_t max_bytes);
// Writes `text` to a new file beside `path` (a name of its own, so threads and processes never
// share one; mode 0644 whatever the umask, so every user of a shared dir can read it; fsynced)
// and returns its name. Errors: kInternal.
Result<std::string> WriteTempFile(const std::string& path, std::string_view text);
// fsyncs the directory that `path` is in (best effort: a rename or link in it is then durable).
void SyncParentDir(const std::string& path);

// Reads the state file; nullopt when there is none yet. Errors: kInvalidArgument (corrupt),
// kInternal (unreadable).
Result<std::optional<StoredState>> ReadStateFile(const std::string& path);
// Writes `text` to `path` durably: WriteTempFile, rename, SyncParentDir. A crash leaves the old
// file or the new one, never a mix. Errors: kInternal (the disk).
Status WriteFileDurably(const std::string& path, std::string_view text);
// Writes it durably (WriteFileDurably).
Status WriteStateFile(const std::string& path, const StoredState& state);

// The files under `dir`: `workers/<dc>-<worker>.state` and `workers/coordinator.last`.
std::unique_ptr<DataDir> NewFileDataDir(std::string dir);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_STATE_FILE_H_
