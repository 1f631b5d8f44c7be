// server/simulation.h
//
// A deterministic simulation of several sekka servers, in the manner of FoundationDB's
// simulation and TigerBeetle's VOPR: one seeded scheduler runs the real Service and Snowflake
// code, with memory backends, against a simulated coordinator and data dirs. Every server has
// its own clock that steps back and forward and pauses; the scheduler injects lease renewals
// and hwm stores that fail, or land but are reported as failed (the caller gave up), coordinator
// outages, processes paused past their TTL, request threads paused inside a call, crashes,
// restarts (some with a lost data dir) and disk-full errors. A checker looks after every step:
//  - no id is issued twice, across all servers and restarts;
//  - the stored hwm of a worker id never decreases (the coordinator is the memory registry,
//    which keeps the larger value, as the real ones do);
//  - every issued id's tick is at or below an hwm its issuer stored, while it held that worker
//    id.
// The same seed replays the same run: `sekka_sim --seed S --verbose`.
//
// Thread-safety: one simulation per thread.

#ifndef SEKKA_SERVER_SIMULATION_H_
#define SEKKA_SERVER_SIMULATION_H_

#include <cstdint>
#include <string>

namespace sekka::server {

struct SimulationOptions {
  std::uint64_t seed = 1;
  int steps = 600;       // scheduler steps per run
  int servers = 3;       // simulated sekka servers (sharing 4 worker ids with the gens)
  int gens = 1;          // slots that run `sekka gen` again and again beside them
  bool verbose = false;  // print every event to stderr
};

struct SimulationResult {
  bool ok = true;
  std::string failure;       // the broken invariant, the step and the seed
  std::uint64_t ids = 0;     // ids issued and checked
  std::uint64_t faults = 0;  // faults injected
  std::uint64_t restarts = 0;
};

SimulationResult RunSimulation(const SimulationOptions& options);

}  // namespace sekka::server

#endif  // SEKKA_SERVER_SIMULATION_H_
