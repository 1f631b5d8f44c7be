#include "sekka/random_id.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#include "sekka/codec.h"
#include "sekka/opaque.h"
#include "sekka/snowflake.h"
#include "testing/fake_clock.h"

namespace sekka {
namespace {

constexpr std::int64_t kNow = 1'790'000'000'000;  // 2026-09-21

std::unique_ptr<RandomIdGenerator> Make(std::string_view layout, Clock& clock) {
  Result<Layout> l = ParseLayout(layout);
  EXPECT_TRUE(l.ok()) << layout;
  return std::move(RandomIdGenerator::Create(*l, clock)).value();
}

TEST(RandomIdTest, IdsCarryTheClocksTimeAndRandomBits) {
  FakeClock clock(kNow);
  auto g = Make("random", clock);
  std::set<std::int64_t> randoms;
  for (int i = 0; i < 1000; ++i) {
    Result<Id> id = g->Next();
    ASSERT_TRUE(id.ok());
    Result<DecodedId> d = DecodeId(*id, g->layout());
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->timestamp_ms, kNow);
    EXPECT_EQ(d->worker, 0);
    EXPECT_EQ(d->sequence, 0);
    randoms.insert(d->random);
  }
  // 1,000 draws from 2^22 values: a handful of alike pairs at most (0.12 expected).
  EXPECT_GE(randoms.size(), 995u);
  clock.AdvanceMillis(7);
  EXPECT_EQ(DecodeId(*g->Next(), g->layout())->timestamp_ms, kNow + 7);
}

TEST(RandomIdTest, ABatchIsDistinctEvenWhenItNearlyFillsTheRandomSpace) {
  FakeClock clock(kNow);
  auto g = Make("kind=random,time_bits=47,random_bits=16", clock);
  std::vector<Id> ids(60'000);  // 92% of 65,536: thousands of first draws alike
  ASSERT_TRUE(g->NextIds(ids).ok());
  EXPECT_EQ(std::set<Id>(ids.begin(), ids.end()).size(), ids.size());
  std::vector<Id> too_many(65'537);
  Status s = g->NextIds(too_many);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("allowed at most 65536"), std::string::npos);
}

TEST(RandomIdTest, BeforeTheEpochAndAfterTheEndAreErrorsNotIds) {
  FakeClock clock(kNow);
  auto g = Make("kind=random,time_bits=16,random_bits=47,tick=1s,epoch=2026-09-01", clock);
  clock.SetMillis(*ParseUtcMillis("2026-08-31T23:59:59Z"));
  Result<Id> early = g->Next();
  ASSERT_FALSE(early.ok());
  EXPECT_NE(early.error().message.find("before layout custom's epoch"), std::string::npos);
  clock.SetMillis(g->layout().end_millis());
  Result<Id> late = g->Next();
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code, ErrorCode::kExhausted);
  EXPECT_FALSE(RandomIdGenerator::Create(Layout::Default(), clock).ok());
  SnowflakeOptions o;
  o.layout = *Layout::Preset("random");
  Result<std::unique_ptr<Snowflake>> s = Snowflake::Create(o, clock);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("random layout"), std::string::npos);
}

// The odds `sekka layout --rate` prints are the generator's: ticks with a Poisson number of
// ids (mean 4) over 8 random bits clash at 1 - exp(-16/2/256) = 3.08% of ticks; 20,000 ticks
// give 616 +- 25 such ticks.
TEST(RandomIdTest, TheGeneratorClashesAtTheOddsTheBirthdayBoundStates) {
  FakeClock clock(kNow);
  auto g = Make("kind=random,time_bits=55,random_bits=8", clock);
  const double rate = 4000;  // ids per second: 4 per 1 ms tick
  const ClashOdds odds = RandomClashOdds(g->layout(), rate);
  EXPECT_NEAR(odds.per_tick, 0.0308, 0.0005);
  std::mt19937 rng(12345);
  std::poisson_distribution<int> per_tick(odds.ids_per_tick);
  const int ticks = 20'000;
  int clashed = 0;
  for (int t = 0; t < ticks; ++t) {
    std::set<Id> seen;
    bool clash = false;
    for (int i = per_tick(rng); i > 0; --i) clash |= !seen.insert(*g->Next()).second;
    clashed += clash;
    clock.AdvanceMillis(1);
  }
  EXPECT_NEAR(static_cast<double>(clashed) / ticks, odds.per_tick, 0.006);
}

TEST(RandomIdTest, RandomIdsRoundTripThroughOpaqueIds) {
  FakeClock clock(kNow);
  for (const char* layout : {"random", "kind=random,js_safe=true,time_bits=38,tick=10ms",
                             "kind=random,reverse_time=true"}) {
    auto g = Make(layout, clock);
    auto codec =
        std::move(OpaqueCodec::Create(*ParseOpaqueKeys("k 000102030405060708090a0b0c0d0e0f\n"),
                                      g->layout()))
            .value();
    std::vector<Id> ids(500);
    ASSERT_TRUE(g->NextIds(ids).ok());
    for (Id id : ids) {
      Result<Id> opaque = codec->Encode(id);
      ASSERT_TRUE(opaque.ok());
      EXPECT_LE(*opaque, g->layout().max_id());
      EXPECT_EQ(*codec->Decode(*opaque), id) << layout;
      EXPECT_EQ(*codec->DecodeText(*codec->EncodeText(id)), id) << layout;
    }
  }
}

}  // namespace
}  // namespace sekka
