// The deterministic simulation (see simulation/simulation.h). Single-threaded: the scheduler picks
// one event at a time with its seeded generator, so a seed always replays the same run.

#include "simulation/simulation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sekka/codec.h"
#include "sekka/coordinator.h"
#include "sekka/leased_generator.h"
#include "sekka/machines.h"
#include "sekka/segment.h"
#include "sekka/worker_lease.h"
#include "server/log.h"
#include "server/service.h"

namespace sekka::server {
namespace {

constexpr std::int64_t kStartMillis = 1'800'000'000'000;  // 2027-01-15, past the layout's epoch
constexpr const char* kSegmentTag = "orders";             // the one segment tag every server serves
constexpr const char* kStrictTag = "chat";                // the one strict tag every server serves

// Simulated time: one monotonic timeline for the whole run.
struct World {
  std::int64_t now = kStartMillis;
};

// A server's clock: the world's time plus an offset that faults step. Sleeping makes the world's
// time pass (everything else stands still meanwhile, which is one possible schedule).
class SimClock final : public Clock {
 public:
  explicit SimClock(World& world) : world_(world) {}
  std::int64_t NowMillis() override { return world_.now + offset_; }
  void SleepUntilMillis(std::int64_t wall_millis) override {
    const std::int64_t now = NowMillis();
    if (wall_millis > now) world_.now += wall_millis - now;
  }
  std::int64_t MonotonicMillis() override { return world_.now; }
  std::int64_t offset_ = 0;

 private:
  World& world_;
};

class Simulation;

// A data dir that survives its process: what was written stays (writes are synchronous, so a
// crash loses nothing that was acknowledged); a "lost volume" restart starts from an empty one.
struct Disk {
  std::map<std::pair<std::int64_t, std::int64_t>, StoredState> states;
  std::int64_t preferred = -1;
  bool full = false;
};

// What becomes of a save of the cluster's machine store.
enum class SaveFate { kLands, kFails, kLandsUnanswered };

// One server's view of the cluster's machine store, where another server's call can land between
// this one's read and its save, as it can in a real cluster, and a save can fail or land with
// its answer lost (the simulation's `between` runs the other call and draws the fate).
class InterleavedMachineStore final : public MachineStore {
 public:
  InterleavedMachineStore(std::unique_ptr<MachineStore> inner, std::function<SaveFate()> between)
      : inner_(std::move(inner)), between_(std::move(between)) {}
  Result<MachineSnapshot> Load(std::string_view ns) override { return inner_->Load(ns); }
  Result<bool> Save(std::string_view ns, const std::vector<MachineRecord>& records,
                    const std::string& version) override {
    const SaveFate fate = between_();
    if (fate == SaveFate::kFails) return Unavailable("the coordinator did not answer");
    Result<bool> saved = inner_->Save(ns, records, version);
    if (fate == SaveFate::kLandsUnanswered) return Unavailable("the answer was lost");
    return saved;
  }

 private:
  std::unique_ptr<MachineStore> inner_;
  std::function<SaveFate()> between_;
};

class SimDataDir final : public DataDir {
 public:
  explicit SimDataDir(std::shared_ptr<Disk> disk) : disk_(std::move(disk)) {}
  Result<std::optional<StoredState>> ReadState(std::int64_t dc, std::int64_t worker) override {
    auto it = disk_->states.find({dc, worker});
    if (it == disk_->states.end()) return std::optional<StoredState>();
    return std::optional<StoredState>(it->second);
  }
  Status WriteState(std::int64_t dc, std::int64_t worker, const StoredState& state) override {
    if (disk_->full) return Internal("cannot write the state: No space left on device");
    StoredState& s = disk_->states[{dc, worker}];
    if (s.layout == state.layout && s.hwm_millis >= state.hwm_millis) return Status::Ok();
    s = state;
    return Status::Ok();
  }
  std::string StateName(std::int64_t dc, std::int64_t worker) const override {
    return fmt::format("sim-disk/{}-{}.state", dc, worker);
  }
  std::int64_t ReadPreferred() override { return disk_->preferred; }
  void WritePreferred(std::int64_t worker) override { disk_->preferred = worker; }

 private:
  std::shared_ptr<Disk> disk_;
};

// The coordinator's faults, shared by every lease client.
struct SimCoordinator {
  std::unique_ptr<WorkerLeaseRegistry> registry;
  std::int64_t down_until = 0;  // world time
  double fail = 0;              // a call fails without effect
  double late = 0;              // a call takes effect, and the caller is told it failed
  std::int64_t latency_ms = 0;  // a call's answer comes up to this long after it lands
};

// SimulationOptions::plant_fence_bug: a coordinator session that is told its renewals and hwm
// stores landed after its claim ended (expired, or taken over), as if the coordinator checked
// no claim. Everything else is the memory registry's.
class UnfencedCoordinator final : public Coordinator {
 public:
  // `unfenced` counts the calls told they landed though they did not.
  UnfencedCoordinator(std::unique_ptr<Coordinator> inner, std::int64_t& unfenced)
      : inner_(std::move(inner)), unfenced_(unfenced) {}
  Result<std::string> BindLayout(const std::string& layout) override {
    return inner_->BindLayout(layout);
  }
  Result<std::map<std::int64_t, Holding>> ListHolders() override { return inner_->ListHolders(); }
  std::int64_t session() const override { return inner_->session(); }
  Result<std::int64_t> PeekHwm(std::int64_t id) override { return inner_->PeekHwm(id); }
  Result<std::optional<std::int64_t>> Claim(std::int64_t id,
                                            const std::optional<Holding>& seen) override {
    return inner_->Claim(id, seen);
  }
  Status KeepAlive(std::int64_t id) override { return Unfenced(inner_->KeepAlive(id)); }
  Status StoreHwm(std::int64_t id, std::int64_t hwm_millis) override {
    return Unfenced(inner_->StoreHwm(id, hwm_millis));
  }
  Status Close() override { return inner_->Close(); }
  std::string Describe() const override { return inner_->Describe(); }
  std::string Where() const override { return inner_->Where(); }
  std::string_view source() const override { return inner_->source(); }
  Result<SharedDocument> ReadShared(std::string_view name) override {
    return inner_->ReadShared(name);
  }
  Result<bool> WriteShared(std::string_view name, std::string_view data,
                           std::int64_t version) override {
    return inner_->WriteShared(name, data, version);
  }

