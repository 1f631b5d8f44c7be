// backends/local_worker_lease.h
//
// The worker-id sources of one machine (docs/contract.md section 8) as a WorkerLease, so that the
// service has one path for every source: `static` (the configured id), `hostname` (the trailing
// number of the host name) and `local` (the preferred id when free, else one this identity held
// before, else the lowest free one). The id is held by an exclusive lock file under the data dir
// (backends/worker_id.h), which the kernel drops when the process dies: a dead holder's id is free
// at once, and a live holder's id cannot be taken, by its own identity either. The hwm is the data
// dir's state file, which StoreHwm never lowers.
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

struct LocalLeaseOptions {
  std::string source = "local";       // static | local | hostname
  std::string data_dir;               // where the lock and state files are
  std::int64_t worker_id = 0;         // for `static`
  std::string hostname;               // for `hostname`; "" = gethostname()
  Layout layout = Layout::Default();  // bounds the ids; its fingerprint goes into the state
};

// Errors (of the lease's Acquire): kInvalidArgument (an id that does not fit, a host name without
// a number, an empty identity), kExhausted ("no free worker id"), kUnavailable (a static id
// held by another process), kInternal (the data dir).
std::unique_ptr<WorkerLease> NewLocalWorkerLease(const LocalLeaseOptions& local,
                                                 const WorkerLeaseOptions& options);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_LOCAL_WORKER_LEASE_H_
