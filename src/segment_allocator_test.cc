#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <limits>
#include <thread>

#include "sekka/segment.h"
#include "testing/fake_clock.h"

namespace sekka {
namespace {

using std::chrono::milliseconds;

// A store in front of a memory store that a test can slow down, block or take down.
class ControlledStore final : public SegmentStore {
 public:
  ControlledStore() : inner_(NewMemorySegmentStore()) {}
  Result<Allocation> Allocate(std::string_view tag, std::int64_t step) override {
    allocations.fetch_add(1);
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !blocked_ && (hung_tag_.empty() || tag != hung_tag_); });
    if (down_) return Unavailable("store is down");
    lock.unlock();
    return inner_->Allocate(tag, step);
  }
  Status CreateTag(const TagInfo& t) override { return inner_->CreateTag(t); }
  Result<TagInfo> GetTag(std::string_view t) override {
    lookups.fetch_add(1);
    {
      std::lock_guard lock(mu_);
      if (down_) return Unavailable("store is down");
    }
    return inner_->GetTag(t);
  }
  Result<std::vector<TagInfo>> ListTagsAfter(std::string_view a, std::size_t n) override {
    return inner_->ListTagsAfter(a, n);
  }
  Status SetStep(std::string_view t, std::int64_t n) override { return inner_->SetStep(t, n); }
  Result<TagInfo> DeleteTag(std::string_view t) override { return inner_->DeleteTag(t); }

  void SetBlocked(bool b) {
    std::lock_guard lock(mu_);
    blocked_ = b;
    cv_.notify_all();
  }
  // Calls for this tag hang until it is cleared ("" = none).
  void SetHungTag(std::string tag) {
    std::lock_guard lock(mu_);
    hung_tag_ = std::move(tag);
    cv_.notify_all();
  }
  void SetDown(bool d) {
    std::lock_guard lock(mu_);
    down_ = d;
  }
  std::atomic<int> allocations{0};
  std::atomic<int> lookups{0};

 private:
  std::unique_ptr<SegmentStore> inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool blocked_ = false;  // guarded by mu_
  bool down_ = false;     // guarded by mu_
  std::string hung_tag_;  // guarded by mu_
};

// Waits (bounded) until `done` holds; the fetcher is a real background thread.
template <typename F>
bool Eventually(F done, milliseconds within = milliseconds(2000)) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  return done();
}

// The sequence of `tag`, once its first range (fetched in the background) is there.
SegmentSequence& Loaded(SegmentAllocator& a, std::string_view tag) {
  SegmentSequence& s = **a.Sequence(tag);
  EXPECT_TRUE(Eventually([&] { return s.stats().remaining > 0; }));
  return s;
}

std::int64_t Next(SegmentSequence& s) {
  Result<std::int64_t> id = s.NextId();
  EXPECT_TRUE(id.ok()) << (id.ok() ? "" : id.error().message);
  return id.ok() ? *id : -1;
}

