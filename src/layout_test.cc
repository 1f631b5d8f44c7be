#include "sekka/layout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <ostream>
#include <set>
#include <string>

#include "sekka/codec.h"

namespace sekka {
namespace {

Layout MustPreset(std::string_view name) {
  Result<Layout> l = Layout::Preset(name);
  EXPECT_TRUE(l.ok()) << name;
  return l.ok() ? *l : Layout::Default();
}

struct PresetCase {
  std::string name;
  int time_bits, datacenter_bits, worker_bits, sequence_bits;
  std::int64_t tick_millis;
  std::int64_t epoch_millis;
  FieldOrder order;
  std::string end;  // the date the time field runs out
  friend void PrintTo(const PresetCase& c, std::ostream* os) { *os << c.name; }
};

class LayoutPresetTest : public ::testing::TestWithParam<PresetCase> {};

TEST_P(LayoutPresetTest, HasTheNumbersOfTheSpec) {
  const PresetCase& c = GetParam();
  const Layout l = MustPreset(c.name);
  EXPECT_EQ(l.name(), c.name);
  EXPECT_EQ(l.time_bits(), c.time_bits);
  EXPECT_EQ(l.datacenter_bits(), c.datacenter_bits);
  EXPECT_EQ(l.worker_bits(), c.worker_bits);
  EXPECT_EQ(l.sequence_bits(), c.sequence_bits);
  EXPECT_EQ(l.tick_millis(), c.tick_millis);
  EXPECT_EQ(l.epoch_millis(), c.epoch_millis);
  EXPECT_EQ(l.order(), c.order);
  EXPECT_EQ(FormatUtcMillis(l.end_millis()).substr(0, c.end.size()), c.end);
}

constexpr auto kStd = FieldOrder::kTimeWorkerSequence;
INSTANTIATE_TEST_SUITE_P(
    Presets, LayoutPresetTest,
    ::testing::Values(PresetCase{"sekka", 41, 0, 10, 12, 1, 1735689600000, kStd, "2094-09-07"},
                      PresetCase{"twitter", 41, 5, 5, 12, 1, 1288834974657, kStd, "2080-07-10"},
                      // Meituan Leaf's snowflake: Twitter's epoch, no datacenter bits.
                      PresetCase{"leaf", 41, 0, 10, 12, 1, 1288834974657, kStd, "2080-07-10"},
                      // 42 time bits, but an id must stay below 2^63: 41 usable bits from 2015.
                      PresetCase{"discord", 42, 5, 5, 12, 1, 1420070400000, kStd, "2084-09-06"},
                      // 41 time bits shifted by 23 leave 40 usable bits below 2^63.
                      PresetCase{"instagram", 41, 0, 13, 10, 1, 1314220021721, kStd, "2046-06-27"},
                      PresetCase{"sonyflake", 39, 0, 16, 8, 10, 1735689600000,
                                 FieldOrder::kTimeSequenceWorker, "2199-03-19"},
                      // sonyflake v1: epoch 2014-09-01T00:00:00Z.
                      PresetCase{"sonyflake-v1", 39, 0, 16, 8, 10, 1409529600000,
                                 FieldOrder::kTimeSequenceWorker, "2188-"},
                      PresetCase{"baidu", 28, 0, 22, 13, 1000, 1463673600000, kStd, "2024-11-20"},
                      PresetCase{"js53", 38, 0, 6, 9, 10, 1735689600000, kStd, "2112-02-09"}),
    [](const auto& info) {
      std::string name = info.param.name;  // gtest allows letters, digits and _ only
      for (char& c : name) c = c == '-' ? '_' : c;
      return name;
    });

// Issue 22, finding 6: a preset's keys could not be overridden and a field order could not be
// typed inside the comma-separated text.
TEST(LayoutTest, APresetFirstThenKeysOverItAndATypedOrder) {
  Result<Layout> v1 = ParseLayout("sonyflake,epoch=2014-09-01");
  ASSERT_TRUE(v1.ok()) << v1.error().message;
  EXPECT_EQ(LayoutFingerprint(*v1), LayoutFingerprint(MustPreset("sonyflake-v1")));
  Result<Layout> typed = ParseLayout(
      "time_bits=39,tick=10ms,sequence_bits=8,worker_bits=16,epoch=2014-09-01,"
      "order=time,sequence,worker");
  ASSERT_TRUE(typed.ok()) << typed.error().message;
  EXPECT_EQ(LayoutFingerprint(*typed), LayoutFingerprint(MustPreset("sonyflake-v1")));
  Result<Layout> leaf8 = ParseLayout("leaf,worker_bits=8,sequence_bits=14");
  ASSERT_TRUE(leaf8.ok()) << leaf8.error().message;
  EXPECT_EQ(leaf8->epoch_millis(), 1288834974657);
  EXPECT_EQ(leaf8->worker_bits(), 8);
  EXPECT_FALSE(ParseLayout("time_bits=41,sekka").ok());  // a preset only first
  EXPECT_FALSE(ParseLayout("random,worker_bits=3").ok());
  EXPECT_FALSE(ParseLayout("sekka,kind=random").ok());
}

// The floor a layout takes over from: ids of later ticks are above the old system's max id.
TEST(LayoutTest, AfterIdFloorIsTheLastMillisecondOfTheIdsTickOrAnErrorSayingWhy) {
  const Layout leaf = MustPreset("leaf");
  const Id n = *leaf.Compose({270512225343, 0, 5, 7});  // a Leaf id of 2019-06-01
  Result<std::int64_t> floor = AfterIdFloorMillis(leaf, n);
  ASSERT_TRUE(floor.ok()) << floor.error().message;
  EXPECT_EQ(*floor, 1559347200000);
  EXPECT_GT(*leaf.Compose({leaf.MillisToTick(*floor + 1), 0, 0, 0}), n);
  // Read in the sekka preset (epoch 2025), the same bits lie in 2033.
  EXPECT_EQ(FormatUtcMillis(*AfterIdFloorMillis(MustPreset("sekka"), n)).substr(0, 10),
            "2033-07-28");
  EXPECT_FALSE(AfterIdFloorMillis(leaf, -1).ok());
  EXPECT_FALSE(AfterIdFloorMillis(leaf, leaf.max_id()).ok());  // its last tick: nothing above
  EXPECT_FALSE(AfterIdFloorMillis(*leaf.WithDescending(true), n).ok());
  EXPECT_FALSE(AfterIdFloorMillis(*ParseLayout("shard_bits=2,time_bits=39"), n).ok());
}

TEST(LayoutTest, DefaultIsTheSekkaPreset) {
  EXPECT_EQ(Layout::Default().name(), "sekka");
  EXPECT_EQ(Layout::PresetNames().front(), "sekka");
  EXPECT_EQ(Layout::PresetNames().size(), 10u);
}

TEST(LayoutTest, ReportsCapacityOfTheSekkaLayout) {
  const Layout l = Layout::Default();
  EXPECT_EQ(l.ids_per_tick(), 4096);
  EXPECT_DOUBLE_EQ(l.ids_per_second(), 4'096'000.0);
  EXPECT_EQ(l.worker_ids(), 1024);
  EXPECT_EQ(l.max_tick(), (std::int64_t{1} << 41) - 1);
}

TEST(LayoutTest, ReportsCapacityOfTwitterAndSonyflake) {
  const Layout twitter = MustPreset("twitter");
  EXPECT_EQ(twitter.worker_ids(), 1024);
  EXPECT_EQ(twitter.datacenter_ids(), 32);
  EXPECT_EQ(twitter.worker_ids_per_datacenter(), 32);
  const Layout sony = MustPreset("sonyflake");
  EXPECT_EQ(sony.ids_per_tick(), 256);
  EXPECT_DOUBLE_EQ(sony.ids_per_second(), 25'600.0);
  EXPECT_EQ(sony.worker_ids(), 65536);
}

TEST(LayoutTest, Js53StaysBelowTwoToThe53ForSixtyYearsWithSixtyFourWorkers) {
  const Layout l = MustPreset("js53");
  EXPECT_LT(l.max_id(), std::int64_t{1} << 53);
  constexpr std::int64_t kSixtyYearsMillis = 60LL * 36525 * 24 * 3600 * 10;  // 60 * 365.25 d
  EXPECT_GE(l.end_millis() - l.epoch_millis(), kSixtyYearsMillis);
  EXPECT_GE(l.worker_ids(), 64);
  Result<Id> last = l.Compose({l.max_tick(), 0, l.worker_ids() - 1, l.max_sequence()});
  ASSERT_TRUE(last.ok());
  EXPECT_LT(*last, std::int64_t{1} << 53);
}

TEST(LayoutTest, UnknownPresetIsNotFoundAndListsThePresets) {
  Result<Layout> l = Layout::Preset("snowflak");
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().code, ErrorCode::kNotFound);
  EXPECT_NE(l.error().message.find("snowflak"), std::string::npos);
  EXPECT_NE(l.error().message.find("sonyflake"), std::string::npos);
}

// sonyflake-style validation table: each bad field gives its own error naming the field.
struct BadLayoutCase {
  std::string label;
  LayoutOptions options;
  std::string expect;  // a piece of the message
  friend void PrintTo(const BadLayoutCase& c, std::ostream* os) { *os << c.label; }
};

LayoutOptions With(void (*edit)(LayoutOptions&)) {
  LayoutOptions o;
  edit(o);
  return o;
}

class LayoutValidationTest : public ::testing::TestWithParam<BadLayoutCase> {};

TEST_P(LayoutValidationTest, RejectsWithAMessageNamingTheField) {
  Result<Layout> l = Layout::Create(GetParam().options);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(l.error().message.find(GetParam().expect), std::string::npos) << l.error().message;
  EXPECT_EQ(l.error().message.find('\n'), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Table, LayoutValidationTest,
    ::testing::Values(
        BadLayoutCase{"TimeBitsTooFew", With([](LayoutOptions& o) { o.time_bits = 8; }),
                      "layout.time_bits = 8 is out of range: allowed 16 to 63"},
        BadLayoutCase{"NegativeWorkerBits", With([](LayoutOptions& o) { o.worker_bits = -1; }),
                      "layout.worker_bits = -1 is out of range: allowed 0 to 31"},
        BadLayoutCase{"TooManySequenceBits", With([](LayoutOptions& o) { o.sequence_bits = 40; }),
                      "layout.sequence_bits = 40 is out of range: allowed 0 to 31"},
        BadLayoutCase{"TooManyDatacenterBits",
                      With([](LayoutOptions& o) { o.datacenter_bits = 32; }),
                      "layout.datacenter_bits = 32"},
        BadLayoutCase{"BitsDoNotSumTo63", With([](LayoutOptions& o) { o.worker_bits = 9; }),
                      "layout bits sum to 62"},
        BadLayoutCase{"BitsSumTo64", With([](LayoutOptions& o) { o.worker_bits = 11; }),
                      "they must sum to 63"},
        BadLayoutCase{"JsSafeOver53", With([](LayoutOptions& o) { o.js_safe = true; }),
                      "a js-safe layout allows at most 53"},
        BadLayoutCase{"TickZero", With([](LayoutOptions& o) { o.tick_millis = 0; }),
                      "layout.tick = 0ms is out of range: allowed 1ms to 1000ms"},
        BadLayoutCase{"TickOverASecond", With([](LayoutOptions& o) { o.tick_millis = 1001; }),
                      "layout.tick = 1001ms"},
        BadLayoutCase{"EpochBefore1970", With([](LayoutOptions& o) { o.epoch_millis = -1; }),
                      "layout.epoch = -1 is before 1970"}),
    [](const auto& info) { return info.param.label; });

TEST(LayoutTest, AcceptsACustomLayoutAndAJsSafeOne) {
  LayoutOptions o;
  o.time_bits = 40;
  o.datacenter_bits = 3;
  o.worker_bits = 7;
  o.sequence_bits = 13;
  o.tick_millis = 2;
  EXPECT_TRUE(Layout::Create(o).ok());
  o.js_safe = true;
  o.time_bits = 30;
  EXPECT_TRUE(Layout::Create(o).ok());
}

// Compose/decompose round trips at the edges (sonyflake's TestCompose/TestDecompose).
class LayoutEdgeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LayoutEdgeTest, ComposeAndDecomposeRoundTripAtTheEdges) {
  const Layout l = MustPreset(GetParam());
  const std::int64_t max_dc = l.datacenter_ids() - 1, max_w = l.worker_ids_per_datacenter() - 1;
  const IdFields edges[] = {
      {0, 0, 0, 0},
      {0, 0, 0, l.max_sequence()},
      {0, max_dc, max_w, 0},
      {l.max_tick(), 0, 0, 0},
      {l.max_tick(), max_dc, max_w, l.max_sequence()},
      {12345, max_dc / 2, max_w / 3, l.max_sequence() / 5},
  };
  for (const IdFields& f : edges) {
    Result<Id> id = l.Compose(f);
    ASSERT_TRUE(id.ok()) << id.error().message;
    EXPECT_GE(*id, 0);
    EXPECT_LE(*id, l.max_id());
    Result<IdFields> back = l.Decompose(*id);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, f);
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, LayoutEdgeTest,
                         ::testing::ValuesIn(std::vector<std::string>(
                             Layout::PresetNames().begin(), Layout::PresetNames().end())));

TEST(LayoutTest, ComposeRejectsFieldsThatDoNotFit) {
  const Layout l = Layout::Default();
  Result<Id> worker = l.Compose({1, 0, 1024, 0});
  ASSERT_FALSE(worker.ok());
  EXPECT_EQ(worker.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(worker.error().message.find("worker id 1024 does not fit 10 bits: allowed 0 to 1023"),
            std::string::npos);
  Result<Id> seq = l.Compose({1, 0, 0, 4096});
  ASSERT_FALSE(seq.ok());
  EXPECT_NE(seq.error().message.find("sequence 4096"), std::string::npos);
  Result<Id> dc = l.Compose({1, 1, 0, 0});
  ASSERT_FALSE(dc.ok());
  EXPECT_NE(dc.error().message.find("datacenter id 1 does not fit 0 bits"), std::string::npos);
}

TEST(LayoutTest, TimeFieldRunningOutIsExhaustedWithTheDate) {
  const Layout l = MustPreset("baidu");
  Result<Id> id = l.Compose({l.max_tick() + 1, 0, 0, 0});
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.error().code, ErrorCode::kExhausted);
  EXPECT_NE(id.error().message.find("exhausted on 2024-11-20"), std::string::npos)
      << id.error().message;
}

TEST(LayoutTest, DecomposeRejectsIdsOutsideTheLayout) {
  EXPECT_FALSE(Layout::Default().Decompose(-1).ok());
  const Layout js = MustPreset("js53");
  Result<IdFields> f = js.Decompose(std::int64_t{1} << 53);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("outside layout js53"), std::string::npos);
}

TEST(LayoutTest, SonyflakeOrderPutsTheSequenceAboveTheWorker) {
  const Layout l = MustPreset("sonyflake");
  Result<Id> id = l.Compose({1, 0, 5, 3});
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, (std::int64_t{1} << 24) | (3 << 16) | 5);
}

