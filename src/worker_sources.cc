// The table of worker-id sources (include/sekka/worker_sources.h).

#include "sekka/worker_sources.h"

#include <array>

namespace sekka {
namespace {

// name, coordinated, tls, users, keeps_id, leaf, uri
constexpr std::array<WorkerSource, 6> kSources = {{
    {"static", false, false, false, false, false, ""},
    {"local", false, false, false, true, false, ""},
    {"hostname", false, false, false, false, false, ""},
    {"etcd", true, true, true, true, false, "etcd://h:p[,h:p]"},
    {"zookeeper", true, false, true, true, true, "zookeeper://h:p[,h:p]"},
    {"redis", true, true, true, true, false, "redis://[user:password@]h:p[/db]"},
}};

// The sources with `property` (every one when null), as a message lists them, each shown by
// `shown`.
std::string ListSources(bool WorkerSource::*property, std::string_view WorkerSource::*shown) {
  std::string names;
  std::size_t left = 0;
  for (const WorkerSource& s : kSources) left += property == nullptr || s.*property ? 1 : 0;
  for (const WorkerSource& s : kSources) {
    if (property != nullptr && !(s.*property)) continue;
    names += s.*shown;
    --left;
    names += left == 0 ? "" : left == 1 ? " or " : ", ";
  }
  return names;
}

}  // namespace

std::span<const WorkerSource> WorkerSources() { return kSources; }

const WorkerSource* FindWorkerSource(std::string_view name) {
  for (const WorkerSource& s : kSources) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string WorkerSourceNames(bool WorkerSource::*property) {
  return ListSources(property, &WorkerSource::name);
}

std::string CoordinatorUriForms() {
  return ListSources(&WorkerSource::coordinated, &WorkerSource::uri);
}

}  // namespace sekka
