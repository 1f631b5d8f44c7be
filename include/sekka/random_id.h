// include/sekka/random_id.h
//
// Ids that need no coordination at all: the time and random bits of a random layout
// (Layout kind random, e.g. the "random" preset: 41 bits of ms and 22 random bits). Two
// generators never talk, so two ids may clash; the odds are stated by RandomClashOdds
// (layout.h) and `sekka layout ... --rate N/s`, and the store that keeps the ids enforces
// uniqueness (a primary key) with the insert retried on a clash (docs/operations.md).
// Within one batch the ids are distinct (a clash inside a batch is drawn again).
//
//   Result<std::unique_ptr<RandomIdGenerator>> g =
//       RandomIdGenerator::Create(*Layout::Preset("random"), SystemClock());
//   Result<Id> id = (*g)->Next();
//
// The random bits come from OpenSSL's RAND_bytes (a CSPRNG) through a RandomPool, drawn 4 KiB
// at a time. The time is the clock's, as it reads: a clock stepped back gives ids of an earlier
// time (their odds of a clash are those of that earlier tick's traffic plus the new), never a
// pile of ids held at one tick.
//
// Thread-safety: a generator may be used from any thread (a mutex); a RandomPool is not
// thread-safe (its owner locks).

#ifndef SEKKA_RANDOM_ID_H_
#define SEKKA_RANDOM_ID_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>

#include "sekka/clock.h"
#include "sekka/layout.h"
#include "sekka/status.h"

namespace sekka {

// Cryptographically secure random bytes from OpenSSL's RAND_bytes, drawn 4 KiB at a time so
// that the cost per id stays low.
class RandomPool {
 public:
  // Errors: kInternal when RAND_bytes fails.
  Status Fill(std::uint8_t* out, std::size_t n);
  // 64 random bits. Errors: as Fill.
  Result<std::uint64_t> Next64();

 private:
  std::array<std::uint8_t, 4096> pool_;
  std::size_t used_ = 4096;  // bytes of pool_ handed out
};

class RandomIdGenerator {
 public:
  // Errors: kInvalidArgument if `layout` is not a random layout or its epoch is in the future
  // on `clock`. `clock` must outlive the generator.
  static Result<std::unique_ptr<RandomIdGenerator>> Create(const Layout& layout, Clock& clock);

  // Errors: kExhausted past the layout's end (naming the date), kInvalidArgument when the clock
  // reads before the epoch, kInternal when RAND_bytes fails.
  Result<Id> Next();
  // Fills `out` with distinct ids of one tick (in no order). Errors: as Next().
  Status NextIds(std::span<Id> out);

  const Layout& layout() const { return layout_; }

 private:
  RandomIdGenerator(const Layout& layout, Clock& clock) : layout_(layout), clock_(clock) {}
  // The tick now, checked against the layout. REQUIRES: nothing.
  Result<std::int64_t> Tick() const;

  const Layout layout_;
  Clock& clock_;
  std::mutex mu_;
  RandomPool pool_;  // guarded by mu_
};

}  // namespace sekka

#endif  // SEKKA_RANDOM_ID_H_
