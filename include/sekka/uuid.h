// include/sekka/uuid.h
//
// 128-bit time-ordered ids that need no worker id: UUIDv7 (RFC 9562 section 5.7) and ULID
// (the ulid/spec README). Both start with 48 bits of Unix milliseconds; the rest is random,
// from OpenSSL's RAND_bytes drawn 4 KiB at a time.
//   UUIDv7  ver 7, then rand_a (12 bits) as a counter seeded at random at each new millisecond
//           with its top bit clear (RFC 9562 section 6.2, method 1), var 0b10, 62 random bits
//   ULID    80 random bits at each new millisecond, incremented by one within it (the spec's
//           monotonic generation)
// One generator's ids strictly increase, across threads and in batches: when a millisecond's
// counter runs out, or the clock steps back, the generator goes on from the last time it used
// plus one (RFC 9562 section 6.2 lets the timestamp run ahead so), and catches up with the
// clock when it passes.
//
//   TimeOrderedGenerator g(SystemClock(), TimeOrderedKind::kUuidV7);  // SystemClock(): a Clock&
//   Result<Uuid> u = g.Next();        // FormatUuid(*u): "0190c8e4-7f3a-7c01-9a3e-5b1d2f4c6e8a"
//
// Thread-safety: a generator may be used from any thread (a mutex); the functions are pure.

#ifndef SEKKA_UUID_H_
#define SEKKA_UUID_H_

#include <array>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "sekka/clock.h"
#include "sekka/random_id.h"
#include "sekka/status.h"

namespace sekka {

// 128 bits, most significant first: compares as the ids order.
struct Uuid {
  std::uint64_t hi = 0;
  std::uint64_t lo = 0;
  auto operator<=>(const Uuid&) const = default;
};

enum class TimeOrderedKind { kUuidV7, kUlid };

// "0190c8e4-7f3a-7c01-9a3e-5b1d2f4c6e8a" (lowercase) and its parser (either case). Errors:
// kInvalidArgument naming the form.
std::string FormatUuid(const Uuid& u);
Result<Uuid> ParseUuid(std::string_view text);
// 26 Crockford base32 characters (uppercase), and its parser (either case, I/L as 1, O as 0).
// Errors: kInvalidArgument naming the form (a first character above 7 overflows 128 bits).
std::string FormatUlid(const Uuid& u);
Result<Uuid> ParseUlid(std::string_view text);
// The Unix milliseconds in the first 48 bits.
inline std::int64_t UuidMillis(const Uuid& u) { return static_cast<std::int64_t>(u.hi >> 16); }
// The version and variant of a UUID's text (for `sekka decode`): version = bits 48-51.
inline int UuidVersion(const Uuid& u) { return static_cast<int>((u.hi >> 12) & 0xf); }

class TimeOrderedGenerator {
 public:
  // `clock` must outlive the generator.
  TimeOrderedGenerator(Clock& clock, TimeOrderedKind kind) : clock_(clock), kind_(kind) {}

  // Errors: kExhausted past the year 10889 (48 bits of ms), kInternal (RAND_bytes failed).
  Result<Uuid> Next();
  // Fills `out` with increasing ids. Errors: as Next.
  Status NextBatch(std::span<Uuid> out);
  TimeOrderedKind kind() const { return kind_; }

 private:
  Status NextLocked(Uuid& out);  // REQUIRES: mu_ held

  Clock& clock_;
  const TimeOrderedKind kind_;
  std::mutex mu_;
  std::int64_t last_ms_ = -1;  // guarded by mu_
  std::uint64_t counter_ = 0;  // guarded by mu_: rand_a (UUIDv7)
  std::uint64_t rand_hi_ = 0;  // guarded by mu_: the ULID's 80 random bits,
  std::uint64_t rand_lo_ = 0;  //   16 above and 64 below
  RandomPool pool_;            // guarded by mu_
};

}  // namespace sekka

#endif  // SEKKA_UUID_H_
