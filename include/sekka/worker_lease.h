// include/sekka/worker_lease.h
//
// A WorkerLease gives this process a worker id that no other live process holds (docs/contract.md
// section 8), and keeps, next to each worker id, the high-water mark (hwm) of the time its holders
// used.
//
//   Result<LeaseGrant> g = lease->Acquire();      // the preferred id if free, else the lowest
//   // wait until the clock is past g->hwm_millis, then issue ids up to a stored hwm:
//   lease->StoreHwm(hwm_ms);                       // before issuing any id up to hwm_ms
//   lease->Renew();                                // every ttl / 3
//   lease->Release();                              // frees the id at once
//
// Fencing: StoreHwm succeeds only while this lease still owns the id: it is a compare-and-set
// on what Acquire wrote (etcd: the owner key's revision; ZooKeeper: the version of the hwm
// node). A process that lost its id, even one that does not know it yet, can therefore never
// store an hwm after the next holder has read the stored one, and the next holder waits past
// that. Ids are never repeated as long as every id's time is at or below a stored hwm.
//
// Backends: the coordinators (etcd, ZooKeeper in backends/; memory for tests and the simulation:
// NewMemoryWorkerLeaseRegistry) each implement the narrow Coordinator of
// include/sekka/coordinator.h, and one adapter (NewCoordinatedLease) makes the WorkerLease of them
// all; the lock-file ones (static, local, hostname) are in backends/local_worker_lease.h. One
// contract suite (testing/worker_lease_contract.h) runs on every one of them.
//
// Thread-safety: one WorkerLease is used by one thread at a time.

#ifndef SEKKA_WORKER_LEASE_H_
#define SEKKA_WORKER_LEASE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sekka/clock.h"
#include "sekka/status.h"

