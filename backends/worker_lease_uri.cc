#include "backends/worker_lease_uri.h"

#include <fmt/format.h>

#include "backends/etcd_worker_lease.h"
#include "backends/redis_worker_lease.h"
#include "backends/zookeeper_worker_lease.h"
#include "sekka/worker_sources.h"

namespace sekka {

Result<std::unique_ptr<Coordinator>> OpenCoordinator(
    std::string_view source, std::string_view coordinator, std::string_view cluster,
    const WorkerLeaseOptions& options, const CoordinatorAccess& access, const LeafRegistry& leaf) {
  if (!leaf.name.empty() && source != "zookeeper") {
    return InvalidArgument(fmt::format(
        "worker.leaf_name applies to worker.source = \"zookeeper\" only (Leaf's registry is on "
        "ZooKeeper); the source is \"{}\"",
        source));
  }
  if (source == "redis") {
    if (coordinator.empty()) {
      return InvalidArgument(
          "worker.coordinator is required with worker.source = \"redis\": allowed "
          "redis://[USER:PASSWORD@]HOST:PORT[/DB] or rediss://...");
    }
    return NewRedisCoordinator(coordinator, cluster, options, access);
  }
  if (source != "etcd" && source != "zookeeper") {
    return InvalidArgument(fmt::format("worker.source \"{}\" has no coordinator: allowed {}",
                                       source, WorkerSourceNames(&WorkerSource::coordinated)));
  }
  std::string_view addresses = coordinator;
  if (const std::size_t scheme = coordinator.find("://"); scheme != std::string_view::npos) {
    if (coordinator.substr(0, scheme) != source) {
      return InvalidArgument(
          fmt::format("worker.coordinator \"{}\" does not match worker.source \"{}\": allowed "
                      "{}://host:port[,host:port...]",
                      coordinator, source, source));
    }
    addresses = coordinator.substr(scheme + 3);
  }
  if (addresses.empty()) {
    return InvalidArgument(
        fmt::format("worker.coordinator is required with worker.source = \"{}\": allowed "
                    "{}://host:port[,host:port...]",
                    source, source));
  }
  if (source == "etcd") return NewEtcdCoordinator(addresses, cluster, options, access);
  if (!access.tls.ca_file.empty() || !access.tls.cert_file.empty()) {
    return InvalidArgument(
        "worker.tls_ca_file and worker.tls_cert_file apply to worker.source = \"etcd\" only: "
        "Debian's ZooKeeper C client has no TLS");
  }
  return NewZooKeeperCoordinator(addresses, cluster, options, access.username, access.password,
                                 leaf);
}

Result<std::unique_ptr<WorkerLease>> OpenWorkerLease(
    std::string_view source, std::string_view coordinator, std::string_view cluster,
    const WorkerLeaseOptions& options, const CoordinatorAccess& access, const LeafRegistry& leaf) {
  SEKKA_ASSIGN_OR_RETURN(auto c,
                         OpenCoordinator(source, coordinator, cluster, options, access, leaf));
  return NewCoordinatedLease(std::move(c), options);
}

}  // namespace sekka
