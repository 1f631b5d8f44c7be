// server/admission.h
//
// The rules that decide, when clients press on the server's limits, who is answered, who waits
// and who is closed:
//   - unauthenticated connections (server.auth_token set, not presented yet) are second-class:
//     an address holds at most server.max_unauthenticated_per_address of them, each is closed
//     at server.auth_timeout, and one gives its slot up before any new client is refused
//     (UnauthenticatedConnections); one that presented the token is never closed to make room;
//   - auth turns: an address's failed credentials are answered one per kAuthFailureSpacingMs,
//     so a guesser gains nothing by opening connections; right ones never wait (Turns); so
//     are its TLS handshakes, server.tls_handshake_rate a second;
//   - the memory budget: past server.max_buffer_mib, the connections whose clients make the
//     server hold the most are closed (MemoryWeight); a client that reads is never chosen;
//   - max_connections: an unauthenticated connection gives its slot up first, then the one
//     whose request has been arriving longest, then (no token set) the one idle longest
//     (RoomWeight).
// No I/O and no Asio: the event loop (server/server.cc, server/connection.cc) reads its
// connections into ConnectionLoad and acts on the answers. Every time is the Clock's monotonic
// milliseconds, so each rule is unit-tested under FakeClock (server/admission_test.cc).
//
// Thread-safety: Turns is thread-safe; UnauthenticatedConnections is not (the server holds
// it under its lock); a DrainWatch is read by one scan at a time (the budget's); the functions
// are pure.

#ifndef SEKKA_SERVER_ADMISSION_H_
#define SEKKA_SERVER_ADMISSION_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "sekka/clock.h"

namespace sekka::server {

// Failed credentials from one host are answered at most once per this interval, however many
// connections it opens; a failure that would wait more than kMaxAuthWaitMs is closed
// unanswered.
inline constexpr std::int64_t kAuthFailureSpacingMs = 200;
inline constexpr std::int64_t kMaxAuthWaitMs = 5000;
// At max_connections, a connection whose request has been arriving for this long, or (with no
// token set) that has been idle this long, gives its slot to the new one.
inline constexpr std::int64_t kSlowSenderAgeMs = 1000;
inline constexpr std::int64_t kIdleSpareMs = 1000;
// On the address holding the most connections, one that has made a request gives its slot first
// once at rest this long (a pool busy with requests every few milliseconds keeps its
// connections), one that never made any at once (a flood of silent connections).
inline constexpr std::int64_t kCrowdedRestMs = 100;
// How many unauthenticated connections the choice of one to close looks at past those it must
// spare.
inline constexpr int kUnauthenticatedLook = 64;
// Past the memory budget, what a connection's client makes the server hold counts once it is
// this old: an unfinished request, or replies read slower than kMinDrainRate.
inline constexpr std::int64_t kStallAgeMs = 250;
inline constexpr double kMinDrainRate = 1024.0 * 1024.0;  // bytes a second

// The host a client's limits count under (turns, unauthenticated connections), from its
// address's text: the address itself for IPv4, the /64 for IPv6 (one subscriber's prefix, as nginx
// and Cloudflare count them); an IPv4-mapped IPv6 address is its IPv4 address (a client of a
// dual-stack listener), and a link-local address's zone ("%eth0") is no part of it. Every address
// counts apart, loopback's too: the limits are about load, not about the token's secrecy (at least
// 16 characters: docs/design.md), and a local user can load the host by other means.
std::string ClientHost(std::string_view address);

// Turns per host (ClientHost), a token bucket kept as each host's next turn: at most `burst`
// at once after a quiet spell, then one per `spacing_ms`. A turn more than `max_wait_ms` away
// is refused (and taken by no one). Used for failed credentials (one per
// kAuthFailureSpacingMs, no burst: a guesser gains nothing by opening connections; right
// credentials never wait, since a guesser learns from the answer whether a guess was right
// anyway, and the token's length, not the rate, keeps it secret) and for TLS handshakes
// (server.tls_handshake_rate: a replayed ClientHello costs the server a millisecond of CPU).
class Turns {
 public:
  Turns(Clock& clock, std::int64_t spacing_ms, std::int64_t burst, std::int64_t max_wait_ms)
      : clock_(clock), spacing_ms_(spacing_ms), burst_(burst), max_wait_ms_(max_wait_ms) {}

  // How long `host`'s next attempt waits for its turn, which it takes; nullopt when that is
  // more than max_wait_ms away.
  std::optional<std::int64_t> Take(const std::string& host);