TEST(LayoutTest, MillisToTickFloorsAndTickToMillisInverts) {
  const Layout sony = MustPreset("sonyflake");
  const std::int64_t e = sony.epoch_millis();
  EXPECT_EQ(sony.MillisToTick(e), 0);
  EXPECT_EQ(sony.MillisToTick(e + 9), 0);
  EXPECT_EQ(sony.MillisToTick(e + 10), 1);
  EXPECT_EQ(sony.MillisToTick(e - 1), -1);
  EXPECT_EQ(sony.TickToMillis(7), e + 70);
}

TEST(LayoutTest, NamesItsOrderWithTheDatacenterOnlyWhereItHasOne) {
  EXPECT_EQ(Layout::Default().OrderName(), "time,worker,sequence");
  EXPECT_EQ(MustPreset("twitter").OrderName(), "time,datacenter,worker,sequence");
  EXPECT_EQ(MustPreset("sonyflake").OrderName(), "time,sequence,worker");
  for (const auto& name : Layout::PresetNames()) {
    const Layout l = MustPreset(name);
    EXPECT_EQ(*ParseFieldOrder(l.OrderName()), l.order());
  }
}

TEST(LayoutTest, ParsesFieldOrders) {
  EXPECT_EQ(*ParseFieldOrder("time,sequence,worker"), FieldOrder::kTimeSequenceWorker);
  EXPECT_EQ(*ParseFieldOrder("time,datacenter,worker,sequence"), FieldOrder::kTimeWorkerSequence);
  Result<FieldOrder> bad = ParseFieldOrder("worker,time");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("allowed"), std::string::npos);
}

}  // namespace
}  // namespace sekka

