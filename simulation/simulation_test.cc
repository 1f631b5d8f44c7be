// The deterministic simulation as a test: SEKKA_SIM_SEEDS seeds (10,000 unless set), from
// SEKKA_SIM_FIRST_SEED (drawn per run unless set). A failure names the seed and the command that
// replays it.

#include "simulation/simulation.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace sekka::server {
namespace {

TEST(SimulationTest, NoIdIsIssuedTwiceUnderRandomFaultSchedules) {
  const auto [first, seeds] = SeedsFromEnvironment(10'000);
  const SimulationResult r = RunSimulations(SimulationOptions(), first, seeds);
  ASSERT_TRUE(r.ok) << r.failure;
  std::printf("simulation: %s\n", Summary(r, seeds).c_str());
  EXPECT_TRUE(RanForReal(r, seeds)) << Summary(r, seeds);
  EXPECT_GT(r.strict_ids, seeds * 50) << Summary(r, seeds);
}

// The checker's self-test (issue 26): a new strict leader that starts at the old bound instead
// of above it repeats the old leader's last id whenever that one had served up to its bound.
TEST(SimulationTest, FindsAStrictLeaderThatStartsAtTheOldBound) {
  SimulationOptions options;
  options.plant_strict_bug = true;
  const SimulationResult r = RunSimulations(options, 1, 2000);
  ASSERT_FALSE(r.ok) << "2,000 seeds missed the planted bug";
  EXPECT_NE(r.failure.find("strict ids"), std::string::npos) << r.failure;
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
