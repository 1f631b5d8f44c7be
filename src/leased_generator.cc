#include "sekka/leased_generator.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "sekka/codec.h"

namespace sekka {

// A generator and the hwm stored for it. The hwm belongs to this generator alone: another
// worker id's (or another generator's) stored hwm never vouches for its ticks.
struct LeasedGenerator::Held {
  std::unique_ptr<Snowflake> snowflake;  // its worker id is this holding's
  std::atomic<std::int64_t> stored{-1};  // the last tick whose hwm was stored durably
  // The largest tick ever sent to a store, stored or not (a call that timed out may still
  // land): the next target is never below it. Owner thread.
  std::int64_t attempted = -1;
};

LeasedGenerator::LeasedGenerator(const LeasedGeneratorOptions& options, Clock& clock,
                                 std::unique_ptr<WorkerLease> lease, DataDir* data_dir)
    : options_(options),
      fingerprint_(LayoutFingerprint(options.generator.layout)),
      clock_(clock),
      lease_(std::move(lease)),
      data_dir_(data_dir) {
  snap_.reach_ms = Window().reach_ms;
}

HwmWindow ComputeHwmWindow(std::int64_t slowest_store_ms, std::int64_t least_ms,
                           std::int64_t most_ms) {
  const std::int64_t reach =
      std::min(std::max(4 * slowest_store_ms, least_ms), std::max<std::int64_t>(most_ms, 1000));
  const std::int64_t half = reach / 2;
  return {reach, std::min(std::max(half, 2 * slowest_store_ms), std::max(half, reach - 500))};
}

LeasedGenerator::~LeasedGenerator() { (void)Stop(); }

Result<std::unique_ptr<LeasedGenerator>> LeasedGenerator::Start(
    const LeasedGeneratorOptions& options, Clock& clock, std::unique_ptr<WorkerLease> lease,
    DataDir* data_dir) {
  if (lease == nullptr) return InvalidArgument("LeasedGenerator::Start needs a lease");
  // The options are checked before anything is claimed (the errors name the field).
  SnowflakeOptions check = options.generator;
  check.store_hwm = nullptr;
  check.start_hwm_tick = -1;
  SEKKA_RETURN_IF_ERROR(Snowflake::Create(check, clock));
  auto made = std::unique_ptr<LeasedGenerator>(
      new LeasedGenerator(options, clock, std::move(lease), data_dir));
  LeasedGenerator& g = *made;
  SEKKA_ASSIGN_OR_RETURN(auto grant, g.FirstAcquire());
  g.last_renew_ok_ms_ = g.last_renew_try_ms_ = clock.MonotonicMillis();
  if (options.coordinated) {
    g.Emit(LeaseLogLevel::kInfo, "worker id leased",
           fmt::format("worker_id={} lease=\"{}\" coordinator_hwm={}", grant.worker_id,
                       g.lease_->Describe(),
                       grant.hwm_millis > 0 ? FormatUtcMillis(grant.hwm_millis) : "none"));
  }
  std::string where;
  SEKKA_ASSIGN_OR_RETURN(auto floor, g.Floor(grant, &where));
  const std::int64_t now = clock.NowMillis();
  if (floor > 0 && now <= floor) {
    SEKKA_RETURN_IF_ERROR(CheckStartupWait(now, floor, options.max_startup_wait_ms, where));
    g.Emit(LeaseLogLevel::kWarn, "waiting for the clock to pass the stored high-water mark",
           fmt::format("wait_ms={} hwm={} now={} from=\"{}\"", floor - now + 1,
                       FormatUtcMillis(floor), FormatUtcMillis(now), where));
    SEKKA_RETURN_IF_ERROR(g.WaitPast(floor, {}));
  }
  SEKKA_RETURN_IF_ERROR(g.Begin(grant, floor));
  // The first hwm is stored before an id is asked for (inline: when the first is).
  if (!options.inline_hwm) {
    SEKKA_RETURN_IF_ERROR(g.StoreHwm(*g.held_.back(), -1, /*log=*/false));
  }
  return made;
}

Result<LeaseGrant> LeasedGenerator::FirstAcquire() {
  // A coordinator that did not answer in time (a fleet starting at once against a small etcd
  // with TLS and users, say: an acquire that used at least half its call budget) is asked again
  // with backoff, 100 ms doubling to 2 s, within max_startup_wait. An answer that came at once
  // (refused, TLS or credentials wrong: a configuration to fix) ends the start at once, as does
  // every other error and every local source's.
  const std::int64_t deadline = clock_.MonotonicMillis() + options_.max_startup_wait_ms;
  std::int64_t backoff_ms = 100;
  for (int attempt = 1;; ++attempt) {
    const std::int64_t began = clock_.MonotonicMillis();
    Result<LeaseGrant> grant = lease_->Acquire();
    if (!options_.coordinated) return grant;
    // Counted, not logged: an error that ends the start is its one line.
    (void)Call("acquire", grant.ok() ? Status::Ok() : Status(grant.error()), /*log=*/false);
    if (grant.ok() || grant.error().code != ErrorCode::kUnavailable) return grant;
    const bool timed_out = clock_.MonotonicMillis() - began >= options_.call_timeout_ms / 2;
    if (!timed_out) return grant;
    if (clock_.MonotonicMillis() + backoff_ms > deadline) {
      return Unavailable(
          fmt::format("no worker id after {} tries within generator.max_startup_wait ({} ms): {}",
                      attempt, options_.max_startup_wait_ms, grant.error().message));
    }
    Emit(LeaseLogLevel::kWarn, "the coordinator did not answer; asking again",
         fmt::format("attempt={} retry_in_ms={} error=\"{}\"", attempt, backoff_ms,
                     grant.error().message));
    clock_.SleepUntilMillis(clock_.NowMillis() + backoff_ms);
    backoff_ms = std::min<std::int64_t>(backoff_ms * 2, 2000);
  }
}

Result<std::int64_t> LeasedGenerator::Floor(const LeaseGrant& grant, std::string* where) {
  const std::int64_t dc = grant.datacenter_id;
  const std::int64_t worker = grant.worker_id;
  std::int64_t floor = grant.hwm_millis;
  *where = options_.coordinated
               ? fmt::format("the coordinator's high-water mark of worker id {}", worker)
               : fmt::format("the stored high-water mark of worker id {} ({})", worker,
                             lease_->Describe());
  if (options_.after_ms > floor) {
    floor = options_.after_ms;
    *where = fmt::format("{} (ids above it start after that time)", options_.after_what);
  }
  if (data_dir_ == nullptr) return floor;
  SEKKA_ASSIGN_OR_RETURN(auto stored, data_dir_->ReadState(dc, worker));
  if (!stored.has_value()) return floor;
  const StoredState& st = *stored;
  if (st.layout != fingerprint_ && !options_.force) {
    return InvalidArgument(fmt::format(
        "the state in {} was made with layout \"{}\", this configuration has \"{}\": refusing "
        "to start, since ids of the two could collide (set generator.force = true or --force "
        "to start anyway)",
        data_dir_->StateName(dc, worker), st.layout, fingerprint_));
  }
  // A forced state of another layout still counts: its hwm is a time, whatever layout stored it.
  if (st.hwm_millis > floor) {
    floor = st.hwm_millis;
    *where = fmt::format("the stored high-water mark of worker id {} in {}", worker,
                         data_dir_->StateName(dc, worker));
  }
  return floor;
}

Status LeasedGenerator::WaitPast(std::int64_t floor_ms, const std::function<bool()>& stopping) {
  while (clock_.NowMillis() <= floor_ms) {
    if (stopping && stopping()) return Unavailable("the server is stopping");
    // A wait longer than the TTL must not let the lease expire under it.
    if (clock_.MonotonicMillis() - last_renew_try_ms_ >= options_.ttl_ms / 3) {
      if (Status r = Renew(); !r.ok() && r.error().code == ErrorCode::kLeaseLost) return r;
    }
    clock_.SleepUntilMillis(std::min(floor_ms + 1, clock_.NowMillis() + 100));
  }
  return Status::Ok();
}

Status LeasedGenerator::Begin(const LeaseGrant& grant, std::int64_t floor_ms) {
  SnowflakeOptions o = options_.generator;
  o.worker_id = grant.worker_id;
  o.datacenter_id = grant.datacenter_id;
  // The floor stays a floor after the wait: a clock that steps back later is refused by the
  // generator instead of reaching below an earlier holder's ids.
  o.start_hwm_tick =
      floor_ms > 0 ? std::max<std::int64_t>(-1, layout().MillisToTick(floor_ms)) : -1;
  auto held = std::make_unique<Held>();
  held->stored.store(o.start_hwm_tick);
  Held* h = held.get();
  // The generator asks about its own hwm, captured here: never the current generator's.
  if (options_.inline_hwm) {
    o.store_hwm = [this, h](std::int64_t tick) { return StoreHwm(*h, tick); };
  } else {
    o.store_hwm = [this, h](std::int64_t tick) { return CheckStored(*h, tick); };
  }
  SEKKA_ASSIGN_OR_RETURN(auto s, Snowflake::Create(o, clock_));
  held->snowflake = std::move(s);
  held_.push_back(std::move(held));
  current_.store(h->snowflake.get(), std::memory_order_release);
  if (options_.coordinated && data_dir_ != nullptr) data_dir_->WritePreferred(grant.worker_id);
  std::lock_guard lock(mu_);
  snap_.acquired_millis = clock_.NowMillis();
  snap_.hwm_millis = std::max(snap_.hwm_millis, floor_ms);
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// The hwm. Stored by the lease (fenced) and then copied into the data dir, which a restart on it
// checks even without the coordinator; for static, local and hostname the lease's own state file
// is the store. A background-run generator only checks what was stored for it, so a request
// never waits on a disk or the network.

Result<std::int64_t> LeasedGenerator::CheckStored(const Held& held, std::int64_t tick) const {
  const std::int64_t stored = held.stored.load(std::memory_order_acquire);
  // (A lost lease is refused before the generator is asked: NextId, NextIds.)
  if (stored >= tick) return stored;
  const std::string until = FormatUtcMillis(layout().TickToMillis(stored + 1) - 1);
  std::lock_guard lock(mu_);
  if (!options_.coordinated) {
    return Unavailable(
        fmt::format("the high-water mark cannot be persisted, so no ids after {}{}", until,
                    snap_.store_error.empty() ? std::string() : ": " + snap_.store_error));
  }
  return LeaseLost(fmt::format(
      "worker id {} cannot vouch for ids after {}: the coordinator has not confirmed a later "
      "high-water mark{}",
      held.snowflake->worker_id(), until,
      snap_.lease_error.empty() ? std::string() : " (" + snap_.lease_error + ")"));
}

Result<std::int64_t> LeasedGenerator::StoreHwm(Held& held, std::int64_t at_least_tick, bool log) {
  const Layout& l = layout();
  // 1. The target: the window's reach past the clock (inline: no further than the ids left
  //    need), and never lower than anything stored or sent already, so that after a backward
  //    clock step the hwm stays where it was (it never decreases, here or at any store).
  std::int64_t ahead =
      l.MillisToTick(clock_.NowMillis() + Window().reach_ms + options_.generator.max_drift.count());
  if (options_.inline_hwm) {
    ahead = std::min(ahead, at_least_tick + ids_left_ / l.ids_per_tick() + 1);
  }
  const std::int64_t target =
      std::max({at_least_tick, ahead, held.stored.load(std::memory_order_acquire), held.attempted});
  held.attempted = target;
  const std::int64_t hwm = l.TickToMillis(target + 1) - 1;  // the last ms of the tick
  // 2. Stored by the lease (fenced), then copied into the data dir. Timed twice: in micros
  //    for the histogram, and on the generator's clock for the window (so that a simulated
  //    store can be slow).
  const auto begin = std::chrono::steady_clock::now();
  const std::int64_t began_ms = clock_.MonotonicMillis();
  Status stored = Call("store_hwm", lease_->StoreHwm(hwm), log);
  Status copied = Status::Ok();
  if (stored.ok() && options_.coordinated && data_dir_ != nullptr) {
    const Snowflake& g = *held.snowflake;
    copied = data_dir_->WriteState(g.datacenter_id(), g.worker_id(), {fingerprint_, hwm});
  }
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now() - begin)
                          .count();
  // 3. Counted, and the window made again from the last stores; a failure is kept for Ready
  //    and the messages of CheckStored.
  store_ms_[store_count_++ % store_ms_.size()] = clock_.MonotonicMillis() - began_ms;
  {
    std::lock_guard lock(mu_);
    snap_.reach_ms = Window().reach_ms;
    snap_.stores++;
    snap_.store_micros += static_cast<std::uint64_t>(micros);
    std::size_t bucket = 0;
    while (bucket < kHwmStoreBucketsMicros.size() && micros > kHwmStoreBucketsMicros[bucket]) {
      ++bucket;
    }
    snap_.store_buckets[bucket]++;
    if (!stored.ok() || !copied.ok()) {
      snap_.store_errors++;
      snap_.store_error = (stored.ok() ? copied : stored).error().message;
    }
  }
  SEKKA_RETURN_IF_ERROR(stored);
  if (!copied.ok()) {  // logged only: the coordinator has the hwm
    Emit(LeaseLogLevel::kError, "cannot copy the high-water mark into the data dir",
         fmt::format("error=\"{}\"", copied.error().message), /*repeats=*/true);
  }
  // 4. Only now may ids of ticks up to the target be issued.
  held.stored.store(target, std::memory_order_release);
  {
    std::lock_guard lock(mu_);
    snap_.hwm_millis = std::max(snap_.hwm_millis, hwm);
  }
  if (!options_.inline_hwm) {
    SEKKA_RETURN_IF_ERROR(held.snowflake->EnsureHwm(target));
  }
  return target;
}

HwmWindow LeasedGenerator::Window() const {
  return ComputeHwmWindow(
      *std::max_element(store_ms_.begin(), store_ms_.end()), options_.hwm_ahead_ms,
      options_.max_startup_wait_ms - options_.generator.max_drift.count() - 1000);
}

// ---------------------------------------------------------------------------------------------
// The lease: renewals, loss and re-acquiring.

Status LeasedGenerator::Call(const char* what, Status status, bool log) {
  std::string description = lease_->Describe();
  {
    std::lock_guard lock(mu_);
    if (options_.coordinated) snap_.coordinator_calls++;
    snap_.description = std::move(description);
    if (status.ok()) return status;
    if (options_.coordinated) snap_.coordinator_errors++;
    snap_.lease_error = status.error().message;
  }
  if (!log) return status;
  Emit(LeaseLogLevel::kWarn,
       options_.coordinated ? "coordinator call failed" : "cannot store the high-water mark",
       fmt::format("call={} error=\"{}\"", what, status.error().message), /*repeats=*/true);
  return status;
}

Status LeasedGenerator::Renew() {
  const std::int64_t mono = clock_.MonotonicMillis();
  last_renew_try_ms_ = mono;
  const auto begin = std::chrono::steady_clock::now();
  Status r = Call("renew", lease_->Renew());
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now() - begin)
                          .count();
  {
    std::lock_guard lock(mu_);
    snap_.renew_micros = micros;
  }
  if (r.ok()) last_renew_ok_ms_ = mono;
  return r;
}