 private:
  Status Unfenced(Status s) {
    if (s.ok() || s.error().code != ErrorCode::kLeaseLost) return s;
    ++unfenced_;
    return Status::Ok();
  }
  std::unique_ptr<Coordinator> inner_;
  std::int64_t& unfenced_;
};

class FaultyLease final : public WorkerLease {
 public:
  // `paused_until`: the calling process's (its slot's), which a slow call moves on.
  FaultyLease(std::unique_ptr<WorkerLease> inner, Simulation& sim, int incarnation,
              std::int64_t& paused_until)
      : inner_(std::move(inner)),
        sim_(sim),
        incarnation_(incarnation),
        paused_until_(paused_until) {}
  Result<LeaseGrant> Acquire() override;
  Status Renew() override;
  Status StoreHwm(std::int64_t hwm_millis) override;
  Status Release() override { return crashed_ ? Status::Ok() : inner_->Release(); }
  std::string Describe() const override { return inner_->Describe(); }
  std::string_view source() const override { return inner_->source(); }

  bool crashed_ = false;  // a killed process releases nothing

 private:
  // Before a call: an outage or a failure without effect.
  bool Refused();
  bool Late();
  // A slow coordinator: the call lands at once, and its caller hears back up to latency_ms
  // later, doing nothing else meanwhile (the world goes on: other processes run).
  void Wait();
  std::unique_ptr<WorkerLease> inner_;
  Simulation& sim_;
  const int incarnation_;
  std::int64_t& paused_until_;
  std::int64_t worker_ = -1;
};

// A strict tag's lease (the memory registry of the tag's namespace), with the coordinator's
// faults: calls refused, or landed and reported failed; a process killed (-9) makes no more
// calls, so its lease ends only at its TTL.
class StrictSimLease final : public WorkerLease {
 public:
  StrictSimLease(std::unique_ptr<WorkerLease> inner, Simulation& sim, std::shared_ptr<bool> dead)
      : inner_(std::move(inner)), sim_(sim), dead_(std::move(dead)) {}
  Result<LeaseGrant> Acquire() override;
  Status Renew() override;
  Status StoreHwm(std::int64_t bound) override;
  Status Release() override { return *dead_ ? Status::Ok() : inner_->Release(); }
  std::string Describe() const override { return inner_->Describe(); }
  std::string_view source() const override { return inner_->source(); }

 private:
  bool Refused();
  bool Late();
  std::unique_ptr<WorkerLease> inner_;
  Simulation& sim_;
  std::shared_ptr<bool> dead_;
};

// The servers' shared database of segments (one memory store), with its faults: calls that fail
// without effect, allocations that land while the caller is told they failed, outages.
class FaultySegmentStore final : public SegmentStore {
 public:
  FaultySegmentStore(SegmentStore& db, Simulation& sim) : db_(db), sim_(sim) {}
  Result<Allocation> Allocate(std::string_view tag, std::int64_t step) override;
  Status CreateTag(const TagInfo& tag) override { return db_.CreateTag(tag); }
  Result<TagInfo> GetTag(std::string_view tag) override;
  Result<std::vector<TagInfo>> ListTagsAfter(std::string_view after, std::size_t limit) override {
    return db_.ListTagsAfter(after, limit);
  }
  Status SetStep(std::string_view tag, std::int64_t step) override {
    return db_.SetStep(tag, step);
  }
  Result<TagInfo> DeleteTag(std::string_view tag) override { return db_.DeleteTag(tag); }

 private:
  SegmentStore& db_;
  Simulation& sim_;
};

struct Slot {
  bool gen = false;  // a `sekka gen` run: starts, prints some ids and exits
  std::string identity;
  std::unique_ptr<SimClock> clock;
  std::shared_ptr<Disk> disk;
  std::unique_ptr<Service> service;
  FaultyLease* lease = nullptr;              // owned by service (or gen_run)
  std::shared_ptr<bool> strict_dead;         // this incarnation was killed: its strict leases stop
  std::unique_ptr<LeasedGenerator> gen_run;  // a gen slot's current run
  std::int64_t gen_left = 0;                 // the ids it has still to print
  int incarnation = 0;
  std::int64_t paused_until = 0;
  std::int64_t next_background = 0;
  std::vector<Snowflake*> stalled;  // request threads paused inside a call, with their generator
  std::set<Snowflake*> generators;  // every generator of the process now, for the checker
};

// A CosId client instance drawing a machine id from the cluster's registry (the proxy it is
// configured with), as CosId's machine distributor does.
struct Instance {
  std::string name;        // a new one per process start (a new host:port)
  std::int64_t held = -1;  // the machine id it believes it holds; -1: none
  std::int64_t guard_ms = 0;
  std::int64_t until = 0;  // on the machine registries' clock: it may issue ids up to then
};

// A machine id's last holder as the instances saw it: who, and until when it may issue ids.
struct MachineHolding {
  std::string instance;
  std::int64_t until = 0;
  bool released = false;  // given back (Revert): it issues no more
};

class Simulation {
 public:
  explicit Simulation(const SimulationOptions& options)
      : options_(options),
        rng_(options.seed * 0x9E3779B97F4A7C15ULL + 1),
        machine_rng_(options.seed * 0xD1B54A32D192ED03ULL + 7),
        segment_rng_(options.seed * 0x94D049BB133111EBULL + 11),
        keep_id_((options.seed & 1) == 1),
        strict_rng_(options.seed * 0xBF58476D1CE4E5B9ULL + 13) {
    layout_ = *ParseLayout(options.fleet
                               ? "time_bits=41,worker_bits=10,sequence_bits=12,epoch=2025-01-01"
                               : "time_bits=41,worker_bits=2,sequence_bits=20,epoch=2025-01-01");
    coordinator_clock_ = std::make_unique<SimClock>(world_);
    machine_clock_ = std::make_unique<SimClock>(world_);
    coordinator_.registry = NewMemoryWorkerLeaseRegistry(coordinator_clock_.get());
    strict_registry_ = NewMemoryWorkerLeaseRegistry(coordinator_clock_.get());
    interleaver_store_ =
        NewCoordinatorMachineStore(coordinator_.registry->NewCoordinator(StrictLeaseOptions("i")));
    interleaver_ = std::make_unique<MachineRegistry>(*interleaver_store_, *machine_clock_);
    // Per run: how flaky the coordinator is, how long leases are, which clock policy.
    const double rates[] = {0, 0.02, 0.1, 0.3};
    coordinator_.fail = rates[Uniform(0, 3)];
    coordinator_.late = rates[Uniform(0, 3)];
    const std::int64_t ttls[] = {2000, 3000, 6000, 10000};
    ttl_ms_ = ttls[Uniform(0, 3)];
    const ClockBackwardsPolicy policies[] = {
        ClockBackwardsPolicy::kWait, ClockBackwardsPolicy::kFail, ClockBackwardsPolicy::kContinue};
    policy_ = policies[Uniform(0, 2)];
    borrow_ = Uniform(0, 1) == 1;
    if (options.fleet) {
      const std::int64_t latencies[] = {0, 10, 100, 500};
      coordinator_.latency_ms = latencies[Uniform(0, 3)];
    }
    segment_db_ = NewMemorySegmentStore();
    (void)segment_db_->CreateTag({kSegmentTag, 1, SegmentUniform(1, 100)});
    db_fail_ = rates[SegmentUniform(0, 3)];
    db_late_ = rates[SegmentUniform(0, 3)];
    for (int i = 0; i < options.servers + options.gens; ++i) {
      Slot slot;
      slot.gen = i >= options.servers;
      slot.identity = fmt::format("{}-{}", slot.gen ? "gen" : "sim", i);
      slot.disk = std::make_shared<Disk>();
      slots_.push_back(std::move(slot));
    }
  }

