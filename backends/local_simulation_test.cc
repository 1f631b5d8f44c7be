// The deterministic simulation (simulation/simulation.h) on the lock-file source: every server and
// `sekka gen` slot of the run takes its worker id from the real local lease, on one temp lock
// dir (one host), with the simulation's faults at its calls (a store that fails, or lands and is
// reported failed; a renewal that fails) and its pauses, clock steps, kills and restarts. A
// killed process's lock is dropped at once (its descriptor closes), unlike a coordinator's
// lease. SEKKA_SIM_SEEDS seeds (1,000 unless set), from SEKKA_SIM_FIRST_SEED (drawn per run
// unless set).

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "backends/local_worker_lease.h"
#include "simulation/simulation.h"

namespace sekka {
namespace {

namespace fs = std::filesystem;

// A memory file system where there is one: every hwm store is an fsync.
fs::path LockDirRoot() {
  std::error_code ec;
  if (fs::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0) return "/dev/shm";
  return fs::temp_directory_path();
}

TEST(LocalSimulationTest, NoIdIsIssuedTwiceOnOneHostsLockFiles) {
  const auto [first, seeds] = server::SeedsFromEnvironment(1000);
  fs::path dir;  // the run's host: a fresh lock dir per seed
  server::SimulationOptions options;
  options.new_lease = [&dir](const WorkerLeaseOptions& lo) {
    LocalLeaseOptions local;
    local.lock_dir = dir.string();
    return NewLocalWorkerLease(local, lo);
  };
  options.replay =
      "SEKKA_SIM_FIRST_SEED={seed} SEKKA_SIM_SEEDS=1 sekka_local_simulation_tests "
      "--gtest_filter=LocalSimulationTest.*";
  const server::SimulationResult r =
      server::RunSimulations(options, first, seeds, [&dir](std::uint64_t seed) {
        if (!dir.empty()) fs::remove_all(dir);
        dir = LockDirRoot() / fmt::format("sekka-local-sim-{}-{}", ::getpid(), seed);
        fs::remove_all(dir);
      });
  fs::remove_all(dir);
  ASSERT_TRUE(r.ok) << r.failure;
  std::printf("local simulation: %s\n", server::Summary(r, seeds).c_str());
  EXPECT_TRUE(server::RanForReal(r, seeds)) << server::Summary(r, seeds);
}

}  // namespace
}  // namespace sekka
