#include "server/service.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "server/http.h"
#include "server/log.h"

namespace sekka::server {
namespace {

constexpr const char* kVersion = SEKKA_VERSION;  // from CMakeLists.txt
// The reservation runs this far ahead of the clock, and is renewed when less than half is left.
constexpr std::int64_t kReserveAheadMs = 2000;
// With a coordinator: further ahead, so that the coordinator is written every 2 s (with a renewal
// every TTL / 3 that is under one call a second) and an outage of up to 2 s goes unnoticed.
constexpr std::int64_t kCoordinatorAheadMs = 4000;

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  out += http::JsonEscape(s);
  out += '"';
  return out;
}

}  // namespace

WireError MapError(ErrorCode code) {
  // On the wire an error's code is its ErrorCodeName, except that a space that ran out (a
  // layout's time field, a tag) reads as unavailable, as docs/contract.md section 6 lists the
  // codes.
  const ErrorCode wire = code == ErrorCode::kExhausted ? ErrorCode::kUnavailable : code;
  int status = 500;
  std::string_view prefix = "ERR";
  switch (wire) {
    case ErrorCode::kInvalidArgument:
      status = 400;
      break;
    case ErrorCode::kNotFound:
      status = 404;
      break;
    case ErrorCode::kAlreadyExists:
      status = 409;
      break;
    case ErrorCode::kUnauthenticated:
      status = 401;
      prefix = "NOAUTH";
      break;
    case ErrorCode::kUnavailable:
    case ErrorCode::kExhausted:
      status = 503;
      prefix = "UNAVAILABLE";
      break;
    case ErrorCode::kClockMovedBackwards:
      status = 503;
      prefix = "CLOCKBACKWARDS";
      break;
    case ErrorCode::kLeaseLost:
      status = 503;
      prefix = "LEASELOST";
      break;
    case ErrorCode::kInternal:
      break;
  }
  return {status, ErrorCodeName(wire), prefix};
}

std::string_view CommandName(Command command) {
  static constexpr std::string_view kNames[] = {
      "id",          "ids",     "decode",  "segment",        "info",
      "healthz",     "readyz",  "metrics", "leaf_snowflake", "leaf_segment",
      "leaf_decode", "ping",    "echo",    "auth",           "hello",
      "command",     "client",  "quit",    "segment_range",  "segment_create",
      "worker",      "machine", "opaque",  "uuid",           "ulid",
      "random",      "other"};
  static_assert(std::size(kNames) == static_cast<std::size_t>(Command::kCount_));
  return kNames[static_cast<int>(command)];
}

std::string_view ProtocolName(Protocol protocol) {
  static constexpr std::string_view kNames[] = {"http", "resp", "thrift"};
  static_assert(std::size(kNames) == kProtocols);
  return kNames[static_cast<int>(protocol)];
}

Service::Service(const ServerConfig& config, Clock& clock)
    : config_(config),
      clock_(clock),
      coordinated_(config.worker_source == "etcd" || config.worker_source == "zookeeper"),
      ttl_ms_(config.lease_ttl_ms),
      ahead_ms_((coordinated_ ? kCoordinatorAheadMs : kReserveAheadMs) +
                config.generator.max_drift.count()),
      started_ms_(clock.NowMillis()) {}

Service::~Service() { Stop(); }