TEST(SegmentAllocatorTest, IdPositionsCoverExactlyTheIdsOfARange) {
  for (std::int64_t delta : {1, 2, 3, 7}) {
    for (std::int64_t remainder = 0; remainder < delta; ++remainder) {
      for (std::int64_t begin = 1; begin < 20; ++begin) {
        for (std::int64_t end = begin; end < begin + 20; ++end) {
          const IdRange p = IdPositions({begin, end}, delta, remainder);
          std::vector<std::int64_t> want, got;
          for (std::int64_t v = begin; v < end; ++v) {
            if (v % delta == remainder) want.push_back(v);
          }
          for (std::int64_t k = p.begin; k < p.end; ++k) got.push_back(k * delta + remainder);
          ASSERT_EQ(got, want) << delta << " " << remainder << " [" << begin << ", " << end << ")";
        }
      }
    }
  }
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  const IdRange top = IdPositions({max - 10, max}, 1'000'000, 999'999);
  EXPECT_LE((top.end - 1) * 1'000'000 + 999'999, max - 1);
}

TEST(SegmentAllocatorTest, ATagWithDeltaAndRemainderIssuesOnlyItsIdsInOrder) {
  ControlledStore store;
  ASSERT_TRUE(store.CreateTag({"odd", 1, 10, 2, 1}).ok());
  ASSERT_TRUE(store.CreateTag({"thirds", 5, 2, 3, 0}).ok());  // a step below delta
  FakeClock clock(1'000'000);
  SegmentAllocator a(store, clock);
  SegmentSequence& odd = Loaded(a, "odd");
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 50; ++i) ids.push_back(Next(odd));
  std::vector<std::int64_t> batch(30);
  ASSERT_TRUE(odd.NextIds(batch).ok());
  ids.insert(ids.end(), batch.begin(), batch.end());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(ids[i] % 2, 1) << ids[i];
    if (i > 0) {
      EXPECT_GT(ids[i], ids[i - 1]);
    }
  }
  EXPECT_EQ(ids[0], 1);
  SegmentSequence& thirds = Loaded(a, "thirds");
  std::int64_t last = 0;
  for (int i = 0; i < 20; ++i) {
    const std::int64_t id = Next(thirds);
    EXPECT_EQ(id % 3, 0);
    EXPECT_GT(id, last);
    last = id;
  }
}

TEST(SegmentAllocatorTest, UnknownAndBadTagsAreErrors) {
  ControlledStore store;
  FakeClock clock(1'000'000);
  SegmentAllocator a(store, clock);
  EXPECT_EQ(a.Sequence("nope").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(a.Sequence("bad\ttag").error().code, ErrorCode::kInvalidArgument);
}

TEST(SegmentAllocatorTest, PrefetchesTheNextRangeBeforeTheCurrentRunsOut) {
  ControlledStore store;
  ASSERT_TRUE(store.CreateTag({"orders", 1, 100}).ok());
  FakeClock clock(1'000'000);
  SegmentAllocator a(store, clock);
  SegmentSequence& s = Loaded(a, "orders");
  EXPECT_EQ(store.allocations.load(), 1);
  for (int i = 1; i <= 10; ++i) EXPECT_EQ(Next(s), i);  // 10% of the range is used
  EXPECT_EQ(Next(s), 11);
  ASSERT_TRUE(Eventually([&] { return store.allocations.load() == 2; }));
  // 89 left of the first range, and a second range of 200: the first range lasted no time on
  // the frozen clock, far less than half the 15-minute target, so the step doubled.
  EXPECT_TRUE(Eventually([&] { return s.stats().remaining == 89 + 200; }));
  std::int64_t last = 11;
  for (int i = 0; i < 150; ++i) {
    const std::int64_t id = Next(s);
    EXPECT_EQ(id, last + 1);
    last = id;
  }
  EXPECT_EQ(s.stats().waits, 0u);  // the next range was always there in time
}

TEST(SegmentAllocatorTest, TheStepGrowsUnderLoadAndShrinksWhenIdleWithinBounds) {
  ControlledStore store;
  ASSERT_TRUE(store.CreateTag({"t", 1, 10}).ok());
  FakeClock clock(1'000'000);
  SegmentOptions o;
  o.min_step = 5;
  o.max_step = 80;
  o.target_range_duration = milliseconds(1000);
  SegmentAllocator a(store, clock, o);
  SegmentSequence& s = Loaded(a, "t");
  std::vector<std::int64_t> steps;
  // Ranges used up at once (no time passes): every fetch doubles the step, up to 80.
  for (int round = 0; round < 6; ++round) {
    const std::int64_t before = s.stats().fetches;
    std::vector<std::int64_t> ids(static_cast<std::size_t>(s.stats().remaining));
    ASSERT_TRUE(s.NextIds(std::span(ids)).ok());
    ASSERT_TRUE(Eventually([&] { return s.stats().fetches > static_cast<std::uint64_t>(before); }));
    steps.push_back(s.stats().step);
  }
  EXPECT_EQ(steps.back(), 80);
  EXPECT_TRUE(std::is_sorted(steps.begin(), steps.end()));
  EXPECT_GT(steps.size(), 3u);
  // Ranges that last far longer than the target: the step halves, down to 5.
  for (int round = 0; round < 6; ++round) {
    clock.AdvanceMillis(10'000);
    const std::uint64_t before = s.stats().fetches;
    std::vector<std::int64_t> ids(static_cast<std::size_t>(s.stats().remaining));
    ASSERT_TRUE(s.NextIds(std::span(ids)).ok());
    ASSERT_TRUE(Eventually([&] { return s.stats().fetches > before; }));
  }
  EXPECT_EQ(s.stats().step, 5);
}

TEST(SegmentAllocatorTest, BothRangesEmptyWaitsUpToTheDeadlineThenIsUnavailable) {
  ControlledStore store;
  ASSERT_TRUE(store.CreateTag({"t", 1, 10}).ok());
  FakeClock clock(1'000'000);
  SegmentOptions o;
  o.wait_deadline = milliseconds(100);
  SegmentAllocator a(store, clock, o);
  SegmentSequence& s = Loaded(a, "t");
  store.SetBlocked(true);  // the next fetch hangs
  std::vector<std::int64_t> first(10);
  ASSERT_TRUE(s.NextIds(std::span(first)).ok());
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::int64_t> id = s.NextId();
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.error().code, ErrorCode::kUnavailable);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(100));
  EXPECT_NE(id.error().message.find("no ids buffered"), std::string::npos);
  // A caller that arrives while the fetch is in flight gets its id when the fetch lands.
  std::thread late([&] {
    std::this_thread::sleep_for(milliseconds(20));
    store.SetBlocked(false);
  });
  Result<std::int64_t> after = s.NextId();
  late.join();
  ASSERT_TRUE(after.ok()) << after.error().message;
  EXPECT_GT(*after, first.back());
  EXPECT_EQ(s.stats().unavailable, 1u);
}