  SimulationResult Run() {
    Trace("seed {} ttl={}ms fail={} late={} latency={}ms policy={} borrow={} keep_id={}",
          options_.seed, ttl_ms_, coordinator_.fail, coordinator_.late, coordinator_.latency_ms,
          ClockBackwardsPolicyName(policy_), borrow_, keep_id_);
    for (std::size_t i = 0; i < slots_.size(); ++i) StartServer(i, /*fresh_disk=*/false);
    for (step_ = 0; step_ < options_.steps && result_.ok; ++step_) {
      if (options_.fleet && step_ == options_.steps / 3) wave_next_ = 0;
      if (options_.fleet && step_ == 2 * options_.steps / 3) RestartAllAtOnce();
      RollWave();
      Step();
    }
    for (std::size_t i = 0; i < slots_.size(); ++i) End(i, "ends with the run");
    return result_;
  }

  std::int64_t Uniform(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
  }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  bool StrictChance(double p) {
    return std::uniform_real_distribution<double>(0, 1)(strict_rng_) < p;
  }
  bool DatabaseRefused() { return world_.now < db_down_until_ || SegmentChance(db_fail_); }
  bool DatabaseLate() { return SegmentChance(db_late_); }
  const SimCoordinator& coordinator() const { return coordinator_; }
  std::int64_t unfenced() const { return unfenced_; }
  World& world() { return world_; }

  template <typename... Args>
  void Trace(fmt::format_string<Args...> format, Args&&... args) {
    if (!options_.verbose) return;
    std::fprintf(stderr, "[%d t=%lld] %s\n", step_,
                 static_cast<long long>(world_.now - kStartMillis),
                 fmt::format(format, std::forward<Args>(args)...).c_str());
  }

  void Fail(const std::string& what) {
    if (!result_.ok) return;
    result_.ok = false;
    const std::string replay =
        options_.replay.empty()
            ? fmt::format("sekka_sim --seed {{seed}}{}{} --steps {{steps}} --verbose",
                          options_.fleet ? " --fleet" : "",
                          options_.plant_fence_bug ? " --plant-fence-bug" : "")
            : options_.replay;
    result_.failure = fmt::format("{} (step {}; replay: {})", what, step_,
                                  fmt::format(fmt::runtime(replay), fmt::arg("seed", options_.seed),
                                              fmt::arg("steps", options_.steps)));
  }

  // A store that took effect at the coordinator, for worker id `worker`.
  void Stored(int incarnation, std::int64_t worker, std::int64_t hwm) {
    Trace("  stored hwm {} for worker {} (incarnation {})", hwm - kStartMillis, worker,
          incarnation);
    std::int64_t& last = stored_[worker];
    if (hwm < last) {
      Fail(
          fmt::format("the stored hwm of worker id {} decreased from {} to {}", worker, last, hwm));
    }
    last = hwm;
    std::int64_t& pending = pending_[incarnation];
    pending = std::max(pending, hwm);
  }

 private:
  // The fleet tier's rolling wave: the next few servers stop (SIGTERM) and start again, in order,
  // until every slot has; restarts of slots already down just start them.
  void RollWave() {
    if (wave_next_ < 0) return;
    for (int k = 0; k < 4 && wave_next_ < static_cast<std::int64_t>(slots_.size()); ++k) {
      const std::size_t i = static_cast<std::size_t>(wave_next_++);
      End(i, "stopped by the rolling wave");
      ++result_.restarts;
      StartServer(i, /*fresh_disk=*/false);
    }
    if (wave_next_ >= static_cast<std::int64_t>(slots_.size())) wave_next_ = -1;
  }

  // The fleet tier's restart of every process at once (a rollout with no surge limit): all stop,
  // then all start.
  void RestartAllAtOnce() {
    Trace("the whole fleet restarts at once");
    for (std::size_t i = 0; i < slots_.size(); ++i) End(i, "stopped with the fleet");
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      ++result_.restarts;
      StartServer(i, /*fresh_disk=*/false);
    }
  }

  // A lease of slot's process at the simulated coordinator, with its faults.
  std::unique_ptr<FaultyLease> NewLease(Slot& slot, std::int64_t preferred, int incarnation) {
    WorkerLeaseOptions lo;
    lo.identity = slot.identity;
    lo.worker_count = layout_.worker_ids_per_datacenter();
    lo.layout = LayoutFingerprint(layout_);
    lo.preferred = preferred;
    lo.ttl = std::chrono::milliseconds(ttl_ms_);
    lo.keep_id = keep_id_;
    lo.clock = slot.clock.get();
    std::unique_ptr<WorkerLease> inner;
    if (options_.new_lease) {
      inner = options_.new_lease(lo);
    } else if (options_.plant_fence_bug) {
      inner = NewCoordinatedLease(std::make_unique<UnfencedCoordinator>(
                                      coordinator_.registry->NewCoordinator(lo), unfenced_),
                                  lo);
    } else {
      inner = coordinator_.registry->NewLease(lo);
    }
    return std::make_unique<FaultyLease>(std::move(inner), *this, incarnation, slot.paused_until);
  }

  // A lease of a coordinator (the memory registry, etcd, ZooKeeper), not of a lock file.
  static bool Coordinated(const WorkerLease& lease) {
    const std::string_view s = lease.source();
    return s != "local" && s != "static" && s != "hostname";
  }

