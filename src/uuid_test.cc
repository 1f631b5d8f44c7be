#include "sekka/uuid.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "testing/fake_clock.h"

namespace sekka {
namespace {

TEST(UuidTest, UuidV7HasItsVersionVariantAndTime) {
  FakeClock clock(1'795'391'493'815);
  TimeOrderedGenerator g(clock, TimeOrderedKind::kUuidV7);
  const Uuid u = *g.Next();
  EXPECT_EQ(UuidVersion(u), 7);
  EXPECT_EQ(u.lo >> 62, 2u);  // variant 0b10
  EXPECT_EQ(UuidMillis(u), 1'795'391'493'815);
  const std::string text = FormatUuid(u);
  ASSERT_EQ(text.size(), 36u);
  EXPECT_EQ(text[14], '7');
  EXPECT_TRUE(text[19] == '8' || text[19] == '9' || text[19] == 'a' || text[19] == 'b');
  EXPECT_EQ(*ParseUuid(text), u);
  std::string upper = text;
  std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
  EXPECT_EQ(*ParseUuid(upper), u);
}

TEST(UuidTest, UlidTextRoundTripsAndDecodesTheTime) {
  FakeClock clock(1'469'918'176'385);  // the spec's example time
  TimeOrderedGenerator g(clock, TimeOrderedKind::kUlid);
  const Uuid u = *g.Next();
  const std::string text = FormatUlid(u);
  ASSERT_EQ(text.size(), 26u);
  EXPECT_EQ(text.substr(0, 10), "01ARYZ6S41");  // the spec's example timestamp prefix
  EXPECT_EQ(*ParseUlid(text), u);
  EXPECT_EQ(UuidMillis(*ParseUlid(text)), 1'469'918'176'385);
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  EXPECT_EQ(*ParseUlid(lower), u);
  EXPECT_EQ(*ParseUlid("7ZZZZZZZZZZZZZZZZZZZZZZZZZ"), (Uuid{~0ull, ~0ull}));
}

TEST(UuidTest, StrictlyIncreasingWithinAMillisecondAcrossBatchesAndAStepBack) {
  for (TimeOrderedKind kind : {TimeOrderedKind::kUuidV7, TimeOrderedKind::kUlid}) {
    FakeClock clock(1'000'000);
    TimeOrderedGenerator g(clock, kind);
    std::vector<Uuid> ids(10'000);  // more than one millisecond's UUIDv7 counter holds
    ASSERT_TRUE(g.NextBatch(ids).ok());
    clock.SetMillis(900'000);  // a step back
    for (int i = 0; i < 100; ++i) ids.push_back(*g.Next());
    clock.SetMillis(2'000'000);
    ids.push_back(*g.Next());
    for (std::size_t i = 1; i < ids.size(); ++i) ASSERT_LT(ids[i - 1], ids[i]) << i;
    EXPECT_EQ(UuidMillis(ids.back()), 2'000'000);
    EXPECT_GE(UuidMillis(ids[100]), 1'000'000);
  }
}

TEST(UuidTest, ThreadsTogetherGetIncreasingDistinctIds) {
  Clock& clock = SystemClock();
  for (TimeOrderedKind kind : {TimeOrderedKind::kUuidV7, TimeOrderedKind::kUlid}) {
    TimeOrderedGenerator g(clock, kind);
    std::vector<std::vector<Uuid>> per(4);
    std::vector<std::thread> threads;
    for (auto& mine : per) {
      threads.emplace_back([&] {
        for (int i = 0; i < 20'000; ++i) mine.push_back(*g.Next());
      });
    }
    for (auto& t : threads) t.join();
    std::vector<Uuid> all;
    for (const auto& mine : per) {
      for (std::size_t i = 1; i < mine.size(); ++i) ASSERT_LT(mine[i - 1], mine[i]);
      all.insert(all.end(), mine.begin(), mine.end());
    }
    std::sort(all.begin(), all.end());
    EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
  }
}

TEST(UuidTest, BadTextsAreNamed) {
  for (const char* bad :
       {"", "0190c8e4-7f3a-7c01-9a3e-5b1d2f4c6e8", "0190c8e47f3a-7c01-9a3e-5b1d2f4c6e8a0",
        "0190c8e4-7f3a-7c01-9a3e-5b1d2f4c6e8g"}) {
    EXPECT_NE(ParseUuid(bad).error().message.find("8-4-4-4-12"), std::string::npos) << bad;
  }
  for (const char* bad : {"", "01ARYZ6S41", "81ARYZ6S41TSV4RRFFQ69G5FAV",
                          "01ARYZ6S41TSV4RRFFQ69G5FAU!", "01ARYZ6S41TSV4RRFFQ69G5FA!"}) {
    EXPECT_NE(ParseUlid(bad).error().message.find("26 Crockford base32"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace sekka
