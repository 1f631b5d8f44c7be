// Segment ids from the in-process buffer (SegmentSequence), one and two threads, against a
// plain std::atomic fetch_add (the floor of any shared counter) in the same run.
// Target (issue: segments): >= 150 M ids/s on one thread (CosId reports 127 M/s, Leaf ~25 M/s).
// SEKKA_BENCH_STORE=URI (a segment.store: postgres://, mysql://, redis://, ...) takes the ranges
// from that store, with the tag `bench` made there if missing; at exit the benchmark prints how
// many ids each store round trip gave (bench/run_stores.sh).

#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "backends/segment_store_uri.h"
#include "sekka/segment.h"

namespace sekka {
namespace {

std::unique_ptr<SegmentStore> OpenStore() {
  const char* uri = std::getenv("SEKKA_BENCH_STORE");
  if (uri == nullptr) {
    auto s = NewMemorySegmentStore();
    (void)s->CreateTag({"bench", 1, 10'000'000});
    return s;
  }
  Result<std::unique_ptr<SegmentStore>> s = OpenSegmentStore(uri, "/tmp");
  if (!s.ok()) {
    std::fprintf(stderr, "segment_bench: %s\n", s.error().message.c_str());
    std::exit(2);
  }
  (void)(*s)->CreateTag({"bench", 1, 1000});
  return std::move(s).value();
}

SegmentAllocator& Allocator() {
  static std::unique_ptr<SegmentStore> store = OpenStore();
  static SegmentAllocator allocator(*store, SystemClock());
  return allocator;
}

SegmentSequence& Sequence() {
  static SegmentSequence* seq = *Allocator().Sequence("bench");
  return *seq;
}

// Ids per store round trip, printed once the benchmarks ran.
void Report() {
  if (std::getenv("SEKKA_BENCH_STORE") == nullptr) return;
  const SegmentStats s = Sequence().stats();
  std::printf("store round trips: %llu fetches for %llu ids (%.0f ids each), %.2f ms each\n",
              static_cast<unsigned long long>(s.fetches), static_cast<unsigned long long>(s.issued),
              s.fetches ? static_cast<double>(s.issued) / static_cast<double>(s.fetches) : 0.0,
              s.fetches ? static_cast<double>(s.fetch_micros_total) / 1000.0 /
                              static_cast<double>(s.fetches)
                        : 0.0);
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

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  sekka::Report();
  return 0;
}
