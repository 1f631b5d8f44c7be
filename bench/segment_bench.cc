// Segment ids from the in-process buffer (SegmentSequence), one and two threads, against a
// plain std::atomic fetch_add (the floor of any shared counter) in the same run.
// Target (issue: segments): >= 150 M ids/s on one thread (CosId reports 127 M/s, Leaf ~25 M/s).

#include <benchmark/benchmark.h>

#include <atomic>

#include "sekka/segment.h"

namespace sekka {
namespace {

SegmentSequence& Sequence() {
  static auto store = [] {
    auto s = NewMemorySegmentStore();
    (void)s->CreateTag({"bench", 1, 10'000'000});
    return s;
  }();
  static SegmentAllocator allocator(*store, SystemClock());
  static SegmentSequence* seq = *allocator.Sequence("bench");
  return *seq;
}

void BM_SegmentNextId(benchmark::State& state) {
  SegmentSequence& s = Sequence();
  for (auto _ : state) {
    Result<std::int64_t> id = s.NextId();
    benchmark::DoNotOptimize(id);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SegmentNextId)->Threads(1)->Threads(2)->UseRealTime();

void BM_SegmentNextIds1000(benchmark::State& state) {
  SegmentSequence& s = Sequence();
  std::vector<std::int64_t> ids(1000);
  for (auto _ : state) {
    Status st = s.NextIds(std::span(ids));
    benchmark::DoNotOptimize(st);
  }
  state.SetItemsProcessed(state.iterations() * 1000);
}
BENCHMARK(BM_SegmentNextIds1000)->Threads(1)->UseRealTime();

void BM_AtomicFetchAdd(benchmark::State& state) {
  static std::atomic<std::int64_t> counter{0};
  for (auto _ : state) benchmark::DoNotOptimize(counter.fetch_add(1, std::memory_order_relaxed));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AtomicFetchAdd)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace sekka

BENCHMARK_MAIN();
