// The worker-lease contract on the local sources: lock files and state files in a temp dir. A
// holder that dies is a forked child that acquires an id and exits without releasing it.

#include "backends/local_worker_lease.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "testing/worker_lease_contract.h"

namespace sekka {
namespace {

// The temp dirs the tests made, removed when the test process exits (the forked holders leave
// with _exit, so they never remove them).
struct TempDirs {
  std::mutex mu;
  std::vector<std::string> dirs;
  ~TempDirs() {
    std::error_code ignored;
    for (const std::string& d : dirs) std::filesystem::remove_all(d, ignored);
  }
};
TempDirs& Made() {
  static TempDirs made;
  return made;
}

std::string FreshDir() {
  static std::atomic<int> counter{0};
  const std::string dir =
      fmt::format("{}/sekka-local-lease-{}-{}", std::filesystem::temp_directory_path().string(),
                  ::getpid(), counter++);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::lock_guard lock(Made().mu);
  Made().dirs.push_back(dir);
  return dir;
}

std::unique_ptr<WorkerLease> Open(const std::string& dir, const WorkerLeaseOptions& options) {
  LocalLeaseOptions local;
  local.source = "local";
  local.data_dir = dir;
  return NewLocalWorkerLease(local, options);
}

LeaseFactory LocalFactory() {
  LeaseFactory f;
  f.name = "local";
  f.fresh = [] { return FreshDir(); };
  f.open = [](const std::string& where, const WorkerLeaseOptions& options) {
    return Open(where, options);
  };
  f.kill_holder = [](const std::string& where,
                     const WorkerLeaseOptions& options) -> Result<std::int64_t> {
    int fds[2];
    if (::pipe(fds) != 0) return Internal("pipe failed");
    const pid_t child = ::fork();
    if (child == 0) {
      ::close(fds[0]);
      Result<LeaseGrant> g = Open(where, options)->Acquire();
      const std::int64_t id = g.ok() ? g->worker_id : -1;
      (void)::write(fds[1], &id, sizeof(id));
      ::_exit(0);  // dies holding it: no Release, no destructors
    }
    ::close(fds[1]);
    std::int64_t id = -1;
    const bool got = ::read(fds[0], &id, sizeof(id)) == sizeof(id);
    ::close(fds[0]);
    ::waitpid(child, nullptr, 0);
    if (!got || id < 0) return Internal("the holder did not acquire an id");
    return id;
  };
  f.frees_at_death = true;
  f.same_identity_takes_over = false;
  return f;
}

INSTANTIATE_TEST_SUITE_P(Local, WorkerLeaseContractTest, ::testing::Values(LocalFactory()),
                         [](const auto& info) { return info.param.name; });

WorkerLeaseOptions Identity(std::string identity) {
  WorkerLeaseOptions o;
  o.identity = std::move(identity);
  return o;
}

TEST(LocalWorkerLease, StaticAndHostnameSourcesHoldTheirOwnIdOnly) {
  const std::string dir = FreshDir();
  const WorkerLeaseOptions o = Identity("x");
  LocalLeaseOptions s;
  s.source.assign("static");
  s.data_dir = dir;
  s.worker_id = 9;
  auto a = NewLocalWorkerLease(s, o);
  Result<LeaseGrant> g = a->Acquire();
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->worker_id, 9);
  Result<LeaseGrant> clash = NewLocalWorkerLease(s, Identity("y"))->Acquire();
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.error().code, ErrorCode::kUnavailable);
  LocalLeaseOptions h;
  h.source.assign("hostname");
  h.data_dir = dir;
  h.hostname.assign("sekka-12.example");
  Result<LeaseGrant> byname = NewLocalWorkerLease(h, Identity("z"))->Acquire();
  ASSERT_TRUE(byname.ok()) << byname.error().message;
  EXPECT_EQ(byname->worker_id, 12);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sekka
