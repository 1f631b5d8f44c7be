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
    case ErrorCode::kCancelled:  // a closed client's; no server path returns it
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

std::string_view ShedReasonName(ShedReason reason) {
  switch (reason) {
    case ShedReason::kRequestTimeout:
      return "request_timeout";
    case ShedReason::kSlowSender:
      return "slow_sender";
    case ShedReason::kMemory:
      return "memory";
    case ShedReason::kAuthFailure:
      return "auth_failure";
  }
  return "unknown";
}

std::string_view ProtocolName(Protocol protocol) {
  static constexpr std::string_view kNames[] = {"http", "resp", "thrift"};
  static_assert(std::size(kNames) == kProtocols);
  return kNames[static_cast<int>(protocol)];
}

Service::Service(const ServerConfig& config, Clock& clock)
    : config_(config),
      clock_(clock),
      coordinated_(config.coordinated()),
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

  // Snowflake ids: the worker id, the wait past the stored hwms and the first hwm stored, all
  // before the server says it is ready.
  s.data_dir_ = std::move(parts.data_dir);
  LeasedGeneratorOptions lo;
  lo.generator = config.generator;
  lo.coordinated = s.coordinated_;
  lo.ttl_ms = config.lease_ttl_ms;
  lo.call_timeout_ms = CoordinatorCallTimeoutMs(config);
  lo.hwm_ahead_ms = s.coordinated_ ? kCoordinatorHwmAheadMs : kLocalHwmAheadMs;
  lo.max_startup_wait_ms = config.max_startup_wait_ms;
  lo.after_ms = config.after_floor_ms;
  lo.after_what = fmt::format("generator.after_id {}", config.after_id);
  lo.force = config.force;
  lo.log = [&s](LeaseLogLevel level, std::string_view message, const std::string& fields,
                bool repeats) { s.LeaseLogLine(level, message, fields, repeats); };
  Result<std::unique_ptr<LeasedGenerator>> leased =
      LeasedGenerator::Start(lo, clock, std::move(parts.lease), s.data_dir_.get());
  if (!leased.ok()) return std::move(leased).error();
  s.leased_ = std::move(leased).value();

  s.segment_store_ = std::move(parts.segment_store);
  SegmentOptions segment_options;
  segment_options.wait_deadline = std::chrono::milliseconds(config.segment_wait_deadline_ms);
  segment_options.max_step = config.segment_max_step;
  segment_options.max_tags = static_cast<std::size_t>(config.segment_max_tags);
  // Without a background thread, its owner's RunBackgroundOnce makes the fetches too.
  segment_options.fetch_threads = parts.background_thread;
  s.segments_ = std::make_unique<SegmentAllocator>(*s.segment_store_, clock, segment_options);

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

void Service::LeaseLogLine(LeaseLogLevel level, std::string_view message, const std::string& fields,
                           bool repeats) {
  // A coordinator that stays down, or a disk that stays full, writes a line per 10 s.
  std::string line = fields;
  if (repeats) {
    std::lock_guard lock(log_mu_);
    auto it = repeating_logs_.find(message);
    if (it == repeating_logs_.end()) it = repeating_logs_.emplace(message, LogLimiter()).first;
    LogLimiter& limiter = it->second;
    std::uint64_t held = 0;
    if (!limiter.Allow(clock_.MonotonicMillis(), &held)) return;
    line += fmt::format(" similar_lines_held_back={}", held);
  }
  const LogLevel l = level == LeaseLogLevel::kError  ? LogLevel::kError
                     : level == LeaseLogLevel::kWarn ? LogLevel::kWarn
                                                     : LogLevel::kInfo;
  Log(l, message, line);
}

WorkerInfo Service::worker() const {
  const Snowflake& g = generator();
  return WorkerInfo{config_.worker_source, g.datacenter_id(), g.worker_id()};
}

bool Service::stopping() {
  std::lock_guard lock(mu_);
  return stopping_;
}

void Service::RunBackgroundOnce() {
  SampleUi();
  leased_->RunBackgroundOnce([this] { return stopping(); });
  segments_->RunFetches();  // only where it has no fetcher threads
}

void Service::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (reserver_.joinable()) reserver_.join();
  // The stored hwm covers every id issued; the id is free for others at once.
  if (leased_ != nullptr) (void)leased_->Stop();
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
  } else if (Status s = (*seq)->NextIds(out); !s.ok()) {
    return s;
  }
  CountIssued(Engine::kSegment, out.size());
  return Status::Ok();
}

Result<SegmentGrant> Service::AllocateSegmentRange(std::string_view tag, std::int64_t step,
                                                   bool dense) {
  if (step < 0 || step > config_.segment_max_step) {
    return InvalidArgument(fmt::format("step {} is not valid: allowed 1 to {} (segment.max_step)",
                                       step, config_.segment_max_step));
  }
  Result<TagInfo> info = segments_->GetTag(tag);
  if (!info.ok()) return std::move(info).error();
  if (dense && info->delta != 1) {
    return InvalidArgument(fmt::format(
        "tag \"{}\" issues only ids with id % {} == {}, and this client issues every id of a "
        "range: use a tag with delta 1",
        tag, info->delta, info->remainder));
  }
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
  return leased_->Ready();
}