  void StartServer(std::size_t i, bool fresh_disk) {
    Slot& slot = slots_[i];
    if (slot.gen) return StartGen(i);
    if (fresh_disk) slot.disk = std::make_shared<Disk>();
    slot.clock = slot.clock ? std::move(slot.clock) : std::make_unique<SimClock>(world_);
    const int incarnation = ++incarnations_;
    std::unique_ptr<FaultyLease> lease = NewLease(slot, slot.disk->preferred, incarnation);
    ServerConfig config = DefaultConfig();
    config.worker_source = Coordinated(*lease) ? "etcd" : std::string(lease->source());
    config.lease_ttl_ms = ttl_ms_;
    config.generator.layout = layout_;
    config.generator.on_clock_backwards = policy_;
    config.generator.on_sequence_exhausted =
        borrow_ ? SequenceExhaustedPolicy::kBorrow : SequenceExhaustedPolicy::kWait;
    config.generator.random_seed = options_.seed;
    FaultyLease* raw = lease.get();
    ServiceParts parts;
    parts.clock = slot.clock.get();
    parts.lease = std::move(lease);
    parts.data_dir = std::make_unique<SimDataDir>(slot.disk);
    parts.segment_store = std::make_unique<FaultySegmentStore>(*segment_db_, *this);
    // CosId's machine ids: the cluster's, at the coordinator, whatever the worker source, judged
    // on one clock (ServiceParts::machine_clock).
    parts.machine_clock = machine_clock_.get();
    parts.machine_store = std::make_unique<InterleavedMachineStore>(
        NewCoordinatorMachineStore(coordinator_.registry->NewCoordinator(StrictLeaseOptions("m"))),
        [this, i] {
          if (!machine_between_ && MachineUniform(0, 3) == 0) {
            machine_between_ = true;
            MachineStep(i);
            machine_between_ = false;
          }
          const std::int64_t fate = MachineUniform(0, 19);
          return fate == 0   ? SaveFate::kFails
                 : fate == 1 ? SaveFate::kLandsUnanswered
                             : SaveFate::kLands;
        });
    parts.background_thread = false;
    slot.strict_dead = std::make_shared<bool>(false);
    parts.strict = StrictCoordinationOf(slot.strict_dead);
    config.strict_window = 8;  // small: leaders often serve up to their bound
    config.strict_tags = {kStrictTag};
    Result<std::unique_ptr<Service>> s = Service::Start(config, std::move(parts));
    if (!s.ok()) {
      Trace("server {} did not start: {}", i, s.error().message);
      return;
    }
    slot.service = std::move(s).value();
    slot.service->SetStrictAddress(fmt::format("sim:{}", i));
    slot.lease = raw;
    slot.incarnation = incarnation;
    slot.next_background = world_.now + 100;
    Attribute(slot);
    Trace("server {} started as incarnation {} with worker id {}", i, incarnation,
          slot.service->worker().worker_id);
  }

  // A `sekka gen` run: sekka gen's LeasedGenerator (inline hwm, no data dir, no background
  // work) on a lease of the servers' coordinator, printing up to 5,000 ids over several steps.
  void StartGen(std::size_t i) {
    Slot& slot = slots_[i];
    slot.clock = slot.clock ? std::move(slot.clock) : std::make_unique<SimClock>(world_);
    LeasedGeneratorOptions o;
    o.generator.layout = layout_;
    o.generator.on_clock_backwards = policy_;
    o.generator.random_seed = options_.seed;
    o.inline_hwm = true;
    o.hwm_ahead_ms = 100;
    o.ttl_ms = ttl_ms_;
    const int incarnation = ++incarnations_;
    std::unique_ptr<FaultyLease> lease = NewLease(slot, -1, incarnation);
    FaultyLease* raw = lease.get();
    Result<std::unique_ptr<LeasedGenerator>> g =
        LeasedGenerator::Start(o, *slot.clock, std::move(lease), nullptr);
    if (!g.ok()) {
      Trace("gen {} did not start: {}", i, g.error().message);
      return;
    }
    slot.gen_run = std::move(g).value();
    slot.lease = raw;
    slot.incarnation = incarnation;
    slot.gen_left = Uniform(1, 5000);
    Attribute(slot);
    Trace("gen {} started as incarnation {} with worker id {}", i, incarnation,
          slot.gen_run->generator().worker_id());
  }

  // The process of slot i ends: its stalled requests and its generators with it.
  void End(std::size_t i, const char* how) {
    Slot& slot = slots_[i];
    if (!Alive(slot)) return;
    Trace("{} {} {}", slot.gen ? "gen" : "server", i, how);
    Forget(slot);
    slot.service.reset();
    slot.gen_run.reset();
  }

  void Crash(std::size_t i) {
    Slot& slot = slots_[i];
    if (!Alive(slot)) return;
    slot.lease->crashed_ = true;
    if (slot.strict_dead) *slot.strict_dead = true;
    End(i, "killed (-9)");
  }

  // The generator a process issues ids from now.
  static Snowflake* Current(const Slot& slot) {
    if (slot.service) return &slot.service->generator();
    return slot.gen_run ? &slot.gen_run->generator() : nullptr;
  }

  // Every store is made for the generator that is current when the call that made it returns
  // (LeasedGenerator stores only for its newest generator): the hwms stored since the last call
  // are credited to it, and to no other generator of the process.
  void Attribute(Slot& slot) {
    auto it = pending_.find(slot.incarnation);
    Snowflake* g = Current(slot);
    if (it == pending_.end() || g == nullptr) return;
    std::int64_t& covered = covered_[g];
    covered = std::max(covered, it->second);
    slot.generators.insert(g);
    pending_.erase(it);
  }

  // A process ends: its generators are gone (an address may be reused by the next one).
  void Forget(Slot& slot) {
    for (Snowflake* g : slot.generators) {
      covered_.erase(g);
      generator_serial_.erase(g);
    }
    slot.generators.clear();
    slot.stalled.clear();
  }

  // The times generator `g` issued ids at, first to last, extended to [first, last]: never
  // overlapping another generator's of worker id `worker` (two holders of one id at once).
  void CheckRange(const Snowflake& g, std::int64_t worker, std::int64_t first, std::int64_t last) {
    auto [serial, fresh] = generator_serial_.try_emplace(&g, 0);
    if (fresh) serial->second = ++generator_serials_;
    auto& of_worker = ranges_[worker];
    auto& mine = of_worker.try_emplace(serial->second, first, last).first->second;
    mine = {std::min(mine.first, first), std::max(mine.second, last)};
    for (const auto& [other, range] : of_worker) {
      if (other == serial->second || range.second < mine.first || mine.second < range.first) {
        continue;
      }
      return Fail(fmt::format(
          "worker id {} issued ids from two generators at once: times {} to {} and {} to {}",
          worker, range.first - kStartMillis, range.second - kStartMillis,
          mine.first - kStartMillis, mine.second - kStartMillis));
    }
  }

