// backends/zookeeper_worker_lease.h
//
// Worker-id leases on ZooKeeper 3.5+, through Debian's C client (libzookeeper-mt, THREADED: its
// own thread keeps the session alive).
//
// Nodes, under /sekka/<cluster>/:
//   workers/<dc>/<id>   ephemeral; data = identity. It goes when the session ends or expires
//                       (the session timeout is the lease TTL).
//   hwm/<dc>/<id>       persistent; data = the high-water mark in ms (decimal)
// A Coordinator (include/sekka/coordinator.h) made a WorkerLease by NewCoordinatedLease. Claim
// creates the ephemeral node of the id (deleting one left by this identity's earlier run, at the
// version it was listed at), then fences the hwm node: it reads it and writes the same value back
// at the version it read. From then on only this session knows the hwm node's version, and
// StoreHwm is a set at that version: a session that was taken over fails with a bad version, one
// that expired fails with the session.
//
// With a user, the client authenticates with ZooKeeper's digest scheme and creates every node
// under /sekka/<cluster> with the creator's ACL: only that user (any process that has its
// password) may read or change them, and a client without it is refused (ZNOAUTH) before it
// takes an id. Nodes created before a user was set keep their open ACL. Debian's C client has
// no TLS.

#ifndef SEKKA_BACKENDS_ZOOKEEPER_WORKER_LEASE_H_
#define SEKKA_BACKENDS_ZOOKEEPER_WORKER_LEASE_H_

#include <memory>
#include <string>
#include <string_view>

#include "sekka/worker_lease.h"

namespace sekka {

// `servers`: "127.0.0.1:2181[,host:port...]"; `cluster` as ValidateClusterName allows;
// `username` and `password` both or neither ("" = no authentication, open ACLs).
// Errors: kInvalidArgument. Connects on the first Acquire.
Result<std::unique_ptr<WorkerLease>> NewZooKeeperWorkerLease(std::string_view servers,
                                                             std::string_view cluster,
                                                             const WorkerLeaseOptions& options,
                                                             const std::string& username = "",
                                                             const std::string& password = "");

}  // namespace sekka

#endif  // SEKKA_BACKENDS_ZOOKEEPER_WORKER_LEASE_H_
