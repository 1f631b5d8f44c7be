// The system clock. See include/sekka/clock.h and docs/design.md ("The clock").
//
// The fast path: after each full clock_gettime() read, the thread remembers the millisecond it
// read and the time-stamp-counter (TSC) value before which that millisecond certainly has not
// ended yet (computed conservatively from the nanoseconds left in it and the measured TSC rate).
// Reads before that TSC value return the remembered millisecond without calling the kernel's
// vDSO. The fast path is used only where the TSC is invariant (CPUID) and is the kernel's
// clocksource, and only after the TSC rate has been measured against CLOCK_MONOTONIC.

#include "sekka/clock.h"

#include <time.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <x86intrin.h>
#define SEKKA_HAVE_TSC 1
#else
#define SEKKA_HAVE_TSC 0
#endif

namespace sekka {
namespace {

constexpr std::int64_t kNanosPerMilli = 1'000'000;

std::int64_t ReadNanos(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Sleeps or spins until CLOCK_REALTIME reaches `wall_millis`, or until the time that was
// missing at the call (plus 1 ms) has passed on CLOCK_MONOTONIC.
void WaitForWallMillis(std::int64_t wall_millis) {
  const std::int64_t target = wall_millis * kNanosPerMilli;
  std::int64_t now = ReadNanos(CLOCK_REALTIME);
  if (now >= target) return;
  const std::int64_t deadline = ReadNanos(CLOCK_MONOTONIC) + (target - now) + kNanosPerMilli;
  while (now < target && ReadNanos(CLOCK_MONOTONIC) < deadline) {
    const std::int64_t left = target - now;
    if (left > 200'000) {
      // Wake up early: a sleep overshoots by the timer slack (~50 us), and the rest is spun.
      const std::int64_t sleep = left - 120'000;
      timespec ts{static_cast<time_t>(sleep / 1'000'000'000),
                  static_cast<long>(sleep % 1'000'000'000)};
      nanosleep(&ts, nullptr);
    } else {
#if SEKKA_HAVE_TSC
      _mm_pause();
#endif
    }
    now = ReadNanos(CLOCK_REALTIME);
  }
}

class PlainClock final : public Clock {
 public:
  std::int64_t NowMillis() override { return ReadNanos(CLOCK_REALTIME) / kNanosPerMilli; }
  void SleepUntilMillis(std::int64_t wall_millis) override { WaitForWallMillis(wall_millis); }
  std::int64_t MonotonicMillis() override { return ReadNanos(CLOCK_MONOTONIC) / kNanosPerMilli; }
};

#if SEKKA_HAVE_TSC

bool TscIsUsable() {
  if (const char* env = std::getenv("SEKKA_CLOCK"); env != nullptr && std::string(env) == "plain") {
    return false;
  }
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0x80000000, &eax, &ebx, &ecx, &edx) == 0 || eax < 0x80000007) return false;
  __get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx);
  const bool invariant = (edx & (1u << 8)) != 0;
  std::ifstream source("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string name;
  source >> name;
  return invariant && name == "tsc";
}

}  // namespace

namespace clock_internal {

// The millisecond a thread last read, and the TSC range [read_tsc, valid_until_tsc) in which it
// is still current.
struct TscCache {
  const void* owner = nullptr;  // the clock that filled it
  std::int64_t millis = 0;
  std::uint64_t read_tsc = 0;
  std::uint64_t valid_until_tsc = 0;  // 0: no fast path
};

// The TSC-backed clock. `counter` reads the time-stamp counter (a parameter so that a test can
// make it jump backwards).
class TscClock final : public Clock {
 public:
  explicit TscClock(
      std::uint64_t (*counter)() = [] { return static_cast<std::uint64_t>(__rdtsc()); },
      bool usable = TscIsUsable())
      : counter_(counter), usable_(usable) {
    base_tsc_ = counter_();
    base_mono_ = ReadNanos(CLOCK_MONOTONIC);
  }

  std::int64_t NowMillis() override {
    TscCache& cache = cache_;
    const std::uint64_t tsc = counter_();
    // Below read_tsc the counter went backwards: the cached millisecond proves nothing.
    if (tsc < cache.valid_until_tsc && tsc >= cache.read_tsc && cache.owner == this) {
      return cache.millis;
    }
    return ReadAndRemember(tsc);
  }

  std::int64_t NowMillisUncached() override { return ReadAndRemember(counter_()); }

  void SleepUntilMillis(std::int64_t wall_millis) override { WaitForWallMillis(wall_millis); }
  std::int64_t MonotonicMillis() override { return ReadNanos(CLOCK_MONOTONIC) / kNanosPerMilli; }

  // False once the counter was seen going backwards.
  bool fast_path_enabled() const { return !disabled_.load(std::memory_order_relaxed); }

 private:
  std::int64_t ReadAndRemember(std::uint64_t tsc) {
    TscCache& cache = cache_;
    if (cache.owner == this && tsc < cache.read_tsc) {
      disabled_.store(true, std::memory_order_relaxed);
    }
    cache.owner = this;
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const std::int64_t millis =
        static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / kNanosPerMilli;
    cache.millis = millis;
    cache.read_tsc = tsc;
    cache.valid_until_tsc = 0;
    if (disabled_.load(std::memory_order_relaxed)) return millis;
    const double per_ns = TscPerNanosecond(tsc);
    if (per_ns > 0) {
      // Nanoseconds certainly left in this millisecond: less 0.1% for rate error and NTP slew
      // (at most 0.05%), less 2 us for TSC skew between cores.
      const double left = static_cast<double>(kNanosPerMilli - ts.tv_nsec % kNanosPerMilli);
      const double safe = left * 0.999 - 2000.0;
      if (safe > 0) cache.valid_until_tsc = tsc + static_cast<std::uint64_t>(safe * per_ns);
    }
    return millis;
  }

  // The TSC rate, measured over at least 50 ms and re-measured about every second so that a
  // change of rate (say, after a VM migration) is picked up. 0 while unknown or unusable.
  double TscPerNanosecond(std::uint64_t tsc) {
    if (!usable_) return 0;
    const double rate = rate_.load(std::memory_order_relaxed);
    const std::uint64_t base = base_tsc_.load(std::memory_order_relaxed);
    if (tsc < base) {  // the counter went backwards since the last calibration
      disabled_.store(true, std::memory_order_relaxed);
      return 0;
    }
    if (rate > 0 && tsc - base < recalibrate_after_.load(std::memory_order_relaxed)) {
      return rate;
    }
    std::unique_lock lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) return rate;
    const std::uint64_t now_tsc = counter_();
    const std::int64_t now_mono = ReadNanos(CLOCK_MONOTONIC);
    const std::int64_t elapsed = now_mono - base_mono_;
    if (elapsed < 50 * kNanosPerMilli) return rate;
    const double measured =
        static_cast<double>(now_tsc - base_tsc_.load(std::memory_order_relaxed)) /
        static_cast<double>(elapsed);
    // A TSC that does not advance at a plausible rate (0.1 to 10 GHz) is not trusted.
    const double next = (measured > 0.1 && measured < 10.0) ? measured : 0.0;
    rate_.store(next, std::memory_order_relaxed);
    recalibrate_after_.store(static_cast<std::uint64_t>(next * 1e9),  // about 1 s of TSC
                             std::memory_order_relaxed);
    base_tsc_.store(now_tsc, std::memory_order_relaxed);
    base_mono_ = now_mono;
    return next;
  }

  static inline thread_local TscCache cache_{};

  std::uint64_t (*const counter_)();
  const bool usable_;
  std::atomic<bool> disabled_{false};
  std::mutex mu_;
  std::atomic<double> rate_{0.0};
  std::atomic<std::uint64_t> base_tsc_{0};
  std::int64_t base_mono_ = 0;  // guarded by mu_
  // Written under mu_; read without it (a stale value only moves a recalibration).
  std::atomic<std::uint64_t> recalibrate_after_{0};
};

std::unique_ptr<Clock> NewTscClock(std::uint64_t (*counter)()) {
  return std::make_unique<TscClock>(counter, /*usable=*/true);
}

}  // namespace clock_internal
#endif  // SEKKA_HAVE_TSC

#if !SEKKA_HAVE_TSC
}  // namespace
#endif

Clock& SystemClock() {
#if SEKKA_HAVE_TSC
  static clock_internal::TscClock* clock = new clock_internal::TscClock();
#else
  static PlainClock* clock = new PlainClock();
#endif
  return *clock;
}

Clock& PlainSystemClock() {
  static PlainClock* clock = new PlainClock();
  return *clock;
}

}  // namespace sekka