  // Checks ids that generator `g` of `slot` issued: each once, each of g's worker id, each tick
  // at or below an hwm that g's lease stored for g while it held that worker id, and no other
  // generator of that worker id issuing in the same span of time.
  void Record(const Slot& slot, const Snowflake& g, std::span<const Id> ids) {
    std::int64_t first = INT64_MAX, last = INT64_MIN;
    for (Id id : ids) {
      ++result_.ids;
      Result<DecodedId> d = DecodeId(id, layout_);
      if (!d.ok()) {
        Fail(fmt::format("id {} does not decode: {}", id, d.error().message));
        return;
      }
      if (!issued_.insert(id).second) {
        Fail(fmt::format("id {} (worker {}, time {}) was issued twice", id, d->worker,
                         d->timestamp_ms - kStartMillis));
        return;
      }
      if (d->worker != g.worker_id()) {
        Fail(fmt::format("id {} has worker {}, its generator worker {}", id, d->worker,
                         g.worker_id()));
        return;
      }
      const std::int64_t tick_end = d->timestamp_ms + layout_.tick_millis() - 1;
      auto it = covered_.find(&g);
      const std::int64_t covered = it == covered_.end() ? -1 : it->second;
      if (tick_end > covered) {
        Fail(fmt::format(
            "id {} of worker {} at time {} is above every hwm its generator (incarnation {}) "
            "stored while holding that worker id ({})",
            id, d->worker, tick_end - kStartMillis, slot.incarnation,
            covered < 0 ? -1 : covered - kStartMillis));
        return;
      }
      first = std::min(first, d->timestamp_ms);
      last = std::max(last, d->timestamp_ms);
    }
    if (!ids.empty()) CheckRange(g, g.worker_id(), first, last);
  }

  static bool Alive(const Slot& slot) { return slot.service || slot.gen_run; }
  bool Runnable(const Slot& slot) const { return Alive(slot) && world_.now >= slot.paused_until; }

  // A gen prints its next ids (its hwm stored inline), and exits when done or on an error.
  void GenPrints(std::size_t i) {
    Slot& slot = slots_[i];
    const std::int64_t n = std::min<std::int64_t>(slot.gen_left, Uniform(1, 2000));
    std::vector<Id> ids(static_cast<std::size_t>(n));
    Snowflake& g = slot.gen_run->generator();
    slot.gen_run->SetIdsLeft(slot.gen_left);
    Status s = slot.gen_run->NextIds(std::span<Id>(ids));
    Attribute(slot);
    if (!s.ok()) {
      Trace("gen {}: {} ids failed: {}", i, n, s.error().message);
      return End(i, "exits on the error");
    }
    Record(slot, g, ids);
    slot.gen_left -= n;
    if (slot.gen_left == 0) End(i, "printed every id and exits");
  }

  void Request(std::size_t i) {
    Slot& slot = slots_[i];
    if (slot.gen) return GenPrints(i);
    Snowflake& g = slot.service->generator();
    const std::size_t n = static_cast<std::size_t>(Chance(0.5) ? 1 : Uniform(2, 300));
    std::vector<Id> ids(n);
    Status s = n == 1 ? [&]() -> Status {
      Result<Id> id = slot.service->NextId();
      if (!id.ok()) return id.error();
      ids[0] = *id;
      return Status::Ok();
    }()
        : slot.service->NextIds(std::span<Id>(ids));
    if (!s.ok()) {
      Trace("server {}: {} ids failed: {}", i, n, s.error().message);
      return;
    }
    Record(slot, g, ids);
    // Sometimes a request thread stops inside a later call, holding the generator it found.
    if (Chance(0.05)) slot.stalled.push_back(&slot.service->generator());
  }

  void ResumeStalled(std::size_t i) {
    Slot& slot = slots_[i];
    if (slot.stalled.empty()) return;
    const std::size_t k =
        static_cast<std::size_t>(Uniform(0, static_cast<std::int64_t>(slot.stalled.size()) - 1));
    Snowflake* g = slot.stalled[k];
    slot.stalled.erase(slot.stalled.begin() + static_cast<std::ptrdiff_t>(k));
    std::vector<Id> ids(static_cast<std::size_t>(Uniform(1, 2000)));
    Status s = g->NextIds(std::span<Id>(ids));
    Trace("server {}: a stalled request (worker {}) resumes: {}", i, g->worker_id(),
          s.ok() ? "ok" : s.error().message);
    if (s.ok()) Record(slot, *g, ids);
  }

  void Fault() {
    ++result_.faults;
    const std::size_t i =
        static_cast<std::size_t>(Uniform(0, static_cast<std::int64_t>(slots_.size()) - 1));
    Slot& slot = slots_[i];
    switch (Uniform(0, 9)) {
      case 0: {  // the clock steps
        const std::int64_t steps[] = {-100, -1500, -5000, -15000, -60000, 100, 5000, 30000};
        const std::int64_t d = steps[Uniform(0, 7)];
        if (slot.clock) slot.clock->offset_ += d;
        Trace("server {}: clock steps {} ms", i, d);
        break;
      }
      case 1:
        slot.paused_until = world_.now + Uniform(0, 3 * ttl_ms_);
        Trace("server {}: paused until {}", i, slot.paused_until - kStartMillis);
        break;
      case 2:
        coordinator_.down_until = world_.now + Uniform(0, 2 * ttl_ms_);
        Trace("coordinator down until {}", coordinator_.down_until - kStartMillis);
        break;
      case 3:
        slot.disk->full = !slot.disk->full;
        Trace("server {}: disk {}", i, slot.disk->full ? "full" : "freed");
        break;
      case 4:
        Crash(i);
        break;
      case 5:
        End(i, "stopped (SIGTERM)");
        break;
      case 6:
      case 7:
        if (!Alive(slot)) {
          ++result_.restarts;
          const bool fresh = Chance(0.25);
          Trace("server {} restarts{}", i, fresh ? " with a fresh data dir" : "");
          StartServer(i, fresh);
        }
        break;
      default:  // time passes in a lump
        world_.now += Uniform(0, 2 * ttl_ms_);
        Trace("time jumps");
        break;
    }
  }

