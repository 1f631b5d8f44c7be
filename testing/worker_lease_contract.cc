#include "testing/worker_lease_contract.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace sekka {
namespace {

using std::chrono::milliseconds;

// prefix + number (appended: g++ 12 warns falsely on `"x" + std::to_string(i)`).
std::string Name(std::string prefix, int i) {
  prefix.append(std::to_string(i));
  return prefix;
}

WorkerLeaseOptions Options(std::string identity, std::int64_t count = 32,
                           milliseconds ttl = milliseconds(10'000)) {
  WorkerLeaseOptions o;
  o.identity = std::move(identity);
  o.worker_count = count;
  o.ttl = ttl;
  // The contract is about who holds which id, not how fast: a call may take up to the TTL. With
  // the 2 s default, 33 ZooKeeper sessions opened at once on a busy machine (the ASan and TSan
  // stages side by side) timed out, as did 32 TLS handshakes and bcrypt logins under TSan.
  o.call_timeout = ttl;
  return o;
}

TEST_P(WorkerLeaseContractTest, FirstAcquireGetsZeroAndAcquireAgainGivesTheSameId) {
  const std::string where = GetParam().fresh();
  auto lease = GetParam().open(where, Options("a"));
  Result<LeaseGrant> g = lease->Acquire();
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->worker_id, 0);
  EXPECT_EQ(g->hwm_millis, 0);
  Result<LeaseGrant> again = lease->Acquire();
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->worker_id, 0);
  EXPECT_TRUE(lease->Renew().ok());
  EXPECT_FALSE(lease->Describe().empty());
  EXPECT_TRUE(lease->Release().ok());
}

TEST_P(WorkerLeaseContractTest, ThirtyTwoHoldersGetEveryIdAndTheThirtyThirdFails) {
  const std::string where = GetParam().fresh();
  std::vector<std::unique_ptr<WorkerLease>> holders;
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 32; ++i) {
    holders.push_back(GetParam().open(where, Options(Name("holder-", i))));
    Result<LeaseGrant> g = holders.back()->Acquire();
    ASSERT_TRUE(g.ok()) << g.error().message;
    ids.push_back(g->worker_id);
  }
  std::vector<std::int64_t> want(32);
  for (int i = 0; i < 32; ++i) want[static_cast<std::size_t>(i)] = i;
  EXPECT_EQ(ids, want);  // each takes the lowest free id
  auto extra = GetParam().open(where, Options("holder-32"));
  Result<LeaseGrant> g = extra->Acquire();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().code, ErrorCode::kExhausted);
  EXPECT_NE(g.error().message.find("no free worker id"), std::string::npos) << g.error().message;
  for (auto& h : holders) EXPECT_TRUE(h->Release().ok());
}

TEST_P(WorkerLeaseContractTest, AReleasedIdIsReusedAndKeepsItsHwm) {
  const std::string where = GetParam().fresh();
  auto a = GetParam().open(where, Options("a"));
  auto b = GetParam().open(where, Options("b"));
  ASSERT_TRUE(a->Acquire().ok());
  Result<LeaseGrant> gb = b->Acquire();
  ASSERT_TRUE(gb.ok());
  EXPECT_EQ(gb->worker_id, 1);
  ASSERT_TRUE(a->StoreHwm(1'700'000'000'123).ok());
  ASSERT_TRUE(a->Release().ok());
  auto c = GetParam().open(where, Options("c"));
  Result<LeaseGrant> gc = c->Acquire();
  ASSERT_TRUE(gc.ok()) << gc.error().message;
  EXPECT_EQ(gc->worker_id, 0);
  EXPECT_EQ(gc->hwm_millis, 1'700'000'000'123);
  // The released lease can no longer store anything.
  Status late = a->StoreHwm(1'800'000'000'000);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code, ErrorCode::kLeaseLost);
  ASSERT_TRUE(c->StoreHwm(1'700'000'000'500).ok());
  ASSERT_TRUE(c->Release().ok());
  auto d = GetParam().open(where, Options("d"));
  Result<LeaseGrant> gd = d->Acquire();
  ASSERT_TRUE(gd.ok());
  EXPECT_EQ(gd->hwm_millis, 1'700'000'000'500);
  EXPECT_TRUE(b->Release().ok());
  EXPECT_TRUE(d->Release().ok());
}

