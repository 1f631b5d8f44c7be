// include/sekka/clock.h
//
// Clock is where sekka reads the wall clock and waits. Generators take a Clock& so that tests
// can substitute a FakeClock (testing/fake_clock.h) whose sleeps advance time instantly.
//
// Thread-safety: implementations must allow concurrent calls from any number of threads.

#ifndef SEKKA_CLOCK_H_
#define SEKKA_CLOCK_H_

#include <cstdint>
#include <memory>

namespace sekka {

class Clock {
 public:
  virtual ~Clock() = default;

  // Wall-clock time in milliseconds since 1970-01-01T00:00:00Z. May step backwards (NTP,
  // an operator, a VM restore); callers must cope.
  virtual std::int64_t NowMillis() = 0;

  // NowMillis() read afresh: never an answer remembered from an earlier read. A clock that
  // answers NowMillis() from a cache (SystemClock() does, within a millisecond) may return a
  // value up to that cache's life behind a clock that just stepped forward; a caller that is
  // about to act on a reading that looks like a backward step confirms it with this one.
  virtual std::int64_t NowMillisUncached() { return NowMillis(); }

  // Blocks until NowMillis() >= `wall_millis`, or until about as much time as was missing at
  // the call has passed on a monotonic clock (so a backward step during the wait cannot block
  // for long). Callers re-read NowMillisUncached() afterwards (the wait reads the clock afresh,
  // so a cached NowMillis() may still lag what it saw). Returns at once if the time has come.
  virtual void SleepUntilMillis(std::int64_t wall_millis) = 0;

  // Milliseconds on a clock that never steps (CLOCK_MONOTONIC; its zero is arbitrary). Lease
  // timing (TTLs, renewal intervals) reads this one, so that a wall-clock step cannot stretch
  // or shrink a lease. SleepUntilMillis() advances it as much as it advances the wall clock.
  virtual std::int64_t MonotonicMillis() = 0;
};

// The process-wide clock backed by CLOCK_REALTIME. Where the CPU has an invariant time-stamp
// counter and the kernel uses it as its clocksource, repeated reads within one millisecond are
// answered from the counter instead of a full clock_gettime(): a read costs ~10 ns instead of
// ~25 ns. Every millisecond boundary is still read from clock_gettime(), so a clock step is seen
// at most 1 ms late. A counter that goes backwards (resume from suspend, a VM restore, a
// counter the kernel later marks unstable) switches the fast path off for good: every read is
// then a clock_gettime(). See docs/design.md ("The clock").
Clock& SystemClock();

// The same clock without the time-stamp-counter fast path: every NowMillis() is one
// clock_gettime(CLOCK_REALTIME). For comparisons and for environments that distrust the TSC.
Clock& PlainSystemClock();

namespace clock_internal {
// For tests: the time-stamp-counter clock reading `counter` instead of the CPU's counter, with
// the fast path allowed whatever the machine. Only on x86-64.
std::unique_ptr<Clock> NewTscClock(std::uint64_t (*counter)());
}  // namespace clock_internal

}  // namespace sekka

#endif  // SEKKA_CLOCK_H_
