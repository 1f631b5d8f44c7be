// One server's strict tags (server/strict_tags.h) on the memory registry, a namespace per tag,
// under a FakeClock: the table's bound and how idle tags are let go.

#include "server/strict_tags.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sekka/coordinator.h"
#include "sekka/worker_lease.h"
#include "testing/fake_clock.h"

namespace sekka::server {
namespace {

constexpr std::int64_t kIdleMs = kStrictIdleRelease.count();

// A strict tag's lease as servers take it: one slot, kept whatever its bound.
WorkerLeaseOptions StrictLeaseOptions(const std::string& identity, Clock* clock) {
  WorkerLeaseOptions o;
  o.identity = identity;
  o.worker_count = 1;
  o.keep_id = true;
  o.layout = "strict counter";
  o.clock = clock;
  return o;
}

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
  std::vector<std::string> declared_;   // the cluster's declared tags (STRICT.CREATE)
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
    return StrictLeaseOptions(identity, &clock_);
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
    c.declared = [this] { return Result<std::vector<std::string>>(declared_); };
    c.declare = [this](const std::string& tag) -> Result<bool> {
      if (std::find(declared_.begin(), declared_.end(), tag) != declared_.end()) return false;
      declared_.push_back(tag);
      return true;
    };
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
  // Before the declared tags were read, a tag not listed may be declared: not known yet.
  EXPECT_EQ(tags_.Next("made-up", 1).error().code, ErrorCode::kUnavailable);
  Pass(kStrictDeclaredRefresh.count());  // read: it is not declared either
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

TEST_F(StrictTagsTest, ATagDeclaredElsewhereIsServedOnceTheDeclarationsAreReadAgain) {
  Pass(kStrictDeclaredRefresh.count());  // the (empty) declarations were read
  declared_.push_back("news");           // another server's STRICT.CREATE
  EXPECT_EQ(tags_.Next("news", 1).error().code, ErrorCode::kNotFound);
  Pass(kStrictDeclaredRefresh.count());
  EXPECT_TRUE(tags_.Next("news", 1).ok());
}

TEST_F(StrictTagsTest, ATagDeclaredHereIsServedAtOnceAndDeclaredOnce) {
  EXPECT_EQ(tags_.Declare("sports").value(), true);
  EXPECT_EQ(tags_.Declare("sports").value(), false);
  // Declared though strict.tags lists it here: the other servers may not list it.
  EXPECT_EQ(tags_.Declare("a").value(), true);
  EXPECT_EQ(tags_.Declare("no such").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(tags_.Declare("..").error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(tags_.Next("sports", 1).ok());
  EXPECT_EQ(declared_, (std::vector<std::string>{"sports", "a"}));
}

// A follower whose tag's leader is elsewhere: a fake leader numbers each call's ids when the
// call arrives, and each call waits at a gate until the test opens it.
class StrictForwardingTest : public ::testing::Test {
 protected:
  StrictForwardingTest() { follower_.SetAddress("127.0.0.1:7000"); }
  ~StrictForwardingTest() override {
    Open(1'000'000);
    follower_.StopCalls();
  }

  // Lets `calls` more calls answer (in the order they arrived).
  void Open(int calls) {
    std::lock_guard lock(mu_);
    open_ += calls;
    cv_.notify_all();
  }
  // Waits (generously) until `n` calls have arrived at the leader.
  bool Arrived(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [&] { return arrived_ >= n; });
  }
  int arrived() {
    std::lock_guard lock(mu_);
    return arrived_;
  }

  // Answers of NextAsync, kept in the order they came.
  struct Answers {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<Result<std::int64_t>> got;
    StrictTags::Done Add() {
      return [this](Result<std::int64_t> r) {
        std::lock_guard lock(mu);
        got.push_back(std::move(r));
        cv.notify_all();
      };
    }
    bool Wait(std::size_t n) {
      std::unique_lock lock(mu);
      return cv.wait_for(lock, std::chrono::seconds(60), [&] { return got.size() >= n; });
    }
  };

  FakeClock clock_{1'700'000'000'000};
  std::unique_ptr<WorkerLeaseRegistry> registry_ = NewMemoryWorkerLeaseRegistry(&clock_);
  std::mutex mu_;
  std::condition_variable cv_;
  std::int64_t next_id_ = 1;   // the leader's, guarded by mu_
  int arrived_ = 0;            // calls that reached the leader, guarded by mu_
  int open_ = 0;               // calls that may answer, in order, guarded by mu_
  std::set<int> out_of_turn_;  // and these (by arrival), guarded by mu_
  StrictOptions options_ = [] {
    StrictOptions o;
    o.window = 100;
    return o;
  }();
  std::int64_t other_next_ = 1;  // the leader's for tag "u", which always answers; under mu_
  StrictTags follower_{Coordination(), clock_, options_, /*tick_thread=*/true, {"t", "u"}};

 private:
  StrictCoordination Coordination() {
    StrictCoordination c;
    c.open_lease = [this](const std::string&, const std::string& identity) {
      return Result<std::unique_ptr<WorkerLease>>(
          registry_->NewLease(StrictLeaseOptions(identity, &clock_)));
    };
    c.find_leader = [](const std::string&) {
      return Result<std::string>(StrictIdentity("127.0.0.1:7001", 1));
    };
    c.forward = [this](const std::string&, const std::string& tag, std::int64_t n,
                       std::chrono::milliseconds) -> Result<std::int64_t> {
      std::unique_lock lock(mu_);
      if (tag == "u") {  // a leader that answers at once, counted apart
        const std::int64_t first = other_next_;
        other_next_ += n;
        return first;
      }
      const std::int64_t first = next_id_;
      next_id_ += n;
      const int mine = arrived_++;
      cv_.notify_all();
      cv_.wait(lock, [&] { return open_ > mine || out_of_turn_.contains(mine); });
      return first;
    };
    c.pause = [](std::chrono::milliseconds) {};
    return c;
  }
};

TEST_F(StrictForwardingTest, WaitingRequestsHoldNoThreadAndOneCallAnswersThem) {
  Open(1);
  ASSERT_TRUE(follower_.Next("t", 1).ok());  // the tag is added (its first request waits)
  // This thread sends 51 requests, 50 of them while the call for the first waits at the
  // leader: it is never held.
  Answers answers;
  ASSERT_TRUE(follower_.NextAsync("t", 1, 1, answers.Add()));
  ASSERT_TRUE(Arrived(2));
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(follower_.NextAsync("t", 1, 1, answers.Add()));
  Open(2);
  ASSERT_TRUE(answers.Wait(51));
  // The 50 that waited behind the first call went together in one more.
  EXPECT_EQ(arrived(), 3);
  std::int64_t last = 1;
  for (const Result<std::int64_t>& r : answers.got) {
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_GT(*r, last);  // answered in the order they came, each above the ones before
    last = *r;
  }
  EXPECT_EQ(follower_.stats().forwarded, 52u);
}

TEST_F(StrictForwardingTest, RequestsWaitingBehindABlockingCallerAreAnsweredAfterIt) {
  Open(1);
  ASSERT_TRUE(follower_.Next("t", 1).ok());  // the tag is added
  // A blocking caller (an HTTP request's thread) makes a call; a request of NextAsync comes
  // while it waits at the leader, and waits for that caller's loop, which ends with its answer.
  std::thread blocking([&] { EXPECT_TRUE(follower_.Next("t", 1).ok()); });
  ASSERT_TRUE(Arrived(2));
  Answers answers;
  ASSERT_TRUE(follower_.NextAsync("t", 1, 1, answers.Add()));
  Open(1000);
  blocking.join();
  EXPECT_TRUE(answers.Wait(1));  // it was left waiting for good before (a client hung)
}

TEST_F(StrictForwardingTest, CallsInFlightTogetherMayBeAnsweredInAnyOrder) {
  Open(1);
  ASSERT_TRUE(follower_.Next("t", 1).ok());
  // A window's worth waits behind the first call: a second call starts beside it.
  Answers answers;
  ASSERT_TRUE(follower_.NextAsync("t", 60, 1, answers.Add()));  // call 2, alone
  ASSERT_TRUE(Arrived(2));
  ASSERT_TRUE(follower_.NextAsync("t", 60, 1, answers.Add()));
  ASSERT_TRUE(follower_.NextAsync("t", 60, 1, answers.Add()));  // 120 waiting: call 3
  ASSERT_TRUE(Arrived(3));
  // The leader numbered call 2 before call 3, and call 3's answer comes back first: both are
  // good (they overlapped), though call 2's ids are lower than ids this server already has.
  {
    std::lock_guard lock(mu_);
    out_of_turn_.insert(2);  // call 3 (arrived third) answers; call 2 still waits
    cv_.notify_all();
  }
  ASSERT_TRUE(answers.Wait(1));
  Open(1000);  // call 2, and the call for the last request
  ASSERT_TRUE(answers.Wait(3));
  EXPECT_EQ(arrived(), 4);  // call 2's answer was taken, not refused and asked again
  for (const Result<std::int64_t>& r : answers.got) ASSERT_TRUE(r.ok()) << r.error().message;
}

TEST_F(StrictForwardingTest, AHungTagHoldsAtMostHalfTheCallThreadsAndOthersAreServed) {
  Open(1);
  ASSERT_TRUE(follower_.Next("t", 1).ok());
  ASSERT_TRUE(follower_.Next("u", 1).ok());  // both tags are added
  // Tag t's leader answers nothing more. Each request fills a window, so calls start beside
  // each other up to kStrictCallsInFlight; the rest wait in t's queue, not on call threads.
  Answers hung;
  for (int i = 0; i < 3 * kStrictCallsInFlight; ++i) {
    ASSERT_TRUE(follower_.NextAsync("t", options_.window, 1, hung.Add()));
  }
  ASSERT_TRUE(Arrived(1 + kStrictCallsInFlight));
  // Another tag's request is answered meanwhile: a thread is left for it.
  Answers other;
  ASSERT_TRUE(follower_.NextAsync("u", 1, 1, other.Add()));
  ASSERT_TRUE(other.Wait(1));
  EXPECT_TRUE(other.got[0].ok()) << other.got[0].error().message;
  EXPECT_EQ(arrived(), 1 + kStrictCallsInFlight);  // no more of t's calls than that at once
  Open(1000);
  ASSERT_TRUE(hung.Wait(3 * kStrictCallsInFlight));
  for (const Result<std::int64_t>& r : hung.got) EXPECT_TRUE(r.ok()) << r.error().message;
}

}  // namespace
}  // namespace sekka::server
