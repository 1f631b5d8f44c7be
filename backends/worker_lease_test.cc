// The worker-lease contract on real coordinators: etcd, etcd over TLS with authentication,
// ZooKeeper and Redis, started by the ctest fixtures `coordinators` (scripts/coord.sh), whose
// addresses the tests read from $SEKKA_TEST_COORDINATORS/test-<backend>/endpoints (and, for
// etcd-tls, the CA, client certificate, key, user and password from .../test-etcd-tls/access),
// and `redis` (scripts/redis.sh, its URI in .../test-redis/uri).
//
// A holder that dies without releasing is a real process: this binary run again with
// --hold-lease, which acquires an id, prints it, and kills itself with SIGKILL.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "backends/etcd_worker_lease.h"
#include "backends/host_ports.h"
#include "backends/http_client.h"
#include "backends/redis_client.h"
#include "backends/store_uri.h"
#include "backends/worker_lease_uri.h"
#include "testing/fake_clock.h"
#include "testing/worker_lease_contract.h"

namespace sekka {
namespace {

// The lines of the fixture's file `file` for `backend`.
std::vector<std::string> ReadFixture(const std::string& backend, const char* file) {
  const char* dir = std::getenv("SEKKA_TEST_COORDINATORS");
  std::vector<std::string> lines;
  if (dir == nullptr) return lines;
  std::ifstream in(fmt::format("{}/test-{}/{}", dir, backend, file));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The redis-server of the `redis` fixture (scripts/redis.sh), database 1.
std::string RedisUri() {
  const std::vector<std::string> uri = ReadFixture("redis", "uri");
  return uri.empty() ? "" : uri[0] + "/1";
}

// `backend`: "etcd", "etcd-tls", "etcd-shared" (every coordinator of this process on one lease),
// "zookeeper", "zookeeper-auth" (the same server, with a digest
// user: every node the contract makes is that user's), "zookeeper-shared" (every coordinator of
// this process in one session, as a server's strict tags share one: backends/
// coordinator_sessions.h) or "redis"; the fixture's server of that kind.
Result<std::unique_ptr<Coordinator>> OpenBackend(const std::string& backend,
                                                 const std::string& cluster,
                                                 const WorkerLeaseOptions& options) {
  if (backend == "redis") return OpenCoordinator("redis", RedisUri(), cluster, options);
  const bool zookeeper = backend.starts_with("zookeeper");
  const std::vector<std::string> address = ReadFixture(zookeeper                  ? "zookeeper"
                                                       : backend == "etcd-shared" ? "etcd"
                                                                                  : backend,
                                                       "endpoints");
  CoordinatorAccess access;
  if (backend == "zookeeper-auth") {
    access.username = "contract";
    access.password = "contract-secret";
  } else if (backend == "etcd-tls") {
    const std::vector<std::string> a = ReadFixture(backend, "access");
    if (a.size() != 5) return Internal("the etcd-tls fixture wrote no access file");
    access = {{a[0], a[1], a[2]}, a[3], a[4]};
  }
  static CoordinatorSessions shared;
  return OpenCoordinator(zookeeper ? "zookeeper" : "etcd", address.empty() ? "" : address[0],
                         cluster, options, access, {},
                         backend.ends_with("-shared") ? &shared : nullptr);
}

// The lease of OpenBackend's coordinator, as `sekka serve` makes it.
Result<std::unique_ptr<WorkerLease>> OpenBackendLease(const std::string& backend,
                                                      const std::string& cluster,
                                                      const WorkerLeaseOptions& options) {
  SEKKA_ASSIGN_OR_RETURN(auto c, OpenBackend(backend, cluster, options));
  return NewCoordinatedLease(std::move(c), options);
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
    Result<std::unique_ptr<WorkerLease>> l = OpenBackendLease(backend, where, options);
    EXPECT_TRUE(l.ok()) << l.error().message;
    return l.ok() ? std::move(l).value() : nullptr;
  };
  f.open_coordinator = [backend](const std::string& where, const WorkerLeaseOptions& options) {
    Result<std::unique_ptr<Coordinator>> c = OpenBackend(backend, where, options);
    EXPECT_TRUE(c.ok()) << c.error().message;
    return c.ok() ? std::move(c).value() : nullptr;
  };
  f.kill_holder = [backend](const std::string& where, const WorkerLeaseOptions& options) {
    return KillHolder(backend, where, options);
  };
  return f;
}

INSTANTIATE_TEST_SUITE_P(Coordinators, WorkerLeaseContractTest,
                         ::testing::Values(Factory("etcd"), Factory("etcd-tls"),
                                           Factory("etcd-shared"), Factory("zookeeper"),
                                           Factory("zookeeper-auth"), Factory("zookeeper-shared"),
                                           Factory("redis")),
                         [](const auto& info) {
                           std::string name = info.param.name;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(EtcdWorkerLease, BadEndpointsAndClusterNamesAreClearErrors) {
  WorkerLeaseOptions o;
  o.identity = "x";
  for (const char* bad : {"etcd_1.example:2379", "127.0.0.1", "[::1:2379", "h:0", "h:65536", "-h:1",
                          "a..b:1", "127.0.0.1:2379,"}) {
    Result<std::unique_ptr<Coordinator>> a = NewEtcdCoordinator(bad, "c", o);
    ASSERT_FALSE(a.ok()) << bad;
    EXPECT_NE(a.error().message.find("allowed host:port"), std::string::npos) << a.error().message;
  }
  Result<std::unique_ptr<Coordinator>> b = NewEtcdCoordinator("127.0.0.1:2379", "a/b", o);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("cluster name"), std::string::npos) << b.error().message;
}

TEST(ZooKeeperWorkerLease, AUserNeedsAPasswordAndNoColon) {
  WorkerLeaseOptions o;
  o.identity = "x";
  Result<std::unique_ptr<WorkerLease>> a =
      OpenWorkerLease("zookeeper", "127.0.0.1:2181", "c", o, {{}, "user", ""});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message.find("go together"), std::string::npos) << a.error().message;
  Result<std::unique_ptr<WorkerLease>> b =
      OpenWorkerLease("zookeeper", "127.0.0.1:2181", "c", o, {{}, "a:b", "p"});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("without ':'"), std::string::npos) << b.error().message;
  Result<std::unique_ptr<WorkerLease>> c =
      OpenWorkerLease("zookeeper", "127.0.0.1:2181", "c", o, {{"system", "", ""}, "", ""});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("no TLS"), std::string::npos) << c.error().message;
}

