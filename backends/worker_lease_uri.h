// backends/worker_lease_uri.h
//
// The one place that turns worker.source and worker.coordinator into a coordinator and its lease:
//   source "etcd",      coordinator "etcd://127.0.0.1:2379,127.0.0.1:22379" (or without etcd://)
//   source "zookeeper", coordinator "zookeeper://127.0.0.1:2181" (or without zookeeper://)
//   source "redis",     coordinator "redis://127.0.0.1:6379/0" (rediss:// with TLS)

#ifndef SEKKA_BACKENDS_WORKER_LEASE_URI_H_
#define SEKKA_BACKENDS_WORKER_LEASE_URI_H_

#include <memory>
#include <string_view>

#include "backends/coordinator_access.h"
#include "backends/coordinator_sessions.h"
#include "backends/zookeeper_worker_lease.h"
#include "sekka/coordinator.h"

namespace sekka {

// `access`: TLS (etcd only) and a user (etcd's users; ZooKeeper's digest authentication);
// `leaf`: Leaf's registry beside (ZooKeeper only); `sessions`: where coordinators share their
// sessions (backends/coordinator_sessions.h; null: each its own).
// Errors: kInvalidArgument (an unknown source, a scheme that is not the source's, bad addresses
// or cluster name, TLS for ZooKeeper, unreadable certificate files), naming the setting and
// what is allowed.
Result<std::unique_ptr<Coordinator>> OpenCoordinator(
    std::string_view source, std::string_view coordinator, std::string_view cluster,
    const WorkerLeaseOptions& options, const CoordinatorAccess& access = {},
    const LeafRegistry& leaf = {}, CoordinatorSessions* sessions = nullptr);
// The lease of OpenCoordinator's coordinator (NewCoordinatedLease). Errors: as OpenCoordinator.
Result<std::unique_ptr<WorkerLease>> OpenWorkerLease(
    std::string_view source, std::string_view coordinator, std::string_view cluster,
    const WorkerLeaseOptions& options, const CoordinatorAccess& access = {},
    const LeafRegistry& leaf = {}, CoordinatorSessions* sessions = nullptr);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_WORKER_LEASE_URI_H_
