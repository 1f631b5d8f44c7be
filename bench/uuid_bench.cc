// UUIDv7 and ULID generation in-process (include/sekka/uuid.h), single ids and batches of
// 1,000, one thread, compared in bench/run_uuid.sh with the npm packages `uuid` (v7) and
// `ulid` (monotonicFactory) on the same machine in the same run.

#include <benchmark/benchmark.h>

#include <vector>

#include "sekka/uuid.h"

namespace {

void BM_Next(benchmark::State& state, sekka::TimeOrderedKind kind) {
  sekka::TimeOrderedGenerator g(sekka::SystemClock(), kind);
  for (auto _ : state) benchmark::DoNotOptimize(g.Next());
  state.SetItemsProcessed(state.iterations());
}

void BM_Batch(benchmark::State& state, sekka::TimeOrderedKind kind) {
  sekka::TimeOrderedGenerator g(sekka::SystemClock(), kind);
  std::vector<sekka::Uuid> ids(1000);
  for (auto _ : state) benchmark::DoNotOptimize(g.NextBatch(ids));
  state.SetItemsProcessed(state.iterations() * 1000);
}

// With the text form, as a client gets it.
void BM_NextText(benchmark::State& state, sekka::TimeOrderedKind kind) {
  sekka::TimeOrderedGenerator g(sekka::SystemClock(), kind);
  for (auto _ : state) {
    const sekka::Uuid u = *g.Next();
    benchmark::DoNotOptimize(kind == sekka::TimeOrderedKind::kUuidV7 ? sekka::FormatUuid(u)
                                                                     : sekka::FormatUlid(u));
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK_CAPTURE(BM_Next, uuidv7, sekka::TimeOrderedKind::kUuidV7);
BENCHMARK_CAPTURE(BM_Next, ulid, sekka::TimeOrderedKind::kUlid);
BENCHMARK_CAPTURE(BM_Batch, uuidv7, sekka::TimeOrderedKind::kUuidV7);
BENCHMARK_CAPTURE(BM_Batch, ulid, sekka::TimeOrderedKind::kUlid);
BENCHMARK_CAPTURE(BM_NextText, uuidv7, sekka::TimeOrderedKind::kUuidV7);
BENCHMARK_CAPTURE(BM_NextText, ulid, sekka::TimeOrderedKind::kUlid);

}  // namespace

BENCHMARK_MAIN();