void LeasedGenerator::MarkLost(const std::string& why) {
  if (lost_.exchange(true)) return;
  {
    std::lock_guard lock(mu_);
    snap_.leases_lost++;
    snap_.lease_error = why;
  }
  Emit(LeaseLogLevel::kError, "worker id lease lost: not issuing ids until a lease is held again",
       fmt::format("worker_id={} reason=\"{}\"", generator().worker_id(), why));
  next_reacquire_ms_ = clock_.MonotonicMillis();
}

void LeasedGenerator::TryReacquire(const std::function<bool()>& stopping) {
  Result<LeaseGrant> grant = lease_->Acquire();
  if (!Call("acquire", grant.ok() ? Status::Ok() : Status(grant.error())).ok()) return;
  last_renew_ok_ms_ = last_renew_try_ms_ = clock_.MonotonicMillis();
  Held& current = *held_.back();
  std::string where;
  Result<std::int64_t> floor = Floor(*grant, &where);
  if (!floor.ok()) {
    std::lock_guard lock(mu_);
    snap_.lease_error = floor.error().message;
    return;
  }
  // The same generator may go on only if nobody stored past what it had stored itself.
  const std::int64_t stored_ms = layout().TickToMillis(current.stored.load() + 1) - 1;
  const bool same = grant->worker_id == current.snowflake->worker_id() &&
                    grant->datacenter_id == current.snowflake->datacenter_id() &&
                    *floor <= stored_ms;
  if (!same) {
    // Another id, or one somebody else used meanwhile: a new generator, past that id's hwm. A
    // clock too far behind it is refused as at start: the id is given back, not held for the
    // length of the wait, and the next try is a second later.
    if (Status too_far =
            CheckStartupWait(clock_.NowMillis(), *floor, options_.max_startup_wait_ms, where);
        !too_far.ok()) {
      (void)Call("release", lease_->Release());
      std::lock_guard lock(mu_);
      snap_.lease_error = too_far.error().message;
      return;
    }
    if (Status w = WaitPast(*floor, stopping); !w.ok()) return;
    if (Status b = Begin(*grant, *floor); !b.ok()) {
      std::lock_guard lock(mu_);
      snap_.lease_error = b.error().message;
      return;
    }
  }
  if (Result<std::int64_t> s = StoreHwm(*held_.back(), -1); !s.ok()) {  // tried again in 1 s
    Emit(LeaseLogLevel::kWarn, "worker id lease acquired but its high-water mark failed",
         fmt::format("error=\"{}\"", s.error().message), /*repeats=*/true);
    return;
  }
  {
    std::lock_guard lock(mu_);
    snap_.acquired_millis = clock_.NowMillis();
  }
  lost_.store(false, std::memory_order_release);
  Emit(LeaseLogLevel::kInfo, "worker id lease held again",
       fmt::format("worker_id={} lease=\"{}\" same_generator={}", grant->worker_id,
                   lease_->Describe(), same));
}

