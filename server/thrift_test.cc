#include "server/thrift.h"

#include <gtest/gtest.h>

#include <string>

namespace sekka::thrift {
namespace {

std::string U32(std::uint32_t v) {
  std::string s;
  for (int shift = 24; shift >= 0; shift -= 8) s += static_cast<char>((v >> shift) & 0xff);
  return s;
}

std::string Frame(const std::string& body) {
  return U32(static_cast<std::uint32_t>(body.size())) + body;
}

std::string StrictCall(const std::string& name, std::int32_t seqid, const std::string& args) {
  return Frame(U32(0x80010001) + U32(static_cast<std::uint32_t>(name.size())) + name +
               U32(static_cast<std::uint32_t>(seqid)) + args);
}

const Limits kLimits;

TEST(ThriftTest, ReadsAStrictCallWithAStringArgument) {
  const std::string args = std::string("\x0b\x00\x01", 3) + U32(5) + "myapp" + '\0';
  const std::string frame = StrictCall("get_id", 9, args);
  ParseOutcome o = ParseFrame(frame + "more", kLimits);
  ASSERT_EQ(o.kind, ParseOutcome::Kind::kCall) << o.error;
  EXPECT_EQ(o.consumed, frame.size());
  EXPECT_EQ(o.call.name, "get_id");
  EXPECT_EQ(o.call.seqid, 9);
  EXPECT_EQ(o.call.type, MessageType::kCall);
  EXPECT_EQ(o.call.strings.at(1), "myapp");
}

TEST(ThriftTest, ReadsAnOldStyleCallAndSkipsFieldsOfEveryType) {
  std::string args;
  args += std::string("\x02\x00\x02\x01", 4);                       // bool
  args += std::string("\x04\x00\x03", 3) + std::string(8, '\x01');  // double
  args += std::string("\x0f\x00\x04\x06", 4) + U32(2) +
          std::string("\x00\x01\x00\x02", 4);  // list<i16>
  args +=
      std::string("\x0d\x00\x05\x0b\x0c", 5) + U32(1) + U32(1) + "k" + '\0';  // map<string,struct>
  args += '\0';
  std::string body = U32(6) + "get_id" + '\x01' + U32(3) + args;
  ParseOutcome o = ParseFrame(Frame(body), kLimits);
  ASSERT_EQ(o.kind, ParseOutcome::Kind::kCall) << o.error;
  EXPECT_EQ(o.call.name, "get_id");
  EXPECT_EQ(o.call.seqid, 3);
  EXPECT_TRUE(o.call.strings.empty());
}

TEST(ThriftTest, WaitsForAWholeFrame) {
  const std::string frame = StrictCall("get_worker_id", 1, std::string(1, '\0'));
  for (std::size_t cut = 0; cut < frame.size(); ++cut) {
    EXPECT_EQ(ParseFrame(frame.substr(0, cut), kLimits).kind, ParseOutcome::Kind::kNeedMore) << cut;
  }
}

TEST(ThriftTest, RejectsBadFramesAndMessagesWithAReason) {
  for (std::uint32_t length : {0u, 0x80000000u, 64u * 1024 + 1, 0x47455420u /* "GET " */}) {
    ParseOutcome o = ParseFrame(U32(length) + "xxxx", kLimits);
    EXPECT_EQ(o.kind, ParseOutcome::Kind::kBadFrame) << length;
    EXPECT_NE(o.error.find("allowed 1 to 65536"), std::string::npos) << o.error;
  }
  const std::string lies[] = {
      Frame(U32(0x80020001) + U32(0) + U32(1) + '\0'),  // another version
      StrictCall("get_id", 1, std::string("\x0f\x00\x01\x0b", 4) + U32(0x7fffffff)),
      StrictCall("get_id", 1, std::string("\x0b\x00\x01", 3) + U32(1000) + "ab"),
      StrictCall("get_id", 1, std::string("\x07\x00\x01", 3)),  // no type 7
      StrictCall("get_id", 1, std::string(1, '\0') + "x"),      // bytes after the end
      StrictCall("get_id", 1, ""),                              // no stop byte
  };
  for (const std::string& frame : lies) {
    ParseOutcome o = ParseFrame(frame, kLimits);
    EXPECT_EQ(o.kind, ParseOutcome::Kind::kBadMessage);
    EXPECT_EQ(o.consumed, frame.size());
    EXPECT_FALSE(o.error.empty());
  }
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += std::string("\x0c\x00\x01", 3);
  ParseOutcome o = ParseFrame(StrictCall("get_id", 1, deep + std::string(41, '\0')), kLimits);
  EXPECT_EQ(o.kind, ParseOutcome::Kind::kBadMessage);
  EXPECT_NE(o.error.find("nested too deeply"), std::string::npos) << o.error;
}

TEST(ThriftTest, WritesRepliesAndExceptionsThatReadBack) {
  std::string out;
  AppendI64Reply(out, "get_id", 77, -2);
  AppendException(out, "get_id", 78, ExceptionType::kInternalError, "clock moved backwards");
  Limits big;
  ParseOutcome reply = ParseFrame(out, big);
  ASSERT_EQ(reply.kind, ParseOutcome::Kind::kCall) << reply.error;
  EXPECT_EQ(reply.call.type, MessageType::kReply);
  EXPECT_EQ(reply.call.seqid, 77);
  // The i64 success field, big-endian, after the header.
  EXPECT_EQ(out.substr(4 + 4 + 4 + 6 + 4, 3), std::string("\x0a\x00\x00", 3));
  EXPECT_EQ(out.substr(4 + 4 + 4 + 6 + 4 + 3, 8), std::string(8, '\xff').replace(7, 1, "\xfe"));
  ParseOutcome exception = ParseFrame(std::string_view(out).substr(reply.consumed), big);
  ASSERT_EQ(exception.kind, ParseOutcome::Kind::kCall) << exception.error;
  EXPECT_EQ(exception.call.type, MessageType::kException);
  EXPECT_EQ(exception.call.seqid, 78);
  EXPECT_EQ(exception.call.strings.at(1), "clock moved backwards");
  EXPECT_EQ(reply.consumed + exception.consumed, out.size());
}

}  // namespace
}  // namespace sekka::thrift
