// sekka_sim: runs the deterministic simulation over many seeds, or replays one.
//   sekka_sim --seeds 100000 [--first 1] [--steps 600]
//   sekka_sim --seed 1234 --verbose
//   sekka_sim --fleet --seeds 10 (the fleet tier: 1,025 servers, 3,000 steps unless --steps
//   follows)
// Exit 0 when every run kept every invariant, 1 at the first that did not.

#include <cstdio>
#include <cstring>
#include <string>

#include "simulation/simulation.h"

int main(int argc, char** argv) {
  sekka::server::SimulationOptions options;
  std::uint64_t first = 1, seeds = 10'000;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--seed" && has_value) {
      first = std::stoull(argv[++i]);
      seeds = 1;
    } else if (arg == "--first" && has_value) {
      first = std::stoull(argv[++i]);
    } else if (arg == "--seeds" && has_value) {
      seeds = std::stoull(argv[++i]);
    } else if (arg == "--steps" && has_value) {
      options.steps = std::stoi(argv[++i]);
    } else if (arg == "--verbose") {
      options.verbose = true;
    } else if (arg == "--plant-strict-bug") {
      options.plant_strict_bug = true;
    } else if (arg == "--fleet") {
      const sekka::server::SimulationOptions fleet = sekka::server::FleetSimulation();
      options.fleet = fleet.fleet;
      options.servers = fleet.servers;
      options.steps = fleet.steps;
    } else if (arg == "--plant-fence-bug") {
      options.plant_fence_bug = true;
    } else {
      std::fprintf(stderr,
                   "sekka_sim: unknown argument \"%s\": allowed --seed S | --first S --seeds N, "
                   "--steps K, --verbose, --fleet, --plant-strict-bug, --plant-fence-bug\n",
                   arg.c_str());
      return 2;
    }
  }
  const sekka::server::SimulationResult r = sekka::server::RunSimulations(options, first, seeds);
  if (!r.ok) {
    std::printf("FAILED: %s\n", r.failure.c_str());
    return 1;
  }
  std::printf("passed: %s\n", sekka::server::Summary(r, seeds).c_str());
  return 0;
}