  void Step() {
    world_.now += Uniform(0, 30);
    // Background threads run every 100 ms in each live, unpaused process.
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      Slot& slot = slots_[i];
      if (slot.service && Runnable(slot) && world_.now >= slot.next_background) {
        slot.service->RunBackgroundOnce();
        Attribute(slot);
        slot.next_background = world_.now + 100;
      }
    }
    const std::size_t i =
        static_cast<std::size_t>(Uniform(0, static_cast<std::int64_t>(slots_.size()) - 1));
    const std::int64_t what = Uniform(0, 99);
    if (what < 8) {
      Fault();
    } else if (what < 15) {
      if (Runnable(slots_[i])) ResumeStalled(i);
    } else if (!Alive(slots_[i])) {
      if (Chance(0.2)) {
        ++result_.restarts;
        StartServer(i, false);
      }
    } else if (Runnable(slots_[i])) {
      Request(i);
    }
    if (std::uniform_real_distribution<double>(0, 1)(machine_rng_) < 0.1) MachineStep(-1);
    if (SegmentChance(0.3)) SegmentStep();
    if (StrictChance(0.3)) StrictStep();
  }

  std::int64_t StrictUniform(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(strict_rng_);
  }

  // How the servers reach the strict tag's namespace: the memory registry (on the coordinator's
  // clock and with its outages), and each other in-process ("sim:<slot>": a server that is down
  // or paused does not answer).
  StrictCoordination StrictCoordinationOf(std::shared_ptr<bool> dead) {
    StrictCoordination c;
    c.open_lease = [this, dead](
                       const std::string&,
                       const std::string& identity) -> Result<std::unique_ptr<WorkerLease>> {
      return std::unique_ptr<WorkerLease>(new StrictSimLease(
          strict_registry_->NewLease(StrictLeaseOptions(identity)), *this, dead));
    };
    c.find_leader = [this](const std::string&) -> Result<std::string> {
      if (world_.now < coordinator_.down_until) {
        return Unavailable("simulated: the coordinator did not answer");
      }
      if (!strict_directory_) {
        strict_directory_ = strict_registry_->NewCoordinator(StrictLeaseOptions("directory"));
      }
      SEKKA_ASSIGN_OR_RETURN(auto holders, strict_directory_->ListHolders());
      auto it = holders.find(0);
      return it == holders.end() ? std::string() : it->second.identity;
    };
    c.forward = [this](const std::string& address, const std::string& tag, std::int64_t n,
                       std::chrono::milliseconds) -> Result<std::int64_t> {
      const std::size_t j = std::strtoul(address.c_str() + 4, nullptr, 10);  // "sim:<slot>"
      if (j >= slots_.size() || !slots_[j].service || !Runnable(slots_[j])) {
        return Unavailable("simulated: the leader does not answer");
      }
      return slots_[j].service->NextStrictAsLeader(tag, n);
    };
    c.pause = [this](std::chrono::milliseconds d) { world_.now += d.count(); };
    c.idle_release = std::chrono::milliseconds(ttl_ms_);  // tags are let go and led again often
    c.planted_bug_start_at_bound = options_.plant_strict_bug;
    return c;
  }

  WorkerLeaseOptions StrictLeaseOptions(const std::string& identity) {
    WorkerLeaseOptions o;
    o.identity = identity;
    o.worker_count = 1;
    o.ttl = std::chrono::milliseconds(ttl_ms_);
    o.keep_id = true;
    o.layout = "strict counter";
    o.clock = coordinator_clock_.get();
    return o;
  }

  // A client asks a server for strict ids. Each request here completes before the next begins,
  // so real-time order means: every answer is above every strict id answered before it, by any
  // server, across leader changes, pauses, crashes and clock steps.
  void StrictStep() {
    const std::size_t i = static_cast<std::size_t>(StrictUniform(0, options_.servers - 1));
    Slot& slot = slots_[i];
    if (!slot.service || !Runnable(slot)) return;
    const std::int64_t n = StrictChance(0.5) ? 1 : StrictUniform(2, 8);
    Result<std::int64_t> first = slot.service->NextStrict(kStrictTag, n);
    if (!first.ok()) {
      Trace("server {}: {} strict ids failed: {}", i, n, first.error().message);
      return;
    }
    result_.strict_ids += static_cast<std::uint64_t>(n);
    if (*first <= strict_last_) {
      return Fail(fmt::format(
          "strict ids {}..{} from server {} (incarnation {}) are not above {}, answered before "
          "this request began",
          *first, *first + n - 1, i, slot.incarnation, strict_last_));
    }
    strict_last_ = *first + n - 1;
  }

  std::int64_t SegmentUniform(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(segment_rng_);
  }
  bool SegmentChance(double p) {
    return std::uniform_real_distribution<double>(0, 1)(segment_rng_) < p;
  }

  // A client asks a server for segment ids of the one tag (or the database goes down for a
  // while). Every id is checked: issued once across all servers and restarts, and, within one
  // server process, above every id it issued before (ids of a tag increase in real-time order).
  void SegmentStep() {
    if (SegmentChance(0.02)) {
      db_down_until_ = world_.now + SegmentUniform(0, 3 * ttl_ms_);
      Trace("database down until {}", db_down_until_ - kStartMillis);
      return;
    }
    const std::size_t i = static_cast<std::size_t>(SegmentUniform(0, options_.servers - 1));
    Slot& slot = slots_[i];
    if (!slot.service || !Runnable(slot)) return;
    std::vector<std::int64_t> ids(
        static_cast<std::size_t>(SegmentChance(0.5) ? 1 : SegmentUniform(2, 50)));
    Status s = slot.service->NextSegmentIds(kSegmentTag, std::span<std::int64_t>(ids),
                                            /*may_create=*/true);
    if (!s.ok()) {
      Trace("server {}: {} segment ids failed: {}", i, ids.size(), s.error().message);
      return;
    }
    std::int64_t& last = last_segment_[slot.incarnation];
    for (std::int64_t id : ids) {
      ++result_.segment_ids;
      if (!segment_ids_.insert(id).second) {
        return Fail(fmt::format("segment id {} was issued twice (server {}, incarnation {})", id, i,
                                slot.incarnation));
      }
      if (id <= last) {
        return Fail(
            fmt::format("segment id {} of server {} (incarnation {}) is not above its "
                        "last one, {}",
                        id, i, slot.incarnation, last));
      }
      last = id;
    }
  }

  std::int64_t MachineUniform(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(machine_rng_);
  }