namespace sekka {
namespace {

TEST(ParseLayoutTest, ReadsAPresetName) {
  Result<Layout> l = ParseLayout("twitter");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->name(), "twitter");
  EXPECT_EQ(ParseLayout("nope").error().code, ErrorCode::kNotFound);
}

TEST(ParseLayoutTest, ReadsACustomLayout) {
  Result<Layout> l = ParseLayout(
      "time_bits=40,datacenter_bits=2,worker_bits=9,sequence_bits=12,tick=2ms,"
      "epoch=2024-01-01T00:00:00Z,order=time,sequence,worker");
  // The field names after order= go on through the commas (issue 22: this was refused).
  ASSERT_TRUE(l.ok()) << l.error().message;
  EXPECT_EQ(l->order(), FieldOrder::kTimeSequenceWorker);
  l = ParseLayout(
      "time_bits=40,datacenter_bits=2,worker_bits=9,sequence_bits=12,tick=2ms,"
      "epoch=2024-01-01T00:00:00Z,order=sonyflake,name=mine");
  ASSERT_TRUE(l.ok()) << l.error().message;
  EXPECT_EQ(l->name(), "mine");
  EXPECT_EQ(l->time_bits(), 40);
  EXPECT_EQ(l->tick_millis(), 2);
  EXPECT_EQ(l->epoch_millis(), 1704067200000);
  EXPECT_EQ(l->order(), FieldOrder::kTimeSequenceWorker);
}

TEST(ParseLayoutTest, NamesTheBadKeyOrValue) {
  EXPECT_NE(ParseLayout("colour=blue").error().message.find("layout key \"colour\" is not known"),
            std::string::npos);
  EXPECT_NE(ParseLayout("worker_bits=ten").error().message.find("layout.worker_bits"),
            std::string::npos);
  EXPECT_NE(ParseLayout("tick=5 minutes").error().message.find("layout.tick"), std::string::npos);
  EXPECT_NE(ParseLayout("worker_bits=11").error().message.find("sum to 64"), std::string::npos);
  EXPECT_NE(ParseLayout("tick=2s").error().message.find("layout.tick = 2000ms is out of range"),
            std::string::npos);
}

}  // namespace
}  // namespace sekka