Result<std::unique_ptr<Service>> Service::Start(const ServerConfig& config, ServiceParts parts) {
  if (parts.clock == nullptr || parts.lease == nullptr || parts.data_dir == nullptr ||
      parts.segment_store == nullptr || parts.machine_store == nullptr) {
    return InvalidArgument(
        "Service::Start needs every part: a clock, a lease, a data dir, a segment store and a "
        "machine store");
  }
  Clock& clock = *parts.clock;
  auto service = std::unique_ptr<Service>(new Service(config, clock));
  Service& s = *service;
  const Layout& layout = config.generator.layout;  // its epoch is checked by Snowflake::Create
  s.data_dir_ = std::move(parts.data_dir);
  s.lease_ = std::move(parts.lease);
  Result<LeaseGrant> grant = s.FirstAcquire();
  if (!grant.ok()) return std::move(grant).error();
  s.last_renew_ok_ms_ = s.last_renew_try_ms_ = clock.MonotonicMillis();
  s.lease_acquired_ms_.store(clock.NowMillis());
  if (s.coordinated_) s.data_dir_->WritePreferred(grant->worker_id);
  const std::int64_t datacenter_id = grant->datacenter_id;
  const std::int64_t worker_id = grant->worker_id;
  const std::int64_t coordinator_hwm = grant->hwm_millis;
  s.lease_description_ = s.lease_->Describe();
  if (s.coordinated_) {
    Log(LogLevel::kInfo, "worker id leased",
        fmt::format("worker_id={} lease=\"{}\" coordinator_hwm={}", worker_id, s.lease_description_,
                    coordinator_hwm > 0 ? FormatUtcMillis(coordinator_hwm) : "none"));
  }
  s.datacenter_id_.store(datacenter_id);
  s.worker_id_.store(worker_id);

  // The clock must be past both stored high-water marks: this data dir's and the coordinator's.
  std::string hwm_where;
  Result<std::int64_t> hwm = s.HwmFloor(datacenter_id, worker_id, coordinator_hwm, &hwm_where);
  if (!hwm.ok()) return std::move(hwm).error();
  std::int64_t start_after_tick = -1;
  if (*hwm > 0) {
    const std::int64_t now = clock.NowMillis();
    if (now <= *hwm) {
      if (Status too_far = s.CheckWaitable(*hwm, hwm_where); !too_far.ok()) {
        return std::move(too_far).error();
      }
      Log(LogLevel::kWarn, "waiting for the clock to pass the stored high-water mark",
          fmt::format("wait_ms={} hwm={} now={} from=\"{}\"", *hwm - now + 1, FormatUtcMillis(*hwm),
                      FormatUtcMillis(now), hwm_where));
      if (Status w = s.WaitPast(*hwm); !w.ok()) return std::move(w).error();
    }
    start_after_tick = s.StartAfterTick(*hwm);
    s.hwm_millis_.store(*hwm);
  }
  if (Status g = s.NewGenerator(datacenter_id, worker_id, start_after_tick); !g.ok()) {
    return std::move(g).error();
  }

  s.segment_store_ = std::move(parts.segment_store);
  SegmentOptions segment_options;
  segment_options.wait_deadline = std::chrono::milliseconds(config.segment_wait_deadline_ms);
  segment_options.max_step = config.segment_max_step;
  segment_options.max_tags = static_cast<std::size_t>(config.segment_max_tags);
  s.segments_ = std::make_unique<SegmentAllocator>(*s.segment_store_, clock, segment_options);

  // Opaque ids: a key file that is configured but unusable stops the start (kInvalidArgument).
  if (!config.opaque_key_file.empty()) {
    Result<std::vector<OpaqueKey>> keys = ReadOpaqueKeyFile(config.opaque_key_file);
    if (!keys.ok()) return InvalidArgument("opaque.key_file: " + keys.error().message);
    Result<std::unique_ptr<OpaqueCodec>> codec = OpaqueCodec::Create(*keys, layout);
    if (!codec.ok()) return InvalidArgument("opaque.key_file: " + codec.error().message);
    s.opaque_ = std::move(codec).value();
    codec = OpaqueCodec::Create(*keys, config.random_layout);
    if (!codec.ok()) return InvalidArgument("opaque.key_file: " + codec.error().message);
    s.random_opaque_ = std::move(codec).value();
  }
  // Random ids: nothing to lease or store; only the layout's epoch is checked.
  Result<std::unique_ptr<RandomIdGenerator>> randoms =
      RandomIdGenerator::Create(config.random_layout, clock);
  if (!randoms.ok()) return InvalidArgument("random.layout: " + randoms.error().message);
  s.randoms_ = std::move(randoms).value();

  // Machine ids for CosId clients: a store that cannot be read fails those requests only.
  s.machine_store_ = std::move(parts.machine_store);
  Result<std::unique_ptr<MachineRegistry>> machines =
      MachineRegistry::Open(*s.machine_store_, clock);
  if (machines.ok()) {
    s.machines_ = std::move(machines).value();
  } else {
    s.machines_error_ = machines.error().message;
    Log(LogLevel::kError, "machine ids cannot be read",
        fmt::format("error=\"{}\"", s.machines_error_));
  }

  // The first reservation is stored before the server says it is ready.
  if (Status r = s.ExtendReservation(); !r.ok()) return std::move(r).error();
  if (parts.background_thread) {
    s.reserver_ = std::thread([&s] {
      std::unique_lock lock(s.mu_);
      while (!s.stopping_) {
        lock.unlock();
        s.RunBackgroundOnce();
        lock.lock();
        s.wake_.wait_for(lock, std::chrono::milliseconds(100), [&s] { return s.stopping_; });
      }
    });
  }
  return service;
}

Result<LeaseGrant> Service::FirstAcquire() {
  // A coordinator that did not answer in time (a fleet starting at once against a small etcd
  // with TLS and users, say: an acquire that used at least half its call budget) is asked again
  // with backoff, 100 ms doubling to 2 s, within generator.max_startup_wait. An answer that came
  // at once (refused, TLS or credentials wrong: a configuration to fix) ends the start at once,
  // as does every other error and every local source's.
  const std::int64_t deadline = clock_.MonotonicMillis() + config_.max_startup_wait_ms;
  std::int64_t backoff_ms = 100;
  for (int attempt = 1;; ++attempt) {
    const std::int64_t began = clock_.MonotonicMillis();
    Result<LeaseGrant> grant = lease_->Acquire();
    if (!coordinated_) return grant;
    coordinator_calls_.fetch_add(1);
    if (grant.ok() || grant.error().code != ErrorCode::kUnavailable) return grant;
    coordinator_errors_.fetch_add(1);
    const bool timed_out =
        clock_.MonotonicMillis() - began >= CoordinatorCallTimeoutMs(config_) / 2;
    if (!timed_out) return grant;
    if (clock_.MonotonicMillis() + backoff_ms > deadline) {
      return Unavailable(
          fmt::format("no worker id after {} tries within generator.max_startup_wait ({} ms): {}",
                      attempt, config_.max_startup_wait_ms, grant.error().message));
    }
    Log(LogLevel::kWarn, "the coordinator did not answer; asking again",
        fmt::format("attempt={} retry_in_ms={} error=\"{}\"", attempt, backoff_ms,
                    grant.error().message));
    clock_.SleepUntilMillis(clock_.NowMillis() + backoff_ms);
    backoff_ms = std::min<std::int64_t>(backoff_ms * 2, 2000);
  }
}

WorkerInfo Service::worker() const {
  return WorkerInfo{config_.worker_source, datacenter_id_.load(), worker_id_.load()};
}

bool Service::stopping() {
  std::lock_guard lock(mu_);
  return stopping_;
}

std::int64_t Service::StartAfterTick(std::int64_t floor_ms) const {
  // The floor is a time (ms), whatever layout stored it (a forced state of another layout
  // included), so it stays a floor after the wait: a clock that steps back later is refused by
  // the generator instead of reaching below an earlier holder's ids.
  return floor_ms > 0 ? std::max<std::int64_t>(-1, layout().MillisToTick(floor_ms)) : -1;
}