// Options for a store that goes down: callers and retries wait briefly.
SegmentOptions ForOutages() {
  SegmentOptions o;
  o.wait_deadline = milliseconds(50);
  o.retry_backoff = milliseconds(10);
  return o;
}

TEST(SegmentAllocatorTest, AStoreOutageIsSurvivedWhileBufferedIdsLastAndRecovers) {
  ControlledStore store;
  ASSERT_TRUE(store.CreateTag({"t", 1, 100}).ok());
  FakeClock clock(1'000'000);
  SegmentAllocator a(store, clock, ForOutages());
  SegmentSequence& s = Loaded(a, "t");
  store.SetDown(true);
  std::vector<std::int64_t> served;
  for (int i = 0; i < 100; ++i) served.push_back(Next(s));  // the buffer outlives the outage
  Result<std::int64_t> failed = s.NextId();
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().message.find("store is down"), std::string::npos);
  store.SetDown(false);
  ASSERT_TRUE(Eventually([&] { return s.NextId().ok(); }));
  served.push_back(Next(s));
  EXPECT_TRUE(std::is_sorted(served.begin(), served.end()));
  EXPECT_EQ(std::adjacent_find(served.begin(), served.end()), served.end());
  EXPECT_GT(s.stats().fetch_errors, 0u);
}