namespace sekka {
namespace {

// Defect: TickToMillis overflowed for a 63-bit time field with a 1 s tick (2^63 s in ms).
TEST(LayoutTest, ALongTimeFieldWithSecondTicksNeverOverflowsTheTime) {
  Result<Layout> l = ParseLayout("time_bits=63,worker_bits=0,sequence_bits=0,tick=1s");
  ASSERT_TRUE(l.ok()) << l.error().message;
  EXPECT_GT(l->end_millis(), l->TickToMillis(l->max_tick()));
  EXPECT_EQ(l->TickToMillis(l->max_tick() + 1), l->end_millis());
  EXPECT_EQ(l->TickToMillis(std::numeric_limits<std::int64_t>::max()),
            std::numeric_limits<std::int64_t>::max());
  Result<DecodedId> d = DecodeId(std::numeric_limits<std::int64_t>::max(), *l);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->timestamp_ms, std::numeric_limits<std::int64_t>::max());
}

}  // namespace
}  // namespace sekka

namespace sekka {
namespace {

TEST(RandomLayoutTest, ThePresetAndTheKeysGiveTimeAndRandomBits) {
  const Layout preset = *Layout::Preset("random");
  EXPECT_TRUE(preset.is_random());
  EXPECT_EQ(preset.time_bits(), 41);
  EXPECT_EQ(preset.random_bits(), 22);
  EXPECT_EQ(preset.worker_ids(), 1);
  EXPECT_EQ(preset.OrderName(), "time,random");
  EXPECT_EQ(FormatUtcMillis(preset.end_millis()).substr(0, 10), "2094-09-07");

  Result<Layout> custom = ParseLayout("time_bits=38,kind=random,tick=10ms");
  ASSERT_TRUE(custom.ok()) << custom.error().message;
  EXPECT_EQ(custom->random_bits(), 25);  // the rest of 63
  Result<Layout> js = ParseLayout("kind=random,js_safe=true,time_bits=38,tick=10ms");
  ASSERT_TRUE(js.ok()) << js.error().message;
  EXPECT_EQ(js->random_bits(), 15);
  EXPECT_EQ(js->max_id(), (Id{1} << 53) - 1);

  const IdFields f{.tick = 123456, .random = 0x2abcde};
  Result<Id> id = preset.Compose(f);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, (Id{123456} << 22) | 0x2abcde);
  EXPECT_EQ(*preset.Decompose(*id), f);
}

TEST(RandomLayoutTest, BadRandomLayoutsNameTheKeyAndWhatIsAllowed) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : {
           Case{"kind=random,worker_bits=4", "not for kind=random"},
           Case{"kind=random,shard_bits=2", "not for kind=random"},
           Case{"random_bits=22", "needs kind=random"},
           Case{"kind=random,random_bits=48,time_bits=15", "time_bits = 15"},
           Case{"kind=random,time_bits=16,random_bits=48", "random_bits = 48"},
           Case{"kind=random,time_bits=41,random_bits=20", "sum to 61 (time 41 + random 20)"},
           Case{"kind=uuid", "allowed snowflake or random"},
       }) {
    Result<Layout> l = ParseLayout(c.text);
    ASSERT_FALSE(l.ok()) << c.text;
    EXPECT_EQ(l.error().code, ErrorCode::kInvalidArgument) << c.text;
    EXPECT_NE(l.error().message.find(c.says), std::string::npos)
        << c.text << ": " << l.error().message;
  }
}