Result<std::int64_t> Service::HwmFloor(std::int64_t dc, std::int64_t worker,
                                       std::int64_t coordinator_hwm, std::string* where) {
  const std::string fingerprint = LayoutFingerprint(layout());
  Result<std::optional<StoredState>> stored = data_dir_->ReadState(dc, worker);
  if (!stored.ok()) return std::move(stored).error();
  std::int64_t hwm = coordinator_hwm;
  *where = coordinated_ ? fmt::format("the coordinator's high-water mark of worker id {}", worker)
                        : fmt::format("the stored high-water mark of worker id {} in {}", worker,
                                      data_dir_->StateName(dc, worker));
  if (config_.after_floor_ms > hwm) {
    hwm = config_.after_floor_ms;
    *where =
        fmt::format("generator.after_id {} (ids above it start after that time)", config_.after_id);
  }
  if (stored->has_value()) {
    const StoredState& st = **stored;
    if (st.layout != fingerprint && !config_.force) {
      return InvalidArgument(fmt::format(
          "the state in {} was made with layout \"{}\", this configuration has \"{}\": refusing "
          "to start, since ids of the two could collide (set generator.force = true or --force "
          "to start anyway)",
          data_dir_->StateName(dc, worker), st.layout, fingerprint));
    }
    if (st.hwm_millis > hwm) {
      hwm = st.hwm_millis;
      *where = fmt::format("the stored high-water mark of worker id {} in {}", worker,
                           data_dir_->StateName(dc, worker));
    }
  }
  return hwm;
}

Status Service::CheckWaitable(std::int64_t hwm_ms, const std::string& where) {
  return CheckStartupWait(clock_.NowMillis(), hwm_ms, config_.max_startup_wait_ms, where);
}

Status Service::WaitPast(std::int64_t hwm_ms) {
  while (clock_.NowMillis() <= hwm_ms) {
    if (stopping()) return Unavailable("the server is stopping");
    // A wait longer than the TTL must not let the lease expire under it.
    if (clock_.MonotonicMillis() - last_renew_try_ms_ >= ttl_ms_ / 3) {
      if (Status r = Renew(); !r.ok() && r.error().code == ErrorCode::kLeaseLost) return r;
    }
    clock_.SleepUntilMillis(std::min(hwm_ms + 1, clock_.NowMillis() + 100));
  }
  return Status::Ok();
}

Status Service::NewGenerator(std::int64_t datacenter_id, std::int64_t worker_id,
                             std::int64_t start_after_tick) {
  SnowflakeOptions options = config_.generator;
  options.worker_id = worker_id;
  options.datacenter_id = datacenter_id;
  options.start_after_tick = start_after_tick;
  auto confirmed = std::make_shared<std::atomic<std::int64_t>>(start_after_tick);
  // The generator's own reservation, captured by value: never the current generator's.
  options.reserve_ticks = [this, confirmed](std::int64_t tick) {
    return CheckConfirmed(*confirmed, tick);
  };
  Result<std::unique_ptr<Snowflake>> g = Snowflake::Create(options, clock_);
  if (!g.ok()) return std::move(g).error();
  generators_.push_back(Generator{std::move(g).value(), confirmed, datacenter_id, worker_id});
  generator_.store(generators_.back().snowflake.get(), std::memory_order_release);
  datacenter_id_.store(datacenter_id);
  worker_id_.store(worker_id);
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Reservations. The reserver thread stores them ahead of the clock: at the coordinator (fenced:
// only while this process owns its worker id) and in the data dir. A generator's reserve_ticks
// only checks what was stored for it, so a request never waits on a disk or the network.

Result<std::int64_t> Service::CheckConfirmed(const std::atomic<std::int64_t>& confirmed,
                                             std::int64_t tick) {
  const std::int64_t c = confirmed.load(std::memory_order_acquire);
  // (A lost lease is refused before the generator is asked: NextId, NextIds.)
  if (c >= tick) return c;
  std::lock_guard lock(mu_);
  const std::string until = FormatUtcMillis(layout().TickToMillis(c + 1) - 1);
  if (!coordinated_) {
    return Unavailable(fmt::format("the high-water mark cannot be persisted, so no ids after {}{}",
                                   until,
                                   store_error_.empty() ? std::string() : ": " + store_error_));
  }
  return LeaseLost(fmt::format(
      "worker id {} cannot vouch for ids after {}: the coordinator has not confirmed a later "
      "reservation{}",
      worker_id_.load(), until, lease_error_.empty() ? std::string() : " (" + lease_error_ + ")"));
}

Status Service::CoordinatorCall(const char* what, Status status) {
  if (coordinated_) coordinator_calls_.fetch_add(1);
  std::string description = lease_->Describe();
  std::lock_guard lock(mu_);
  lease_description_ = std::move(description);
  if (!status.ok()) {
    if (coordinated_) coordinator_errors_.fetch_add(1);
    std::uint64_t held = 0;
    if (coordinator_log_.Allow(clock_.MonotonicMillis(), &held)) {
      Log(LogLevel::kWarn,
          coordinated_ ? "coordinator call failed" : "cannot store the high-water mark",
          fmt::format("call={} error=\"{}\" similar_lines_held_back={}", what,
                      status.error().message, held));
    }
    lease_error_ = status.error().message;
  }
  return status;
}

Status Service::ExtendReservation() {
  const Layout& l = layout();
  Generator& g = generators_.back();
  // Never lower than anything stored or sent already: after a backward clock step the
  // reservation stays where it was (the hwm never decreases, here or at any store).
  const std::int64_t target = std::max({l.MillisToTick(clock_.NowMillis() + ahead_ms_),
                                        g.confirmed->load(std::memory_order_acquire), g.attempted});
  g.attempted = target;
  const std::int64_t hwm = l.TickToMillis(target + 1) - 1;  // the last ms of the tick
  // Durably stored by the lease: a coordinator's (then also copied into the data dir, which a
  // restart on it checks even without the coordinator), or, for static, local and hostname, the
  // data dir's own state file. The histogram times the whole store.
  const auto begin = std::chrono::steady_clock::now();
  Status stored = CoordinatorCall("store_hwm", lease_->StoreHwm(hwm));
  Status copied = Status::Ok();
  if (stored.ok() && coordinated_) {
    copied = data_dir_->WriteState(g.datacenter_id, g.worker_id, {LayoutFingerprint(l), hwm});
  }
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now() - begin)
                          .count();
  persist_count_.fetch_add(1);
  persist_micros_total_.fetch_add(static_cast<std::uint64_t>(micros));
  std::size_t bucket = 0;
  while (bucket < kPersistBucketsMicros.size() && micros > kPersistBucketsMicros[bucket]) ++bucket;
  persist_buckets_[bucket].fetch_add(1);
  if (!stored.ok() || !copied.ok()) {
    persist_errors_.fetch_add(1);
    std::lock_guard lock(mu_);
    store_error_ = (stored.ok() ? copied : stored).error().message;
  }
  if (!stored.ok()) return stored;
  if (!copied.ok()) {  // the second line only: the coordinator has the reservation
    std::lock_guard lock(mu_);
    std::uint64_t held = 0;
    if (persist_log_.Allow(clock_.MonotonicMillis(), &held)) {
      Log(LogLevel::kError, "cannot copy the high-water mark into the data dir",
          fmt::format("error=\"{}\" similar_lines_held_back={}", copied.error().message, held));
    }
  }
  // Only this thread writes these, and target >= confirmed by construction.
  g.confirmed->store(target, std::memory_order_release);
  hwm_millis_.store(std::max(hwm_millis_.load(), hwm));
  return g.snowflake->ReserveTicks(target);
}

Status Service::Renew() {
  const std::int64_t mono = clock_.MonotonicMillis();
  last_renew_try_ms_ = mono;
  const auto begin = std::chrono::steady_clock::now();
  Status r = CoordinatorCall("renew", lease_->Renew());
  renew_micros_.store(std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now() - begin)
                          .count());
  if (r.ok()) last_renew_ok_ms_ = mono;
  return r;
}

