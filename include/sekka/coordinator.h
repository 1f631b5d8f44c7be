// include/sekka/coordinator.h
//
// A Coordinator is what a cluster's store of worker ids must do, and no more: list the holders,
// claim an id with a fence, keep the session alive, store the hwm if still fenced, release; and
// keep the small documents the cluster's servers share (CosId's machine ids), each written only
// at the version read. etcd, ZooKeeper and Redis (backends/) and the memory registry (tests, the
// simulation) implement it;
// NewCoordinatedLease makes the one WorkerLease of them all, so that the worker-id policy
// (WorkerIdCandidates), the cluster's layout rule, the retries and the messages exist once.
//
// One Coordinator is one session at its coordinator (etcd: a lease; ZooKeeper: a session), opened
// on first use: what it claims is held while the session lives, and is free once it ends or
// expires. The fencing argument of include/sekka/worker_lease.h rests on two of its promises:
//  1. Claim reads the id's stored hwm in the same atomic step that makes this session its holder
//     (a transaction, or a write at the version read);
//  2. StoreHwm(id, ...) lands only while that claim stands: once another session claimed the id,
//     no store of this one can land, even one sent before and delivered late.
// So every later holder reads every hwm an earlier holder stored, and starts past it.
//
// Thread-safety: one thread at a time, like a WorkerLease.

#ifndef SEKKA_COORDINATOR_H_
#define SEKKA_COORDINATOR_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sekka/status.h"
#include "sekka/worker_lease.h"

namespace sekka {

// A worker id's holder as listed: who, in which session, and the version Claim compares.
struct Holding {
  std::string identity;
  std::int64_t session = 0;  // etcd: the lease id; ZooKeeper: the session id
  std::int64_t version = 0;  // etcd: the owner key's mod_revision; ZooKeeper: the node's czxid
  friend bool operator==(const Holding&, const Holding&) = default;
};

// A document the cluster's servers share, as read: its bytes and the version a write compares.
struct SharedDocument {
  std::string data;
  std::int64_t version = 0;  // 0: none stored yet
};

class Coordinator {
 public:
  virtual ~Coordinator() = default;

  // Binds the cluster to `layout` unless a layout is bound already; returns the bound one.
  // Errors: kUnavailable, kUnauthenticated, kInternal.
  virtual Result<std::string> BindLayout(const std::string& layout) = 0;
  // The worker ids of this datacenter held now by live sessions. Opens the session if none is
  // open. Errors: kUnavailable, kUnauthenticated.
  virtual Result<std::map<std::int64_t, Holding>> ListHolders() = 0;
  // This session's id as Holding::session shows it; 0 while none is open.
  virtual std::int64_t session() const = 0;
  // True when `h`, listed at `id`, is a claim of this coordinator's (one whose answer was lost
  // may have landed): Claim then keeps it. A session shared by several coordinators
  // (backends/coordinator_sessions.h) holds others' claims too.
  virtual bool Mine(std::int64_t id, const Holding& h) const {
    (void)id;
    return h.session != 0 && h.session == session();
  }
  // The hwm stored for `id` (0: none), read without claiming it: a hint for choosing an id, never
  // a floor (the floor is what Claim returns). Errors: kUnavailable, kInternal.
  virtual Result<std::int64_t> PeekHwm(std::int64_t id) = 0;
  // Makes this session the holder of `id` with this coordinator's identity, if `id` is still as
  // `seen` was listed (nullopt: free), and returns its stored hwm (promise 1). A `seen` holding
  // of another session (this identity's earlier run) ends. nullopt: `id` changed meanwhile (try
  // another). Errors: kUnavailable (it may or may not have landed), kUnauthenticated,
  // kInternal.
  virtual Result<std::optional<std::int64_t>> Claim(std::int64_t id,
                                                    const std::optional<Holding>& seen) = 0;
  // Keeps the session alive and checks that `id` is still this session's. Errors: kLeaseLost
  // (the session expired, or the id was taken over), kUnavailable (no answer).
  virtual Status KeepAlive(std::int64_t id) = 0;
  // Raises the hwm of `id` to `hwm_millis` if this session's claim of it stands (promise 2);
  // never lowers it. Errors: kLeaseLost, kUnavailable (it may or may not have landed).
  virtual Status StoreHwm(std::int64_t id, std::int64_t hwm_millis) = 0;
  // Ends the session: every id it holds is free at once (their hwms stay). Ending none is OK.
  // Errors: kUnavailable.
  virtual Status Close() = 0;
  // For logs and /v1/info: "etcd lease 694d7a3c1b2e0f04 on 127.0.0.1:2379 (cluster c)".
  virtual std::string Describe() const = 0;
  // LeaseGrant::settle of the id the last Claim took (include/sekka/worker_lease.h): 0 unless
  // this coordinator can free an id before a TTL has passed since its holder's last renewal
  // reached it, and the id's earlier holder did not release it.
  virtual std::chrono::milliseconds settle() const { return std::chrono::milliseconds(0); }
  // The id space's name in messages: "cluster c" (etcd, ZooKeeper), "the memory registry".
  virtual std::string Where() const = 0;
  // "etcd", "zookeeper", "memory".
  virtual std::string_view source() const = 0;

  // The cluster's document `name` ([A-Za-z0-9._:-], never "." or ".."), read without a session.
  // Errors: kUnavailable, kUnauthenticated, kInternal.
  virtual Result<SharedDocument> ReadShared(std::string_view name) = 0;
  // Stores `data` as `name` if it is still at `version` (0: none stored); false when another
  // server wrote it since (read it again). Errors: kUnavailable (it may or may not have landed),
  // kUnauthenticated, kExhausted (larger than kMaxSharedBytes).
  virtual Result<bool> WriteShared(std::string_view name, std::string_view data,
                                   std::int64_t version) = 0;
  // A document's size at most: below what every coordinator takes in one write (ZooKeeper's
  // jute.maxbuffer of 1 MiB by default, etcd's request limit of 1.5 MiB).
  static constexpr std::size_t kMaxSharedBytes = 900 * 1024;
};

// The one refusal of a document larger than Coordinator::kMaxSharedBytes, for WriteShared.
Status CheckSharedSize(std::string_view name, std::size_t bytes);

// The WorkerLease of a coordinator: Acquire binds the layout (CheckClusterLayout), lists the
// holders, and claims the first candidate of WorkerIdCandidates that it can, listing again when
// all were taken meanwhile. Unless options.keep_id, a candidate whose hwm lies ahead of
// options.clock (a restart right after its own run stored an hwm ahead) is passed over for a
// later free one whose hwm is past, so that the restart need not wait.
std::unique_ptr<WorkerLease> NewCoordinatedLease(std::unique_ptr<Coordinator> coordinator,
                                                 const WorkerLeaseOptions& options);

}  // namespace sekka

#endif  // SEKKA_COORDINATOR_H_
