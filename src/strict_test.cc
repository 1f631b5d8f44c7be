#include "sekka/strict.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

#include "testing/fake_clock.h"

namespace sekka {
namespace {

// Servers of one cluster, each a StrictLeader of tag "t" over the memory registry, on one clock.
class StrictTest : public ::testing::Test {
 protected:
  std::unique_ptr<StrictLeader> Server(const std::string& name, std::int64_t window = 10) {
    WorkerLeaseOptions o;
    o.identity = name;
    o.worker_count = 1;
    o.ttl = std::chrono::milliseconds(10'000);
    o.keep_id = true;
    o.clock = &clock_;
    StrictOptions s;
    s.ttl = o.ttl;
    s.window = window;
    return std::make_unique<StrictLeader>("t", registry_->NewLease(o), clock_, s);
  }

  FakeClock clock_{1'700'000'000'000};
  std::unique_ptr<WorkerLeaseRegistry> registry_ = NewMemoryWorkerLeaseRegistry(&clock_);
};

// A lease whose grants carry a settle, as Redis's do after a claim from a holder that did not
// release (its key may have expired early, by Redis's wall clock).
class SettlingLease final : public WorkerLease {
 public:
  SettlingLease(std::unique_ptr<WorkerLease> lease, std::chrono::milliseconds settle)
      : lease_(std::move(lease)), settle_(settle) {}
  Result<LeaseGrant> Acquire() override {
    Result<LeaseGrant> g = lease_->Acquire();
    if (g.ok()) g->settle = settle_;
    return g;
  }
  Status Renew() override { return lease_->Renew(); }
  Status StoreHwm(std::int64_t hwm) override { return lease_->StoreHwm(hwm); }
  Status Release() override { return lease_->Release(); }
  std::string Describe() const override { return lease_->Describe(); }
  std::string_view source() const override { return "settling"; }