void Service::MarkLost(const std::string& why) {
  if (lease_lost_.exchange(true)) return;
  leases_lost_.fetch_add(1);
  {
    std::lock_guard lock(mu_);
    lease_error_ = why;
  }
  Log(LogLevel::kError, "worker id lease lost: not issuing ids until a lease is held again",
      fmt::format("worker_id={} reason=\"{}\"", worker_id_.load(), why));
  next_reacquire_ms_ = clock_.MonotonicMillis();
}

void Service::TryReacquire() {
  Result<LeaseGrant> grant = lease_->Acquire();
  if (!CoordinatorCall("acquire", grant.ok() ? Status::Ok() : Status(grant.error())).ok()) return;
  last_renew_ok_ms_ = last_renew_try_ms_ = clock_.MonotonicMillis();
  const Generator& current = generators_.back();
  std::string where;
  Result<std::int64_t> floor =
      HwmFloor(grant->datacenter_id, grant->worker_id, grant->hwm_millis, &where);
  if (!floor.ok()) {
    MarkLost(floor.error().message);
    return;
  }
  // The same generator may go on only if nobody stored past what it had confirmed itself.
  const std::int64_t confirmed_ms = layout().TickToMillis(current.confirmed->load() + 1) - 1;
  const bool same = grant->worker_id == current.worker_id &&
                    grant->datacenter_id == current.datacenter_id && *floor <= confirmed_ms;
  if (!same) {
    // Another id, or one somebody else used meanwhile: a new generator, past that id's hwm. A
    // clock too far behind it is refused as at start: the id is given back, not held for the
    // length of the wait, and the next try is a second later.
    if (Status too_far = CheckWaitable(*floor, where); !too_far.ok()) {
      (void)CoordinatorCall("release", lease_->Release());
      std::lock_guard lock(mu_);
      lease_error_ = too_far.error().message;
      return;
    }
    if (Status w = WaitPast(*floor); !w.ok()) {
      if (w.error().code == ErrorCode::kLeaseLost) MarkLost(w.error().message);
      return;
    }
    if (Status g = NewGenerator(grant->datacenter_id, grant->worker_id, StartAfterTick(*floor));
        !g.ok()) {
      MarkLost(g.error().message);
      return;
    }
    data_dir_->WritePreferred(grant->worker_id);
  }
  if (Status s = ExtendReservation(); !s.ok()) {  // still lost; tried again in a second
    Log(LogLevel::kWarn, "worker id lease acquired but its reservation failed",
        fmt::format("error=\"{}\"", s.error().message));
    return;
  }
  lease_acquired_ms_.store(clock_.NowMillis());
  lease_lost_.store(false, std::memory_order_release);
  Log(LogLevel::kInfo, "worker id lease held again",
      fmt::format("worker_id={} lease=\"{}\" same_generator={}", grant->worker_id,
                  lease_->Describe(), same));
}