TEST_P(WorkerLeaseContractTest, ADeadHoldersIdIsReusedOnlyAfterTheTtl) {
  const std::string where = GetParam().fresh();
  const milliseconds ttl(2'000);
  const auto died = std::chrono::steady_clock::now();
  Result<std::int64_t> dead = GetParam().kill_holder(where, Options("dead", 32, ttl));
  ASSERT_TRUE(dead.ok()) << dead.error().message;
  EXPECT_EQ(*dead, 0);
  if (GetParam().frees_at_death) {
    auto next = GetParam().open(where, Options("next", 32, ttl));
    Result<LeaseGrant> g = next->Acquire();
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_EQ(g->worker_id, 0) << "a lock file dies with its holder";
    ASSERT_TRUE(next->Release().ok());
    return;
  }
  auto next = GetParam().open(where, Options("next", 32, ttl));
  Result<LeaseGrant> g = next->Acquire();
  ASSERT_TRUE(g.ok()) << g.error().message;
  if (std::chrono::steady_clock::now() - died < ttl) {
    EXPECT_EQ(g->worker_id, 1);
  }
  ASSERT_TRUE(next->Release().ok());
  // After the TTL (and the coordinator's own expiry sweep), the dead holder's id is free: a
  // deadline for liveness of 30 s (a quiet machine frees it within a second of the TTL).
  bool reused = false;
  for (int i = 0; i < 120 && !reused; ++i) {
    std::this_thread::sleep_for(milliseconds(250));
    auto later = GetParam().open(where, Options(Name("later-", i), 32, ttl));
    Result<LeaseGrant> l = later->Acquire();
    ASSERT_TRUE(l.ok()) << l.error().message;
    reused = l->worker_id == 0;
    if (reused) {
      EXPECT_GE(std::chrono::steady_clock::now() - died, ttl);
    }
    ASSERT_TRUE(later->Release().ok());
  }
  EXPECT_TRUE(reused) << "the dead holder's id was not freed within 30 s after its TTL";
}

TEST_P(WorkerLeaseContractTest, ThirtyTwoConcurrentAcquiresGetExactlyEveryId) {
  const std::string where = GetParam().fresh();
  std::vector<std::unique_ptr<WorkerLease>> leases;
  for (int i = 0; i < 32; ++i) {
    leases.push_back(GetParam().open(where, Options(Name("c", i))));
  }
  std::vector<Result<LeaseGrant>> grants(32, Result<LeaseGrant>(Internal("not run")));
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < 32; ++i) {
    threads.emplace_back([&, i] { grants[i] = leases[i]->Acquire(); });
  }
  for (auto& t : threads) t.join();
  std::set<std::int64_t> ids;
  for (const auto& g : grants) {
    ASSERT_TRUE(g.ok()) << g.error().message;
    ids.insert(g->worker_id);
  }
  EXPECT_EQ(ids.size(), 32u);
  EXPECT_EQ(*ids.begin(), 0);
  EXPECT_EQ(*ids.rbegin(), 31);
  // Every winner still holds its id (a loser's clean-up never ends another's claim).
  for (auto& l : leases) EXPECT_TRUE(l->Renew().ok());
  for (auto& l : leases) EXPECT_TRUE(l->Release().ok());
}

TEST_P(WorkerLeaseContractTest, ThePreferredIdIsTakenWhenFree) {
  const std::string where = GetParam().fresh();
  WorkerLeaseOptions o = Options("p");
  o.preferred = 7;
  auto lease = GetParam().open(where, o);
  Result<LeaseGrant> g = lease->Acquire();
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->worker_id, 7);
  // Held by someone else: the lowest free one instead.
  WorkerLeaseOptions q = Options("q");
  q.preferred = 7;
  auto other = GetParam().open(where, q);
  Result<LeaseGrant> h = other->Acquire();
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_EQ(h->worker_id, 0);
  EXPECT_TRUE(lease->Release().ok());
  EXPECT_TRUE(other->Release().ok());
}

