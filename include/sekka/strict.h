// include/sekka/strict.h
//
// Strict ids: per tag, ids that are unique across the cluster and ordered in real time: if one
// request completes before another begins, anywhere in the cluster, the second gets larger ids
// (docs/contract.md, docs/design.md "Strict ids"). They are plain counters from 1, not times.
//
// One server leads a tag at a time; the others forward to it. The leader holds a lease on the
// tag at the cluster's coordinator (a WorkerLease of one slot in the tag's own namespace), and
// the lease's hwm is the tag's *bound*: every id any leader served is at or below it. The
// argument, in five lines:
//  1. A leader serves ids only above the bound it read when it took the lease (Lead), and only
//     at or below a bound it stored since (StoreHwm, fenced: it lands only while the lease
//     stands). So a new leader, which reads the bound when it takes the lease, starts above
//     every id an earlier one served: ids never repeat.
//  2. A leader answers only while its lease is valid by its own monotonic clock: until the time
//     it *sent* its last successful Acquire or Renew, plus the TTL less a margin for clock-rate
//     error. The coordinator frees the lease no earlier than the TTL after it *received* that
//     call, so a new leader exists only after the old one stopped answering: a request the old
//     one answers overlaps every request the new one completed (order holds, pauses included,
//     as the check runs after the request arrived). A coordinator that may free it sooner
//     (Redis expires keys by its wall clock, which can step) says so in the grant
//     (LeaseGrant::settle), and the new leader then answers only once that long has passed on
//     its own clock since its claim, which came after the old one's last renewal arrived.
//
// Thread-safety: all methods may be called from any thread.

#ifndef SEKKA_STRICT_H_
#define SEKKA_STRICT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "sekka/clock.h"
#include "sekka/status.h"
#include "sekka/worker_lease.h"

namespace sekka {

struct StrictOptions {
  // The leader's lease at the coordinator; Tick() renews it every ttl / 3.
  std::chrono::milliseconds ttl{10'000};
  // The share of the TTL a leader gives up for clock-rate error between it and the coordinator
  // (a leader's clock running slow by this much would otherwise overlap its successor).
  double margin = 0.1;
  // How far the stored bound runs ahead of what was served: the ids a failover skips at most.
  std::int64_t window = 100'000;
  // The simulation's planted bug (simulation/simulation.h, plant_strict_bug): a new leader starts
  // AT the stored bound instead of above it. Its self-test only; never set otherwise.
  bool planted_bug_start_at_bound = false;
};

// Strict tag names: 1 to 40 characters of A-Z a-z 0-9 _ . - (the tag names a coordinator
// namespace). Errors: kInvalidArgument naming what is allowed.
Status ValidateStrictTag(std::string_view tag);

// One tag's leadership on this server: Lead() to take it, Next() to serve, Tick() to keep it.
class StrictLeader {
 public:
  // `lease`: one slot (worker_count 1) in the tag's own namespace, with an identity no other
  // process shares (a takeover by identity would skip the wait of step 2). `clock` outlives this.
  StrictLeader(std::string tag, std::unique_ptr<WorkerLease> lease, Clock& clock,
               StrictOptions options = {});
  ~StrictLeader();

  // Takes the lease, reads the bound B, stores B + window and serves from B + 1. Leading
  // already is OK. Errors: kExhausted (another server leads), kUnavailable, kLeaseLost.
  Status Lead();
  // `n` consecutive ids (1 <= n <= window); returns the first. Raises the bound first when it
  // would be passed. Errors: kLeaseLost (not leading, or the lease is not known valid now: the
  // caller finds the leader again), kUnavailable (the bound could not be raised), kExhausted
  // (the ids would pass 2^63 - 1), kInvalidArgument (n).
  Result<std::int64_t> Next(std::int64_t n = 1);
  // Renews the lease and raises the bound when less than half the window is left. Errors:
  // kLeaseLost (leadership ended: Lead again or follow another), kUnavailable.
  Status Tick();
  // Gives the lease back; the next leader starts above the bound at once.
  void Resign();

  bool leading() const;
  // True when Next(n) would be answered now without a coordinator call: leading, the lease
  // known valid, and n ids below the stored bound (a hint: another caller may take them first).
  // Never waits (the event loops ask it): false while another call holds the leader.
  bool Ready(std::int64_t n);
  // The last id served (0 before any), the stored bound, and the lease's local deadline.
  struct State {
    bool leading = false;
    std::int64_t last = 0;
    std::int64_t bound = 0;
    std::int64_t valid_until_ms = 0;  // on clock's MonotonicMillis()
  };
  State state() const;
  const std::string& tag() const { return tag_; }

 private:
  // How long a lease is valid after its call was sent: the TTL less the margin.
  std::int64_t Validity() const;
  // True while the lease is known valid. REQUIRES: mu_ held.
  bool ValidLocked();
  // Stores a bound of at least `needed`, a window past it. REQUIRES: mu_ and lease_mu_ held.
  Status RaiseLocked(std::int64_t needed);

  const std::string tag_;
  const std::unique_ptr<WorkerLease> lease_;
  Clock& clock_;
  const StrictOptions options_;
  // mu_ serializes the steps of Next: the order of ids is the order of the lock. lease_mu_ makes
  // the lease's calls one at a time (taken after mu_, or alone to renew).
  mutable std::mutex mu_;
  std::mutex lease_mu_;
  bool leading_ = false;          // guarded by mu_
  std::int64_t next_ = 1;         // guarded by mu_: the next id to serve
  std::int64_t bound_ = 0;        // guarded by mu_: the stored bound
  std::int64_t valid_until_ = 0;  // guarded by mu_: on clock_.MonotonicMillis()
  std::int64_t serve_from_ = 0;   // guarded by mu_: on clock_.MonotonicMillis() (the settle)
};

}  // namespace sekka

#endif  // SEKKA_STRICT_H_