void Service::RunBackgroundOnce() {
  SampleUi();
  const std::int64_t mono = clock_.MonotonicMillis();
  if (lease_lost_.load()) {
    if (mono >= next_reacquire_ms_) {
      next_reacquire_ms_ = mono + 1000;
      TryReacquire();
    }
    return;
  }
  {
    if (mono - last_renew_try_ms_ >= ttl_ms_ / 3) {
      Status r = Renew();
      if (!r.ok() && r.error().code == ErrorCode::kLeaseLost) MarkLost(r.error().message);
    }
    // Unconfirmed for a whole TTL: the coordinator may have given the id away.
    if (!lease_lost_.load() && clock_.MonotonicMillis() - last_renew_ok_ms_ >= ttl_ms_) {
      MarkLost(fmt::format("the lease could not be renewed for {} ms (the TTL)", ttl_ms_));
    }
    if (lease_lost_.load()) return;
  }
  const std::int64_t left =
      layout().TickToMillis(generators_.back().confirmed->load() + 1) - clock_.NowMillis();
  if (left < ahead_ms_ / 2 && mono >= next_extend_ms_) {
    Status e = ExtendReservation();
    if (!e.ok()) next_extend_ms_ = mono + 500;  // not 10 times a second
    if (!e.ok() && e.error().code == ErrorCode::kLeaseLost) MarkLost(e.error().message);
  }
}

void Service::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (reserver_.joinable()) reserver_.join();
  if (lease_ != nullptr) {
    // The stored reservation covers every id issued; the id is free for others at once.
    Status r = lease_->Release();
    if (!r.ok()) {
      Log(LogLevel::kWarn, "cannot release the worker id lease; it expires after its TTL",
          fmt::format("error=\"{}\"", r.error().message));
    }
  }
}

Error Service::LeaseLostError() {
  std::lock_guard lock(mu_);
  return LeaseLost(fmt::format("worker id {} is not held by this process now: {}",
                               worker_id_.load(), lease_error_));
}

Result<Id> Service::NextId() {
  if (lease_lost_.load(std::memory_order_acquire)) [[unlikely]]
    return LeaseLostError();
  Result<Id> id = generator().NextId();
  if (id.ok()) ids_issued_.fetch_add(1, std::memory_order_relaxed);
  return id;
}

Status Service::NextIds(std::span<Id> out) {
  if (lease_lost_.load(std::memory_order_acquire)) [[unlikely]]
    return LeaseLostError();
  Status s = generator().NextIds(out);
  if (s.ok()) ids_issued_.fetch_add(out.size(), std::memory_order_relaxed);
  return s;
}

Status Service::NextSegmentIds(std::string_view tag, std::span<std::int64_t> out) {
  Result<SegmentSequence*> seq = segments_->Sequence(tag);
  if (!seq.ok() && seq.error().code == ErrorCode::kNotFound && config_.segment_auto_create) {
    Status created = segments_->CreateTag({std::string(tag), 1, config_.segment_step});
    if (!created.ok() && created.error().code != ErrorCode::kAlreadyExists) {
      return created;
    }
    seq = segments_->Sequence(tag);
  }
  if (!seq.ok()) return std::move(seq).error();
  if (out.size() == 1) {
    Result<std::int64_t> id = (*seq)->NextId();
    if (!id.ok()) return std::move(id).error();
    out[0] = *id;
    return Status::Ok();
  }
  return (*seq)->NextIds(out);
}

Result<SegmentGrant> Service::AllocateSegmentRange(std::string_view tag, std::int64_t step) {
  if (step < 0 || step > config_.segment_max_step) {
    return InvalidArgument(fmt::format("step {} is not valid: allowed 1 to {} (segment.max_step)",
                                       step, config_.segment_max_step));
  }
  Result<TagInfo> info = segments_->GetTag(tag);
  if (!info.ok()) return std::move(info).error();
  Result<IdRange> range = segment_store_->Allocate(tag, step > 0 ? step : info->step);
  if (!range.ok()) return std::move(range).error();
  return SegmentGrant{*range, info->delta, info->remainder};
}

Result<MachineRegistry*> Service::machines() {
  if (machines_ == nullptr) {
    return Unavailable("machine ids cannot be read: " + machines_error_);
  }
  return machines_.get();
}

Status Service::CreateSegmentTag(const TagInfo& tag) {
  if (!config_.segment_auto_create) {
    Result<TagInfo> existing = segments_->GetTag(tag.tag);
    if (existing.ok()) return TagExists(tag.tag);
    if (existing.error().code != ErrorCode::kNotFound) return std::move(existing).error();
    return NotFound(fmt::format(
        "tag \"{}\" does not exist and clients may not create tags (segment.auto_create = "
        "false): create it with `sekka segment create`",
        tag.tag));
  }
  // Clients create at most segment.max_tags tags per process, as with auto-create on first use.
  if (tags_created_.fetch_add(1) >= config_.segment_max_tags) {
    tags_created_.fetch_sub(1);
    return Exhausted(
        fmt::format("tag \"{}\" is not created: clients of this server created {} "
                    "tags already (segment.max_tags)",
                    tag.tag, config_.segment_max_tags));
  }
  Status s = segments_->CreateTag(tag);
  if (!s.ok()) tags_created_.fetch_sub(1);
  return s;
}

