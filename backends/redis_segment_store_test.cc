#include "backends/redis_segment_store.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "backends/redis_client.h"
#include "backends/segment_store_uri.h"
#include "testing/segment_store_contract.h"

namespace sekka {
namespace {

// The URI (redis://127.0.0.1:PORT) of the redis-server that the ctest fixture started
// (scripts/redis.sh).
std::string BaseUri() { return FixtureUri("SEKKA_TEST_REDIS_FILE", "Redis", "redis", "redis.sh"); }

// A command on database `db`, for the tests' own reads and writes (as CosId's client would).
RespReply Command(const std::string& db, const std::vector<std::string>& args) {
  static constexpr std::string_view kNone[] = {"x"};
  Result<StoreUri> uri = ParseStoreUri(BaseUri() + "/" + db, "test", kNone);
  EXPECT_TRUE(uri.ok());
  Result<std::unique_ptr<RedisClient>> redis = RedisClient::Open(*uri, "test", "test");
  EXPECT_TRUE(redis.ok()) << redis.error().message;
  Result<RespReply> r = (*redis)->Call(args);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? *r : RespReply{};
}

// A fresh database per case (the server has 100,000), numbered by a counter in database 0 so
// that test processes running at once never share one.
std::string FreshDatabase() {
  return std::to_string(1000 + Command("0", {"INCR", "sekka-test:databases"}).integer);
}

StoreFactory Factory(const std::string& schema) {
  return StoreFactory{"redis_" + schema,
                      [schema] { return BaseUri() + "/" + FreshDatabase() + "?schema=" + schema; },
                      [](const std::string& uri) -> std::unique_ptr<SegmentStore> {
                        Result<std::unique_ptr<SegmentStore>> s = OpenRedisSegmentStore(uri);
                        return s.ok() ? std::move(s).value() : nullptr;
                      },
                      true,
                      schema == "sekka",
                      schema == "sekka"};
}

INSTANTIATE_TEST_SUITE_P(Redis, SegmentStoreContractTest,
                         ::testing::Values(Factory("sekka"), Factory("cosid")),
                         [](const auto& info) { return info.param.name; });

// CosId's RedisIdSegmentDistributor: SETNX of the offset, then INCRBY by its step; it issues
// (max - step, max]. Beside two sekka stores on the same counter, no id is covered twice.
TEST(RedisSegmentStoreTest, CosIdsOwnDistributorAndSekkaShareACounterWithoutOverlap) {
  const std::string db = FreshDatabase();
  const std::string key = "cosid:{orders.order_id}.adder";
  Command(db, {"SETNX", key, "0"});
  const std::string uri = BaseUri() + "/" + db + "?schema=cosid";
  const auto cosid_takes = [&] {
    const std::int64_t max = Command(db, {"INCRBY", key, "100"}).integer;
    return std::optional(IdRange{max - 100 + 1, max + 1});
  };
  const auto open = [&] { return std::move(OpenRedisSegmentStore(uri)).value(); };
  std::vector<IdRange> all = DrawBeside(open, "orders.order_id", cosid_takes, 2, 200, 200);
  ExpectContiguous(all, 1);
  const std::int64_t end =
      std::max_element(all.begin(), all.end(), [](auto& a, auto& b) { return a.end < b.end; })->end;
  Result<TagInfo> info = std::move(OpenRedisSegmentStore(uri)).value()->GetTag("orders.order_id");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->next_id, end);
  EXPECT_EQ(info->step, 100) << "a tag CosId made has CosId's default step";
}

TEST(RedisSegmentStoreTest, AnUnreachableRedisIsUnavailableAndNamed) {
  auto store = std::move(OpenRedisSegmentStore("redis://sekka:pw@127.0.0.1:1/0")).value();
  Result<Allocation> r = store->Allocate("t", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find("is unreachable"), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.find("pw"), std::string::npos) << "the password must not leak";
}

TEST(RedisSegmentStoreTest, AWrongPasswordIsNamedInOneLine) {
  const std::string base = BaseUri();
  auto wrong = std::move(OpenRedisSegmentStore("redis://nobody:secret@" +
                                               base.substr(base.find("//") + 2) + "/0"))
                   .value();
  Result<Allocation> r = wrong->Allocate("t", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find("AUTH refused"), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.find("secret"), std::string::npos);
}

TEST(RedisSegmentStoreTest, BadUrisAreInvalidArgumentsNamingWhatIsAllowed) {
  for (const auto& [uri, says] : std::vector<std::pair<std::string, std::string>>{
           {"redis://127.0.0.1:6379/0?schema=leaf", "allowed sekka, cosid"},
           {"redis://127.0.0.1:6379/0?db=1", "allowed durability, eviction, tls_ca_file"},
           {"redis://127.0.0.1:6379/0?durability=some", "allowed fsync (the default) or any"},
           {"redis://127.0.0.1:6379/0?eviction=lru", "allowed none (the default) or any"},
           {"redis://127.0.0.1:6379/x", "is a number"},
           {"rediss://127.0.0.1:6379/0", "without tls_ca_file"},
           {"redis://127.0.0.1:6379/0?tls_ca_file=/x", "use rediss://"},
           {"rediss://127.0.0.1/0?tls_ca_file=/nonexistent", "tls_ca_file = \"/nonexistent\""}}) {
    Result<std::unique_ptr<SegmentStore>> s = OpenRedisSegmentStore(uri);
    ASSERT_FALSE(s.ok()) << uri;
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(s.error().message.find(says), std::string::npos) << s.error().message;
  }
  EXPECT_TRUE(OpenSegmentStore(BaseUri(), "/tmp").ok());
}

}  // namespace
}  // namespace sekka