std::string Service::LeaseJson() {
  const LeaseSnapshot snap = leased_->Snapshot();
  return fmt::format(
      "{{\"state\":\"{}\",\"coordinator\":{},\"cluster\":{},\"lease\":{},\"age_s\":{:.3f},"
      "\"renew_ms\":{:.3f},\"ttl_ms\":{},\"coordinator_calls\":{},\"last_error\":{}}}",
      snap.held ? "held" : "lost", JsonString(config_.coordinator), JsonString(config_.cluster),
      JsonString(snap.description),
      static_cast<double>(clock_.NowMillis() - snap.acquired_millis) / 1000.0,
      static_cast<double>(snap.renew_micros) / 1000.0, config_.lease_ttl_ms, snap.coordinator_calls,
      JsonString(snap.lease_error));
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
  const LeaseSnapshot lease = leased_->Snapshot();
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
      lease.held ? "true" : "false", FormatUtcMillis(lease.hwm_millis), lease.hwm_millis - now,
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
  static constexpr const char* kEngines[] = {"segment", "random", "uuid", "ulid"};
  for (int e = 0; e < 4; ++e) {
    out +=
        fmt::format("sekka_ids_issued_total{{engine=\"{}\"}} {}\n", kEngines[e], issued_[e].load());
  }
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
  const LeaseSnapshot snap = leased_->Snapshot();
  family("sekka_lease_held", "gauge", "1 while this process holds its worker id.");
  out += fmt::format("sekka_lease_held {}\n", snap.held ? 1 : 0);
  if (coordinated_) {
    family("sekka_lease_age_seconds", "gauge", "Time since the worker id lease was acquired.");
    out += fmt::format("sekka_lease_age_seconds {:.3f}\n",
                       static_cast<double>(clock_.NowMillis() - snap.acquired_millis) / 1000.0);
    family("sekka_lease_renew_seconds", "gauge", "Latency of the last lease renewal.");
    out += fmt::format("sekka_lease_renew_seconds {:.6f}\n",
                       static_cast<double>(snap.renew_micros) / 1e6);
    family("sekka_coordinator_calls_total", "counter",
           "Calls to the coordinator (etcd or ZooKeeper).");
    out += fmt::format("sekka_coordinator_calls_total {}\n", snap.coordinator_calls);
    family("sekka_coordinator_errors_total", "counter", "Coordinator calls that failed.");
    out += fmt::format("sekka_coordinator_errors_total {}\n", snap.coordinator_errors);
    family("sekka_leases_lost_total", "counter", "Times the worker id lease was lost.");
    out += fmt::format("sekka_leases_lost_total {}\n", snap.leases_lost);
  }
  family("sekka_layout_remaining_seconds", "gauge",
         "Time left until the layout's time field runs out (negative: it has).");
  out += fmt::format("sekka_layout_remaining_seconds{{layout=\"{}\"}} {:.0f}\n", layout().name(),
                     static_cast<double>(layout().end_millis() - clock_.NowMillis()) / 1000.0);
  family("sekka_hwm_timestamp_seconds", "gauge", "The persisted high-water mark (Unix time).");
  out += fmt::format("sekka_hwm_timestamp_seconds {:.3f}\n",
                     static_cast<double>(snap.hwm_millis) / 1000.0);
  family("sekka_hwm_persist_seconds", "histogram",
         "Time to store a high-water mark (the lease, and the data dir's copy).");
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < kHwmStoreBucketsMicros.size(); ++i) {
    cumulative += snap.store_buckets[i];
    out += fmt::format("sekka_hwm_persist_seconds_bucket{{le=\"{}\"}} {}\n",
                       static_cast<double>(kHwmStoreBucketsMicros[i]) / 1e6, cumulative);
  }
  cumulative += snap.store_buckets.back();
  out += fmt::format("sekka_hwm_persist_seconds_bucket{{le=\"+Inf\"}} {}\n", cumulative);
  out += fmt::format("sekka_hwm_persist_seconds_sum {}\n",
                     static_cast<double>(snap.store_micros) / 1e6);
  out += fmt::format("sekka_hwm_persist_seconds_count {}\n", snap.stores);
  family("sekka_hwm_persist_errors_total", "counter",
         "High-water marks that could not be stored (or copied into the data dir).");
  out += fmt::format("sekka_hwm_persist_errors_total {}\n", snap.store_errors);
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
  family("sekka_connections_shed_total", "counter",
         "Connections the server closed for breaking a limit, by reason.");
  for (int r = 0; r < kShedReasons; ++r) {
    out += fmt::format("sekka_connections_shed_total{{reason=\"{}\"}} {}\n",
                       ShedReasonName(static_cast<ShedReason>(r)), shed_[r].load());
  }
  return out;
}

}  // namespace sekka::server