  // One call of a CosId instance, through a load balancer, to any server's machine registry
  // (the cluster's, at the coordinator): it asks for an id, guards it, gives it back, or dies
  // (its successor has a new name). One that lands inside server `busy`'s change (>= 0) is
  // answered by the interleaver, a registry of the same store that is no server's, so that no
  // server's registry is entered while another's is (a lock order the real servers never
  // have); nor is it the call of the instance making that change.
  void MachineStep(std::int64_t busy) {
    Result<MachineRegistry*> registry = interleaver_.get();
    if (busy < 0) {
      const std::int64_t to = MachineUniform(0, static_cast<std::int64_t>(slots_.size()) - 1);
      Slot& server = slots_[static_cast<std::size_t>(to)];
      if (!server.service || !Runnable(server)) return;
      registry = server.service->machines();
      if (!registry.ok()) return;
    }
    const std::int64_t k = MachineUniform(0, 2);
    if (busy >= 0 && k == machine_caller_) return;
    struct Restore {
      std::int64_t& value;
      const std::int64_t old;
      ~Restore() { value = old; }
    } restore{machine_caller_, machine_caller_};
    if (busy < 0) machine_caller_ = k;
    Instance& in = instances_[static_cast<std::size_t>(k)];
    if (in.name.empty()) in.name = fmt::format("i{}-{}", k, ++instance_starts_);
    if (busy < 0 && MachineUniform(0, 99) == 0) {  // the registries' clock steps, back or ahead
      machine_clock_->offset_ += MachineUniform(-60'000, 30'000);
    }
    const std::int64_t now = machine_clock_->NowMillis();
    // The latest the registries' clock has read: an answer may come after a step back, so a
    // grant is judged by the latest time it may have been made at.
    machine_latest_ = std::max(machine_latest_, now);
    const std::int64_t what = MachineUniform(0, 9);
    if (in.held < 0) {
      const std::int64_t guards[] = {1000, 3000, 20000};
      in.guard_ms = guards[MachineUniform(0, 2)];
      Result<MachineGrant> g = (*registry)->Distribute("sim", 2, in.name, false, in.guard_ms);
      if (!g.ok()) return;
      ++result_.machine_grants;
      CheckMachineGrant(in, *g, machine_latest_);
      if (MachineUniform(0, 9) == 0) {  // the answer was lost: it issues nothing, and asks again
        Trace("instance {} was given machine id {}, but the answer was lost", in.name,
              g->machine_id);
        machine_last_[g->machine_id] = MachineHolding{in.name, 0, true};
        return;
      }
      in.held = g->machine_id;
      in.until = now + in.guard_ms;
      machine_last_[in.held] = MachineHolding{in.name, in.until, false};
      Trace("instance {} holds machine id {} (lastTimestamp {})", in.name, in.held,
            g->last_timestamp_ms - kStartMillis);
    } else if (what < 7) {
      Status s = (*registry)->Guard("sim", in.name, in.guard_ms);
      if (s.ok()) {
        in.until = std::max(in.until, now + in.guard_ms);
        machine_last_[in.held] = MachineHolding{in.name, in.until, false};
      } else if (s.error().code == ErrorCode::kLeaseLost ||
                 s.error().code == ErrorCode::kNotFound) {
        Trace("instance {} lost machine id {}: {}", in.name, in.held, s.error().message);
        in.held = -1;  // it stops issuing
      }
    } else if (what < 8) {
      if ((*registry)->Revert("sim", in.name).ok()) {
        Trace("instance {} gives machine id {} back", in.name, in.held);
        machine_last_[in.held] = MachineHolding{in.name, std::min(in.until, now), true};
        in.held = -1;
      }
    } else {
      Trace("instance {} dies holding machine id {}", in.name, in.held);
      in = Instance{};
    }
  }

  // A grant of a machine id to `in` at `now` (the machine registries' clock): its last holder, if
  // another instance, is past its guard or gave it back, and `in` is told to wait past every id it
  // may have issued.
  void CheckMachineGrant(const Instance& in, const MachineGrant& g, std::int64_t now) {
    auto it = machine_last_.find(g.machine_id);
    if (it == machine_last_.end() || it->second.instance == in.name) return;
    const MachineHolding& last = it->second;
    if (!last.released && last.until > now) {
      Fail(fmt::format("machine id {} went to {} while {} was within its guard (until {}, now {})",
                       g.machine_id, in.name, last.instance, last.until - kStartMillis,
                       now - kStartMillis));
    } else if (g.last_timestamp_ms < last.until) {
      Fail(fmt::format("machine id {} went to {} with lastTimestamp {}, below {}'s last ids ({})",
                       g.machine_id, in.name, g.last_timestamp_ms - kStartMillis, last.instance,
                       last.until - kStartMillis));
    }
  }

  const SimulationOptions options_;
  std::mt19937_64 rng_;
  std::mt19937_64 machine_rng_;  // the CosId instances' own, so that they leave rng_'s draws
  std::mt19937_64 segment_rng_;  // the segment requests' and the database's, likewise
  World world_;
  Layout layout_ = Layout::Default();
  std::unique_ptr<SimClock> coordinator_clock_;
  // The machine registries' one clock (ServiceParts::machine_clock), with steps of its own, and
  // the latest it has read.
  std::unique_ptr<SimClock> machine_clock_;
  std::int64_t machine_latest_ = 0;
  // The registry of calls that land inside a server's change (MachineStep).
  std::unique_ptr<MachineStore> interleaver_store_;
  std::unique_ptr<MachineRegistry> interleaver_;
  SimCoordinator coordinator_;
  std::int64_t ttl_ms_ = 2000;
  ClockBackwardsPolicy policy_ = ClockBackwardsPolicy::kWait;
  bool borrow_ = false;
  bool keep_id_ = false;  // WorkerLeaseOptions::keep_id of every lease of the run
  std::vector<Slot> slots_;
  int incarnations_ = 0;
  int instance_starts_ = 0;
  int step_ = 0;
  std::int64_t wave_next_ = -1;  // the fleet's rolling wave: the next slot it restarts; -1: none
  std::int64_t unfenced_ = 0;    // plant_fence_bug: calls told they landed though they did not
  // The ticks each generator issued, first and last, by worker id: the generators of one worker
  // id issue in disjoint ranges (a later holder starts past every hwm an earlier one stored).
  // Generators by a serial of their own (an address is reused after its process ends).
  std::unordered_map<const Snowflake*, int> generator_serial_;
  int generator_serials_ = 0;
  std::unordered_map<std::int64_t, std::map<int, std::pair<std::int64_t, std::int64_t>>> ranges_;
  SimulationResult result_;
  std::unordered_map<std::int64_t, std::int64_t> stored_;  // worker id -> last stored hwm
  std::unordered_map<int, std::int64_t> pending_;          // incarnation -> hwm not yet credited
  std::unordered_map<const Snowflake*, std::int64_t> covered_;  // generator -> its stored hwm
  std::unordered_set<Id> issued_;
  std::unique_ptr<SegmentStore> segment_db_;  // the servers' shared database
  std::int64_t db_down_until_ = 0;            // world time
  double db_fail_ = 0;
  double db_late_ = 0;
  std::unordered_set<std::int64_t> segment_ids_;        // every segment id issued
  std::unordered_map<int, std::int64_t> last_segment_;  // incarnation -> its last segment id
  std::mt19937_64 strict_rng_;
  // The strict tag's namespace at the coordinator, and a session that looks up its leader.
  std::unique_ptr<WorkerLeaseRegistry> strict_registry_;
  std::unique_ptr<Coordinator> strict_directory_;
  std::int64_t strict_last_ = 0;  // the largest strict id answered so far
  std::vector<Instance> instances_{3};
  // Per machine id, its last holder as the instances saw it (the cluster's registry).
  std::map<std::int64_t, MachineHolding> machine_last_;
  bool machine_between_ = false;      // a call runs inside another server's change
  std::int64_t machine_caller_ = -1;  // the instance whose call runs now
};

