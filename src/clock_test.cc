#include "sekka/clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace sekka {
namespace {

TEST(ClockTest, MonotonicMillisDoesNotGoBackwards) {
  Clock& clock = SystemClock();
  std::int64_t last = clock.MonotonicMillis();
  for (int i = 0; i < 1000; ++i) {
    const std::int64_t now = clock.MonotonicMillis();
    ASSERT_GE(now, last);
    last = now;
  }
}

#if defined(__x86_64__)
// How far the fake counter is set back from the real one.
std::atomic<std::uint64_t> g_counter_back{0};
std::uint64_t BackwardsCounter() { return __rdtsc() - g_counter_back.load(); }

// Defect: the fast path only checked an upper bound, so a counter that jumped backwards (resume
// from suspend, a VM restore) kept answering the cached millisecond until it caught up again.
TEST(ClockTest, ACounterThatGoesBackwardsDoesNotFreezeTheClock) {
  std::unique_ptr<Clock> clock = clock_internal::NewTscClock(&BackwardsCounter);
  ASSERT_NE(clock, nullptr);
  // Let the clock measure the counter's rate, so that the fast path is on.
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  for (int i = 0; i < 1000; ++i) clock->NowMillis();
  const std::int64_t before = clock->NowMillis();
  g_counter_back.store(std::uint64_t{1} << 40);  // minutes of counter ticks at any rate
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::int64_t after = clock->NowMillis();
  EXPECT_GE(after - before, 15) << "the clock froze when the counter went backwards";
  // And it keeps following the system clock.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GE(clock->NowMillis() - after, 15);
  const std::int64_t plain = PlainSystemClock().NowMillis();
  EXPECT_LE(std::abs(clock->NowMillis() - plain), 2);
  g_counter_back.store(0);
}
#endif

}  // namespace
}  // namespace sekka