 private:
  Clock& clock_;
  const std::int64_t spacing_ms_, burst_, max_wait_ms_;
  std::mutex mu_;
  std::unordered_map<std::string, std::int64_t> next_;  // a host's next turn; guarded by mu_
};

// The connections that have not presented the token: each host's in the order they came, and
// all of them in that order. An id is the server's handle for a connection.
class UnauthenticatedConnections {
 public:
  using Id = const void*;
  void Add(Id id, const std::string& host);
  // Removes `id` (it authenticated, closed, or was chosen to close); false when it is not
  // there.
  bool Remove(Id id);
  std::size_t Count(const std::string& host) const;
  std::size_t size() const { return index_.size(); }
  // The oldest unauthenticated connection of `host` (nullptr: of all hosts) that `spare(id)` does
  // not keep (a client whose bytes wait to be read is about to authenticate), looking past at most
  // kUnauthenticatedLook spared ones; nullopt when there is none.
  template <typename Spare>
  std::optional<Id> Oldest(const std::string* host, Spare spare) const {
    const std::list<Id>& order = host == nullptr ? all_ : ByHost(*host);
    int spared = 0;
    for (Id id : order) {
      if (!spare(id)) return id;
      if (++spared > kUnauthenticatedLook) break;
    }
    return std::nullopt;
  }

 private:
  struct Place {
    std::list<Id>::iterator in_all;
    std::list<Id>::iterator in_host;
    std::string host;
  };
  const std::list<Id>& ByHost(const std::string& host) const;
  std::list<Id> all_;
  std::unordered_map<std::string, std::list<Id>> by_host_;
  std::unordered_map<Id, Place> index_;
};

// What the rules read of a connection (0: the event has not happened).
struct ConnectionLoad {
  std::int64_t partial_since_ms = 0;  // when its unfinished request began
  std::int64_t write_since_ms = 0;    // when a write the socket did not take at once began
  bool held = false;                  // its replies wait for an auth turn
  bool pending = false;               // a request of its runs on a lane's pool
  bool handshaking = false;           // its TLS handshake is under way
  std::size_t buffered = 0;           // its buffers' bytes
  std::int64_t active_ms = 0;         // its last progress (a read, a reply written)
  bool presented_token = false;       // it presented server.auth_token
  bool requested = false;             // it has made a request
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
// them: a TLS handshake under way (at once: thousands of ClientHellos sent in less than
// kStallAgeMs would otherwise take the budget many times over), a request not whole for
// kStallAgeMs, a reply waiting that long on a client that does not read it (`stalled`, asked
// only then: it takes a DrainWatch mark), or replies held for an auth turn (up to
// kMaxAuthWaitMs of a host's guessing). 0 otherwise: a client reading a large reply at speed is
// never chosen, however large the reply.
template <typename Stalled>
std::size_t MemoryWeight(const ConnectionLoad& c, std::int64_t now_ms, Stalled stalled) {
  const bool input =
      c.partial_since_ms != 0 && (c.handshaking || now_ms - c.partial_since_ms >= kStallAgeMs);
  const bool output =
      c.write_since_ms != 0 && now_ms - c.write_since_ms >= kStallAgeMs && stalled();
  return input || output || c.held ? c.buffered : 0;
}

// Past the memory budget, whom to close first of those that weigh (MemoryWeight): the most
// first; of equals (handshakes), the one whose address holds the most unauthenticated
// connections (`crowd`: a flood's, not a good client's), then the oldest (`since`).
struct MemoryCandidate {
  std::size_t weight;
  std::size_t crowd;
  std::int64_t since;
};
inline bool ClosesFirst(const MemoryCandidate& a, const MemoryCandidate& b) {
  return std::tie(b.weight, b.crowd, a.since) < std::tie(a.weight, a.crowd, b.since);
}

// At max_connections, after the unauthenticated ones (UnauthenticatedConnections::Oldest): how
// much a connection's slot is owed to a new client, the largest giving it up; 0: it keeps it.
// Never one that presented the token. First the connections of the address that holds the most
// (`crowded`: with no token set every connection is a client like the new one, and one client
// must not take the others' pooled connections), of which also one at rest for kCrowdedRestMs,
// or at once when it never made a request;
// within each, a slow sender (a request arriving for at least kSlowSenderAgeMs) before any idle
// one, the longest arriving first; then one idle for at least kIdleSpareMs, the longest first.
std::int64_t RoomWeight(const ConnectionLoad& c, std::int64_t now_ms, bool crowded);

// True when an unfinished request that began at `partial_since_ms` has had `timeout_ms`.
bool RequestOverdue(std::int64_t partial_since_ms, std::int64_t now_ms, std::int64_t timeout_ms);

}  // namespace sekka::server

#endif  // SEKKA_SERVER_ADMISSION_H_