void LeasedGenerator::RunBackgroundOnce(const std::function<bool()>& stopping) {
  const std::int64_t mono = clock_.MonotonicMillis();
  if (lost_.load()) {
    if (mono >= next_reacquire_ms_) {
      next_reacquire_ms_ = mono + 1000;
      TryReacquire(stopping);
    }
    return;
  }
  if (mono - last_renew_try_ms_ >= options_.ttl_ms / 3) {
    Status r = Renew();
    if (!r.ok() && r.error().code == ErrorCode::kLeaseLost) MarkLost(r.error().message);
  }
  // Unconfirmed for a whole TTL: the coordinator may have given the id away.
  if (!lost_.load() && clock_.MonotonicMillis() - last_renew_ok_ms_ >= options_.ttl_ms) {
    MarkLost(fmt::format("the lease could not be renewed for {} ms (the TTL)", options_.ttl_ms));
  }
  if (lost_.load()) return;
  // Stored again when less than max_drift + the window's margin is left: ids borrowed up to
  // max_drift ahead of the clock stay below the stored hwm.
  Held& h = *held_.back();
  const std::int64_t left = layout().TickToMillis(h.stored.load() + 1) - clock_.NowMillis();
  const std::int64_t low = options_.generator.max_drift.count() + Window().margin_ms;
  if (left < low && mono >= next_store_ms_) {
    Result<std::int64_t> s = StoreHwm(h, -1);
    if (!s.ok()) next_store_ms_ = mono + 500;  // not 10 times a second
    if (!s.ok() && s.error().code == ErrorCode::kLeaseLost) MarkLost(s.error().message);
  }
}

