// The worker-lease contract on real coordinators: etcd and ZooKeeper, started by the ctest
// fixture `coordinators` (scripts/coord.sh), whose addresses the tests read from
// $SEKKA_TEST_COORDINATORS/test-etcd/endpoints and .../test-zookeeper/endpoints.
//
// A holder that dies without releasing is a real process: this binary run again with
// --hold-lease, which acquires an id, prints it, and kills itself with SIGKILL.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "backends/etcd_worker_lease.h"
#include "backends/worker_lease_uri.h"
#include "testing/worker_lease_contract.h"

namespace sekka {
namespace {

std::string ReadAddress(const char* name) {
  const char* dir = std::getenv("SEKKA_TEST_COORDINATORS");
  if (dir == nullptr) return "";
  std::ifstream in(fmt::format("{}/{}/endpoints", dir, name));
  std::string address;
  std::getline(in, address);
  return address;
}

// `backend` is a worker.source ("etcd", "zookeeper"); the fixture's server of that kind.
Result<std::unique_ptr<WorkerLease>> OpenBackend(const std::string& backend,
                                                 const std::string& cluster,
                                                 const WorkerLeaseOptions& options) {
  return OpenWorkerLease(backend, ReadAddress(backend == "etcd" ? "test-etcd" : "test-zookeeper"),
                         cluster, options);
}

std::string FreshCluster() {
  static std::atomic<int> counter{0};
  return fmt::format("t{}-{}", ::getpid(), counter++);
}

Result<std::int64_t> KillHolder(const std::string& backend, const std::string& cluster,
                                const WorkerLeaseOptions& o) {
  const std::string command =
      fmt::format("/proc/{}/exe --hold-lease {} {} {} {} {}", ::getpid(), backend, cluster,
                  o.identity, o.worker_count, o.ttl.count());
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return Internal("popen failed");
  char line[64] = {};
  const bool got = std::fgets(line, sizeof(line), p) != nullptr;
  ::pclose(p);
  if (!got) return Internal("the holder printed nothing");
  if (std::strncmp(line, "error ", 6) == 0) return Unavailable(line);
  return std::stoll(line);
}

LeaseFactory Factory(const std::string& backend) {
  LeaseFactory f;
  f.name = backend;
  f.fresh = [] { return FreshCluster(); };
  f.open = [backend](const std::string& where, const WorkerLeaseOptions& options) {
    Result<std::unique_ptr<WorkerLease>> l = OpenBackend(backend, where, options);
    EXPECT_TRUE(l.ok()) << l.error().message;
    return l.ok() ? std::move(l).value() : nullptr;
  };
  f.kill_holder = [backend](const std::string& where, const WorkerLeaseOptions& options) {
    return KillHolder(backend, where, options);
  };
  return f;
}

INSTANTIATE_TEST_SUITE_P(Coordinators, WorkerLeaseContractTest,
                         ::testing::Values(Factory("etcd"), Factory("zookeeper")),
                         [](const auto& info) { return info.param.name; });

TEST(EtcdWorkerLease, BadEndpointsAndClusterNamesAreClearErrors) {
  WorkerLeaseOptions o;
  o.identity = "x";
  Result<std::unique_ptr<WorkerLease>> a = NewEtcdWorkerLease("etcd.example:2379", "c", o);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message.find("allowed host:port"), std::string::npos) << a.error().message;
  Result<std::unique_ptr<WorkerLease>> b = NewEtcdWorkerLease("127.0.0.1:2379", "a/b", o);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("cluster name"), std::string::npos) << b.error().message;
}

TEST(WorkerLeaseBackends, AnUnreachableCoordinatorIsUnavailable) {
  WorkerLeaseOptions o;
  o.identity = "x";
  o.call_timeout = std::chrono::milliseconds(500);
  for (const char* source : {"etcd", "zookeeper"}) {
    SCOPED_TRACE(source);
    Result<std::unique_ptr<WorkerLease>> l = OpenWorkerLease(source, "127.0.0.1:1", "c", o);
    ASSERT_TRUE(l.ok());
    Result<LeaseGrant> g = (*l)->Acquire();
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.error().code, ErrorCode::kUnavailable);
    EXPECT_NE(g.error().message.find("127.0.0.1:1"), std::string::npos) << g.error().message;
  }
}

int HoldLease(char** argv) {
  WorkerLeaseOptions o;
  o.identity = argv[4];
  o.worker_count = std::stoll(argv[5]);
  o.ttl = std::chrono::milliseconds(std::stoll(argv[6]));
  Result<std::unique_ptr<WorkerLease>> l = OpenBackend(argv[2], argv[3], o);
  Result<LeaseGrant> g = l.ok() ? (*l)->Acquire() : Result<LeaseGrant>(l.error());
  if (g.ok()) {
    std::printf("%lld\n", static_cast<long long>(g->worker_id));
  } else {
    std::printf("error %s\n", g.error().message.c_str());
  }
  std::fflush(stdout);
  ::raise(SIGKILL);  // die holding it
  return 1;
}

}  // namespace
}  // namespace sekka

int main(int argc, char** argv) {
  if (argc == 7 && std::strcmp(argv[1], "--hold-lease") == 0) return sekka::HoldLease(argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
