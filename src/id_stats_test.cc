#include "sekka/id_stats.h"

#include <gtest/gtest.h>

#include "sekka/codec.h"

namespace sekka {
namespace {

TEST(IdStatsTest, TwoWorkersAtKnownRatesWithAGapAndABurst) {
  const Layout l = Layout::Default();
  const std::int64_t start = *ParseUtcMillis("2026-06-01T00:00:00Z");
  StatsOptions o;
  o.interval_ms = 1000;
  IdStats s(o);
  for (std::int64_t ms = 0; ms < 10'000; ++ms) {
    if (ms >= 4000 && ms < 7000) continue;  // 3 quiet seconds
    const std::int64_t tick = l.MillisToTick(start + ms);
    s.Add(*l.Compose({tick, 0, 3, 0}));
    s.Add(*l.Compose({tick, 0, 3, 1}));
    if (ms % 2 == 0) s.Add(*l.Compose({tick, 0, 9, 0}));
  }
  // Worker 9 uses a whole tick's sequence once, in the last second (at 9.999 s).
  const std::int64_t burst = l.MillisToTick(start + 9999);
  for (std::int64_t seq = 1; seq < 4096; ++seq) s.Add(*l.Compose({burst, 0, 9, seq}));
  s.Add(-1);
  const StatsReport r = s.Finish();
  EXPECT_EQ(r.skipped, 1u);
  EXPECT_EQ(r.ids, 7 * 2500u + 4095);
  EXPECT_EQ(r.first_ms, start);
  EXPECT_EQ(r.last_ms, start + 9999);
  ASSERT_EQ(r.totals.size(), 10u);
  EXPECT_EQ(r.starts_ms[0], start);
  EXPECT_EQ(r.totals[0], 2500u);
  EXPECT_EQ(r.totals[5], 0u);
  EXPECT_EQ(r.totals[9], 2500u + 4095);
  EXPECT_EQ(r.peak_bucket, 9u);
  EXPECT_EQ(r.empty_buckets, 3u);
  EXPECT_EQ(r.longest_gap_start, 4u);
  EXPECT_EQ(r.longest_gap_buckets, 3u);
  ASSERT_EQ(r.workers.size(), 2u);
  EXPECT_EQ(r.workers[0].worker, 3);
  EXPECT_EQ(r.workers[0].ids, 14'000u);
  EXPECT_NEAR(r.workers[0].share, 14'000.0 / r.ids, 1e-12);
  EXPECT_EQ(r.workers[1].worker, 9);
  EXPECT_DOUBLE_EQ(r.workers[1].max_sequence_use, 1.0);
  EXPECT_DOUBLE_EQ(r.workers[0].max_sequence_use, 2.0 / 4096);
  ASSERT_EQ(r.series.size(), 2u);  // two workers: no "others"
  EXPECT_EQ(r.series[0].per_bucket[0], 2000u);
  EXPECT_EQ(r.series[1].per_bucket[9], 500u + 4095);
  EXPECT_EQ(r.ticks, 7000u + 3500u + 1);  // the burst is a tick of its own (an odd ms)
  EXPECT_EQ(r.ticks_at_ceiling, 1u);
  EXPECT_EQ(r.sequence_use[9], 1u);
  EXPECT_EQ(r.sequence_use[0], r.ticks - 1);
}

TEST(IdStatsTest, TheBusiestWorkersGetSeriesAndTheRestAreSummed) {
  const Layout l = Layout::Default();
  StatsOptions o;
  o.top_workers = 2;
  IdStats s(o);
  const std::int64_t tick = l.MillisToTick(*ParseUtcMillis("2026-06-01T00:00:00Z"));
  for (std::int64_t w = 0; w < 5; ++w) {
    for (std::int64_t seq = 0; seq <= w; ++seq) s.Add(*l.Compose({tick, 0, w, seq}));
  }
  const StatsReport r = s.Finish();
  ASSERT_EQ(r.series.size(), 3u);
  EXPECT_EQ(r.series[0].worker, 4);
  EXPECT_EQ(r.series[1].worker, 3);
  EXPECT_EQ(r.series[2].worker, -1);
  EXPECT_EQ(r.series[2].ids, 1u + 2 + 3);
  EXPECT_EQ(r.interval_ms, 1);
}

TEST(IdStatsTest, AutoIntervalsAreRound) {
  EXPECT_EQ(AutoIntervalMillis(0, 99), 1);
  EXPECT_EQ(AutoIntervalMillis(0, 10'000), 100);
  EXPECT_EQ(AutoIntervalMillis(0, 3'600'000), 30'000);
  EXPECT_EQ(AutoIntervalMillis(0, 86'400'000 * 7), 3'600'000 * 1);
}

}  // namespace
}  // namespace sekka
