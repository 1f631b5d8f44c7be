// backends/local_worker_lease.h
//
// The worker-id sources of one machine (docs/contract.md section 8) as a WorkerLease, so that the
// service has one path for every source: `static` (the configured id), `hostname` (the trailing
// number of the host name) and `local` (the preferred id when free, else one this identity held
// before, else the lowest free one). The id is held by an exclusive lock file in the host's worker
// lock dir (backends/worker_id.h), which the kernel drops when the process dies: a dead holder's
// id is free at once, and a live holder's id cannot be taken, by its own identity either. The hwm
// is the state file beside the lock, `<lock_dir>/<dc>-<worker>.state`, with the layout it was
// made with; StoreHwm never lowers it. Every process of the host (serve with any data dir, gen,
// any user) shares the lock dir, so none can take a worker id another holds, and each starts past
// every earlier holder's hwm. The lock dir serves one id space (BindLockDir: one layout, worker
// ids from this host), bound by the first hwm stored, before any id is issued, and checked at
// every store (a binding removed meanwhile is made again; one of another id space stops this
// lease's stores); a free id whose state belongs to another layout (from before the binding) is
// passed over. The layout's
// fingerprint is WorkerLeaseOptions::layout, or, when that is empty, LocalLeaseOptions::layout's.
//
// Thread-safety: one thread at a time, like every WorkerLease.

#ifndef SEKKA_BACKENDS_LOCAL_WORKER_LEASE_H_
#define SEKKA_BACKENDS_LOCAL_WORKER_LEASE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "sekka/layout.h"
#include "sekka/worker_lease.h"

namespace sekka {

// The default worker lock dir (worker.lock_dir): one per host.
inline constexpr const char* kDefaultWorkerLockDir = "/var/lib/sekka/workers";

struct LocalLeaseOptions {
  std::string source = "local";                  // static | local | hostname
  std::string lock_dir = kDefaultWorkerLockDir;  // the host's locks and states
  std::int64_t worker_id = 0;                    // for `static`
  std::string hostname;                          // for `hostname`; "" = gethostname()
  Layout layout = Layout::Default();  // bounds the ids; its fingerprint goes into the state
  // Take an id this process was told to take even when its state is of another layout.
  bool force = false;
};

// A coordinator's lease (etcd, ZooKeeper) that binds the host's lock dir to its id space
// (BindLockDir: `layout`, "etcd cluster C") at its first hwm store, before any id is issued, so
// that no `sekka gen` or local server of the host can lock a worker id the cluster may have
// given out, and checks it at every later store. A start that fails earlier (a cluster never
// reached) binds nothing; a refused binding is StoreHwm's error: the start stops on it, and a
// running server stops issuing.
std::unique_ptr<WorkerLease> NewHostBoundLease(std::unique_ptr<WorkerLease> inner,
                                               std::string lock_dir, std::string layout,
                                               std::string workers);

// Errors (of the lease's Acquire): kInvalidArgument (an id that does not fit, a host name without
// a number, an empty identity, a state of another layout on an id it must take), kExhausted ("no
// free worker id"), kUnavailable (a static id held by another process), kInternal (the lock dir).
std::unique_ptr<WorkerLease> NewLocalWorkerLease(const LocalLeaseOptions& local,
                                                 const WorkerLeaseOptions& options);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_LOCAL_WORKER_LEASE_H_
