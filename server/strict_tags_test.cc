// One server's strict tags (server/strict_tags.h) on the memory registry, a namespace per tag,
// under a FakeClock: the table's bound and how idle tags are let go.

#include "server/strict_tags.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sekka/coordinator.h"
#include "sekka/worker_lease.h"
#include "testing/fake_clock.h"

namespace sekka::server {
namespace {

constexpr std::int64_t kIdleMs = kStrictIdleRelease.count();

class StrictTagsTest : public ::testing::Test {
 protected:
  StrictTagsTest() { tags_.SetAddress("127.0.0.1:7000"); }

  // Time passes in steps of 1 s, the background thread ticking after each (leases renewed).
  void Pass(std::int64_t ms) {
    for (std::int64_t done = 0; done < ms; done += 1000) {
      clock_.AdvanceMillis(std::min<std::int64_t>(1000, ms - done));
      tags_.Tick();
    }
  }

  // Who holds `tag`'s lease at the coordinator ("" when nobody).
  std::string Holder(const std::string& tag) {
    Result<std::map<std::int64_t, Holding>> holders =
        Registry(tag).NewCoordinator(Options("directory"))->ListHolders();
    if (!holders.ok() || holders->empty()) return "";
    return holders->begin()->second.identity;
  }

  FakeClock clock_{1'700'000'000'000};
  std::vector<std::string> forgotten_;  // tags whose lookup sessions were closed
  std::map<std::string, std::unique_ptr<WorkerLeaseRegistry>> registries_;
  StrictTags tags_{Coordination(),        clock_,          StrictOptions{},
                   /*tick_thread=*/false, {"a", "b", "c"}, /*max_tags=*/2};

 private:
  WorkerLeaseRegistry& Registry(const std::string& tag) {
    std::unique_ptr<WorkerLeaseRegistry>& r = registries_[tag];
    if (r == nullptr) r = NewMemoryWorkerLeaseRegistry(&clock_);
    return *r;
  }

  WorkerLeaseOptions Options(const std::string& identity) {
    WorkerLeaseOptions o;
    o.identity = identity;
    o.worker_count = 1;
    o.keep_id = true;
    o.layout = "strict counter";
    o.clock = &clock_;
    return o;
  }

  StrictCoordination Coordination() {
    StrictCoordination c;
    c.open_lease = [this](const std::string& tag, const std::string& identity) {
      return Result<std::unique_ptr<WorkerLease>>(Registry(tag).NewLease(Options(identity)));
    };
    c.find_leader = [this](const std::string& tag) { return Result<std::string>(Holder(tag)); };
    c.forward = [](const std::string&, const std::string&, std::int64_t,
                   std::chrono::milliseconds) -> Result<std::int64_t> {
      return Unavailable("no other server here");
    };
    c.pause = [this](std::chrono::milliseconds d) { clock_.AdvanceMillis(d.count()); };
    c.forget = [this](const std::string& tag) { forgotten_.push_back(tag); };
    return c;
  }
};

TEST_F(StrictTagsTest, AFullTableRefusesANewTagUntilAnIdleOneIsLetGo) {
  ASSERT_TRUE(tags_.Next("a", 1).ok());
  ASSERT_TRUE(tags_.Next("b", 1).ok());
  Result<std::int64_t> refused = tags_.Next("c", 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kExhausted);
  EXPECT_NE(refused.error().message.find("serves 2 tags already"), std::string::npos)
      << refused.error().message;

  const std::string leader = Holder("a");
  Pass(kIdleMs - 1000);
  EXPECT_EQ(tags_.size(), 2u);
  EXPECT_EQ(Holder("a"), leader);  // renewed meanwhile
  EXPECT_FALSE(tags_.Next("c", 1).ok());
  Pass(1000);
  EXPECT_EQ(tags_.size(), 0u);
  EXPECT_EQ(Holder("a"), "");  // given back, long before its TTL would end
  EXPECT_EQ(forgotten_, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(tags_.Next("c", 1).ok());
}

TEST_F(StrictTagsTest, ATagInUseIsKept) {
  ASSERT_TRUE(tags_.Next("a", 1).ok());
  const std::string leader = Holder("a");
  ASSERT_NE(leader, "");
  for (int i = 0; i < 4; ++i) {
    Pass(kIdleMs - 1000);
    ASSERT_TRUE(tags_.Next("a", 1).ok());
  }
  EXPECT_EQ(tags_.size(), 1u);
  EXPECT_EQ(Holder("a"), leader);
  EXPECT_EQ(tags_.stats().elections, 1u);
}

TEST_F(StrictTagsTest, ATagLetGoIsLedAgainAboveEveryIdServed) {
  Result<std::int64_t> before = tags_.Next("a", 10);
  ASSERT_TRUE(before.ok());
  Pass(kIdleMs);
  ASSERT_EQ(tags_.size(), 0u);
  Result<std::int64_t> after = tags_.Next("a", 1);
  ASSERT_TRUE(after.ok()) << after.error().message;
  EXPECT_GT(*after, *before + 9);
  EXPECT_EQ(tags_.stats().elections, 2u);
}

TEST_F(StrictTagsTest, ATagNotListedIsRefusedBeforeTheCoordinatorIsAsked) {
  Result<std::int64_t> r = tags_.Next("made-up", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_NE(r.error().message.find("strict.tags"), std::string::npos) << r.error().message;
  EXPECT_EQ(tags_.size(), 0u);
  EXPECT_EQ(registries_.count("made-up"), 0u);  // no namespace opened, nothing written
}

TEST_F(StrictTagsTest, AForwardedCallNeverAddsATag) {
  Result<std::int64_t> r = tags_.NextAsLeader("made-up", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kLeaseLost);
  EXPECT_EQ(tags_.size(), 0u);
}

}  // namespace
}  // namespace sekka::server
