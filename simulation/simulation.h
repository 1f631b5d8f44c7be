// simulation/simulation.h
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
//    id;
//  - a CosId machine id (server 0's machine registry, drawn by three simulated instances that
//    ask, guard, give back and die) never goes to another instance while its holder is within
//    its own guard, and its next holder is told a lastTimestamp past every id the last one may
//    have issued;
//  - a segment id (one tag, served by every server from one shared store whose calls fail, land
//    unanswered, or stall in outages) is issued once across all servers and restarts, and above
//    every earlier id of its server process;
//  - a strict id (one strict tag, led by one server and forwarded to by the others, through the
//    coordinator's faults, pauses past the TTL, crashes and clock steps) is above every strict id
//    answered before its request began, by any server.
// The fleet tier (SimulationOptions::fleet) runs a thousand servers on the sekka layout's 1,024
// worker ids, with whole-fleet restarts and a slow coordinator.
// The same seed replays the same run: `sekka_sim --seed S --verbose`. A run may instead give
// every process a lease of its own making (`new_lease`), e.g. the lock-file source of one host
// on a temp dir (backends/local_simulation_test.cc), with the same faults at its calls.
//
// Thread-safety: one simulation per thread.

#ifndef SEKKA_SERVER_SIMULATION_H_
#define SEKKA_SERVER_SIMULATION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "sekka/worker_lease.h"

namespace sekka::server {

struct SimulationOptions {
  std::uint64_t seed = 1;
  int steps = 600;       // scheduler steps per run
  int servers = 3;       // simulated sekka servers (sharing 4 worker ids with the gens)
  int gens = 1;          // slots that run `sekka gen` again and again beside them
  bool verbose = false;  // print every event to stderr
  // Makes each process's lease (a new one per start). Null: a lease of the simulated
  // coordinator (the memory registry, ids freed a TTL after their holder's last renewal).
  // Called with a fresh WorkerLeaseOptions per start; its source() decides whether the servers
  // run as coordinated ("etcd", "zookeeper", "memory") or as a lock-file source.
  std::function<std::unique_ptr<WorkerLease>(const WorkerLeaseOptions&)> new_lease;
  // How a failure says to replay it, with {seed} and {steps} for the run's; "" = sekka_sim.
  std::string replay;
  // The checker's self-test (issue 26): a new strict leader starts at the old bound, not above
  // it. The runs must then fail.
  bool plant_strict_bug = false;
  // The fleet tier (issue 44): the servers run on a layout of 1,024 worker ids (the sekka
  // layout's), every one started at once; a third of the way in the whole fleet restarts in a
  // rolling wave (a few servers a step), two thirds in, all at once; each coordinator call's
  // answer comes up to 0, 10, 100 or 500 ms (per run) after it landed. With more servers
  // than ids, the extra ones wait (their start is refused, and tried again), never share.
  bool fleet = false;
  // The fence's self-test: a session whose claim ended is told that its renewals and hwm
  // stores landed, as a coordinator without the claim's fence would. The runs must then fail.
  bool plant_fence_bug = false;
};

struct SimulationResult {
  bool ok = true;
  std::string failure;       // the broken invariant, the step and the seed
  std::uint64_t ids = 0;     // ids issued and checked
  std::uint64_t faults = 0;  // faults injected
  std::uint64_t restarts = 0;
  std::uint64_t machine_grants = 0;  // CosId machine ids handed to the simulated instances
  std::uint64_t segment_ids = 0;     // segment ids issued and checked
  std::uint64_t strict_ids = 0;      // strict ids answered and checked
};

SimulationResult RunSimulation(const SimulationOptions& options);
// The fleet tier's options (SimulationOptions::fleet): 1,025 servers, 3,000 steps a run.
SimulationOptions FleetSimulation();

// Runs seeds `first` .. `first + seeds - 1` with `options` (its seed set for each), calling
// `before(seed)` ahead of each run when given; stops at the first run that fails. Returns the
// sums of ids, faults and restarts, and the failing run's `ok` and `failure`.
SimulationResult RunSimulations(SimulationOptions options, std::uint64_t first, std::uint64_t seeds,
                                const std::function<void(std::uint64_t seed)>& before = {});

// The seeds a simulation test runs, from its environment: SEKKA_SIM_SEEDS of them (`fallback`
// unless set), from SEKKA_SIM_FIRST_SEED; unless that is set, from a first seed drawn for this
// run and printed with the setting that replays it, so that run after run the suite covers new
// schedules (a failure names its own seed either way). A ctest ENVIRONMENT cannot carry it:
// gtest_discover_tests splits a list of variables into separate properties.
struct SeedRange {
  std::uint64_t first = 1;
  std::uint64_t count = 0;
};
// `count_variable` names the count's variable (the fleet tier has its own).
SeedRange SeedsFromEnvironment(std::uint64_t fallback,
                               const char* count_variable = "SEKKA_SIM_SEEDS");

// "N seeds, I ids checked, S segment ids checked, F faults, R restarts, M machine ids granted".
std::string Summary(const SimulationResult& total, std::uint64_t seeds);
// True when the runs really issued ids and injected faults (a simulation that does neither
// checks nothing): over 1,000 ids, 100 segment ids, 20 faults, one restart and one machine id
// grant a seed.
bool RanForReal(const SimulationResult& total, std::uint64_t seeds);

}  // namespace sekka::server

#endif  // SEKKA_SERVER_SIMULATION_H_