Status Service::Ready() {
  const Layout& l = layout();
  const std::int64_t now_ms = clock_.NowMillisUncached();
  const std::int64_t now = l.MillisToTick(now_ms);
  if (now > l.max_tick()) {
    return Exhausted(
        fmt::format("layout {} exhausted on {}", l.name(), FormatUtcMillis(l.end_millis())));
  }
  const std::int64_t behind_ms = (generator().newest_clock_tick() - now) * l.tick_millis();
  const auto& g = config_.generator;
  if (behind_ms > 0 && (g.on_clock_backwards == ClockBackwardsPolicy::kFail ||
                        (g.on_clock_backwards == ClockBackwardsPolicy::kWait &&
                         behind_ms > g.max_backwards_wait.count()) ||
                        (g.on_clock_backwards == ClockBackwardsPolicy::kContinue &&
                         behind_ms > g.max_drift.count() + g.max_backwards_wait.count()))) {
    return Error{
        ErrorCode::kClockMovedBackwards,
        fmt::format("the clock is {} ms behind time already used ({}), more than "
                    "policy {} tolerates",
                    behind_ms, FormatUtcMillis(l.TickToMillis(generator().newest_clock_tick())),
                    ClockBackwardsPolicyName(g.on_clock_backwards))};
  }
  if (lease_lost_.load()) return LeaseLostError();
  if (l.TickToMillis(generator().reserved_tick() + 1) <= now_ms) {
    std::lock_guard lock(mu_);
    if (coordinated_) {
      return LeaseLost("the coordinator has not confirmed a reservation past now" +
                       (lease_error_.empty() ? std::string() : ": " + lease_error_));
    }
    return Unavailable("the high-water mark cannot be persisted" +
                       (store_error_.empty() ? std::string() : ": " + store_error_));
  }
  return Status::Ok();
}

std::string Service::LeaseJson() {
  std::string error;
  std::string description;
  {
    std::lock_guard lock(mu_);
    error = lease_error_;
    description = lease_description_;
  }
  return fmt::format(
      "{{\"state\":\"{}\",\"coordinator\":{},\"cluster\":{},\"lease\":{},\"age_s\":{:.3f},"
      "\"renew_ms\":{:.3f},\"ttl_ms\":{},\"coordinator_calls\":{},\"last_error\":{}}}",
      lease_lost_.load() ? "lost" : "held", JsonString(config_.coordinator),
      JsonString(config_.cluster), JsonString(description),
      static_cast<double>(clock_.NowMillis() - lease_acquired_ms_.load()) / 1000.0,
      static_cast<double>(renew_micros_.load()) / 1000.0, config_.lease_ttl_ms,
      coordinator_calls_.load(), JsonString(error));
}

std::string Service::InfoJson() {
  const Layout& l = layout();
  const Status readiness = Ready();
  const bool ready = readiness.ok();
  const std::string reason = ready
                                 ? std::string()
                                 : fmt::format("{}: {}", MapError(readiness.error().code).http_code,
                                               readiness.error().message);
  const WorkerInfo w = worker();
  return fmt::format(
      "{{\"version\":\"{}\",\"uptime_s\":{},\"layout\":{{\"name\":{},\"time_bits\":{},"
      "\"datacenter_bits\":{},\"worker_bits\":{},\"sequence_bits\":{},\"tick_ms\":{},"
      "\"epoch\":\"{}\",\"order\":\"{}\",\"shard_bits\":{},\"reverse_time\":{},"
      "\"runs_out\":\"{}\"}},\"random_layout\":{{\"name\":{},\"time_bits\":{},\"random_bits\":{},"
      "\"tick_ms\":{},\"runs_out\":\"{}\"}},\"worker\":{{\"source\":\"{}\","
      "\"datacenter_id\":{},\"worker_id\":{}}},\"lease\":{},"
      "\"hwm\":\"{}\",\"hwm_ms\":{},\"ready\":{},\"reason\":{}}}",
      kVersion, (clock_.NowMillis() - started_ms_) / 1000, JsonString(l.name()), l.time_bits(),
      l.datacenter_bits(), l.worker_bits(), l.sequence_bits(), l.tick_millis(),
      FormatUtcMillis(l.epoch_millis()), l.OrderName(), l.shard_bits(),
      l.reverse_time() ? "true" : "false", FormatUtcMillis(l.end_millis()),
      JsonString(random_layout().name()), random_layout().time_bits(),
      random_layout().random_bits(), random_layout().tick_millis(),
      FormatUtcMillis(random_layout().end_millis()), w.source, w.datacenter_id, w.worker_id,
      LeaseJson(), FormatUtcMillis(hwm_millis()), hwm_millis(), ready ? "true" : "false",
      JsonString(reason));
}

void Service::SampleUi() {
  const std::int64_t mono = clock_.MonotonicMillis();
  {
    std::lock_guard lock(ui_mu_);
    if (ui_last_mono_ >= 0 && mono - ui_last_mono_ < 1000) return;
    ui_last_mono_ = mono;
  }
  UiSample sample;
  sample.t_ms = clock_.NowMillis();
  sample.snowflake = ids_issued_.load();
  for (const auto& per_protocol : counters_) {
    for (const auto& per_command : per_protocol) {
      for (const auto& n : per_command) sample.requests += n.load(std::memory_order_relaxed);
    }
  }
  for (const auto& o : open_) sample.connections += o.load();
  for (const SegmentSequence* q : segments_->Sequences()) {
    sample.tags.emplace_back(q->tag(), q->stats().issued);
  }
  // Bounded: the history keeps the busiest tags only (segment.max_tags may be 10,000).
  constexpr std::size_t kUiTags = 20;
  if (sample.tags.size() > kUiTags) {
    std::partial_sort(sample.tags.begin(), sample.tags.begin() + kUiTags, sample.tags.end(),
                      [](const auto& a, const auto& b) { return a.second > b.second; });
    sample.tags.resize(kUiTags);
  }
  std::lock_guard lock(ui_mu_);
  ui_history_.push_back(std::move(sample));
  while (ui_history_.size() > 601) ui_history_.pop_front();
}