// The review of issue 25: a password in the coordinator's URI silently won over
// worker.password (and TLS files alike); credentials are given in one place.
TEST(RedisWorkerLease, CredentialsInTheUriAndInTheSettingsAreRefusedTogether) {
  WorkerLeaseOptions o;
  o.identity = "x";
  Result<std::unique_ptr<Coordinator>> both =
      OpenCoordinator("redis", "redis://u:p@127.0.0.1:1/0", "c", o, {{}, "u2", "p2"});
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.error().message.find("give them in one place"), std::string::npos)
      << both.error().message;
  EXPECT_EQ(both.error().message.find("p2"), std::string::npos);
  Result<std::unique_ptr<Coordinator>> tls =
      OpenCoordinator("redis", "rediss://127.0.0.1:1/0?tls_ca_file=/etc/a.pem", "c", o,
                      {{"/etc/b.pem", "", ""}, "", ""});
  ASSERT_FALSE(tls.ok());
  EXPECT_NE(tls.error().message.find("worker.tls_ca_file is set too"), std::string::npos)
      << tls.error().message;
  EXPECT_TRUE(OpenCoordinator("redis", "redis://127.0.0.1:1/0", "c", o, {{}, "u", "p"}).ok());
}

// A claim from a session that did not end by Close owes a settle (LeaseGrant::settle): the
// larger TTL of the two holders; kept when this session claims the id again (after a lost
// reply); and passed on by a holder that closes before its own settle has passed. The review of
// issue 40 found the last two answering 0.
TEST(RedisWorkerLease, AClaimFromAnExpiredSessionOwesTheLargerTtlUntilItHasPassed) {
  const std::string uri = RedisUri();
  ASSERT_FALSE(uri.empty()) << "the redis fixture wrote no URI";
  FakeClock clock(1'700'000'000'000);
  const std::string cluster = FreshCluster();
  auto open = [&](const char* identity, std::int64_t ttl_ms) {
    WorkerLeaseOptions o;
    o.identity = identity;
    o.worker_count = 1;
    o.ttl = std::chrono::milliseconds(ttl_ms);
    o.clock = &clock;
    Result<std::unique_ptr<Coordinator>> c = OpenCoordinator("redis", uri, cluster, o);
    EXPECT_TRUE(c.ok()) << c.error().message;
    return c.ok() ? std::move(c).value() : nullptr;
  };
  Result<StoreUri> raw_uri = ParseStoreUri(uri, "test", RedisClient::kParams);
  ASSERT_TRUE(raw_uri.ok());
  Result<std::unique_ptr<RedisClient>> raw = RedisClient::Open(*raw_uri, uri, "test");
  ASSERT_TRUE(raw.ok()) << raw.error().message;
  auto claim = [](Coordinator& c, const std::optional<Holding>& seen) {
    Result<std::optional<std::int64_t>> r = c.Claim(0, seen);
    EXPECT_TRUE(r.ok() && r->has_value()) << (r.ok() ? "taken" : r.error().message);
  };
  using std::chrono::milliseconds;
  auto x = open("x", 20'000);
  ASSERT_NE(x, nullptr);
  claim(*x, std::nullopt);
  EXPECT_EQ(x->settle(), milliseconds(0));  // nobody held it
  // x's session key is gone as if Redis's clock had stepped past its TTL.
  ASSERT_TRUE(
      (*raw)->Call({"DEL", fmt::format("sekka:{{{}}}:session:{}", cluster, x->session())}).ok());
  auto y = open("y", 10'000);
  claim(*y, std::nullopt);
  EXPECT_EQ(y->settle(), milliseconds(20'000));  // x's TTL, the larger
  Result<std::map<std::int64_t, Holding>> listed = y->ListHolders();
  ASSERT_TRUE(listed.ok() && listed->contains(0));
  claim(*y, listed->at(0));  // y's own claim again, as after a lost reply
  EXPECT_EQ(y->settle(), milliseconds(20'000));
  ASSERT_TRUE(y->Close().ok());  // before its settle passed: the next holder owes one
  auto z = open("z", 10'000);
  claim(*z, std::nullopt);
  EXPECT_EQ(z->settle(), milliseconds(20'000));  // what y owed: x may still answer
  clock.AdvanceMillis(20'001);
  ASSERT_TRUE(z->Close().ok());  // after it: released
  auto w = open("w", 10'000);
  claim(*w, std::nullopt);
  EXPECT_EQ(w->settle(), milliseconds(0));
}

// A session key gone before the claim (expired while the process was paused, or evicted):
// the claim fails once, and the next opens a new session. The review of issue 40 found the
// script's NOSESSION answered as "ERR NOSESSION", which was taken for another error: the
// coordinator kept its dead session and every later claim failed.
TEST(RedisWorkerLease, AClaimAfterTheSessionKeyWentOpensANewSession) {
  const std::string uri = RedisUri();
  ASSERT_FALSE(uri.empty()) << "the redis fixture wrote no URI";
  const std::string cluster = FreshCluster();
  WorkerLeaseOptions o;
  o.identity = "x";
  o.worker_count = 1;
  Result<std::unique_ptr<Coordinator>> c = OpenCoordinator("redis", uri, cluster, o);
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_TRUE((*c)->ListHolders().ok());  // opens the session
  Result<StoreUri> raw_uri = ParseStoreUri(uri, "test", RedisClient::kParams);
  ASSERT_TRUE(raw_uri.ok());
  Result<std::unique_ptr<RedisClient>> raw = RedisClient::Open(*raw_uri, uri, "test");
  ASSERT_TRUE(raw.ok()) << raw.error().message;
  ASSERT_TRUE(
      (*raw)->Call({"DEL", fmt::format("sekka:{{{}}}:session:{}", cluster, (*c)->session())}).ok());
  Result<std::optional<std::int64_t>> first = (*c)->Claim(0, std::nullopt);
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.error().message.find("expired before its claim"), std::string::npos)
      << first.error().message;
  Result<std::optional<std::int64_t>> again = (*c)->Claim(0, std::nullopt);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_TRUE(again->has_value());
}

TEST(HostPorts, NamesAndAddressesParse) {
  Result<std::vector<HostPort>> h =
      ParseHostPorts("etcd-0.etcd.svc:2379, 127.0.0.1:22379,[::1]:1,localhost:65535", "x");
  ASSERT_TRUE(h.ok()) << h.error().message;
  ASSERT_EQ(h->size(), 4u);
  EXPECT_EQ((*h)[0].host, "etcd-0.etcd.svc");
  EXPECT_EQ((*h)[1].Text(), "127.0.0.1:22379");
  EXPECT_EQ((*h)[2].host, "::1");
  EXPECT_EQ((*h)[2].Text(), "[::1]:1");
  EXPECT_EQ((*h)[3].port, 65535);
}

TEST(EtcdWorkerLease, InconsistentTlsAndUserSettingsAreClearErrors) {
  WorkerLeaseOptions o;
  o.identity = "x";
  auto error = [&](const CoordinatorAccess& access) {
    Result<std::unique_ptr<Coordinator>> l = NewEtcdCoordinator("127.0.0.1:2379", "c", o, access);
    EXPECT_FALSE(l.ok());
    return l.ok() ? std::string() : l.error().message;
  };
  EXPECT_NE(error({{"system", "/etc/hostname", ""}, "", ""}).find("go together"),
            std::string::npos);
  EXPECT_NE(error({{"", "/etc/hostname", "/etc/hostname"}, "", ""}).find("worker.tls_ca_file"),
            std::string::npos);
  EXPECT_NE(error({{"/nonexistent/ca.pem", "", ""}, "", ""}).find("cannot be read"),
            std::string::npos);
  EXPECT_NE(error({{}, "", "secret"}).find("worker.username"), std::string::npos);
  Result<std::unique_ptr<Coordinator>> ok =
      NewEtcdCoordinator("127.0.0.1:2379", "c", o, {{"system", "", ""}, "u", "p"});
  EXPECT_TRUE(ok.ok()) << ok.error().message;
}

// The TLS handshake is paid once, not once a call: every call goes over the one connection.
TEST(HttpClient, OneTlsConnectionServesManyCalls) {
  const std::vector<std::string> endpoints = ReadFixture("etcd-tls", "endpoints");
  const std::vector<std::string> a = ReadFixture("etcd-tls", "access");
  ASSERT_FALSE(endpoints.empty());
  ASSERT_EQ(a.size(), 5u) << "the etcd-tls fixture wrote no access file";
  Result<std::vector<HostPort>> to = ParseHostPorts(endpoints[0], "endpoints");
  ASSERT_TRUE(to.ok()) << to.error().message;
  HttpClient client({a[0], a[1], a[2]});
  const std::string login = fmt::format(R"({{"name":"{}","password":"{}"}})", a[3], a[4]);
  for (int i = 0; i < 5; ++i) {
    Result<HttpResponse> r =
        client.Post(to->front(), "/v3/auth/authenticate", login, {}, std::chrono::seconds(10));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_NE(r->body.find("\"token\""), std::string::npos) << r->body;
  }
  EXPECT_EQ(client.connections_opened(), 1);
}

TEST(WorkerLeaseBackends, AnUnreachableCoordinatorIsUnavailable) {
  WorkerLeaseOptions o;
  o.identity = "x";
  o.call_timeout = std::chrono::milliseconds(500);
  for (const char* source : {"etcd", "zookeeper", "redis"}) {
    SCOPED_TRACE(source);
    const std::string address =
        std::string(source) == "redis" ? "redis://127.0.0.1:1" : "127.0.0.1:1";
    Result<std::unique_ptr<WorkerLease>> l = OpenWorkerLease(source, address, "c", o);
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
  Result<std::unique_ptr<WorkerLease>> l = OpenBackendLease(argv[2], argv[3], o);
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
