// The service under a FakeClock with memory backends: lease loss and re-acquisition, the
// hwm rules (defects 1, 2 and 7 of the safety review), without a thread or a sleep.

#include "server/service.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "server/log.h"
#include "testing/fake_clock.h"

namespace sekka::server {
namespace {

constexpr std::int64_t kNow = 1'800'000'000'000;

// Passes calls through and records every hwm the service asks to store; its first
// `unavailable_acquires` acquires fail as an overloaded coordinator's do.
class RecordingLease final : public WorkerLease {
 public:
  RecordingLease(std::unique_ptr<WorkerLease> inner, std::vector<std::int64_t>& stores,
                 int unavailable_acquires, FakeClock& clock, std::int64_t call_ms)
      : inner_(std::move(inner)),
        stores_(stores),
        unavailable_acquires_(unavailable_acquires),
        clock_(clock),
        call_ms_(call_ms) {}
  Result<LeaseGrant> Acquire() override {
    if (unavailable_acquires_ > 0) {
      --unavailable_acquires_;
      clock_.AdvanceMillis(call_ms_);  // a call that times out takes its whole budget
      return Unavailable("etcd cannot be reached within 2000 ms per member: timed out");
    }
    return inner_->Acquire();
  }
  Status Renew() override { return inner_->Renew(); }
  Status StoreHwm(std::int64_t hwm) override {
    stores_.push_back(hwm);
    return inner_->StoreHwm(hwm);
  }
  Status Release() override { return inner_->Release(); }
  std::string Describe() const override { return inner_->Describe(); }
  std::string_view source() const override { return "etcd"; }

 private:
  std::unique_ptr<WorkerLease> inner_;
  std::vector<std::int64_t>& stores_;
  int unavailable_acquires_ = 0;
  FakeClock& clock_;
  const std::int64_t call_ms_;  // how long a failing acquire takes
};

class ServiceTest : public ::testing::Test {
 protected:
  ServiceTest() { SetLogLevel("off"); }
  ~ServiceTest() override { SetLogLevel("info"); }

  WorkerLeaseOptions LeaseOptions(const std::string& identity) {
    WorkerLeaseOptions o;
    o.identity = identity;
    o.worker_count = 4;
    o.ttl = std::chrono::milliseconds(ttl_ms_);
    o.keep_id = true;  // these cases are about waiting past, and re-acquiring, one id's hwm
    o.clock = &clock_;
    return o;
  }

  Result<std::unique_ptr<Service>> TryStart(const std::string& identity,
                                            int unavailable_acquires = 0,
                                            std::int64_t failing_call_ms = 2000) {
    ServerConfig config = DefaultConfig();
    config.worker_source = "etcd";
    config.lease_ttl_ms = ttl_ms_;
    config.generator.layout =
        *ParseLayout("time_bits=41,worker_bits=2,sequence_bits=20,epoch=2025-01-01");
    ServiceParts parts;
    parts.clock = &clock_;
    parts.lease =
        std::make_unique<RecordingLease>(registry_->NewLease(LeaseOptions(identity)), stores_,
                                         unavailable_acquires, clock_, failing_call_ms);
    parts.data_dir = NewMemoryDataDir();
    parts.segment_store = NewMemorySegmentStore();
    parts.machine_store = NewMemoryMachineStore();
    parts.background_thread = false;
    return Service::Start(config, std::move(parts));
  }

  std::unique_ptr<Service> Start(const std::string& identity) {
    Result<std::unique_ptr<Service>> s = TryStart(identity);
    EXPECT_TRUE(s.ok()) << s.error().message;
    return s.ok() ? std::move(s).value() : nullptr;
  }

  // Time passes while the process is paused: nothing of it runs.
  void Pause(std::int64_t ms) { clock_.AdvanceMillis(ms); }
  // Time passes while the process runs: its background work every 100 ms.
  void Run(Service& s, std::int64_t ms) {
    for (std::int64_t t = 0; t < ms; t += 100) {
      clock_.AdvanceMillis(100);
      s.RunBackgroundOnce();
    }
  }