Status LeasedGenerator::Stop() {
  if (lease_ == nullptr) return Status::Ok();
  // The stored hwm covers every id issued; the id is free for others at once.
  Status r = lease_->Release();
  if (!r.ok()) {
    Emit(LeaseLogLevel::kWarn, "cannot release the worker id lease; it expires after its TTL",
         fmt::format("error=\"{}\"", r.error().message));
  }
  lease_.reset();
  return r;
}

// ---------------------------------------------------------------------------------------------
// What others see.

Error LeasedGenerator::LostError() const {
  std::lock_guard lock(mu_);
  return LeaseLost(fmt::format("worker id {} is not held by this process now: {}",
                               generator().worker_id(), snap_.lease_error));
}

Status LeasedGenerator::Ready() const {
  if (lost_.load()) return LostError();
  const std::int64_t now_ms = clock_.NowMillisUncached();
  if (layout().TickToMillis(generator().hwm_tick() + 1) > now_ms) return Status::Ok();
  std::lock_guard lock(mu_);
  if (options_.coordinated) {
    return LeaseLost("the coordinator has not confirmed a high-water mark past now" +
                     (snap_.lease_error.empty() ? std::string() : ": " + snap_.lease_error));
  }
  return Unavailable("the high-water mark cannot be persisted" +
                     (snap_.store_error.empty() ? std::string() : ": " + snap_.store_error));
}

LeaseSnapshot LeasedGenerator::Snapshot() const {
  std::lock_guard lock(mu_);
  LeaseSnapshot snap = snap_;
  snap.held = !lost_.load();
  return snap;
}

std::int64_t LeasedGenerator::hwm_millis() const {
  std::lock_guard lock(mu_);
  return snap_.hwm_millis;
}

void LeasedGenerator::Emit(LeaseLogLevel level, std::string_view message, const std::string& fields,
                           bool repeats) const {
  if (options_.log) options_.log(level, message, fields, repeats);
}

}  // namespace sekka
