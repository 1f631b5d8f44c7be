#include <gtest/gtest.h>

#include "sekka/segment.h"
#include "testing/segment_store_contract.h"

namespace sekka {
namespace {

INSTANTIATE_TEST_SUITE_P(Memory, SegmentStoreContractTest, ::testing::Values(MemoryStoreFactory()));

TEST(SegmentTagTest, ValidatesNames) {
  EXPECT_TRUE(ValidateTag("orders.eu-1:v2_x").ok());
  EXPECT_FALSE(ValidateTag("").ok());
  EXPECT_FALSE(ValidateTag(std::string(129, 'a')).ok());
  Status s = ValidateTag("bad/tag");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("allowed 1 to 128 characters of A-Z a-z 0-9 _ . : -"),
            std::string::npos);
  // Issue 40: "order/cn east" was shown as "order?cn?east".
  EXPECT_NE(ValidateTag("order/cn east").error().message.find("tag \"order/cn east\" is not"),
            std::string::npos);
  EXPECT_EQ(ShownTag("caf\xc3\xa9 \"x\"\n"), "caf\\xc3\\xa9 \\\"x\\\"\\x0a");
}

}  // namespace
}  // namespace sekka