TEST(SegmentAllocatorTest, EveryFailedStoreCallIsReportedAndCountedTheFirstLoadToo) {
  ControlledStore store;
  ASSERT_TRUE(store.CreateTag({"t", 1, 100}).ok());
  FakeClock clock(1'000'000);
  SegmentOptions o = ForOutages();
  std::mutex mu;
  std::vector<std::string> reported;
  o.on_store_error = [&](std::string_view tag, const Error& e) {
    std::lock_guard lock(mu);
    reported.push_back(fmt::format("{}: {}", tag, e.message));
  };
  SegmentAllocator a(store, clock, o);
  store.SetDown(true);
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(a.Sequence("t").ok());  // the row's first load
  EXPECT_TRUE(a.Sequence("unknown-but-down").error().code == ErrorCode::kUnavailable);
  using Counts = std::vector<std::pair<std::string, std::uint64_t>>;
  EXPECT_EQ(a.LoadErrors(), (Counts{{"t", 2}, {"unknown-but-down", 1}}));
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(reported, (std::vector<std::string>{"t: store is down", "t: store is down",
                                                  "unknown-but-down: store is down"}));
  }
  store.SetDown(false);
  SegmentSequence& s = Loaded(a, "t");
  EXPECT_EQ(s.stats().fetch_errors, 2u);  // carried from the loads: the counter never drops
  EXPECT_EQ(a.LoadErrors(), (Counts{{"unknown-but-down", 1}}));
  store.SetDown(true);
  for (int i = 0; i < 100; ++i) Next(s);
  EXPECT_FALSE(s.NextId().ok());  // a range fetch fails: counted and reported as well
  EXPECT_GT(s.stats().fetch_errors, 2u);
  std::lock_guard lock(mu);
  EXPECT_GT(reported.size(), 3u);
}