std::string Service::UiJson() {
  std::vector<UiSample> history;
  {
    std::lock_guard lock(ui_mu_);
    history.assign(ui_history_.begin(), ui_history_.end());
  }
  // Rates between consecutive samples.
  std::string points = "[";
  for (std::size_t i = 1; i < history.size(); ++i) {
    const UiSample &a = history[i - 1], &b = history[i];
    const double dt = std::max<double>(1, static_cast<double>(b.t_ms - a.t_ms)) / 1000.0;
    auto rate = [&](std::uint64_t x, std::uint64_t y) {
      return y >= x ? static_cast<double>(y - x) / dt : 0.0;
    };
    std::string tags = "{";
    for (const auto& [tag, n] : b.tags) {
      std::uint64_t before = n;
      for (const auto& [t0, n0] : a.tags) {
        if (t0 == tag) before = n0;
      }
      if (tags.size() > 1) tags += ',';
      tags += fmt::format("{}:{:.1f}", JsonString(tag), rate(before, n));
    }
    tags += '}';
    if (points.size() > 1) points += ',';
    points += fmt::format(
        "{{\"t\":\"{}\",\"snowflake\":{:.1f},\"segments\":{},\"requests\":{:.1f},"
        "\"connections\":{}}}",
        FormatUtcMillis(b.t_ms), rate(a.snowflake, b.snowflake), tags, rate(a.requests, b.requests),
        b.connections);
  }
  points += ']';
  // The tags whose buffers are lowest first, at most 50 (segment.max_tags may be 10,000).
  std::vector<std::pair<const SegmentSequence*, SegmentStats>> tags;
  for (const SegmentSequence* q : segments_->Sequences()) tags.emplace_back(q, q->stats());
  auto fill = [](const SegmentStats& st) {
    return st.step > 0 ? static_cast<double>(st.remaining) / static_cast<double>(st.step) : 0.0;
  };
  std::stable_sort(tags.begin(), tags.end(),
                   [&](const auto& a, const auto& b) { return fill(a.second) < fill(b.second); });
  if (tags.size() > 50) tags.resize(50);
  std::string segments = "[";
  for (const auto& [q, st] : tags) {
    if (segments.size() > 1) segments += ',';
    segments += fmt::format(
        "{{\"tag\":{},\"remaining\":{},\"step\":{},\"issued\":{},\"waits\":{},"
        "\"store_errors\":{}}}",
        JsonString(q->tag()), st.remaining, st.step, st.issued, st.waits, st.fetch_errors);
  }
  segments += ']';
  const SnowflakeStats st = generator().stats();
  const WorkerInfo w = worker();
  const std::int64_t now = clock_.NowMillis();
  std::int64_t connections = 0;
  for (const auto& o : open_) connections += o.load();
  return fmt::format(
      "{{\"now\":\"{}\",\"version\":\"{}\",\"uptime_s\":{},\"layout\":{},"
      "\"layout_runs_out\":\"{}\",\"worker\":{{\"source\":\"{}\",\"datacenter_id\":{},"
      "\"worker_id\":{},\"lease_held\":{}}},\"hwm\":\"{}\",\"hwm_ahead_ms\":{},"
      "\"ids_issued\":{},\"clock\":{{\"backwards_events\":{},\"max_backwards_ms\":{},"
      "\"sequence_waits\":{}}},\"connections\":{},\"segments\":{},\"history\":{}}}",
      FormatUtcMillis(now), kVersion, (now - started_ms_) / 1000, JsonString(layout().name()),
      FormatUtcMillis(layout().end_millis()), w.source, w.datacenter_id, w.worker_id,
      lease_lost_.load() ? "false" : "true", FormatUtcMillis(hwm_millis()), hwm_millis() - now,
      ids_issued_.load(), st.clock_backwards_events, st.max_backwards_millis, st.sequence_waits,
      connections, segments, points);
}

