// testing/fake_clock.h
//
// FakeClock: a Clock for tests. Time stands still until a test moves it; SleepUntilMillis()
// advances time instantly to the target and counts the sleep, so tests never really sleep.
// MonotonicMillis() moves with AdvanceMillis() and sleeps, never with SetMillis().
// A test can also queue readings (Twitter IdWorkerSpec style): each NextMillis() value is
// returned by one NowMillis() call before the clock falls back to its current time.
//
// Thread-safety: all methods may be called from any thread.

#ifndef SEKKA_TESTING_FAKE_CLOCK_H_
#define SEKKA_TESTING_FAKE_CLOCK_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <mutex>

#include "sekka/clock.h"

namespace sekka {

class FakeClock : public Clock {
 public:
  explicit FakeClock(std::int64_t now_millis) : now_(now_millis) {}

  std::int64_t NowMillis() override {
    std::lock_guard lock(mu_);
    if (!queued_.empty()) {
      now_ = queued_.front();
      queued_.pop_front();
    }
    ++reads_;
    return now_;
  }

  void SleepUntilMillis(std::int64_t wall_millis) override {
    std::lock_guard lock(mu_);
    ++sleeps_;
    if (wall_millis > now_) {
      slept_millis_ += wall_millis - now_;
      mono_ += wall_millis - now_;
      now_ = wall_millis;
    }
    queued_.clear();
  }

  std::int64_t MonotonicMillis() override {
    std::lock_guard lock(mu_);
    return mono_;
  }

  // Steps the wall clock (the monotonic clock does not move).
  void SetMillis(std::int64_t millis) {
    std::lock_guard lock(mu_);
    now_ = millis;
  }
  // Time passes: both clocks move forward.
  void AdvanceMillis(std::int64_t millis) {
    std::lock_guard lock(mu_);
    now_ += millis;
    mono_ += millis;
  }
  // The next NowMillis() calls return these values, in order.
  void QueueMillis(std::initializer_list<std::int64_t> readings) {
    std::lock_guard lock(mu_);
    queued_.insert(queued_.end(), readings.begin(), readings.end());
  }

  int sleeps() const {
    std::lock_guard lock(mu_);
    return sleeps_;
  }
  std::int64_t slept_millis() const {
    std::lock_guard lock(mu_);
    return slept_millis_;
  }
  std::int64_t reads() const {
    std::lock_guard lock(mu_);
    return reads_;
  }

 private:
  mutable std::mutex mu_;
  std::int64_t now_;                 // guarded by mu_
  std::int64_t mono_ = 1'000'000;    // guarded by mu_
  std::deque<std::int64_t> queued_;  // guarded by mu_
  int sleeps_ = 0;                   // guarded by mu_
  std::int64_t slept_millis_ = 0;    // guarded by mu_
  std::int64_t reads_ = 0;           // guarded by mu_
};

}  // namespace sekka

#endif  // SEKKA_TESTING_FAKE_CLOCK_H_