namespace sekka {

struct WorkerLeaseOptions {
  // Who asks: a name that stays the same across restarts of one process slot (host and data
  // dir, or the configured worker.name). A holder whose lease has not expired yet but that has
  // this same identity is taken to be this slot's earlier, dead run: its id is taken over at
  // once (it waits past the hwm as usual). Must not be empty.
  std::string identity;
  std::int64_t datacenter_id = 0;
  // Worker ids 0 .. worker_count - 1 may be handed out (1 << the layout's worker bits).
  std::int64_t worker_count = 1024;
  // The worker id this slot held before (kept in its data dir), tried first; -1: none.
  std::int64_t preferred = -1;
  // A lease not renewed for this long is gone, and its id becomes free.
  std::chrono::milliseconds ttl{10'000};
  // How long one call to the coordinator may take.
  std::chrono::milliseconds call_timeout{2'000};
  // The fingerprint of the layout ids are made with (LayoutFingerprint). A coordinator cluster,
  // and a host's lock dir, serve one layout: the first holder binds it, and Acquire refuses any
  // other (two layouts, or two directions, on one set of worker ids could make equal ids).
  // "" = not checked (a local lease then takes its own layout's).
  std::string layout;
  // false (the default): when the id this slot would take (preferred, or its identity's) has an
  // hwm ahead of `clock` (a restart right after its own run stored one ahead), a free id whose
  // hwm is past is taken instead, so that the restart need not wait (sources local, etcd,
  // zookeeper). true: that id is taken, and the start waits past its hwm (worker.keep_id).
  bool keep_id = false;
  // The clock the hwms are compared with for keep_id = false; the system clock when null.
  Clock* clock = nullptr;
  Clock& clock_or_system() const { return clock != nullptr ? *clock : SystemClock(); }
};

struct LeaseGrant {
  std::int64_t datacenter_id = 0;
  std::int64_t worker_id = 0;
  // The id's hwm: the highest time (ms since 1970) any holder of this id stored; 0 when none
  // did. Ids may be issued only once the clock is past it.
  std::int64_t hwm_millis = 0;
  // How long, on this process's monotonic clock from the grant, an earlier holder of the id
  // that did not release it may still take itself to hold it: 0 where the coordinator frees an
  // id only a TTL after the holder's last renewal reached it, on a clock that does not step
  // (etcd, ZooKeeper, memory, lock files); the TTL on Redis, which expires keys by its wall
  // clock. The hwm fence needs no wait; a holder that relies on the TTL alone (a strict leader,
  // include/sekka/strict.h) waits it out.
  std::chrono::milliseconds settle{0};
};

class WorkerLease {
 public:
  virtual ~WorkerLease() = default;

  // Takes a worker id: the held one if there is one, else options.preferred when it is free
  // (or held by this identity), else the lowest free one (WorkerIdCandidates). Errors: kExhausted
  // ("no free worker id"), kUnavailable (the coordinator cannot be reached), kInvalidArgument.
  virtual Result<LeaseGrant> Acquire() = 0;
  // Keeps the lease alive. Errors: kLeaseLost (it is gone: expired, revoked or taken over;
  // Acquire again), kUnavailable (no answer; the lease may still be alive until its TTL).
  virtual Status Renew() = 0;
  // Raises this id's high-water mark to hwm_millis (ms since 1970), if this lease still owns
  // the id. The stored mark never decreases: a value below it leaves it as it is (and is OK).
  // Errors: kLeaseLost; kUnavailable, after which the value may or may not have been stored
  // (a call that timed out can still land): the caller must not rely on either.
  virtual Status StoreHwm(std::int64_t hwm_millis) = 0;
  // Gives the id back at once (the hwm stays). Holding nothing is not an error.
  virtual Status Release() = 0;
  // For logs and /v1/info: "etcd lease 694d7a3c1b2e0f04 on 127.0.0.1:2379", ...
  virtual std::string Describe() const = 0;
  // The source's name: "etcd", "zookeeper", "local", "static", "hostname", "memory".
  virtual std::string_view source() const = 0;
};

// The worker-id policy of every lease, written once: the order in which to try ids. `holders`
// maps each id held now (expired holdings left out) to whether its holder is this identity (an
// earlier run of this slot, or this lease itself). The order is: `preferred` when it is free or
// this identity's; the ids this identity holds; free ids from `spread` on (wrapping; 0: the
// lowest), at most `max_free` of them (never the whole space: 31 worker bits make 2^31 ids).
// Each id once, all in [0, worker_count). Empty: every id is held by others.
std::vector<std::int64_t> WorkerIdCandidates(const std::map<std::int64_t, bool>& holders,
                                             std::int64_t preferred, std::int64_t worker_count,
                                             int max_free = 16, std::int64_t spread = 0);

// The start-up rule of every holder of a worker id (`sekka serve`, `sekka gen`): ids may be
// issued only once the clock is past the id's stored hwm (`hwm_ms`, from `where`). A wait of up
// to `max_wait_ms` is made; a longer one is refused, as the clock is wrong or ids could repeat.
// Errors: kUnavailable naming both times, where the hwm comes from and the limit.
Status CheckStartupWait(std::int64_t now_ms, std::int64_t hwm_ms, std::int64_t max_wait_ms,
                        std::string_view where);

// The one-layout rule of a coordinator cluster: `bound` is the layout fingerprint the cluster's
// first holder stored, `mine` this lease's (WorkerLeaseOptions::layout); `where` names the
// cluster ("cluster c"). Errors: kInvalidArgument naming both and what to do.
Status CheckClusterLayout(std::string_view where, std::string_view bound, std::string_view mine);

// Checks the name of a sekka cluster at a coordinator (its key prefix): 1 to 64 characters of
// [A-Za-z0-9._-]. Errors: kInvalidArgument naming the name and what is allowed.
Status ValidateClusterName(std::string_view cluster);

// The memory backend: a registry that stands in for a coordinator within one process, with the
// same rules (TTLs measured on `clock`'s MonotonicMillis(); the system clock when null). For
// unit tests, the simulation and the contract's own checks. StoreHwm keeps the larger value.
class Coordinator;  // include/sekka/coordinator.h
class WorkerLeaseRegistry {
 public:
  virtual ~WorkerLeaseRegistry() = default;
  // A session at the registry, and its lease (NewCoordinatedLease of such a session).
  virtual std::unique_ptr<Coordinator> NewCoordinator(const WorkerLeaseOptions& options) = 0;
  virtual std::unique_ptr<WorkerLease> NewLease(const WorkerLeaseOptions& options) = 0;
};
std::unique_ptr<WorkerLeaseRegistry> NewMemoryWorkerLeaseRegistry(Clock* clock = nullptr);

}  // namespace sekka

#endif  // SEKKA_WORKER_LEASE_H_
