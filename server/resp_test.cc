#include "server/resp.h"

#include <gtest/gtest.h>

namespace sekka::resp {
namespace {

const Limits kLimits;

TEST(RespTest, ParsesAMultibulkCommand) {
  const std::string in = "*2\r\n$8\r\nID.BATCH\r\n$2\r\n10\r\n";
  ParseResult r = ParseCommand(in, kLimits);
  ASSERT_EQ(r.status, ParseStatus::kComplete);
  EXPECT_EQ(r.consumed, in.size());
  ASSERT_EQ(r.args.size(), 2u);
  EXPECT_EQ(r.args[0], "ID.BATCH");
  EXPECT_EQ(r.args[1], "10");
}

TEST(RespTest, ParsesAnInlineCommand) {
  ParseResult r = ParseCommand("PING hello\r\nrest", kLimits);
  ASSERT_EQ(r.status, ParseStatus::kComplete);
  EXPECT_EQ(r.consumed, 12u);
  ASSERT_EQ(r.args.size(), 2u);
  EXPECT_EQ(r.args[1], "hello");
}

TEST(RespTest, AsksForMoreWhenBulkStringIsSplit) {
  EXPECT_EQ(ParseCommand("*1\r\n$4\r\nNE", kLimits).status, ParseStatus::kNeedMore);
}

TEST(RespTest, ACommandSplitAtEveryByteOffsetParsesTheSame) {
  const std::string in = "*3\r\n$8\r\nSEG.NEXT\r\n$5\r\norder\r\n$3\r\n100\r\n";
  for (std::size_t cut = 0; cut < in.size(); ++cut) {
    ParseResult part = ParseCommand(std::string_view(in).substr(0, cut), kLimits);
    EXPECT_EQ(part.status, ParseStatus::kNeedMore) << "cut at " << cut;
  }
  ParseResult whole = ParseCommand(in, kLimits);
  ASSERT_EQ(whole.status, ParseStatus::kComplete);
  EXPECT_EQ(whole.args.size(), 3u);
}

TEST(RespTest, EmptyArraysAreSkipped) {
  ParseResult r = ParseCommand("*0\r\n", kLimits);
  EXPECT_EQ(r.status, ParseStatus::kComplete);
  EXPECT_TRUE(r.args.empty());
  EXPECT_EQ(r.consumed, 4u);
}

TEST(RespTest, RejectsWhatRedisRejects) {
  auto error = [](std::string_view in) {
    ParseResult r = ParseCommand(in, kLimits);
    EXPECT_EQ(r.status, ParseStatus::kMalformed) << in;
    return r.error;
  };
  EXPECT_EQ(error("*x\r\n"), "Protocol error: invalid multibulk length");
  EXPECT_EQ(error("*100000\r\n"), "Protocol error: invalid multibulk length");
  EXPECT_EQ(error("*1\r\n$99999999\r\n"), "Protocol error: invalid bulk length");
  EXPECT_EQ(error("*1\r\n$-5\r\n"), "Protocol error: invalid bulk length");
  EXPECT_EQ(error("*1\r\n+OK\r\n"), "Protocol error: expected '$', got '+'");
  EXPECT_EQ(error("*1\r\n$2\r\nabcd\r\n"), "Protocol error: bulk string not terminated by CRLF");
  EXPECT_EQ(error("*1" + std::string(100, '1')), "Protocol error: invalid multibulk length");
  EXPECT_EQ(error(std::string(70 * 1024, 'a')), "Protocol error: too big inline request");
}

TEST(RespTest, WritesReplies) {
  std::string out;
  AppendSimple(out, "OK");
  AppendError(out, "ERR bad\r\nthing");
  AppendInteger(out, 42);
  AppendInteger(out, -1);
  AppendBulk(out, "hi");
  AppendNull(out);
  AppendArrayHeader(out, 2);
  EXPECT_EQ(out, "+OK\r\n-ERR bad  thing\r\n:42\r\n:-1\r\n$2\r\nhi\r\n$-1\r\n*2\r\n");
}

}  // namespace
}  // namespace sekka::resp
