// Random ids (include/sekka/random_id.h), single and in batches of 1,000, and what the spread
// orderings (shard bits, a reversed time field) cost the snowflake generator: the same
// generator on an ordered layout, side by side in one run. The snowflake layouts have 26
// sequence bits so that no run waits for a tick.

#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "sekka/random_id.h"
#include "sekka/snowflake.h"

namespace {

void BM_RandomNext(benchmark::State& state) {
  auto g = std::move(sekka::RandomIdGenerator::Create(*sekka::Layout::Preset("random"),
                                                      sekka::SystemClock()))
               .value();
  for (auto _ : state) benchmark::DoNotOptimize(g->Next());
  state.SetItemsProcessed(state.iterations());
}

void BM_RandomBatch(benchmark::State& state) {
  auto g = std::move(sekka::RandomIdGenerator::Create(*sekka::Layout::Preset("random"),
                                                      sekka::SystemClock()))
               .value();
  std::vector<sekka::Id> ids(1000);
  for (auto _ : state) benchmark::DoNotOptimize(g->NextIds(ids));
  state.SetItemsProcessed(state.iterations() * 1000);
}

void BM_SnowflakeNext(benchmark::State& state, const char* layout) {
  sekka::SnowflakeOptions o;
  o.layout = *sekka::ParseLayout(layout);
  auto s = std::move(sekka::Snowflake::Create(o, sekka::SystemClock())).value();
  for (auto _ : state) {
    sekka::Result<sekka::Id> id = s->NextId();
    if (!id.ok()) state.SkipWithError(id.error().message.c_str());
    benchmark::DoNotOptimize(id);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_SnowflakeBatch(benchmark::State& state, const char* layout) {
  sekka::SnowflakeOptions o;
  o.layout = *sekka::ParseLayout(layout);
  auto s = std::move(sekka::Snowflake::Create(o, sekka::SystemClock())).value();
  std::vector<sekka::Id> ids(1000);
  for (auto _ : state) benchmark::DoNotOptimize(s->NextIds(ids));
  state.SetItemsProcessed(state.iterations() * 1000);
}

// A recent epoch: 33 bits of ms last 99 days.
constexpr const char* kOrdered = "time_bits=37,worker_bits=0,sequence_bits=26,epoch=2026-11-01";
constexpr const char* kSharded =
    "time_bits=33,worker_bits=0,sequence_bits=26,shard_bits=4,epoch=2026-11-01";
constexpr const char* kReversed =
    "time_bits=37,worker_bits=0,sequence_bits=26,reverse_time=true,epoch=2026-11-01";

BENCHMARK(BM_RandomNext);
BENCHMARK(BM_RandomBatch);
BENCHMARK_CAPTURE(BM_SnowflakeNext, ordered, kOrdered);
BENCHMARK_CAPTURE(BM_SnowflakeNext, shard_bits_4, kSharded);
BENCHMARK_CAPTURE(BM_SnowflakeNext, reverse_time, kReversed);
BENCHMARK_CAPTURE(BM_SnowflakeBatch, ordered, kOrdered);
BENCHMARK_CAPTURE(BM_SnowflakeBatch, shard_bits_4, kSharded);
BENCHMARK_CAPTURE(BM_SnowflakeBatch, reverse_time, kReversed);

}  // namespace

BENCHMARK_MAIN();
