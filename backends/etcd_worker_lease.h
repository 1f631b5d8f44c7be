// backends/etcd_worker_lease.h
//
// Worker-id leases on etcd 3.4+, through its JSON gateway (POST /v3/lease/*, /v3/kv/*): Debian
// has no etcd C++ client, and gRPC is not needed for a call a second.
//
// Keys, under "sekka/<cluster>/":
//   workers/<dc>/<id>   the owner: value = identity, attached to this process's lease, so it
//                       disappears when the lease expires or is revoked
//   hwm/<dc>/<id>       the high-water mark in ms (decimal), kept forever
// A Coordinator (include/sekka/coordinator.h) made a WorkerLease by NewCoordinatedLease. The
// session is an etcd lease. Claim is a transaction (the owner key must not exist, or must still
// be the same identity's earlier run at the revision it was listed at) that also reads the hwm.
// StoreHwm is a transaction conditioned on the owner key still being at the revision this
// session wrote: a session that expired or was taken over can never store again. KeepAlive is a
// lease keep-alive. Several endpoints are tried in turn. Coordinators may share one lease
// (backends/coordinator_sessions.h): each then deletes, at Close, only the owner keys it wrote
// (at the revision it wrote them) instead of revoking the lease.
//
// Transport: libcurl (backends/http_client.h), HTTP or HTTPS with a CA file and an optional
// client certificate. With a user name, sekka authenticates (POST /v3/auth/authenticate) and
// sends the token on every call; a token etcd no longer knows (it expired, or the member
// restarted) is replaced once per call. etcd's gateway refuses client certificates that carry a
// Common Name (etcd 3.4.10+): give sekka's certificate none, and authenticate with a user.

#ifndef SEKKA_BACKENDS_ETCD_WORKER_LEASE_H_
#define SEKKA_BACKENDS_ETCD_WORKER_LEASE_H_

#include <memory>
#include <string>
#include <string_view>

#include "backends/coordinator_access.h"
#include "backends/coordinator_sessions.h"
#include "sekka/coordinator.h"

namespace sekka {

// `endpoints`: "127.0.0.1:2379[,host:port...]"; `cluster`: the key namespace ([A-Za-z0-9._-],
// 1 to 64 characters). The files `access` names must be readable. Errors: kInvalidArgument,
// naming the setting (worker.coordinator, worker.tls_*, worker.username). Connects lazily (no
// call is made here). `sessions`: where coordinators share one lease (backends/
// coordinator_sessions.h; null: a lease of its own, revoked by Close).
Result<std::unique_ptr<Coordinator>> NewEtcdCoordinator(std::string_view endpoints,
                                                        std::string_view cluster,
                                                        const WorkerLeaseOptions& options,
                                                        const CoordinatorAccess& access = {},
                                                        CoordinatorSessions* sessions = nullptr);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_ETCD_WORKER_LEASE_H_
