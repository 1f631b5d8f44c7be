#include "sekka/opaque.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "sekka/codec.h"
#include "sekka/snowflake.h"

namespace sekka {
namespace {

const char* kKeys =
    "# rotated once\n"
    "a 000102030405060708090a0b0c0d0e0f\n"
    "b  2B7E151628AED2A6ABF7158809CF4F3C   # the newest\n";

std::unique_ptr<OpaqueCodec> Codec(const Layout& layout, const char* keys = kKeys) {
  return std::move(OpaqueCodec::Create(*ParseOpaqueKeys(keys), layout)).value();
}

TEST(OpaqueTest, RoundTripsInEveryPresetAndStaysInsideTheLayout) {
  for (std::string_view name : Layout::PresetNames()) {
    const Layout layout = *Layout::Preset(name);
    auto c = Codec(layout);
    EXPECT_EQ(c->payload_bits(), layout.max_id() == (Id{1} << 53) - 1 ? 53 : 63) << name;
    for (Id id : {Id{0}, Id{1}, Id{249780180292206592} & layout.max_id(), layout.max_id()}) {
      Result<Id> opaque = c->Encode(id);
      ASSERT_TRUE(opaque.ok()) << name;
      EXPECT_GE(*opaque, 0);
      EXPECT_LE(*opaque, layout.max_id()) << name;
      EXPECT_EQ(*c->Decode(*opaque), id) << name;
      Result<std::string> text = c->EncodeText(id);
      ASSERT_TRUE(text.ok());
      EXPECT_EQ(text->size(), 12u);
      EXPECT_EQ((*text)[0], 'b');
      EXPECT_EQ(*c->DecodeText(*text), id);
    }
    EXPECT_FALSE(c->Encode(-1).ok());
    if (layout.max_id() < (Id{1} << 62)) {
      EXPECT_FALSE(c->Encode(layout.max_id() + 1).ok()) << name;
    }
  }
}

// Known answers, from the first release of opaque ids: a change to FF1, the tweak or the text
// form that would break links already handed out fails here.
TEST(OpaqueTest, KnownAnswersDoNotChange) {
  auto c = Codec(Layout::Default(), "a 000102030405060708090a0b0c0d0e0f\n");
  EXPECT_EQ(*c->EncodeText(123456789), "a0KWecidf9xW");
  EXPECT_EQ(*c->EncodeText(249780180292206592), "a6nMoPmlxzmk");
  auto js = Codec(*Layout::Preset("js53"), "a 000102030405060708090a0b0c0d0e0f\n");
  EXPECT_EQ(*js->Encode(5), 4600072292469881);
}

TEST(OpaqueTest, OldLinksStillDecodeAfterARotation) {
  const Layout layout = Layout::Default();
  auto before = Codec(layout, "a 000102030405060708090a0b0c0d0e0f\n");
  auto after = Codec(layout);
  const std::string link = *before->EncodeText(123456789);
  EXPECT_EQ(link[0], 'a');
  EXPECT_EQ(*after->DecodeText(link), 123456789);
  EXPECT_EQ((*after->EncodeText(123456789))[0], 'b');
  EXPECT_EQ(*after->Decode(*before->Encode(5), 'a'), 5);
  std::string other_version = link;
  other_version[0] = 'z';
  Result<Id> unknown = after->DecodeText(other_version);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  EXPECT_NE(unknown.error().message.find("allowed 'a', 'b'"), std::string::npos);
}

// A thousand consecutive snowflake ids: the opaque ids' order has nothing to do with theirs
// (Spearman's rank correlation near 0; |rho| < 0.1 holds with overwhelming odds for a random
// permutation of 1,000, whose rho has a standard deviation of about 0.03).
TEST(OpaqueTest, ConsecutiveIdsGiveOpaqueIdsWithNoVisibleOrder) {
  const Layout layout = Layout::Default();
  auto c = Codec(layout);
  const Id first = 249780180292206592;
  std::vector<std::pair<Id, int>> opaque;
  std::set<Id> seen;
  for (int i = 0; i < 1000; ++i) {
    const Id o = *c->Encode(first + i);
    opaque.emplace_back(o, i);
    seen.insert(o);
  }
  EXPECT_EQ(seen.size(), 1000u);
  std::sort(opaque.begin(), opaque.end());
  double d2 = 0;
  for (int rank = 0; rank < 1000; ++rank) {
    const double d = rank - opaque[static_cast<std::size_t>(rank)].second;
    d2 += d * d;
  }
  const double n = 1000;
  const double rho = 1 - 6 * d2 / (n * (n * n - 1));
  EXPECT_LT(std::abs(rho), 0.1) << rho;
}

TEST(OpaqueTest, BadKeysAndTextsAreNamed) {
  for (const char* bad :
       {"", "# nothing\n", "ab 000102030405060708090a0b0c0d0e0f\n", "a 0001\n",
        "a 000102030405060708090a0b0c0d0e0g\n",
        "a 000102030405060708090a0b0c0d0e0f\na 000102030405060708090a0b0c0d0e0f\n",
        "! 000102030405060708090a0b0c0d0e0f\n"}) {
    Result<std::vector<OpaqueKey>> keys = ParseOpaqueKeys(bad);
    ASSERT_FALSE(keys.ok()) << bad;
    EXPECT_EQ(keys.error().code, ErrorCode::kInvalidArgument);
  }
  auto c = Codec(Layout::Default());
  for (const char* bad :
       {"", "b", "b0IRzk99Z5u", "b0IRzk99Z5u45", "b0IRzk99Z5u!", "!0IRzk99Z5u4"}) {
    Result<Id> id = c->DecodeText(bad);
    ASSERT_FALSE(id.ok()) << bad;
    EXPECT_NE(id.error().message.find("12 of 0-9A-Za-z"), std::string::npos) << bad;
  }
  Result<std::string> line = NewOpaqueKeyLine('k');
  ASSERT_TRUE(line.ok());
  EXPECT_EQ(line->size(), 34u);
  EXPECT_EQ(ParseOpaqueKeys(*line)->at(0).key.size(), 16u);
  EXPECT_FALSE(NewOpaqueKeyLine('!').ok());
}

}  // namespace
}  // namespace sekka