TEST_P(WorkerLeaseContractTest, TheSameIdentityTakesItsIdBackAndTheOldLeaseLearnsItIsLost) {
  const std::string where = GetParam().fresh();
  auto first = GetParam().open(where, Options("slot-1"));
  auto other = GetParam().open(where, Options("other"));
  ASSERT_TRUE(other->Acquire().ok());  // holds 0
  Result<LeaseGrant> g1 = first->Acquire();
  ASSERT_TRUE(g1.ok());
  EXPECT_EQ(g1->worker_id, 1);
  ASSERT_TRUE(first->StoreHwm(1'700'000'000'000).ok());
  // A restart of the same slot (same identity) before the old lease expired.
  auto second = GetParam().open(where, Options("slot-1"));
  Result<LeaseGrant> g2 = second->Acquire();
  ASSERT_TRUE(g2.ok()) << g2.error().message;
  if (!GetParam().same_identity_takes_over) {
    // A live lock is never taken: the second gets another id, and the first keeps its own.
    EXPECT_EQ(g2->worker_id, 2);
    EXPECT_TRUE(first->Renew().ok());
    EXPECT_TRUE(first->StoreHwm(1'700'000'001'000).ok());
    EXPECT_TRUE(first->Release().ok());
    EXPECT_TRUE(second->Release().ok());
    EXPECT_TRUE(other->Release().ok());
    return;
  }
  EXPECT_EQ(g2->worker_id, 1);
  EXPECT_EQ(g2->hwm_millis, 1'700'000'000'000);
  // The old lease is fenced off: it can neither store an hwm nor keep the lease.
  Status s = first->StoreHwm(1'700'000'001'000);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kLeaseLost) << s.error().message;
  Status r = first->Renew();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kLeaseLost) << r.error().message;
  EXPECT_TRUE(second->StoreHwm(1'700'000'002'000).ok());
  // The old lease's clean-up left the new one's claim alone.
  EXPECT_TRUE(second->Renew().ok());
  EXPECT_TRUE(second->Release().ok());
  EXPECT_TRUE(other->Release().ok());
}

TEST_P(WorkerLeaseContractTest, TheStoredHwmNeverDecreases) {
  const std::string where = GetParam().fresh();
  auto a = GetParam().open(where, Options("a"));
  ASSERT_TRUE(a->Acquire().ok());
  ASSERT_TRUE(a->StoreHwm(1'700'000'005'000).ok());
  ASSERT_TRUE(a->StoreHwm(1'700'000'001'000).ok());  // lower: kept as it was, and OK
  ASSERT_TRUE(a->Release().ok());
  auto b = GetParam().open(where, Options("b"));
  Result<LeaseGrant> g = b->Acquire();
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->worker_id, 0);
  EXPECT_EQ(g->hwm_millis, 1'700'000'005'000);
  ASSERT_TRUE(b->StoreHwm(1'700'000'004'000).ok());
  ASSERT_TRUE(b->StoreHwm(1'700'000'006'000).ok());
  ASSERT_TRUE(b->Release().ok());
  auto c = GetParam().open(where, Options("c"));
  Result<LeaseGrant> h = c->Acquire();
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_EQ(h->hwm_millis, 1'700'000'006'000);
  EXPECT_TRUE(c->Release().ok());
}

