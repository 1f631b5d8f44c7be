// backends/etcd_worker_lease.h
//
// Worker-id leases on etcd 3.4+, through its JSON gateway (POST /v3/lease/*, /v3/kv/*): Debian
// has no etcd C++ client, and gRPC is not needed for a call a second.
//
// Keys, under "sekka/<cluster>/":
//   workers/<dc>/<id>   the owner: value = identity, attached to this process's lease, so it
//                       disappears when the lease expires or is revoked
//   hwm/<dc>/<id>       the high-water mark in ms (decimal), kept forever
// Acquire grants a lease, lists the owners, and claims one id with a transaction (the owner key
// must not exist, or must still be the same identity's earlier run at the revision it was
// seen) that also reads the hwm. StoreHwm is a transaction conditioned on the owner key still
// being at the revision this lease wrote: a lease that expired or was taken over can never
// store again. Renew is a lease keep-alive. Several endpoints are tried in turn.

#ifndef SEKKA_BACKENDS_ETCD_WORKER_LEASE_H_
#define SEKKA_BACKENDS_ETCD_WORKER_LEASE_H_

#include <memory>
#include <string>
#include <string_view>

#include "sekka/worker_lease.h"

namespace sekka {

// `endpoints`: "127.0.0.1:2379[,host:port...]"; `cluster`: the key namespace ([A-Za-z0-9._-],
// 1 to 64 characters). Errors: kInvalidArgument. Connects lazily (no call is made here).
Result<std::unique_ptr<WorkerLease>> NewEtcdWorkerLease(std::string_view endpoints,
                                                        std::string_view cluster,
                                                        const WorkerLeaseOptions& options);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_ETCD_WORKER_LEASE_H_