 private:
  std::unique_ptr<WorkerLease> lease_;
  std::chrono::milliseconds settle_;
};

TEST_F(StrictTest, ALeaderWhoseGrantSettlesAnswersOnlyOnceTheSettleHasPassed) {
  WorkerLeaseOptions o;
  o.identity = "a";
  o.worker_count = 1;
  o.ttl = std::chrono::milliseconds(10'000);
  o.clock = &clock_;
  StrictOptions s;
  s.ttl = o.ttl;
  s.window = 10;
  StrictLeader a("t", std::make_unique<SettlingLease>(registry_->NewLease(o), o.ttl), clock_, s);
  ASSERT_TRUE(a.Lead().ok());
  clock_.AdvanceMillis(3'000);
  ASSERT_TRUE(a.Tick().ok());
  EXPECT_FALSE(a.Ready(1));
  Result<std::int64_t> early = a.Next();
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.error().code, ErrorCode::kUnavailable) << early.error().message;
  clock_.AdvanceMillis(3'000);
  ASSERT_TRUE(a.Tick().ok());
  clock_.AdvanceMillis(4'000);  // 10 s after the claim
  EXPECT_TRUE(a.Ready(1));
  EXPECT_EQ(*a.Next(), 1);
}

TEST_F(StrictTest, ANewLeaderStartsAboveEveryIdTheOldOneServed) {
  auto a = Server("a"), b = Server("b");
  ASSERT_TRUE(a->Lead().ok());
  EXPECT_EQ(*a->Next(10), 1);  // 1..10: all of a's bound
  EXPECT_EQ(b->Lead().error().code, ErrorCode::kExhausted);
  clock_.AdvanceMillis(10'001);  // a stops renewing: its lease ends
  EXPECT_EQ(a->Next().error().code, ErrorCode::kLeaseLost);
  ASSERT_TRUE(b->Lead().ok());
  EXPECT_EQ(*b->Next(), 11);
}

TEST_F(StrictTest, ALeaderPausedPastItsLeaseNeverServesAfterAnotherTookOver) {
  auto a = Server("a"), b = Server("b");
  ASSERT_TRUE(a->Lead().ok());
  ASSERT_TRUE(a->Next().ok());
  // Past its own margin but within the TTL: a stops answering, and a renewal that still lands
  // (nobody could take over yet) lets it go on.
  clock_.AdvanceMillis(9'500);
  EXPECT_EQ(a->Next().error().code, ErrorCode::kLeaseLost);
  ASSERT_TRUE(a->Tick().ok());
  EXPECT_EQ(*a->Next(), 2);
  // Paused past the TTL: b takes over, and a, back, is refused for good.
  clock_.AdvanceMillis(10'001);
  ASSERT_TRUE(b->Lead().ok());
  const std::int64_t first_of_b = *b->Next();
  EXPECT_GT(first_of_b, 2);
  EXPECT_EQ(a->Tick().error().code, ErrorCode::kLeaseLost);
  EXPECT_EQ(a->Next().error().code, ErrorCode::kLeaseLost);
  EXPECT_FALSE(a->leading());
  EXPECT_GT(*b->Next(), first_of_b);
}

TEST_F(StrictTest, TheBoundIsStoredBeforeItIsPassedAndRaisedAheadByTick) {
  auto a = Server("a");
  ASSERT_TRUE(a->Lead().ok());
  EXPECT_EQ(a->state().bound, 10);
  EXPECT_EQ(*a->Next(7), 1);
  ASSERT_TRUE(a->Tick().ok());  // 3 left of a window of 10: raised
  EXPECT_EQ(a->state().bound, 17);
  EXPECT_EQ(a->Next(11).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(*a->Next(10), 8);  // 8..17: no raise needed
  EXPECT_EQ(a->state().bound, 17);
  EXPECT_EQ(*a->Next(), 18);  // raised first
  EXPECT_EQ(a->state().bound, 27);
  a->Resign();
  auto b = Server("b");
  ASSERT_TRUE(b->Lead().ok());  // at once: a gave the lease back
  EXPECT_EQ(*b->Next(), 28);
}

TEST_F(StrictTest, ConcurrentCallersGetDistinctIdsIncreasingForEach) {
  auto a = Server("a", 1000);
  ASSERT_TRUE(a->Lead().ok());
  std::vector<std::vector<std::int64_t>> got(4);
  std::vector<std::thread> threads;
  for (auto& mine : got) {
    threads.emplace_back([&a, &mine] {
      for (int i = 0; i < 2000; ++i) {
        const std::int64_t n = 1 + i % 3;
        Result<std::int64_t> first = a->Next(n);
        ASSERT_TRUE(first.ok()) << first.error().message;
        for (std::int64_t k = 0; k < n; ++k) mine.push_back(*first + k);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::int64_t> all;
  for (const auto& mine : got) {
    EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
    all.insert(mine.begin(), mine.end());
  }
  EXPECT_EQ(all.size(), 4u * 3999u);   // 667 ones, 667 twos and 666 threes each
  EXPECT_EQ(*all.rbegin(), 4 * 3999);  // no gap while one leader serves
}

// A lease whose Acquire claims with a session that an earlier, failed call opened: its TTL has
// been running since. The leader must renew before it trusts the lease.
class OldSessionLease final : public WorkerLease {
 public:
  OldSessionLease(std::unique_ptr<WorkerLease> inner, int* renewals, bool* renew_fails)
      : inner_(std::move(inner)), renewals_(renewals), renew_fails_(renew_fails) {}
  Result<LeaseGrant> Acquire() override { return inner_->Acquire(); }
  Status Renew() override {
    ++*renewals_;
    return *renew_fails_ ? Unavailable("no answer") : inner_->Renew();
  }
  Status StoreHwm(std::int64_t v) override { return inner_->StoreHwm(v); }
  Status Release() override { return inner_->Release(); }
  std::string Describe() const override { return inner_->Describe(); }
  std::string_view source() const override { return inner_->source(); }

 private:
  std::unique_ptr<WorkerLease> inner_;
  int* renewals_;
  bool* renew_fails_;
};

TEST_F(StrictTest, ALeaderRenewsBeforeItTrustsALeaseItJustClaimed) {
  WorkerLeaseOptions o;
  o.identity = "a";
  o.worker_count = 1;
  o.keep_id = true;
  o.clock = &clock_;
  int renewals = 0;
  bool renew_fails = true;
  StrictLeader a("t",
                 std::make_unique<OldSessionLease>(registry_->NewLease(o), &renewals, &renew_fails),
                 clock_, StrictOptions{});
  EXPECT_EQ(a.Lead().error().code, ErrorCode::kUnavailable);  // claimed, not renewed: not led
  EXPECT_EQ(renewals, 1);
  EXPECT_FALSE(a.leading());
  renew_fails = false;
  ASSERT_TRUE(a.Lead().ok());
  EXPECT_EQ(renewals, 2);
  EXPECT_EQ(a.state().valid_until_ms, clock_.MonotonicMillis() + 9'000);
}

TEST(StrictTagTest, NamesAreCheckedForTheCoordinatorsNamespace) {
  EXPECT_TRUE(ValidateStrictTag("chat.room-7_a").ok());
  for (const char* bad : {"", "a:b", "a/b", "a b", "0123456789012345678901234567890123456789X"}) {
    Status s = ValidateStrictTag(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.error().message.find("allowed 1 to 40 characters"), std::string::npos);
  }
  // Issue 42: a name over 40 characters was shown cut to 40, as if it were a valid one.
  const std::string long_name(45, 'a');
  EXPECT_NE(ValidateStrictTag(long_name).error().message.find("\"" + long_name + "\""),
            std::string::npos);
  EXPECT_NE(ValidateStrictTag("a\x1b[2J").error().message.find("a\\x1b[2J"), std::string::npos);
}

}  // namespace
}  // namespace sekka