// A restart right after its own run stored an hwm ahead of the clock (issue 22's fast restart):
// by default it takes a free id whose hwm is past and need not wait; with keep_id it takes its
// own id back and waits; when every free id lies ahead, it takes its own.
TEST_P(WorkerLeaseContractTest, ARestartTakesAFreeIdWhoseHwmIsPastUnlessKeepId) {
  const std::string where = GetParam().fresh();
  const std::int64_t ahead = SystemClock().NowMillis() + 60'000;
  auto first = GetParam().open(where, Options("slot", 2));
  Result<LeaseGrant> g = first->Acquire();
  ASSERT_TRUE(g.ok()) << g.error().message;
  ASSERT_EQ(g->worker_id, 0);
  ASSERT_TRUE(first->StoreHwm(ahead).ok());
  ASSERT_TRUE(first->Release().ok());
  auto restart = [&](bool keep_id) {
    WorkerLeaseOptions o = Options("slot", 2);
    o.preferred = 0;
    o.keep_id = keep_id;
    auto lease = GetParam().open(where, o);
    Result<LeaseGrant> r = lease->Acquire();
    EXPECT_TRUE(lease->Release().ok());
    return r;
  };
  Result<LeaseGrant> kept = restart(true);
  ASSERT_TRUE(kept.ok()) << kept.error().message;
  EXPECT_EQ(kept->worker_id, 0);
  EXPECT_EQ(kept->hwm_millis, ahead);
  Result<LeaseGrant> moved = restart(false);
  ASSERT_TRUE(moved.ok()) << moved.error().message;
  EXPECT_EQ(moved->worker_id, 1);
  EXPECT_EQ(moved->hwm_millis, 0);
  // Another slot passes over id 0 too, takes 1 and stores ahead: no id is past now, so the
  // restart takes its preferred one.
  auto other = GetParam().open(where, Options("other", 2));
  Result<LeaseGrant> h = other->Acquire();
  ASSERT_TRUE(h.ok()) << h.error().message;
  ASSERT_EQ(h->worker_id, 1);
  ASSERT_TRUE(other->StoreHwm(ahead).ok());
  ASSERT_TRUE(other->Release().ok());
  Result<LeaseGrant> waits = restart(false);
  ASSERT_TRUE(waits.ok()) << waits.error().message;
  EXPECT_EQ(waits->worker_id, 0);
  EXPECT_EQ(waits->hwm_millis, ahead);
}

// The review's case: a slot restarted again and again while its earlier runs still hold their
// ids (each ahead) finds a free id whose hwm is past behind all of them, not only among the
// first few candidates.
TEST_P(WorkerLeaseContractTest, ARestartLooksPastItsEarlierRunsLiveIdsForAFreeOne) {
  const std::string where = GetParam().fresh();
  const std::int64_t ahead = SystemClock().NowMillis() + 60'000;
  std::vector<std::unique_ptr<WorkerLease>> runs;
  std::set<std::int64_t> held;
  for (int i = 0; i < 10; ++i) {
    runs.push_back(GetParam().open(where, Options("slot")));
    Result<LeaseGrant> g = runs.back()->Acquire();
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_EQ(g->hwm_millis, 0) << "run " << i << " waited for id " << g->worker_id;
    EXPECT_TRUE(held.insert(g->worker_id).second);
    ASSERT_TRUE(runs.back()->StoreHwm(ahead).ok());
  }
  for (auto& r : runs) EXPECT_TRUE(r->Release().ok());
}

// The narrow interface: a claim made on a listing that has gone stale never ends a holding made
// since. The review found ZooKeeper's claim deleting whatever node stood at the id (an owner
// node's version is always 0), so a slot's restart evicted an unrelated server that took the id
// after the listing.
TEST_P(WorkerLeaseContractTest, AClaimOnAStaleListingNeverEndsAHoldingMadeSince) {
  if (!GetParam().open_coordinator) GTEST_SKIP() << "a lock-file source has no coordinator";
  const std::string where = GetParam().fresh();
  auto a = GetParam().open_coordinator(where, Options("slot"));
  auto b = GetParam().open_coordinator(where, Options("slot"));
  auto w = GetParam().open_coordinator(where, Options("other"));
  ASSERT_TRUE(a->ListHolders().ok());
  Result<std::optional<std::int64_t>> claimed = a->Claim(0, std::nullopt);
  ASSERT_TRUE(claimed.ok() && claimed->has_value());
  Result<std::map<std::int64_t, Holding>> seen = b->ListHolders();  // a's holding of 0
  ASSERT_TRUE(seen.ok() && seen->contains(0));
  ASSERT_TRUE(a->Close().ok());
  ASSERT_TRUE(w->ListHolders().ok());
  Result<std::optional<std::int64_t>> taken = w->Claim(0, std::nullopt);
  ASSERT_TRUE(taken.ok() && taken->has_value());
  Result<std::optional<std::int64_t>> stale = b->Claim(0, seen->at(0));
  ASSERT_TRUE(stale.ok()) << stale.error().message;
  EXPECT_FALSE(stale->has_value()) << "a claim on a stale listing took the id over";
  EXPECT_TRUE(w->KeepAlive(0).ok());
  EXPECT_TRUE(w->StoreHwm(0, 1'700'000'000'000).ok());
  // A close after a takeover leaves the new holder's claim alone.
  Result<std::map<std::int64_t, Holding>> now = b->ListHolders();
  ASSERT_TRUE(now.ok() && now->contains(0));
  auto w2 = GetParam().open_coordinator(where, Options("other"));
  ASSERT_TRUE(w2->ListHolders().ok());
  Result<std::optional<std::int64_t>> over = w2->Claim(0, now->at(0));  // same identity: takes over
  ASSERT_TRUE(over.ok() && over->has_value());
  ASSERT_TRUE(w->Close().ok());
  EXPECT_TRUE(w2->KeepAlive(0).ok());
  EXPECT_TRUE(w2->StoreHwm(0, 1'700'000'001'000).ok());
  EXPECT_TRUE(w2->Close().ok());
  EXPECT_TRUE(b->Close().ok());
}

