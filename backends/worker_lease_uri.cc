#include "backends/worker_lease_uri.h"

#include <fmt/format.h>

#include "backends/etcd_worker_lease.h"
#include "backends/redis_worker_lease.h"
#include "backends/zookeeper_worker_lease.h"
#include "sekka/worker_sources.h"

namespace sekka {

namespace {

// What an opener gets: the coordinator URI and the rest of the worker configuration.
struct CoordinatorCall {
  std::string_view source;
  std::string_view coordinator;
  std::string_view cluster;
  const WorkerLeaseOptions& options;
  const CoordinatorAccess& access;
  const LeafRegistry& leaf;
  CoordinatorSessions* sessions;
};

// The host:port list of "SOURCE://h:p[,h:p]" (the scheme may be left out).
Result<std::string_view> Addresses(const CoordinatorCall& c) {
  std::string_view addresses = c.coordinator;
  if (const std::size_t scheme = addresses.find("://"); scheme != std::string_view::npos) {
    if (addresses.substr(0, scheme) != c.source) {
      return InvalidArgument(
          fmt::format("worker.coordinator \"{}\" does not match worker.source \"{}\": allowed "
                      "{}://host:port[,host:port...]",
                      c.coordinator, c.source, c.source));
    }
    addresses.remove_prefix(scheme + 3);
  }
  if (addresses.empty()) {
    return InvalidArgument(
        fmt::format("worker.coordinator is required with worker.source = \"{}\": allowed "
                    "{}://host:port[,host:port...]",
                    c.source, c.source));
  }
  return addresses;
}

Result<std::unique_ptr<Coordinator>> OpenEtcd(const CoordinatorCall& c) {
  SEKKA_ASSIGN_OR_RETURN(auto addresses, Addresses(c));
  return NewEtcdCoordinator(addresses, c.cluster, c.options, c.access, c.sessions);
}

Result<std::unique_ptr<Coordinator>> OpenZooKeeper(const CoordinatorCall& c) {
  SEKKA_ASSIGN_OR_RETURN(auto addresses, Addresses(c));
  return NewZooKeeperCoordinator(addresses, c.cluster, c.options, c.access.username,
                                 c.access.password, c.leaf, c.sessions);
}

Result<std::unique_ptr<Coordinator>> OpenRedis(const CoordinatorCall& c) {
  if (c.coordinator.empty()) {
    return InvalidArgument(
        "worker.coordinator is required with worker.source = \"redis\": allowed "
        "redis://[USER:PASSWORD@]HOST:PORT[/DB] or rediss://...");
  }
  return NewRedisCoordinator(c.coordinator, c.cluster, c.options, c.access);
}

// Each coordinated source's opener, by its name in sekka/worker_sources.h.
struct CoordinatorOpener {
  std::string_view source;
  Result<std::unique_ptr<Coordinator>> (*open)(const CoordinatorCall& c);
};
constexpr CoordinatorOpener kOpeners[] = {
    {"etcd", OpenEtcd},
    {"zookeeper", OpenZooKeeper},
    {"redis", OpenRedis},
};

}  // namespace

Result<std::unique_ptr<Coordinator>> OpenCoordinator(
    std::string_view source, std::string_view coordinator, std::string_view cluster,
    const WorkerLeaseOptions& options, const CoordinatorAccess& access, const LeafRegistry& leaf,
    CoordinatorSessions* sessions) {
  const WorkerSource* row = FindWorkerSource(source);
  const CoordinatorOpener* opener = nullptr;
  for (const CoordinatorOpener& o : kOpeners) {
    if (row != nullptr && row->coordinated && o.source == source) opener = &o;
  }
  if (opener == nullptr) {
    return InvalidArgument(fmt::format("worker.source \"{}\" has no coordinator: allowed {}",
                                       source, WorkerSourceNames(&WorkerSource::coordinated)));
  }
  if (!leaf.name.empty() && !row->leaf) {
    return InvalidArgument(fmt::format(
        "worker.leaf_name applies to worker.source = {} only (where Leaf's registry is); the "
        "source is \"{}\"",
        WorkerSourceNames(&WorkerSource::leaf), source));
  }
  if (!row->tls && (!access.tls.ca_file.empty() || !access.tls.cert_file.empty())) {
    return InvalidArgument(fmt::format(
        "worker.tls_ca_file and worker.tls_cert_file apply to worker.source = {} only: the "
        "{} client has no TLS",
        WorkerSourceNames(&WorkerSource::tls), source));
  }
  return opener->open({source, coordinator, cluster, options, access, leaf, sessions});
}

Result<std::unique_ptr<WorkerLease>> OpenWorkerLease(
    std::string_view source, std::string_view coordinator, std::string_view cluster,
    const WorkerLeaseOptions& options, const CoordinatorAccess& access, const LeafRegistry& leaf,
    CoordinatorSessions* sessions) {
  SEKKA_ASSIGN_OR_RETURN(
      auto c, OpenCoordinator(source, coordinator, cluster, options, access, leaf, sessions));
  return NewCoordinatedLease(std::move(c), options);
}

}  // namespace sekka
