#include "sekka/codec.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <string>

namespace sekka {
namespace {

constexpr Id kMaxId = std::numeric_limits<Id>::max();
const Layout kDefault = Layout::Default();

std::string Fmt(Id id, IdFormat f, const Layout& l = kDefault) { return FormatId(id, f, l); }

Error ParseError(std::string_view text, IdFormat f, const Layout& l = kDefault) {
  Result<Id> r = ParseId(text, f, l);
  EXPECT_FALSE(r.ok()) << text;
  if (r.ok()) return Error{};
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().message.find('\n'), std::string::npos);
  return r.error();
}

bool Contains(const Error& e, std::string_view piece) {
  return e.message.find(piece) != std::string::npos;
}

TEST(CodecTest, FormatsTheEdgesInEveryForm) {
  EXPECT_EQ(Fmt(0, IdFormat::kDec), "0");
  EXPECT_EQ(Fmt(kMaxId, IdFormat::kDec), "9223372036854775807");
  EXPECT_EQ(Fmt(0, IdFormat::kHex), "0000000000000000");
  EXPECT_EQ(Fmt(kMaxId, IdFormat::kHex), "7fffffffffffffff");
  EXPECT_EQ(Fmt(255, IdFormat::kHex), "00000000000000ff");
  EXPECT_EQ(Fmt(0, IdFormat::kBase32), "0000000000000");
  EXPECT_EQ(Fmt(kMaxId, IdFormat::kBase32), "7ZZZZZZZZZZZZ");
  EXPECT_EQ(Fmt(31, IdFormat::kBase32), "000000000000Z");
  EXPECT_EQ(Fmt(0, IdFormat::kBase62), "00000000000");
  EXPECT_EQ(Fmt(61, IdFormat::kBase62), "0000000000z");
  EXPECT_EQ(Fmt(kMaxId, IdFormat::kBase62), "AzL8n0Y58m7");
}

TEST(CodecTest, FormatsDecimalLikeTheStandardLibrary) {
  for (Id id : {Id{0}, Id{9}, Id{10}, Id{99}, Id{100}, Id{12345678901234}, kMaxId}) {
    char buf[20];
    EXPECT_EQ(std::string(buf, FormatDec(id, buf)), std::to_string(id));
  }
}

TEST(CodecTest, FriendlyShowsUtcTimeWorkerAndSequence) {
  Result<Id> id = kDefault.Compose({1000, 0, 7, 42});  // 1 s after 2025-01-01
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(Fmt(*id, IdFormat::kFriendly), "20250101000001000-7-42");
  const Layout twitter = *Layout::Preset("twitter");
  Result<Id> tid = twitter.Compose({0, 3, 4, 5});
  ASSERT_TRUE(tid.ok());
  EXPECT_EQ(Fmt(*tid, IdFormat::kFriendly, twitter), "20101104014254657-3-4-5");
  EXPECT_EQ(*ParseId("20101104014254657-3-4-5", IdFormat::kFriendly, twitter), *tid);
}

TEST(CodecTest, Base32ParsingIgnoresCaseAndReadsLookalikes) {
  EXPECT_EQ(*ParseId("000000000000z", IdFormat::kBase32, kDefault), 31);
  EXPECT_EQ(*ParseId("000000000000I", IdFormat::kBase32, kDefault), 1);
  EXPECT_EQ(*ParseId("000000000000l", IdFormat::kBase32, kDefault), 1);
  EXPECT_EQ(*ParseId("00000000000o0", IdFormat::kBase32, kDefault), 0);
}

TEST(CodecTest, RejectsBadTextWithAnErrorNamingWhatIsAllowed) {
  EXPECT_TRUE(Contains(ParseError("", IdFormat::kDec), "empty"));
  EXPECT_TRUE(Contains(ParseError("-5", IdFormat::kDec), "negative"));
  EXPECT_TRUE(Contains(ParseError("12a", IdFormat::kDec), "\"a\" at position 3"));
  EXPECT_TRUE(Contains(ParseError("9223372036854775808", IdFormat::kDec), "too large"));
  EXPECT_TRUE(Contains(ParseError("99999999999999999999999", IdFormat::kDec), "too large"));
  EXPECT_TRUE(Contains(ParseError("abc", IdFormat::kHex), "has 3 characters: allowed exactly 16"));
  EXPECT_TRUE(Contains(ParseError("000000000000000g", IdFormat::kHex), "\"g\" at position 16"));
  EXPECT_TRUE(Contains(ParseError("8000000000000000", IdFormat::kHex), "2^63 or more"));
  EXPECT_TRUE(Contains(ParseError("000000000000U", IdFormat::kBase32), "\"U\" at position 13"));
  EXPECT_TRUE(Contains(ParseError("8000000000000", IdFormat::kBase32), "2^63 or more"));
  EXPECT_TRUE(Contains(ParseError("0000000000", IdFormat::kBase62), "allowed exactly 11"));
  EXPECT_TRUE(Contains(ParseError("zzzzzzzzzzz", IdFormat::kBase62), "2^63 or more"));
  EXPECT_TRUE(Contains(ParseError("0000000000-", IdFormat::kBase62), "\"-\" at position 11"));
  EXPECT_TRUE(Contains(ParseError("2025-7-1", IdFormat::kFriendly), "17 digits of time"));
  EXPECT_TRUE(Contains(ParseError("20251301000000000-1-1", IdFormat::kFriendly), "impossible"));
  EXPECT_TRUE(Contains(ParseError("20250101000000000-1", IdFormat::kFriendly), "too few parts"));
  EXPECT_TRUE(Contains(ParseError("20250101000000000-1-1-1", IdFormat::kFriendly), "extra"));
  EXPECT_TRUE(Contains(ParseError("20250101000000000-5000-1", IdFormat::kFriendly),
                       "worker id 5000 does not fit"));
  EXPECT_TRUE(Contains(ParseError("\x01\xff", IdFormat::kDec), "\\x01"));
}

TEST(CodecTest, ParsesFormatNames) {
  EXPECT_EQ(*ParseIdFormat("base62"), IdFormat::kBase62);
  Result<IdFormat> bad = ParseIdFormat("base64");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("dec, hex, base32, base62, friendly"), std::string::npos);
}