TEST_P(WorkerLeaseContractTest, AnEmptyIdentityIsRefused) {
  const std::string where = GetParam().fresh();
  auto lease = GetParam().open(where, Options(""));
  Result<LeaseGrant> g = lease->Acquire();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().code, ErrorCode::kInvalidArgument);
}

// A lease's first hwm store, or its Acquire: the lease of a second layout must fail one of them
// (a coordinator refuses at Acquire, a host's lock dir at the first store), so it never issues.
Status AcquireAndStore(WorkerLease& lease) {
  Result<LeaseGrant> g = lease.Acquire();
  if (!g.ok()) return g.error();
  return lease.StoreHwm(g->hwm_millis + 1000);
}

// A coordinator's cluster and a host's lock dir alike serve one layout
// (WorkerLeaseOptions::layout), bound by its first holder.
TEST_P(WorkerLeaseContractTest, AClusterServesTheLayoutItsFirstHolderBound) {
  const std::string where = GetParam().fresh();
  auto with_layout = [](std::string identity, std::string layout) {
    WorkerLeaseOptions o = Options(std::move(identity));
    o.layout = std::move(layout);
    return o;
  };
  auto a = GetParam().open(where, with_layout("a", "layout one"));
  ASSERT_TRUE(AcquireAndStore(*a).ok());
  auto b = GetParam().open(where, with_layout("b", "layout two"));
  Status refused = AcquireAndStore(*b);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.error().message.find("\"layout one\""), std::string::npos)
      << refused.error().message;
  // The binding outlives its first holder: ids of layout one stay in the cluster's history.
  ASSERT_TRUE(a->Release().ok());
  ASSERT_TRUE(b->Release().ok());
  EXPECT_FALSE(AcquireAndStore(*b).ok());
  auto c = GetParam().open(where, with_layout("c", "layout one"));
  EXPECT_TRUE(AcquireAndStore(*c).ok());
}

}  // namespace

LeaseFactory MemoryLeaseFactory() {
  struct State {
    std::mutex mu;
    std::map<std::string, std::unique_ptr<WorkerLeaseRegistry>> registries;
  };
  auto state = std::make_shared<State>();
  LeaseFactory f;
  f.name = "memory";
  f.fresh = [state] {
    std::lock_guard lock(state->mu);
    const std::string where = std::to_string(state->registries.size());
    state->registries[where] = NewMemoryWorkerLeaseRegistry();
    return where;
  };
  f.open = [state](const std::string& where, const WorkerLeaseOptions& options) {
    std::lock_guard lock(state->mu);
    return state->registries.at(where)->NewLease(options);
  };
  f.open_coordinator = [state](const std::string& where, const WorkerLeaseOptions& options) {
    std::lock_guard lock(state->mu);
    return state->registries.at(where)->NewCoordinator(options);
  };
  f.kill_holder = [state](const std::string& where,
                          const WorkerLeaseOptions& options) -> Result<std::int64_t> {
    std::unique_ptr<WorkerLease> lease;
    {
      std::lock_guard lock(state->mu);
      lease = state->registries.at(where)->NewLease(options);
    }
    SEKKA_ASSIGN_OR_RETURN(auto g, lease->Acquire());
    return g.worker_id;  // dropped without Release: it is left to expire
  };
  return f;
}

}  // namespace sekka
