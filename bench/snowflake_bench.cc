// Generation speed, with references measured in the same run:
//   - one bare clock_gettime(CLOCK_REALTIME), the floor of any time-based generator;
//   - a plain mutex-based snowflake (Twitter's algorithm behind a std::mutex), the usual design.
// "capped" is the sekka layout (4,096 ids per ms per worker: a ceiling of 4,096,000 ids/s);
// "uncapped" has 22 sequence bits (4,194,304 ids per ms), so no wait ever limits it.
// Run: build-bench/bench/snowflake_bench --benchmark_repetitions=3 (see docs/benchmarks.md).

#include <benchmark/benchmark.h>
#include <time.h>

#include <map>
#include <mutex>
#include <vector>

#include "sekka/snowflake.h"

namespace sekka {
namespace {

Layout Uncapped() {
  LayoutOptions o;
  o.name = "uncapped";
  o.time_bits = 41;
  o.worker_bits = 0;
  o.sequence_bits = 22;
  return *Layout::Create(o);
}

Snowflake& Generator(bool capped, Clock& clock = SystemClock()) {
  auto make = [&](const Layout& layout) {
    SnowflakeOptions o;
    o.layout = layout;
    return std::move(Snowflake::Create(o, clock)).value();
  };
  if (&clock != &SystemClock()) {
    static auto plain = make(Uncapped());
    return *plain;
  }
  static auto capped_gen = make(Layout::Default());
  static auto uncapped_gen = make(Uncapped());
  return capped ? *capped_gen : *uncapped_gen;
}

void BM_ClockGettimeRealtime(benchmark::State& state) {
  for (auto _ : state) {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    benchmark::DoNotOptimize(ts);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ClockGettimeRealtime)->Threads(1)->Threads(2)->UseRealTime();

void NextIdLoop(benchmark::State& state, Snowflake& s) {
  for (auto _ : state) {
    Result<Id> id = s.NextId();
    benchmark::DoNotOptimize(id);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_NextId_Capped(benchmark::State& state) { NextIdLoop(state, Generator(true)); }
BENCHMARK(BM_NextId_Capped)->Threads(1)->Threads(2)->UseRealTime();

void BM_NextId_Uncapped(benchmark::State& state) { NextIdLoop(state, Generator(false)); }
BENCHMARK(BM_NextId_Uncapped)->Threads(1)->Threads(2)->UseRealTime();

// The same generator on the clock without the TSC fast path: one clock_gettime() per id.
void BM_NextId_Uncapped_PlainClock(benchmark::State& state) {
  NextIdLoop(state, Generator(false, PlainSystemClock()));
}
BENCHMARK(BM_NextId_Uncapped_PlainClock)->Threads(1)->Threads(2)->UseRealTime();

// The same generator with thread_block = 1: one compare-and-swap per id, one global order.
void BM_NextId_Uncapped_GlobalOrder(benchmark::State& state) {
  static auto global = [] {
    SnowflakeOptions o;
    o.layout = Uncapped();
    o.thread_block = 1;
    return std::move(Snowflake::Create(o, SystemClock())).value();
  }();
  NextIdLoop(state, *global);
}
BENCHMARK(BM_NextId_Uncapped_GlobalOrder)->Threads(1)->Threads(2)->UseRealTime();

// Uncapped NextId() by thread_block size (the argument), to choose the default.
void BM_NextId_Uncapped_Block(benchmark::State& state) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<Snowflake>> generators;
  Snowflake* s;
  {
    std::lock_guard lock(mu);
    auto& g = generators[static_cast<int>(state.range(0))];
    if (!g) {
      SnowflakeOptions o;
      o.layout = Uncapped();
      o.thread_block = static_cast<int>(state.range(0));
      g = std::move(Snowflake::Create(o, SystemClock())).value();
    }
    s = g.get();
  }
  NextIdLoop(state, *s);
}
BENCHMARK(BM_NextId_Uncapped_Block)
    ->ArgName("block")
    ->Arg(4)
    ->Arg(16)
    ->Arg(64)
    ->Arg(256)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();

void NextIdsLoop(benchmark::State& state, Snowflake& s) {
  std::vector<Id> ids(1000);
  for (auto _ : state) {
    Status st = s.NextIds(std::span<Id>(ids));
    benchmark::DoNotOptimize(st);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetItemsProcessed(state.iterations() * 1000);
}

void BM_NextIds1000_Capped(benchmark::State& state) { NextIdsLoop(state, Generator(true)); }
BENCHMARK(BM_NextIds1000_Capped)->Threads(1)->Threads(2)->UseRealTime();

void BM_NextIds1000_Uncapped(benchmark::State& state) { NextIdsLoop(state, Generator(false)); }
BENCHMARK(BM_NextIds1000_Uncapped)->Threads(1)->Threads(2)->UseRealTime();

// Reference: Twitter's algorithm under one mutex, uncapped layout (22 sequence bits).
class MutexSnowflake {
 public:
  std::int64_t NextId() {
    std::lock_guard lock(mu_);
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    std::int64_t now = ts.tv_sec * 1000 + ts.tv_nsec / 1'000'000 - kSekkaEpochMillis;
    if (now < last_) now = last_;  // the reference ignores backward steps
    if (now == last_) {
      sequence_ = (sequence_ + 1) & kMask;
      if (sequence_ == 0) {
        while (now <= last_) {
          clock_gettime(CLOCK_REALTIME, &ts);
          now = ts.tv_sec * 1000 + ts.tv_nsec / 1'000'000 - kSekkaEpochMillis;
        }
      }
    } else {
      sequence_ = 0;
    }
    last_ = now;
    return (now << 22) | sequence_;
  }

 private:
  static constexpr std::int64_t kMask = (1 << 22) - 1;
  std::mutex mu_;
  std::int64_t last_ = -1;
  std::int64_t sequence_ = 0;
};

void BM_MutexSnowflake_Uncapped(benchmark::State& state) {
  static MutexSnowflake s;
  for (auto _ : state) benchmark::DoNotOptimize(s.NextId());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MutexSnowflake_Uncapped)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace sekka

BENCHMARK_MAIN();
