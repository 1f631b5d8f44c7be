#include <gtest/gtest.h>

#include <string>

#include "sekka/segment.h"
#include "testing/segment_store_contract.h"

namespace sekka {
namespace {

INSTANTIATE_TEST_SUITE_P(Memory, SegmentStoreContractTest, ::testing::Values(MemoryStoreFactory()));

TEST(SegmentTagTest, ValidatesNames) {
  EXPECT_TRUE(ValidateTag("orders.eu-1:v2_x").ok());
  // Issue 40: what Leaf's and tinyid's VARCHAR columns hold is served.
  EXPECT_TRUE(ValidateTag("order/cn east").ok());
  EXPECT_TRUE(ValidateTag("\xe8\xae\xa2\xe5\x8d\x95").ok());  // 订单
  EXPECT_TRUE(ValidateTag("a%2F\"{b}\\ \xf0\x9f\x98\x80").ok());
  EXPECT_TRUE(ValidateTag(std::string(128, 'a')).ok());
  std::string wide;  // 128 characters of three bytes
  for (int i = 0; i < 128; ++i) wide += "\xe8\xae\xa2";
  EXPECT_TRUE(ValidateTag(wide).ok());
  EXPECT_FALSE(ValidateTag(wide + "a").ok());
  EXPECT_FALSE(ValidateTag("").ok());
  EXPECT_FALSE(ValidateTag(std::string(129, 'a')).ok());
  using std::string_literals::operator""s;
  for (const std::string& bad : {"tab\there"s, "nl\n"s, "del\x7f"s, "c1\xc2\x85"s, "nul\0x"s,
                                 "\xc3"s,          // cut short
                                 "\xc0\xaf"s,      // an overlong '/'
                                 "\xed\xa0\x80"s,  // a surrogate
                                 "\xf4\x90\x80\x80"s, "\xff"s, "\x80"s}) {
    EXPECT_FALSE(ValidateTag(bad).ok()) << ShownTag(bad);
  }
  Status s = ValidateTag("bad\ttag");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message,
            "tag \"bad\\x09tag\" is not valid: allowed 1 to 128 characters of UTF-8 without "
            "control characters");
}

TEST(SegmentTagTest, ShowsNamesAsGivenWithControlsAndStrayBytesEscaped) {
  EXPECT_EQ(ShownTag("caf\xc3\xa9 \"x\"\n"), "caf\xc3\xa9 \\\"x\\\"\\x0a");
  EXPECT_EQ(ShownTag("a\xff\xc3"), "a\\xff\\xc3");
  EXPECT_EQ(ShownTag("c1\xc2\x85"), "c1\\xc2\\x85");
  std::string long_name;
  for (int i = 0; i < 70; ++i) long_name += "\xe8\xae\xa2";
  std::string cut;
  for (int i = 0; i < 60; ++i) cut += "\xe8\xae\xa2";
  EXPECT_EQ(ShownTag(long_name), cut + "...");  // cut between characters, never inside one
}

}  // namespace
}  // namespace sekka