// Birthday bound: at 1,000 ids/s over 22 random bits of 1 ms ticks, a tick holds one id on
// average, 1/2 a pair, alike with odds 2^-22: about 1.19e-7 a tick and 10.3 clashes a day.
TEST(RandomLayoutTest, ClashOddsFollowTheBirthdayBound) {
  const Layout l = *Layout::Preset("random");
  const ClashOdds odds = RandomClashOdds(l, 1000);
  EXPECT_DOUBLE_EQ(odds.ids_per_tick, 1.0);
  EXPECT_NEAR(odds.per_tick, 0.5 / 4194304.0, 1e-12);
  EXPECT_NEAR(odds.expected_per_day, 86'400'000 * 0.5 / 4194304.0, 1e-6);
  EXPECT_NEAR(odds.per_day, 1 - std::exp(-odds.expected_per_day), 1e-12);
  EXPECT_GT(odds.per_day, 0.9999);
  // Ten times the rate, a hundred times the pairs.
  EXPECT_NEAR(RandomClashOdds(l, 10'000).expected_per_day, 100 * odds.expected_per_day, 1e-3);
  EXPECT_EQ(RandomClashOdds(l, 0).per_day, 0);
}

TEST(SpreadLayoutTest, ShardBitsAreAHashOfTheFieldsAndDecodingChecksThem) {
  Result<Layout> parsed = ParseLayout("time_bits=41,worker_bits=6,sequence_bits=12,shard_bits=4");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  const Layout& l = *parsed;
  EXPECT_FALSE(l.ordered());
  EXPECT_EQ(l.max_id(), std::numeric_limits<Id>::max());
  std::set<std::int64_t> shards;
  Id last_in_shard[16] = {};
  for (std::int64_t seq = 0; seq < 1000; ++seq) {
    const IdFields f{.tick = 5'000'000 + seq / 100, .worker = 33, .sequence = seq % 100};
    Result<Id> id = l.Compose(f);
    ASSERT_TRUE(id.ok());
    const std::int64_t shard = *id >> 59;
    shards.insert(shard);
    // Within a shard, ids still increase with (tick, sequence).
    EXPECT_GT(*id, last_in_shard[shard]);
    last_in_shard[shard] = *id;
    Result<IdFields> back = l.Decompose(*id);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, f);
    EXPECT_EQ(DecodeId(*id, l)->shard, shard);
    // Any other shard bits are not an id of this layout.
    const Id forged = *id ^ (Id{1} << 60);
    Result<IdFields> bad = l.Decompose(forged);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("shard bits"), std::string::npos);
  }
  EXPECT_EQ(shards.size(), 16u);  // consecutive ids of one worker use every shard
  EXPECT_NE(l.OrderingNote().find("within each of 16 shards"), std::string::npos);
  Result<Layout> too_many = ParseLayout("time_bits=41,worker_bits=6,sequence_bits=12,shard_bits=5");
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.error().message.find("+ shard 5"), std::string::npos);
  EXPECT_NE(ParseLayout("shard_bits=16,time_bits=35").error().message.find("0 to 15"),
            std::string::npos);
}