  std::int64_t ttl_ms_ = 3000;
  FakeClock clock_{kNow};
  std::unique_ptr<WorkerLeaseRegistry> registry_ = NewMemoryWorkerLeaseRegistry(&clock_);
  std::vector<std::int64_t> stores_;
};

TEST_F(ServiceTest, ALostLeaseFailsEveryRequestUntilTheSameIdIsHeldAgain) {
  std::unique_ptr<Service> s = Start("a");
  ASSERT_NE(s, nullptr);
  Result<Id> before = s->NextId();
  ASSERT_TRUE(before.ok());
  Pause(ttl_ms_ + 500);  // longer than the TTL: the coordinator lets the lease go
  s->RunBackgroundOnce();
  Result<Id> lost = s->NextId();
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.error().code, ErrorCode::kLeaseLost);
  Status ready = s->Ready();
  ASSERT_FALSE(ready.ok());
  EXPECT_EQ(ready.error().code, ErrorCode::kLeaseLost);
  std::vector<Id> batch(10);
  EXPECT_EQ(s->NextIds(std::span<Id>(batch)).error().code, ErrorCode::kLeaseLost);

  Run(*s, 1000);  // re-acquires: the same id, nobody used it meanwhile
  ready = s->Ready();
  EXPECT_TRUE(ready.ok()) << ready.error().message;
  Result<Id> after = s->NextId();
  ASSERT_TRUE(after.ok()) << after.error().message;
  EXPECT_GT(*after, *before);
  EXPECT_EQ(s->worker().worker_id, 0);
}

// Issue 22: a fleet starting at once against a small etcd with auth timed out its first
// acquire and exited for its unit to restart it. It retries within max_startup_wait instead.
TEST_F(ServiceTest, AnUnavailableCoordinatorAtStartIsRetriedWithinTheStartupBudget) {
  const std::int64_t before = clock_.MonotonicMillis();
  Result<std::unique_ptr<Service>> s = TryStart("a", 3);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_TRUE((*s)->NextId().ok());
  EXPECT_LE(clock_.MonotonicMillis() - before, 10'000);
  Result<std::unique_ptr<Service>> never = TryStart("b", 1'000);
  ASSERT_FALSE(never.ok());
  EXPECT_EQ(never.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(never.error().message.find("generator.max_startup_wait"), std::string::npos)
      << never.error().message;
}

// A coordinator that answers at once with an error (refused, wrong TLS or credentials) has a
// configuration to fix: the start ends at once, with its error.
TEST_F(ServiceTest, AnAtOnceAnsweredCoordinatorErrorAtStartIsNotRetried) {
  const std::int64_t before = clock_.MonotonicMillis();
  Result<std::unique_ptr<Service>> s = TryStart("a", 1, 5);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(clock_.MonotonicMillis() - before, 5);
}

TEST_F(ServiceTest, AnIdTakenMeanwhileIsLeftForAnotherAndTheOldGeneratorStopsAtItsReservation) {
  std::unique_ptr<Service> a = Start("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->worker().worker_id, 0);
  Snowflake* old = &a->generator();  // a request thread that is inside the old generator
  ASSERT_TRUE(old->NextId().ok());
  Pause(ttl_ms_ + 500);
  // Another process takes id 0 meanwhile and stores an hwm far ahead.
  auto other = registry_->NewLease(LeaseOptions("b"));
  Result<LeaseGrant> g = other->Acquire();
  ASSERT_TRUE(g.ok());
  ASSERT_EQ(g->worker_id, 0);
  ASSERT_TRUE(other->StoreHwm(clock_.NowMillis() + 60'000).ok());
  Run(*a, 1500);  // a notices, re-acquires: another id
  Status ready = a->Ready();
  ASSERT_TRUE(ready.ok()) << ready.error().message;
  EXPECT_EQ(a->worker().worker_id, 1);
  Result<Id> id = a->NextId();
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(DecodeId(*id, a->layout())->worker, 1);
  // The paused thread resumes in the old generator of worker id 0, past what was stored for
  // it: the new id's hwm must not vouch for it.
  Run(*a, 10'000);
  Result<Id> stale = old->NextId();
  ASSERT_FALSE(stale.ok()) << "worker id 0 issued an id past its own hwm";
  EXPECT_EQ(stale.error().code, ErrorCode::kLeaseLost);
}

TEST_F(ServiceTest, AClockStepBackNeverLowersTheStoredHwm) {
  std::unique_ptr<Service> s = Start("a");
  ASSERT_NE(s, nullptr);
  Run(*s, 3000);
  ASSERT_TRUE(s->NextId().ok());
  const std::int64_t high = s->hwm_millis();
  clock_.SetMillis(clock_.NowMillis() - 15'000);  // the wall clock steps back
  Pause(ttl_ms_ + 500);                           // and the process is paused past its TTL
  Run(*s, 3000);                                  // lease lost, the same id held again
  Status ready = s->Ready();
  EXPECT_TRUE(ready.ok() || ready.error().code == ErrorCode::kClockMovedBackwards)
      << ready.error().message;
  EXPECT_GE(s->hwm_millis(), high);
  ASSERT_GE(stores_.size(), 2u);
  for (std::size_t i = 1; i < stores_.size(); ++i) {
    EXPECT_GE(stores_[i], stores_[i - 1]) << "store " << i << " asked for a lower hwm";
  }
}

TEST_F(ServiceTest, AReacquiredIdFarAheadOfTheClockIsGivenBackNotWaitedFor) {
  std::unique_ptr<Service> a = Start("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->worker().worker_id, 0);
  Pause(ttl_ms_ + 500);
  // Meanwhile others hold 1..3 and stored an hwm for id 0 an hour ahead.
  std::vector<std::unique_ptr<WorkerLease>> others;
  for (const char* who : {"b", "c", "d", "e"})
    others.push_back(registry_->NewLease(LeaseOptions(who)));
  for (auto& o : others) ASSERT_TRUE(o->Acquire().ok());
  ASSERT_TRUE(others[0]->StoreHwm(clock_.NowMillis() + 3'600'000).ok());
  ASSERT_TRUE(others[0]->Release().ok());  // id 0 is free again, far ahead of this clock
  const std::int64_t slept_before = clock_.slept_millis();
  Run(*a, 2000);
  EXPECT_LT(clock_.slept_millis() - slept_before, 10'000) << "it waited for the far hwm";
  Status ready = a->Ready();
  ASSERT_FALSE(ready.ok());
  EXPECT_EQ(ready.error().code, ErrorCode::kLeaseLost);
  EXPECT_NE(ready.error().message.find("max_startup_wait"), std::string::npos)
      << ready.error().message;
  // The id it could not use was given back: another process may take it.
  auto f = registry_->NewLease(LeaseOptions("f"));
  Result<LeaseGrant> g = f->Acquire();
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->worker_id, 0);
}

TEST_F(ServiceTest, AStartupWaitLongerThanTheTtlKeepsTheLease) {
  ttl_ms_ = 2000;
  {
    auto earlier = registry_->NewLease(LeaseOptions("a"));
    ASSERT_TRUE(earlier->Acquire().ok());
    ASSERT_TRUE(earlier->StoreHwm(clock_.NowMillis() + 8000).ok());  // 4 TTLs ahead
    ASSERT_TRUE(earlier->Release().ok());
  }
  std::unique_ptr<Service> s = Start("a");
  ASSERT_NE(s, nullptr) << "the lease expired during the start-up wait";
  EXPECT_GE(clock_.slept_millis(), 8000);
  Run(*s, 500);
  Status ready = s->Ready();
  EXPECT_TRUE(ready.ok()) << ready.error().message;
  EXPECT_TRUE(s->NextId().ok());
}

}  // namespace
}  // namespace sekka::server
