// The deterministic simulation as a test: SEKKA_SIM_SEEDS seeds (10,000 unless set), from
// SEKKA_SIM_FIRST_SEED (1). A failure names the seed and the command that replays it.

#include "server/simulation.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace sekka::server {
namespace {

std::uint64_t EnvNumber(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::stoull(v) : fallback;
}

TEST(SimulationTest, NoIdIsIssuedTwiceUnderRandomFaultSchedules) {
  const std::uint64_t seeds = EnvNumber("SEKKA_SIM_SEEDS", 10'000);
  const std::uint64_t first = EnvNumber("SEKKA_SIM_FIRST_SEED", 1);
  std::uint64_t ids = 0, faults = 0, restarts = 0;
  for (std::uint64_t seed = first; seed < first + seeds; ++seed) {
    SimulationOptions options;
    options.seed = seed;
    SimulationResult r = RunSimulation(options);
    ASSERT_TRUE(r.ok) << r.failure;
    ids += r.ids;
    faults += r.faults;
    restarts += r.restarts;
  }
  std::printf("simulation: %llu seeds, %llu ids checked, %llu faults, %llu restarts\n",
              static_cast<unsigned long long>(seeds), static_cast<unsigned long long>(ids),
              static_cast<unsigned long long>(faults), static_cast<unsigned long long>(restarts));
  // The runs really issue ids and really inject faults (a simulation that does neither checks
  // nothing).
  EXPECT_GT(ids, seeds * 1000);
  EXPECT_GT(faults, seeds * 20);
  EXPECT_GT(restarts, seeds);
}

TEST(SimulationTest, ASeedReplaysTheSameRun) {
  SimulationOptions options;
  options.seed = 4242;
  SimulationResult a = RunSimulation(options);
  SimulationResult b = RunSimulation(options);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.faults, b.faults);
  EXPECT_EQ(a.restarts, b.restarts);
}

}  // namespace
}  // namespace sekka::server
