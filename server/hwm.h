// server/hwm.h
//
// The high-water mark (SPEC section 3): the highest time a worker id may have used, stored with
// the layout it was made with in `<data>/workers/<dc>-<worker>.state`. It is written (write,
// fsync, atomic rename, fsync of the directory) before any id of a later time is issued, in
// reservations ahead of the clock, so the disk is touched about once a second.
//
// Thread-safety: pure functions, and a file written by one process.

#ifndef SEKKA_SERVER_HWM_H_
#define SEKKA_SERVER_HWM_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sekka/layout.h"
#include "sekka/status.h"

namespace sekka::server {

struct StoredState {
  std::string layout;          // the layout's fingerprint (LayoutFingerprint)
  std::int64_t hwm_millis = 0; // ms since the Unix epoch
};

// A one-line description of everything that gives an id its meaning: bits, tick, epoch, order.
std::string LayoutFingerprint(const Layout& layout);

// The file's text, and its parser. Errors: kInvalidArgument naming what is wrong.
std::string FormatState(const StoredState& state);
Result<StoredState> ParseState(std::string_view text);

// Reads the state file; nullopt when there is none yet. Errors: kInvalidArgument (corrupt),
// kInternal (unreadable).
Result<std::optional<StoredState>> ReadStateFile(const std::string& path);
// Writes it durably: temp file, fsync, rename, fsync of the directory.
Status WriteStateFile(const std::string& path, const StoredState& state);

}  // namespace sekka::server

#endif  // SEKKA_SERVER_HWM_H_
