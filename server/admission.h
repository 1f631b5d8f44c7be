// server/admission.h
//
// The rules that decide, when clients press on the server's limits, who is answered, who waits
// and who is closed:
//   - auth turns: a host's credentials are answered one failure per kAuthFailureSpacingMs, so a
//     guesser gains nothing by opening connections, and a guess's timing says nothing about
//     whether it was right (a right one waits for the same turn, but takes none);
//   - the memory budget: past server.max_buffer_mib, the connections whose clients make the
//     server hold the most are closed (MemoryWeight); a client that reads is never chosen;
//   - max_connections: the connection whose request has been arriving longest gives its slot
//     up (SlowSenderWeight).
// No I/O and no Asio: the event loop (server/server.cc, server/connection.cc) reads its
// connections into ConnectionLoad and acts on the answers. Every time is the Clock's monotonic
// milliseconds, so each rule is unit-tested under FakeClock (server/admission_test.cc).
//
// Thread-safety: AuthTurns is thread-safe; a DrainWatch is read by one scan at a time (the
// budget's); the functions are pure.

#ifndef SEKKA_SERVER_ADMISSION_H_
#define SEKKA_SERVER_ADMISSION_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "sekka/clock.h"

namespace sekka::server {

// Failed credentials from one host are answered at most once per this interval, however many
// connections it opens; an attempt that would wait more than kMaxAuthWaitMs is closed
// unanswered.
inline constexpr std::int64_t kAuthFailureSpacingMs = 200;
inline constexpr std::int64_t kMaxAuthWaitMs = 5000;
// At max_connections, a connection whose request has been arriving for this long gives its
// slot to the new one.
inline constexpr std::int64_t kSlowSenderAgeMs = 1000;
// Past the memory budget, what a connection's client makes the server hold counts once it is
// this old: an unfinished request, or replies read slower than kMinDrainRate.
inline constexpr std::int64_t kStallAgeMs = 250;
inline constexpr double kMinDrainRate = 1024.0 * 1024.0;  // bytes a second

// The host whose turn a client's credentials take, from its address's text: "loopback" for any
// of 127/8 and ::1 (one local user), the /64 for IPv6, the address itself otherwise; an
// IPv4-mapped IPv6 address is its IPv4 address (a client of a dual-stack listener), and a
// link-local address's zone ("%eth0") is no part of it.
std::string AuthHost(std::string_view address);

class AuthTurns {
 public:
  explicit AuthTurns(Clock& clock) : clock_(clock) {}

  // How long credentials presented by `host` (AuthHost) wait for their answer: until the host's
  // next turn (0 unless failures are queued), or nullopt when that is more than kMaxAuthWaitMs
  // away (the connection is then closed unanswered). Failed credentials (`failed`) take the
  // turn, so the host's next ones wait kAuthFailureSpacingMs more; right ones take none.
  std::optional<std::int64_t> Turn(const std::string& host, bool failed);

 private:
  Clock& clock_;
  std::mutex mu_;
  std::unordered_map<std::string, std::int64_t> next_;  // a host's next turn; guarded by mu_
};

// What the rules read of a connection (0: the event has not happened).
struct ConnectionLoad {
  std::int64_t partial_since_ms = 0;  // when its unfinished request began
  std::int64_t write_since_ms = 0;    // when a write the socket did not take at once began
  bool held = false;                  // its replies wait for an auth turn
  std::size_t buffered = 0;           // its buffers' bytes
};

// Whether a client reads its replies at kMinDrainRate: from the budget's scan, the bytes the
// client has acknowledged in total and those the kernel still holds for it. The kernel keeps
// sending while the server is busy, so the server's own pauses do not count.
class DrainWatch {
 public:
  // True when since the last look, at least kStallAgeMs ago and during the write that began at
  // `write_since_ms`, the client acknowledged less than kMinDrainRate with bytes still queued.
  // The first look of a write only takes a mark; a look sooner than kStallAgeMs after the last
  // is false and takes none.
  bool Stalled(std::uint64_t acked, std::int64_t queued, std::int64_t write_since_ms,
               std::int64_t now_ms);

 private:
  std::atomic<std::uint64_t> acked_mark_{0};
  std::atomic<std::int64_t> mark_ms_{0};
};

// What closing a connection frees (its buffers) when its client is what makes the server hold
// them: a request not whole for kStallAgeMs, a reply waiting that long on a client that does
// not read it (`stalled`, asked only then: it takes a DrainWatch mark), or replies held for an
// auth turn (up to kMaxAuthWaitMs of a host's guessing). 0 otherwise: a client reading a large
// reply at speed is never chosen, however large the reply.
template <typename Stalled>
std::size_t MemoryWeight(const ConnectionLoad& c, std::int64_t now_ms, Stalled stalled) {
  const bool input = c.partial_since_ms != 0 && now_ms - c.partial_since_ms >= kStallAgeMs;
  const bool output =
      c.write_since_ms != 0 && now_ms - c.write_since_ms >= kStallAgeMs && stalled();
  return input || output || c.held ? c.buffered : 0;
}

// At max_connections: how long past kSlowSenderAgeMs a connection's unfinished request has been
// arriving (plus one), or 0 when it is no slow sender. The largest gives its slot up.
std::int64_t SlowSenderWeight(std::int64_t partial_since_ms, std::int64_t now_ms);

// True when an unfinished request that began at `partial_since_ms` has had `timeout_ms`.
bool RequestOverdue(std::int64_t partial_since_ms, std::int64_t now_ms, std::int64_t timeout_ms);

}  // namespace sekka::server

#endif  // SEKKA_SERVER_ADMISSION_H_