TEST(CodecTest, FormatsAndParsesUtcTimes) {
  EXPECT_EQ(FormatUtcMillis(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatUtcMillis(1735689600000), "2025-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatUtcMillis(1767323045678), "2026-01-02T03:04:05.678Z");
  EXPECT_EQ(*ParseUtcMillis("2026-01-02T03:04:05.678Z"), 1767323045678);
  EXPECT_EQ(*ParseUtcMillis("2026-01-02"), 1767312000000);
  EXPECT_EQ(*ParseUtcMillis("2016-05-20T00:00:00+08:00"), 1463673600000);
  EXPECT_EQ(*ParseUtcMillis("2026-01-02T03:04:05.6"), 1767323045600);
  EXPECT_EQ(*ParseUtcMillis("1288834974657"), 1288834974657);
  EXPECT_FALSE(ParseUtcMillis("2026-02-30").ok());
  EXPECT_FALSE(ParseUtcMillis("2026-01-02T25:00:00Z").ok());
  EXPECT_FALSE(ParseUtcMillis("yesterday").ok());
  EXPECT_FALSE(ParseUtcMillis("").ok());
}

// Properties.
rc::Gen<Id> AnyId() {
  return rc::gen::oneOf(
      rc::gen::inRange<Id>(0, kMaxId),
      rc::gen::elementOf(std::vector<Id>{0, 1, kMaxId, kMaxId - 1}),
      rc::gen::map(rc::gen::inRange(0, 63), [](int b) { return (Id{1} << b) - 1; }));
}

RC_GTEST_PROP(CodecProperty, EveryFormatRoundTrips, ()) {
  const Id id = *AnyId();
  for (IdFormat f : {IdFormat::kDec, IdFormat::kHex, IdFormat::kBase32, IdFormat::kBase62,
                     IdFormat::kFriendly}) {
    Result<Id> back = ParseId(FormatId(id, f, kDefault), f, kDefault);
    RC_ASSERT(back.ok());
    RC_ASSERT(*back == id);
  }
}

RC_GTEST_PROP(CodecProperty, FixedWidthTextOrderIsNumericOrder, ()) {
  const Id a = *AnyId();
  const Id b = *AnyId();
  for (IdFormat f : {IdFormat::kHex, IdFormat::kBase32, IdFormat::kBase62}) {
    const std::string ta = FormatId(a, f, kDefault), tb = FormatId(b, f, kDefault);
    RC_ASSERT((ta < tb) == (a < b));
    RC_ASSERT(ta.size() == tb.size());
  }
}

RC_GTEST_PROP(CodecProperty, DecomposeInvertsComposeForEveryPreset, ()) {
  const auto name = *rc::gen::elementOf(Layout::PresetNames());
  const Layout l = *Layout::Preset(name);
  IdFields f;
  f.tick = *rc::gen::inRange<std::int64_t>(0, l.max_tick() + 1);
  f.datacenter = *rc::gen::inRange<std::int64_t>(0, l.datacenter_ids());
  f.worker = *rc::gen::inRange<std::int64_t>(0, l.worker_ids_per_datacenter());
  f.sequence = *rc::gen::inRange<std::int64_t>(0, l.ids_per_tick());
  Result<Id> id = l.Compose(f);
  RC_ASSERT(id.ok());
  RC_ASSERT(*l.Decompose(*id) == f);
  // And through the friendly text, which carries every field.
  RC_ASSERT(*ParseId(FormatId(*id, IdFormat::kFriendly, l), IdFormat::kFriendly, l) == *id);
}

}  // namespace
}  // namespace sekka