std::string Service::MetricsText() {
  std::string out;
  auto family = [&](std::string_view name, std::string_view type, std::string_view help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  const SnowflakeStats st = generator().stats();
  const WorkerInfo w = worker();
  family("sekka_ids_issued_total", "counter", "Ids issued, by engine.");
  out += fmt::format("sekka_ids_issued_total{{engine=\"snowflake\"}} {}\n", ids_issued_.load());
  family("sekka_sequence_waits_total", "counter",
         "Waits for the next tick because a tick's sequence was used up.");
  out += fmt::format("sekka_sequence_waits_total {}\n", st.sequence_waits);
  family("sekka_clock_backwards_total", "counter",
         "Calls that found the clock behind time already used.");
  out += fmt::format("sekka_clock_backwards_total {}\n", st.clock_backwards_events);
  family("sekka_clock_backwards_max_seconds", "gauge", "The largest backward clock step seen.");
  out += fmt::format("sekka_clock_backwards_max_seconds {}\n",
                     static_cast<double>(st.max_backwards_millis) / 1000.0);
  family("sekka_wait_seconds_total", "counter", "Time spent waiting for the clock.");
  out += fmt::format("sekka_wait_seconds_total {}\n", static_cast<double>(st.wait_millis) / 1000.0);
  family("sekka_worker_id", "gauge", "The worker id this process holds.");
  out += fmt::format("sekka_worker_id{{source=\"{}\",datacenter=\"{}\"}} {}\n", w.source,
                     w.datacenter_id, w.worker_id);
  family("sekka_lease_held", "gauge", "1 while this process holds its worker id.");
  out += fmt::format("sekka_lease_held {}\n", lease_lost_.load() ? 0 : 1);
  if (coordinated_) {
    family("sekka_lease_age_seconds", "gauge", "Time since the worker id lease was acquired.");
    out +=
        fmt::format("sekka_lease_age_seconds {:.3f}\n",
                    static_cast<double>(clock_.NowMillis() - lease_acquired_ms_.load()) / 1000.0);
    family("sekka_lease_renew_seconds", "gauge", "Latency of the last lease renewal.");
    out += fmt::format("sekka_lease_renew_seconds {:.6f}\n",
                       static_cast<double>(renew_micros_.load()) / 1e6);
    family("sekka_coordinator_calls_total", "counter",
           "Calls to the coordinator (etcd or ZooKeeper).");
    out += fmt::format("sekka_coordinator_calls_total {}\n", coordinator_calls_.load());
    family("sekka_coordinator_errors_total", "counter", "Coordinator calls that failed.");
    out += fmt::format("sekka_coordinator_errors_total {}\n", coordinator_errors_.load());
    family("sekka_leases_lost_total", "counter", "Times the worker id lease was lost.");
    out += fmt::format("sekka_leases_lost_total {}\n", leases_lost_.load());
  }
  family("sekka_layout_remaining_seconds", "gauge",
         "Time left until the layout's time field runs out (negative: it has).");
  out += fmt::format("sekka_layout_remaining_seconds{{layout=\"{}\"}} {:.0f}\n", layout().name(),
                     static_cast<double>(layout().end_millis() - clock_.NowMillis()) / 1000.0);
  family("sekka_hwm_timestamp_seconds", "gauge", "The persisted high-water mark (Unix time).");
  out += fmt::format("sekka_hwm_timestamp_seconds {:.3f}\n",
                     static_cast<double>(hwm_millis()) / 1000.0);
  family("sekka_hwm_persist_seconds", "histogram",
         "Time to store a high-water mark reservation (the lease, and the data dir's copy).");
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < kPersistBucketsMicros.size(); ++i) {
    cumulative += persist_buckets_[i].load();
    out += fmt::format("sekka_hwm_persist_seconds_bucket{{le=\"{}\"}} {}\n",
                       static_cast<double>(kPersistBucketsMicros[i]) / 1e6, cumulative);
  }
  cumulative += persist_buckets_.back().load();
  out += fmt::format("sekka_hwm_persist_seconds_bucket{{le=\"+Inf\"}} {}\n", cumulative);
  out += fmt::format("sekka_hwm_persist_seconds_sum {}\n",
                     static_cast<double>(persist_micros_total_.load()) / 1e6);
  out += fmt::format("sekka_hwm_persist_seconds_count {}\n", persist_count_.load());
  family("sekka_hwm_persist_errors_total", "counter",
         "Reservations that could not be stored (or copied into the data dir).");
  out += fmt::format("sekka_hwm_persist_errors_total {}\n", persist_errors_.load());
  family("sekka_requests_total", "counter", "Requests, by protocol, command and result.");
  for (int p = 0; p < kProtocols; ++p) {
    for (int c = 0; c < static_cast<int>(Command::kCount_); ++c) {
      for (int r = 0; r < 2; ++r) {
        const std::uint64_t n = counters_[p][c][r].load(std::memory_order_relaxed);
        if (n == 0) continue;
        out +=
            fmt::format("sekka_requests_total{{protocol=\"{}\",command=\"{}\",result=\"{}\"}} {}\n",
                        ProtocolName(static_cast<Protocol>(p)),
                        CommandName(static_cast<Command>(c)), r == 0 ? "ok" : "error", n);
      }
    }
  }
  const std::vector<const SegmentSequence*> tags = segments_->Sequences();
  std::vector<std::pair<std::string, SegmentStats>> seg;
  for (const SegmentSequence* q : tags) seg.emplace_back(q->tag(), q->stats());
  auto per_tag = [&](std::string_view name, std::string_view type, std::string_view help,
                     auto value) {
    family(name, type, help);
    for (const auto& [tag, st] : seg)
      out += fmt::format("{}{{tag=\"{}\"}} {}\n", name, tag, value(st));
  };
  per_tag("sekka_segment_issued_total", "counter", "Segment ids issued (or skipped), by tag.",
          [](const SegmentStats& st) { return st.issued; });
  per_tag("sekka_segment_remaining", "gauge", "Segment ids buffered in this process, by tag.",
          [](const SegmentStats& st) { return st.remaining; });
  per_tag("sekka_segment_step", "gauge", "The step of the last range fetched, by tag.",
          [](const SegmentStats& st) { return st.step; });
  per_tag("sekka_segment_fetches_total", "counter", "Ranges fetched from the store, by tag.",
          [](const SegmentStats& st) { return st.fetches; });
  per_tag("sekka_segment_fetch_seconds_total", "counter", "Time spent fetching ranges, by tag.",
          [](const SegmentStats& st) { return static_cast<double>(st.fetch_micros_total) / 1e6; });
  per_tag("sekka_segment_store_errors_total", "counter", "Failed range fetches, by tag.",
          [](const SegmentStats& st) { return st.fetch_errors; });
  per_tag("sekka_segment_waits_total", "counter", "Callers that found both buffers empty, by tag.",
          [](const SegmentStats& st) { return st.waits; });
  per_tag("sekka_segment_unavailable_total", "counter", "Callers that gave up at the deadline.",
          [](const SegmentStats& st) { return st.unavailable; });
  family("sekka_connections_open", "gauge", "Open client connections, by protocol.");
  for (int p = 0; p < kProtocols; ++p) {
    out += fmt::format("sekka_connections_open{{protocol=\"{}\"}} {}\n",
                       ProtocolName(static_cast<Protocol>(p)), open_[p].load());
  }
  family("sekka_connections_rejected_total", "counter",
         "Connections refused at the connection limit.");
  for (int p = 0; p < kProtocols; ++p) {
    out += fmt::format("sekka_connections_rejected_total{{protocol=\"{}\"}} {}\n",
                       ProtocolName(static_cast<Protocol>(p)), rejected_[p].load());
  }
  return out;
}

}  // namespace sekka::server
