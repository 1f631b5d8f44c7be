// TagSeries (server/tag_series.h), rule by rule.
#include "server/tag_series.h"

#include <gtest/gtest.h>

namespace sekka::server {
namespace {

SegmentStats Issued(std::uint64_t n, std::uint64_t fetches = 0) {
  SegmentStats st;
  st.issued = n;
  st.fetches = fetches;
  return st;
}

std::vector<std::string> Names(const TagSplit& s) {
  std::vector<std::string> out;
  for (const auto& [tag, st] : s.own) out.push_back(tag);
  return out;
}

TEST(TagSeriesTest, TheBusiestTakeThePlacesAndTheRestAreSummed) {
  TagSeries t;
  const TagSplit s = t.Split({{"a", Issued(5)}, {"b", Issued(9)}, {"c", Issued(1)}}, 1, 0);
  EXPECT_EQ(Names(s), std::vector<std::string>{"b"});
  EXPECT_EQ(s.summed.issued, 6u);
  EXPECT_TRUE(s.has_sum);
}

TEST(TagSeriesTest, ATagThatIssuedNothingTakesNoPlace) {
  TagSeries t;
  const TagSplit s = t.Split({{"junk", Issued(0)}}, 1, 0);
  EXPECT_TRUE(s.own.empty());
}

TEST(TagSeriesTest, APlaceIsKeptWhenAnotherOvertakesAndTheSumNeverGoesDown) {
  TagSeries t;
  t.Split({{"a", Issued(10, 1)}, {"b", Issued(5, 1)}}, 1, 0);
  const TagSplit s = t.Split({{"a", Issued(11, 1)}, {"b", Issued(500, 9)}}, 1, 1000);
  EXPECT_EQ(Names(s), std::vector<std::string>{"a"});
  EXPECT_EQ(s.summed.fetches, 9u);
}

TEST(TagSeriesTest, AnIdleOrGoneTagGivesItsPlaceAndLeavesItsCountsInTheSum) {
  TagSeries t;
  t.Split({{"a", Issued(10, 2)}, {"b", Issued(5, 3)}}, 1, 0);
  // a idle for the whole window: back to the sum; b, busier, takes the place and leaves its
  // counts behind in the sum.
  const TagSplit s =
      t.Split({{"a", Issued(10, 2)}, {"b", Issued(6, 3)}}, 1, TagSeries::kIdlePlaceMs);
  EXPECT_EQ(Names(s), std::vector<std::string>{"b"});
  EXPECT_EQ(s.summed.fetches, 2u + 3u);  // a's now, and b's it left behind
  // b deleted (no longer served), a gone too: the sum keeps every count it ever had.
  const TagSplit later = t.Split({}, 1, TagSeries::kIdlePlaceMs + 1);
  EXPECT_TRUE(later.own.empty());
  EXPECT_EQ(later.summed.fetches, 5u);
  EXPECT_TRUE(later.has_sum);
}

}  // namespace
}  // namespace sekka::server