bool FaultyLease::Refused() {
  const SimCoordinator& c = sim_.coordinator();
  return sim_.world().now < c.down_until || sim_.Chance(c.fail);
}

bool FaultyLease::Late() { return sim_.Chance(sim_.coordinator().late); }

void FaultyLease::Wait() {
  if (sim_.coordinator().latency_ms == 0) return;
  paused_until_ =
      std::max(paused_until_, sim_.world().now) + sim_.Uniform(0, sim_.coordinator().latency_ms);
}

Result<LeaseGrant> FaultyLease::Acquire() {
  Wait();
  if (Refused()) return Unavailable("simulated: the coordinator did not answer");
  Result<LeaseGrant> g = inner_->Acquire();
  if (g.ok()) worker_ = g->worker_id;
  if (g.ok() && Late()) return Unavailable("simulated: acquired, but the answer was lost");
  return g;
}

Status FaultyLease::Renew() {
  Wait();
  if (Refused()) return Unavailable("simulated: the coordinator did not answer");
  Status s = inner_->Renew();
  if (s.ok() && Late()) return Unavailable("simulated: renewed, but the answer was lost");
  return s;
}

Status FaultyLease::StoreHwm(std::int64_t hwm_millis) {
  Wait();
  if (Refused()) return Unavailable("simulated: the coordinator did not answer");
  const std::int64_t unfenced = sim_.unfenced();
  Status s = inner_->StoreHwm(hwm_millis);
  if (!s.ok()) return s;
  if (sim_.unfenced() == unfenced) sim_.Stored(incarnation_, worker_, hwm_millis);
  if (Late()) return Unavailable("simulated: stored, but the answer was lost");
  return s;
}

bool StrictSimLease::Refused() {
  return *dead_ || sim_.world().now < sim_.coordinator().down_until ||
         sim_.StrictChance(sim_.coordinator().fail);
}

bool StrictSimLease::Late() { return sim_.StrictChance(sim_.coordinator().late); }

Result<LeaseGrant> StrictSimLease::Acquire() {
  if (Refused()) return Unavailable("simulated: the coordinator did not answer");
  Result<LeaseGrant> g = inner_->Acquire();
  if (g.ok() && Late()) return Unavailable("simulated: acquired, but the answer was lost");
  return g;
}

Status StrictSimLease::Renew() {
  if (Refused()) return Unavailable("simulated: the coordinator did not answer");
  Status s = inner_->Renew();
  if (s.ok() && Late()) return Unavailable("simulated: renewed, but the answer was lost");
  return s;
}

Status StrictSimLease::StoreHwm(std::int64_t bound) {
  if (Refused()) return Unavailable("simulated: the coordinator did not answer");
  Status s = inner_->StoreHwm(bound);
  if (s.ok() && Late()) return Unavailable("simulated: stored, but the answer was lost");
  return s;
}

Result<Allocation> FaultySegmentStore::Allocate(std::string_view tag, std::int64_t step) {
  if (sim_.DatabaseRefused()) return Unavailable("simulated: the database did not answer");
  Result<Allocation> r = db_.Allocate(tag, step);
  if (r.ok() && sim_.DatabaseLate())
    return Unavailable("simulated: allocated, but the answer was lost");
  return r;
}

Result<TagInfo> FaultySegmentStore::GetTag(std::string_view tag) {
  if (sim_.DatabaseRefused()) return Unavailable("simulated: the database did not answer");
  return db_.GetTag(tag);
}

}  // namespace

SimulationOptions FleetSimulation() {
  SimulationOptions options;
  options.fleet = true;
  options.servers = 1025;
  options.steps = 3000;
  return options;
}

SimulationResult RunSimulation(const SimulationOptions& options) {
  SetLogLevel(options.verbose ? "info" : "off");
  Simulation sim(options);
  return sim.Run();
}

SimulationResult RunSimulations(SimulationOptions options, std::uint64_t first, std::uint64_t seeds,
                                const std::function<void(std::uint64_t seed)>& before) {
  SimulationResult total;
  for (std::uint64_t seed = first; seed < first + seeds && total.ok; ++seed) {
    if (before) before(seed);
    options.seed = seed;
    const SimulationResult r = RunSimulation(options);
    total.ok = r.ok;
    total.failure = r.failure;
    total.ids += r.ids;
    total.faults += r.faults;
    total.restarts += r.restarts;
    total.machine_grants += r.machine_grants;
    total.segment_ids += r.segment_ids;
    total.strict_ids += r.strict_ids;
  }
  return total;
}

SeedRange SeedsFromEnvironment(std::uint64_t fallback, const char* count_variable) {
  const auto text = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v != nullptr ? v : "");
  };
  const std::string count = text(count_variable);
  const std::string first = text("SEKKA_SIM_FIRST_SEED");
  SeedRange range{1, count.empty() ? fallback : std::stoull(count)};
  if (first.empty()) {
    range.first = std::random_device{}() % 1'000'000'000 + 1;
    std::printf("simulation: seeds %llu to %llu (SEKKA_SIM_FIRST_SEED=%llu replays them)\n",
                static_cast<unsigned long long>(range.first),
                static_cast<unsigned long long>(range.first + range.count - 1),
                static_cast<unsigned long long>(range.first));
  } else {
    range.first = std::stoull(first);
  }
  return range;
}

std::string Summary(const SimulationResult& total, std::uint64_t seeds) {
  return fmt::format(
      "{} seeds, {} ids checked, {} segment ids checked, {} strict ids checked, {} faults, {} "
      "restarts, {} machine ids granted",
      seeds, total.ids, total.segment_ids, total.strict_ids, total.faults, total.restarts,
      total.machine_grants);
}

bool RanForReal(const SimulationResult& total, std::uint64_t seeds) {
  return total.ids > seeds * 1000 && total.faults > seeds * 20 && total.restarts > seeds &&
         total.machine_grants > seeds && total.segment_ids > seeds * 100;
}

}  // namespace sekka::server