// Defect: a tag's entry was erased when its first fetch failed while other callers waited on
// it (a use-after-free: SIGSEGV with an exhausted tag). Under ASan this crashed.
TEST(SegmentAllocatorTest, AFailingFirstFetchWithManyWaitingCallersIsAnErrorForEachOfThem) {
  ControlledStore store;
  ASSERT_TRUE(store.CreateTag({"t", 1, 10}).ok());
  FakeClock clock(1'000'000);
  SegmentOptions o;
  o.wait_deadline = milliseconds(200);
  o.retry_backoff = milliseconds(5);
  SegmentAllocator a(store, clock, o);
  store.SetDown(true);
  std::atomic<int> failed{0};
  std::vector<std::thread> callers;
  for (int i = 0; i < 8; ++i) {
    callers.emplace_back([&] {
      for (int j = 0; j < 3; ++j) {
        Result<SegmentSequence*> s = a.Sequence("t");
        Result<std::int64_t> id = s.ok() ? (*s)->NextId() : Result<std::int64_t>(s.error());
        if (!id.ok() && id.error().code == ErrorCode::kUnavailable) failed.fetch_add(1);
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(failed.load(), 24);
  store.SetDown(false);
  // The retries back off (up to 5 s) while the store stays down; then the tag works.
  SegmentSequence& s = **a.Sequence("t");
  EXPECT_TRUE(Eventually([&] { return s.NextId().ok(); }, milliseconds(8000)));
}

// One tag whose store calls hang must not stop another tag's first fetch or prefetch.
TEST(SegmentAllocatorTest, AHungTagDoesNotHoldUpAnotherTag) {
  ControlledStore store;
  ASSERT_TRUE(store.CreateTag({"slow", 1, 10}).ok());
  ASSERT_TRUE(store.CreateTag({"fast", 1, 10}).ok());
  FakeClock clock(1'000'000);
  SegmentOptions o;
  o.wait_deadline = milliseconds(100);
  SegmentAllocator a(store, clock, o);
  store.SetHungTag("slow");
  Result<SegmentSequence*> slow = a.Sequence("slow");
  ASSERT_TRUE(slow.ok());
  EXPECT_FALSE((*slow)->NextId().ok());  // waits out its deadline
  SegmentSequence& fast = Loaded(a, "fast");
  for (int i = 0; i < 100; ++i) ASSERT_GT(Next(fast), 0);  // ten ranges, fetched meanwhile
  store.SetHungTag("");
  ASSERT_TRUE(Eventually([&] { return (*slow)->NextId().ok(); }));
}

// Clients must not make a server hold unbounded tags or query the store once per unknown name.
TEST(SegmentAllocatorTest, TagsAreBoundedAndUnknownNamesAreRememberedBriefly) {
  ControlledStore store;
  for (const char* t : {"a", "b", "c"}) ASSERT_TRUE(store.CreateTag({t, 1, 10}).ok());
  FakeClock clock(1'000'000);
  SegmentOptions o;
  o.max_tags = 2;
  SegmentAllocator a(store, clock, o);
  ASSERT_TRUE(a.Sequence("a").ok());
  ASSERT_TRUE(a.Sequence("b").ok());
  Result<SegmentSequence*> c = a.Sequence("c");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, ErrorCode::kExhausted);
  EXPECT_NE(c.error().message.find("segment.max_tags"), std::string::npos) << c.error().message;
  EXPECT_TRUE(a.Sequence("a").ok());  // the ones served go on

  SegmentAllocator fresh(store, clock);
  // A tag another process creates is seen at once (issue 24, finding 9: it stayed "not found"
  // for 5 s, and docs/protocol.md's own "create, then INCR" example failed).
  EXPECT_EQ(fresh.Sequence("later").error().code, ErrorCode::kNotFound);
  ASSERT_TRUE(store.CreateTag({"later", 1, 10}).ok());
  EXPECT_TRUE(fresh.Sequence("later").ok());
  // A name asked for again and again costs the re-check budget's queries, not one each.
  const int before = store.lookups.load();
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(fresh.Sequence("nope").error().code, ErrorCode::kNotFound);
  EXPECT_LE(store.lookups.load() - before,
            1 + SegmentOptions{}.unknown_tag_rechecks_per_second + 1);
  // Creating it through the allocator makes it known at once.
  ASSERT_TRUE(fresh.CreateTag({"nope", 1, 10}).ok());
  EXPECT_TRUE(fresh.Sequence("nope").ok());
  EXPECT_EQ(fresh.CreateTag({"nope", 1, 10}).error().code, ErrorCode::kAlreadyExists);
}

// Leaf's "both segments not ready": a small step under bursts of many callers.
TEST(SegmentAllocatorTest, AThousandCallersInBurstsWithStepFiftyNeverFail) {
  ControlledStore store;
  ASSERT_TRUE(store.CreateTag({"burst", 1, 50}).ok());
  FakeClock clock(1'000'000);
  SegmentOptions o;
  o.max_step = 50;  // keep the step small, as in Leaf's reports
  SegmentAllocator a(store, clock, o);
  SegmentSequence& s = Loaded(a, "burst");
  std::vector<std::int64_t> ids(1000 * 5, -1);
  std::atomic<int> failures{0};
  for (int burst = 0; burst < 4; ++burst) {
    std::vector<std::thread> callers;
    std::atomic<bool> go{false};
    for (int c = 0; c < 250; ++c) {
      callers.emplace_back([&, burst, c] {
        while (!go.load()) std::this_thread::yield();
        for (int k = 0; k < 5; ++k) {
          Result<std::int64_t> id = s.NextId();
          if (!id.ok()) {
            failures.fetch_add(1);
          } else {
            ids[static_cast<std::size_t>((burst * 250 + c) * 5 + k)] = *id;
          }
        }
      });
    }
    go = true;
    for (auto& t : callers) t.join();
  }
  EXPECT_EQ(failures.load(), 0);
  std::sort(ids.begin(), ids.end());
  EXPECT_GT(ids.front(), 0);
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());
}

TEST(SegmentAllocatorTest, FourThreadsTakeAHundredThousandIdsEachDistinctAndIncreasing) {
  ControlledStore store;
  ASSERT_TRUE(store.CreateTag({"t", 1, 1000}).ok());
  FakeClock clock(1'000'000);
  SegmentAllocator a(store, clock);
  SegmentSequence& s = Loaded(a, "t");
  std::vector<std::vector<std::int64_t>> per(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::int64_t> batch(100);
      while (per[t].size() < 100'000) {
        if (per[t].size() % 1000 == 500) {
          ASSERT_TRUE(s.NextIds(std::span(batch)).ok());
          per[t].insert(per[t].end(), batch.begin(), batch.end());
        } else {
          per[t].push_back(Next(s));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<std::int64_t> all;
  for (auto& v : per) {
    EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));
    all.insert(all.end(), v.begin(), v.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
}

TEST(SegmentAllocatorTest, IdsIncreaseAcrossThreadsInRealTimeOrder) {
  ControlledStore store;
  ASSERT_TRUE(store.CreateTag({"t", 1, 7}).ok());
  FakeClock clock(1'000'000);
  SegmentAllocator a(store, clock);
  SegmentSequence& s = Loaded(a, "t");
  std::int64_t last = 0;
  for (int i = 0; i < 50; ++i) {
    std::int64_t id = 0;
    std::thread([&] { id = Next(s); }).join();
    EXPECT_GT(id, last);
    last = id;
  }
}

TEST(SegmentAllocatorWithoutThreadsTest, AStepChangedInTheStoreIsTakenAtTheNextRange) {
  ControlledStore store;
  ASSERT_TRUE(store.CreateTag({"t", 1, 10}).ok());
  FakeClock clock(1'700'000'000'000);
  SegmentOptions o;
  o.fetch_threads = false;
  SegmentAllocator a(store, clock, o);
  SegmentSequence* seq = *a.Sequence("t");
  a.RunFetches();
  EXPECT_EQ(seq->stats().buffered, (std::vector<IdRange>{{1, 11}}));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(seq->NextId().ok());
  EXPECT_EQ(seq->stats().buffered, (std::vector<IdRange>{{4, 11}}));
  // Another server (or `sekka segment step`) changes the step in the store.
  ASSERT_TRUE(store.SetStep("t", 1000).ok());
  EXPECT_EQ(seq->stats().tag_step, 10);
  while (seq->NextId().ok()) {
  }
  a.RunFetches();
  EXPECT_EQ(seq->stats().tag_step, 1000);
  EXPECT_EQ(seq->stats().step, 1000);
  // Through this allocator, the change is taken at once.
  ASSERT_TRUE(a.SetStep("t", 50).ok());
  EXPECT_EQ(seq->stats().step, 50);
  EXPECT_EQ(store.GetTag("t")->step, 50);
  EXPECT_EQ(a.SetStep("t", 0).error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace sekka

namespace sekka {
namespace {

// The simulation's mode (SegmentOptions::fetch_threads = false): nothing fetches but the owner's
// RunFetches, so a caller with no ids buffered is answered at once rather than left waiting for
// nobody, and a failed fetch stays queued for the next call.
TEST(SegmentAllocatorWithoutThreadsTest, FetchesOnlyInRunFetchesAndNeverMakesACallerWait) {
  ControlledStore store;
  ASSERT_TRUE(store.CreateTag({"t", 1, 10}).ok());
  FakeClock clock(1'700'000'000'000);
  SegmentOptions o;
  o.fetch_threads = false;
  o.wait_deadline = milliseconds(60'000);  // were it waited for, the test would hang
  SegmentAllocator a(store, clock, o);
  Result<SegmentSequence*> seq = a.Sequence("t");
  ASSERT_TRUE(seq.ok()) << seq.error().message;
  Result<std::int64_t> early = (*seq)->NextId();
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(store.allocations.load(), 0);
  store.SetDown(true);
  a.RunFetches();
  EXPECT_EQ(store.allocations.load(), 1);
  store.SetDown(false);
  a.RunFetches();  // the failed fetch was still queued
  EXPECT_EQ(store.allocations.load(), 2);
  std::int64_t last = 0;
  for (int i = 0; i < 30; ++i) {
    Result<std::int64_t> id = (*seq)->NextId();
    if (!id.ok()) {
      a.RunFetches();
      continue;
    }
    EXPECT_GT(*id, last);
    last = *id;
  }
  EXPECT_GT(last, 10);  // past the first range: the prefetch was made by RunFetches
}

}  // namespace
}  // namespace sekka
