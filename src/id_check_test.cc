#include "sekka/id_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "sekka/codec.h"

namespace sekka {
namespace {

std::vector<Id> Scan(const std::vector<std::string_view>& chunks, IdTextScanner& s) {
  std::vector<Id> out;
  auto add = [&](Id id) { out.push_back(id); };
  for (std::string_view c : chunks) s.Feed(c, add);
  s.Finish(add);
  return out;
}

TEST(IdTextScannerTest, TokensSpanChunksAndBadOnesAreCountedWithTheirLine) {
  IdTextScanner s;
  const std::vector<Id> ids = Scan({"12", "3 45\n\"67\",8", "9\r\nx1 -9223372036854775808\n",
                                    "99999999999999999999 -\n9223372036854775807"},
                                   s);
  EXPECT_EQ(ids, (std::vector<Id>{123, 45, 67, 89, std::numeric_limits<Id>::min(),
                                  std::numeric_limits<Id>::max()}));
  EXPECT_EQ(s.bad_count(), 3u);
  ASSERT_EQ(s.bad_examples().size(), 3u);
  EXPECT_EQ(s.bad_examples()[0].line, 3u);
  EXPECT_EQ(s.bad_examples()[0].text, "x1");
  EXPECT_EQ(s.bad_examples()[1].text, "99999999999999999999");
  EXPECT_EQ(s.bad_examples()[2].text, "-");
}

TEST(IdTextScannerTest, EverySplitOfATextGivesTheSameIds) {
  const std::string text = "1 22 333,-4444 \"55555\"\n666666\tabc 7777777 88888888";
  IdTextScanner whole;
  const std::vector<Id> want = Scan({text}, whole);
  for (std::size_t cut = 0; cut <= text.size(); ++cut) {
    IdTextScanner s;
    EXPECT_EQ(Scan({std::string_view(text).substr(0, cut), std::string_view(text).substr(cut)}, s),
              want)
        << cut;
    EXPECT_EQ(s.bad_count(), 1u);
  }
}

TEST(RadixSortTest, SortsLikeStdSort) {
  std::mt19937_64 rng(7);
  for (std::size_t n : {0, 1, 5, 127, 128, 1000, 100'000}) {
    std::vector<std::uint64_t> keys(n);
    for (auto& k : keys) {
      // Time-ordered-looking keys (shared top bytes), with some repeats and some wide values.
      k = (rng() % 3 == 0) ? rng() : (0x0379'0000'0000'0000ULL | (rng() & 0xffff'ffffULL));
      if (rng() % 10 == 0 && !keys.empty()) k = keys[rng() % keys.size()];
    }
    std::vector<std::uint64_t> want = keys;
    std::sort(want.begin(), want.end());
    std::vector<std::uint64_t> got(n);
    RadixSortCopy(keys, got);
    EXPECT_EQ(got, want) << n;
  }
  // Big enough for every pass to be shared among threads.
  std::vector<std::uint64_t> keys(3'000'000);
  for (auto& k : keys) k = 0x0379'0000'0000'0000ULL | (rng() & 0xff'ffff'ffffULL);
  std::vector<std::uint64_t> want = keys;
  std::sort(want.begin(), want.end());
  std::vector<std::uint64_t> got(keys.size());
  RadixSortCopy(keys, got, 3);
  EXPECT_EQ(got, want);
}

TEST(RadixSortTest, SortCopyAgreesWithStdSortOnEveryKeyShape) {
  std::mt19937_64 rng(11);
  auto check = [](std::vector<std::uint64_t> keys, int threads) {
    std::vector<std::uint64_t> out(keys.size(), 0xdead);
    RadixSortCopy(keys, out, threads);
    std::sort(keys.begin(), keys.end());
    EXPECT_EQ(out, keys) << keys.size() << " keys, " << threads << " threads";
  };
  for (int threads : {1, 2, 3}) {
    for (std::size_t n : {0, 1, 100, 70'000, 300'000}) {
      std::vector<std::uint64_t> keys(n);
      // Time-ordered-looking keys over a few hundred thousand ticks, with repeats.
      for (auto& k : keys) k = 0x0379'0000'0000'0000ULL + (rng() & 0xff'ffff'ffffULL);
      for (std::size_t i = 0; i + 7 < n; i += 7) keys[i] = keys[i + 3];
      check(keys, threads);
      for (auto& k : keys) k = rng();  // the whole range, sign bit included
      check(keys, threads);
      for (auto& k : keys) k = 0x0379'0000'0000'0000ULL | (rng() & 0x1ff);  // 9 bits differ
      check(keys, threads);
      for (auto& k : keys) k = 0x0379'0000'0000'0000ULL | (rng() & 0x7);  // 3 bits differ
      check(keys, threads);
      for (auto& k : keys) k = 42;  // all equal
      check(keys, threads);
      // One huge bucket: most keys share their top 16 differing bits.
      for (auto& k : keys) k = rng() % 4 == 0 ? rng() : 0x7000'0000'0000'0000ULL + (rng() & 0xffff);
      check(keys, threads);
      // One outlier (a negative id) far above the rest: all others share one bucket.
      for (auto& k : keys) k = 0x0379'0000'0000'0000ULL + (rng() & 0xff'ffff'ffffULL);
      if (!keys.empty()) keys[n / 2] = 0xffff'ffff'ffff'fff0ULL;
      check(keys, threads);
    }
  }
  // The same at a size where that bucket is sorted by all threads.
  std::vector<std::uint64_t> keys(2'500'000);
  for (auto& k : keys) k = 0x0379'0000'0000'0000ULL + (rng() & 0xff'ffff'ffffULL);
  keys[7] = 0xffff'ffff'ffff'fff0ULL;
  check(keys, 2);
}

// Two workers at known rates over 10 s of ticks, with planted findings of each kind.
TEST(IdCheckerTest, KnownAnswersForTwoWorkersAndPlantedFaults) {
  const Layout layout = Layout::Default();
  const std::int64_t start = *ParseUtcMillis("2026-06-01T00:00:00Z");
  CheckOptions o;
  o.layout = layout;
  o.now_ms = start + 20'000;
  o.examples = 3;
  IdChecker c(o);
  std::vector<Id> stream;
  for (std::int64_t ms = 0; ms < 10'000; ++ms) {
    const std::int64_t tick = layout.MillisToTick(start + ms);
    for (std::int64_t seq = 0; seq < 2; ++seq) stream.push_back(*layout.Compose({tick, 0, 3, seq}));
    if (ms % 2 == 0) stream.push_back(*layout.Compose({tick, 0, 9, 0}));
  }
  // Planted: an order break (worker 3 steps back 5 s), two repeats of one of its ids (the
  // first below its previous id: another break; the second equal to it: none), a future id,
  // a negative one.
  const Id back = *layout.Compose({layout.MillisToTick(start + 5000), 0, 3, 2});
  stream.push_back(back);
  const Id repeated = stream[100];
  stream.push_back(repeated);
  stream.push_back(repeated);
  const Id future = *layout.Compose({layout.MillisToTick(start + 3'600'000), 0, 9, 0});
  stream.push_back(future);
  stream.push_back(-7);
  c.Add(stream);
  const CheckReport r = c.Finish();
  EXPECT_EQ(r.ids, stream.size());
  EXPECT_EQ(r.distinct, stream.size() - 2);
  EXPECT_EQ(r.repeated_values, 1u);
  EXPECT_EQ(r.repeats, 2u);
  ASSERT_EQ(r.repeat_examples.size(), 1u);
  EXPECT_EQ(r.repeat_examples[0].id, repeated);
  EXPECT_EQ(r.repeat_examples[0].occurrences, 3u);
  EXPECT_EQ(r.repeat_examples[0].positions, (std::vector<std::uint64_t>{100, 25'001, 25'002}));
  // Worker 3 went back twice: to 5 s, then to the repeated id's 33 ms.
  EXPECT_EQ(r.order_breaks, 2u);
  ASSERT_EQ(r.order_break_examples.size(), 2u);
  EXPECT_EQ(r.order_break_examples[0].id, back);
  EXPECT_EQ(r.order_break_examples[0].worker, 3);
  EXPECT_EQ(r.order_break_examples[0].previous, stream[24'999]);
  EXPECT_EQ(r.order_break_examples[1].id, repeated);
  EXPECT_EQ(r.future, 1u);
  EXPECT_EQ(r.future_examples[0].id, future);
  EXPECT_EQ(r.before_epoch, 1u);
  EXPECT_EQ(r.before_epoch_examples[0].position, stream.size() - 1);
  EXPECT_EQ(r.workers, 2);
  EXPECT_EQ(r.first_ms, start);
  EXPECT_EQ(r.last_ms, start + 3'600'000);
}

TEST(IdCheckerTest, IdsOutsideTheLayoutAreNamed) {
  CheckOptions o;
  o.layout = *ParseLayout("time_bits=37,shard_bits=4");
  o.now_ms = *ParseUtcMillis("2026-06-01T00:00:00Z");
  IdChecker c(o);
  const Id good = *o.layout.Compose({123456, 0, 5, 1});
  c.Add(good);
  c.Add(good ^ (Id{1} << 60));  // other shard bits
  CheckOptions js;
  js.layout = *Layout::Preset("js53");
  IdChecker small(js);
  small.Add(Id{1} << 53);
  const CheckReport r = c.Finish();
  EXPECT_EQ(r.outside, 1u);
  EXPECT_EQ(r.outside_examples[0].position, 1u);
  EXPECT_EQ(r.repeats, 0u);
  EXPECT_EQ(small.Finish().outside, 1u);
}

}  // namespace
}  // namespace sekka
