// include/sekka/worker_sources.h
//
// Where worker ids come from: one row per `worker.source`. The configuration, the command line,
// their messages and the backends read this table, so a new coordinator is a row here and its
// Coordinator in backends/ (backends/worker_lease_uri.cc opens each by name), nothing in server/
// or cli/.

#ifndef SEKKA_WORKER_SOURCES_H_
#define SEKKA_WORKER_SOURCES_H_

#include <span>
#include <string>
#include <string_view>

namespace sekka {

struct WorkerSource {
  std::string_view name;  // worker.source, and the coordinator URI's scheme when coordinated
  bool coordinated;       // worker ids from a coordinator (a cluster), else from this host
  bool tls;               // worker.tls_* apply (etcd's HTTPS, Redis's rediss://)
  bool users;             // worker.username and worker.password* apply
  bool keeps_id;          // worker.keep_id applies (static and hostname have one id each)
  bool leaf;              // worker.leaf_name applies (Leaf's registry lives on ZooKeeper)
  std::string_view uri;   // worker.coordinator's form when coordinated: "etcd://h:p[,h:p]"
};

// Every source, in the order messages list them.
std::span<const WorkerSource> WorkerSources();
// The source of that name, or null.
const WorkerSource* FindWorkerSource(std::string_view name);
// The names of the sources with `property` (every source when null), as a message lists them:
// "etcd, zookeeper or redis".
std::string WorkerSourceNames(bool WorkerSource::*property = nullptr);
// The coordinated sources' worker.coordinator forms, as a message lists them:
// "etcd://h:p[,h:p], zookeeper://h:p[,h:p] or redis://[user:password@]h:p[/db]".
std::string CoordinatorUriForms();

}  // namespace sekka

#endif  // SEKKA_WORKER_SOURCES_H_
