// The cases of Twitter Snowflake's IdWorkerSpec (the original Scala test suite), restated in
// sekka's terms with the `twitter` preset: 41 time bits, 5 datacenter bits, 5 worker bits,
// 12 sequence bits, epoch 1288834974657.

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "sekka/snowflake.h"
#include "testing/fake_clock.h"
#include "testing/next_id.h"

namespace sekka {
namespace {

constexpr std::int64_t kTwitterEpoch = 1288834974657;
constexpr Id kWorkerMask = 0x000000000001F000;
constexpr Id kDatacenterMask = 0x00000000003E0000;
constexpr Id kTimestampMask = 0xFFFFFFFFFFC00000;

std::unique_ptr<Snowflake> TwitterWorker(
    Clock& clock, std::int64_t worker, std::int64_t dc,
    ClockBackwardsPolicy policy = ClockBackwardsPolicy::kWait) {
  SnowflakeOptions o;
  o.layout = *Layout::Preset("twitter");
  o.worker_id = worker;
  o.datacenter_id = dc;
  o.on_clock_backwards = policy;
  Result<std::unique_ptr<Snowflake>> s = Snowflake::Create(o, clock);
  EXPECT_TRUE(s.ok());
  return std::move(s).value();
}

TEST(IdWorkerSpec, GeneratesAnId) {
  auto worker = TwitterWorker(SystemClock(), 1, 1);
  EXPECT_GT(Next(*worker), 0);
}

TEST(IdWorkerSpec, ReturnsAnAccurateTimestamp) {
  auto worker = TwitterWorker(SystemClock(), 1, 1);
  const std::int64_t before = SystemClock().NowMillis();
  const Id id = Next(*worker);
  const std::int64_t t = worker->layout().TickToMillis(worker->layout().Decompose(id)->tick);
  EXPECT_LE(std::abs(t - before), 50);
}

TEST(IdWorkerSpec, ReturnsTheWorkerIdAndDatacenterId) {
  auto worker = TwitterWorker(SystemClock(), 1, 2);
  EXPECT_EQ(worker->worker_id(), 1);
  EXPECT_EQ(worker->datacenter_id(), 2);
  const IdFields f = *worker->layout().Decompose(Next(*worker));
  EXPECT_EQ(f.worker, 1);
  EXPECT_EQ(f.datacenter, 2);
}

TEST(IdWorkerSpec, MasksTheWorkerId) {
  auto worker = TwitterWorker(SystemClock(), 0x1F, 0);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ((Next(*worker) & kWorkerMask) >> 12, 0x1F);
  }
}

TEST(IdWorkerSpec, MasksTheDatacenterId) {
  auto worker = TwitterWorker(SystemClock(), 0, 0x1F);
  const Id id = Next(*worker);
  EXPECT_EQ((id & kDatacenterMask) >> 17, 0x1F);
}

TEST(IdWorkerSpec, MasksTheTimestamp) {
  FakeClock clock(kTwitterEpoch + 1'000'000);
  auto worker = TwitterWorker(clock, 31, 31);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ((Next(*worker) & kTimestampMask) >> 22, 1'000'000);
  }
}

TEST(IdWorkerSpec, RollsTheSequenceOverWithoutBleedingIntoTheWorkerBits) {
  FakeClock clock(kTwitterEpoch + 1'000'000);
  const std::int64_t worker_id = 0x1F;
  auto worker = TwitterWorker(clock, worker_id, 0);
  ASSERT_TRUE(worker->NextIds(4096 - 20).ok());  // the sequence is about to roll over
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ((Next(*worker) & kWorkerMask) >> 12, worker_id);
  }
}

TEST(IdWorkerSpec, GeneratesIncreasingIds) {
  auto worker = TwitterWorker(SystemClock(), 1, 1);
  Id last = 0;
  for (int i = 0; i < 100; ++i) {
    const Id id = Next(*worker);
    EXPECT_GT(id, last);
    last = id;
  }
}

TEST(IdWorkerSpec, GeneratesOneMillionIds) {
  auto worker = TwitterWorker(SystemClock(), 31, 31);
  Id last = 0;
  for (int i = 0; i < 1'000'000; ++i) {
    const Id id = Next(*worker);
    ASSERT_GT(id, last);
    last = id;
  }
}

// Twitter's "sleep if we would rollover twice in the same millisecond": a sequence at 4095
// in a millisecond that does not end forces exactly one wait.
TEST(IdWorkerSpec, SleepsOnceWhenTheSequenceRollsOverInOneMillisecond) {
  FakeClock clock(kTwitterEpoch + 2);
  auto worker = TwitterWorker(clock, 1, 1);
  ASSERT_TRUE(worker->NextIds(4095).ok());  // sequence 0..4094 at t=2
  const Id at_4095 = Next(*worker);
  EXPECT_EQ(worker->layout().Decompose(at_4095)->sequence, 4095);
  EXPECT_EQ(clock.sleeps(), 0);
  const Id rolled = Next(*worker);
  EXPECT_EQ(clock.sleeps(), 1);
  EXPECT_EQ(*worker->layout().Decompose(rolled), (IdFields{3, 1, 1, 0}));
}

TEST(IdWorkerSpec, GeneratesOnlyUniqueIds) {
  auto worker = TwitterWorker(SystemClock(), 31, 31);
  std::vector<Id> ids(2'000'000);
  for (Id& id : ids) id = Next(*worker);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());
}

TEST(IdWorkerSpec, GeneratesIdsOverFiftyBillion) {
  auto worker = TwitterWorker(SystemClock(), 0, 0);
  EXPECT_GT(Next(*worker), 50'000'000'000);
}

// Twitter's StaticTimeWorker case: the clock reads 1, then 0, then 1 again.
TEST(IdWorkerSpec, GeneratesOnlyUniqueIdsEvenWhenTimeGoesBackwards) {
  FakeClock clock(kTwitterEpoch + 1);
  auto worker = TwitterWorker(clock, 0, 0, ClockBackwardsPolicy::kFail);
  const Layout& l = worker->layout();
  EXPECT_EQ(l.Decompose(Next(*worker))->sequence, 0);
  EXPECT_EQ(l.Decompose(Next(*worker))->sequence, 1);
  clock.SetMillis(kTwitterEpoch + 0);
  Result<Id> failed = worker->NextId();
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code, ErrorCode::kClockMovedBackwards);
  clock.SetMillis(kTwitterEpoch + 1);
  const IdFields f = *l.Decompose(Next(*worker));
  EXPECT_EQ(f.tick, 1);
  EXPECT_EQ(f.sequence, 2);  // the failed call did not reset or consume anything
}

}  // namespace
}  // namespace sekka