namespace sekka {
namespace {

TEST(DurationTest, ParsesUnitsAndRejectsTheRest) {
  EXPECT_EQ(*ParseDurationMillis("250ms"), 250);
  EXPECT_EQ(*ParseDurationMillis("5s"), 5000);
  EXPECT_EQ(*ParseDurationMillis("2m"), 120000);
  EXPECT_EQ(*ParseDurationMillis("1h"), 3600000);
  EXPECT_EQ(*ParseDurationMillis("0"), 0);
  for (const char* bad : {"", "5", "ms", "-1s", "1.5s", "5 s", "10d", "9999999999999s"}) {
    Result<std::int64_t> r = ParseDurationMillis(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find("allowed a whole number with ms, s, m or h"),
              std::string::npos);
  }
}

TEST(CodecTest, IsoDurationsAsJavaWritesThem) {
  const std::pair<const char*, std::int64_t> good[] = {
      {"PT5M", 300'000}, {"PT1H30M", 5'400'000}, {"PT0.5S", 500},
      {"PT0.0005S", 0},  {"P2D", 172'800'000},   {"PT48H", 172'800'000},
      {"pt10s", 10'000}, {"P1DT1S", 86'401'000}, {"PT1,25S", 1250},
      {"PT0S", 0},
  };
  for (const auto& [text, ms] : good) {
    Result<std::int64_t> d = ParseIsoDurationMillis(text);
    ASSERT_TRUE(d.ok()) << text << ": " << d.error().message;
    EXPECT_EQ(*d, ms) << text;
  }
  for (const char* bad : {"", "P", "PT", "5M", "PT5", "PT-5S", "-PT5S", "PT5M1H", "PT1.5M", "P1H",
                          "PT1D", "PT5MT1S", "PT1.S", "PT99999999999999999S", "PT5S ", "5s"}) {
    Result<std::int64_t> d = ParseIsoDurationMillis(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_NE(d.error().message.find("allowed ISO-8601"), std::string::npos);
  }
}

TEST(Base64Test, Rfc4648VectorsAndStrictDecoding) {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, coded] : vectors) {
    EXPECT_EQ(Base64Encode(plain), coded);
    Result<std::string> back = Base64Decode(coded);
    ASSERT_TRUE(back.ok()) << coded;
    EXPECT_EQ(*back, plain);
  }
  const std::string bytes("\0\xff\x10:x", 5);
  EXPECT_EQ(*Base64Decode(Base64Encode(bytes)), bytes);
  for (const char* bad : {"Zg=", "Zg", "Z===", "Zg==Zg==", "Zm9v YmFy", "Zm9\n", "Zm9-"}) {
    Result<std::string> r = Base64Decode(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find("is not base64"), std::string::npos) << r.error().message;
  }
}

}  // namespace
}  // namespace sekka