TEST(SpreadLayoutTest, AReversedTimeFieldSpreadsConsecutiveTicksAndDecodes) {
  Result<Layout> parsed = ParseLayout("reverse_time=true");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  const Layout& l = *parsed;
  EXPECT_EQ(Layout::ReverseBits(0b0011, 4), 0b1100u);
  EXPECT_EQ(Layout::ReverseBits(1, 41), std::uint64_t{1} << 40);
  for (std::int64_t tick = 1'000'000; tick < 1'000'100; ++tick) {
    const IdFields f{.tick = tick, .worker = 7, .sequence = 9};
    const Id id = *l.Compose(f);
    const Id next = *l.Compose(IdFields{.tick = tick + 1, .worker = 7, .sequence = 9});
    // Neighbouring ticks differ in the low time bits, which are now the top ones.
    EXPECT_GE(std::llabs(next - id), Id{1} << 40) << tick;
    EXPECT_EQ(*l.Decompose(id), f);
  }
  // The last tick still fits, and the random kind may be reversed too.
  EXPECT_EQ(l.Decompose(*l.Compose(IdFields{.tick = l.max_tick()}))->tick, l.max_tick());
  Result<Layout> random = ParseLayout("kind=random,reverse_time=true");
  ASSERT_TRUE(random.ok());
  const IdFields rf{.tick = 99, .random = 5};
  EXPECT_EQ(*random->Decompose(*random->Compose(rf)), rf);
  EXPECT_NE(l.OrderingNote().find("bit-reversed"), std::string::npos);
}

}  // namespace
}  // namespace sekka
