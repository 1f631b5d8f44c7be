#include "server/service.h"

#include <fmt/format.h>

#include <chrono>

#include "backends/segment_store_uri.h"
#include "server/http.h"
#include "server/hwm.h"
#include "server/log.h"

namespace sekka::server {
namespace {

constexpr const char* kVersion = "0.1.0";
// The reservation runs this far ahead of the clock, and is renewed when less than half is left.
constexpr std::int64_t kReserveAheadMs = 2000;

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  out += http::JsonEscape(s);
  out += '"';
  return out;
}

}  // namespace

WireError MapError(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return {400, "invalid_argument", "ERR"};
    case ErrorCode::kNotFound:
      return {404, "not_found", "ERR"};
    case ErrorCode::kUnavailable:
      return {503, "unavailable", "UNAVAILABLE"};
    case ErrorCode::kClockMovedBackwards:
      return {503, "clock_moved_backwards", "CLOCKBACKWARDS"};
    case ErrorCode::kExhausted:
      return {503, "unavailable", "UNAVAILABLE"};
    case ErrorCode::kLeaseLost:
      return {503, "lease_lost", "LEASELOST"};
    case ErrorCode::kInternal:
      return {500, "internal", "ERR"};
  }
  return {500, "internal", "ERR"};
}

std::string_view CommandName(Command command) {
  static constexpr std::string_view kNames[] = {
      "id", "ids", "decode", "segment", "info", "healthz", "readyz", "metrics", "leaf_snowflake",
      "leaf_segment", "leaf_decode", "ping", "echo", "auth", "hello", "command", "client", "quit",
      "other"};
  return kNames[static_cast<int>(command)];
}

Service::Service(const ServerConfig& config, Clock& clock)
    : config_(config), clock_(clock), started_ms_(clock.NowMillis()) {}

Service::~Service() { Stop(); }

Result<std::unique_ptr<Service>> Service::Start(const ServerConfig& config, Clock& clock,
                                                const std::string& identity) {
  auto service = std::unique_ptr<Service>(new Service(config, clock));
  Service& s = *service;
  const Layout& layout = config.generator.layout;  // its epoch is checked by Snowflake::Create

  WorkerIdRequest request;
  request.source = config.worker_source;
  request.data_dir = config.data_dir;
  request.identity = identity;
  request.worker_id = config.worker_id;
  request.datacenter_id = config.datacenter_id;
  Result<std::unique_ptr<WorkerIdClaim>> claim = ClaimWorkerId(request, layout);
  if (!claim.ok()) return std::move(claim).error();
  s.claim_ = std::move(claim).value();
  s.state_path_ = fmt::format("{}/workers/{}.state", config.data_dir, s.claim_->Stem());

  // The stored high-water mark: same layout (unless forced), and the clock must be past it.
  const std::string fingerprint = LayoutFingerprint(layout);
  Result<std::optional<StoredState>> stored = ReadStateFile(s.state_path_);
  if (!stored.ok()) return std::move(stored).error();
  std::int64_t start_after_tick = -1;
  if (stored->has_value()) {
    const StoredState& st = **stored;
    if (st.layout != fingerprint && !config.force) {
      return InvalidArgument(fmt::format(
          "the state in {} was made with layout \"{}\", this configuration has \"{}\": refusing "
          "to start, since ids of the two could collide (set generator.force = true or --force "
          "to start anyway)",
          s.state_path_, st.layout, fingerprint));
    }
    const std::int64_t now = clock.NowMillis();
    if (now <= st.hwm_millis) {
      const std::int64_t gap = st.hwm_millis - now + 1;
      if (gap > config.max_startup_wait_ms) {
        return Unavailable(fmt::format(
            "the clock ({}) is {} ms behind the stored high-water mark ({}) of worker id {} in "
            "{}, more than generator.max_startup_wait ({} ms): refusing to start, as ids could "
            "repeat; fix the clock or raise max_startup_wait",
            FormatUtcMillis(now), gap, FormatUtcMillis(st.hwm_millis), s.claim_->worker_id(),
            s.state_path_, config.max_startup_wait_ms));
      }
      Log(LogLevel::kWarn, "waiting for the clock to pass the stored high-water mark",
          fmt::format("wait_ms={} hwm={} now={}", gap, FormatUtcMillis(st.hwm_millis),
                      FormatUtcMillis(now)));
      while (clock.NowMillis() <= st.hwm_millis) clock.SleepUntilMillis(st.hwm_millis + 1);
    }
    if (st.layout == fingerprint) start_after_tick = layout.MillisToTick(st.hwm_millis);
  }

  SnowflakeOptions options = config.generator;
  options.worker_id = s.claim_->worker_id();
  options.datacenter_id = s.claim_->datacenter_id();
  options.start_after_tick = start_after_tick;
  options.reserve_ticks = [&s](std::int64_t tick) { return s.PersistThrough(tick); };
  Result<std::unique_ptr<Snowflake>> snowflake = Snowflake::Create(options, clock);
  if (!snowflake.ok()) return std::move(snowflake).error();
  s.snowflake_ = std::move(snowflake).value();

  // Segments: the store is opened now (PostgreSQL connects lazily, so a database that is down
  // does not stop the snowflake engine from serving).
  Result<std::unique_ptr<SegmentStore>> store =
      OpenSegmentStore(config.segment_store, config.data_dir);
  if (!store.ok()) return std::move(store).error();
  s.segment_store_ = std::move(store).value();
  SegmentOptions segment_options;
  segment_options.wait_deadline = std::chrono::milliseconds(config.segment_wait_deadline_ms);
  segment_options.max_step = config.segment_max_step;
  s.segments_ = std::make_unique<SegmentAllocator>(*s.segment_store_, clock, segment_options);

  // The first reservation is made before the server says it is ready.
  const std::int64_t ahead = layout.MillisToTick(clock.NowMillis() + kReserveAheadMs);
  if (Status r = s.snowflake_->ReserveTicks(ahead); !r.ok()) return std::move(r).error();
  s.reserver_ = std::thread([&s] { s.KeepReserving(); });
  return service;
}

Result<std::int64_t> Service::PersistThrough(std::int64_t tick) {
  const Layout& l = layout();
  // Reserve at least kReserveAheadMs past the clock, so the disk is touched about once a second.
  const std::int64_t target =
      std::max(tick, l.MillisToTick(clock_.NowMillis() + kReserveAheadMs));
  const std::int64_t hwm = l.TickToMillis(target + 1) - 1;  // the last ms of the tick
  const auto begin = std::chrono::steady_clock::now();
  Status written = WriteStateFile(state_path_, {LayoutFingerprint(l), hwm});
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now() - begin)
                          .count();
  persist_count_.fetch_add(1);
  persist_micros_total_.fetch_add(static_cast<std::uint64_t>(micros));
  std::size_t bucket = 0;
  while (bucket < kPersistBucketsMicros.size() && micros > kPersistBucketsMicros[bucket]) ++bucket;
  persist_buckets_[bucket].fetch_add(1);
  if (!written.ok()) {
    persist_errors_.fetch_add(1);
    Log(LogLevel::kError, "cannot persist the high-water mark",
        fmt::format("error=\"{}\"", written.error().message));
    return Unavailable("cannot persist the high-water mark: " + written.error().message);
  }
  hwm_millis_.store(hwm);
  return target;
}

void Service::KeepReserving() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    const std::int64_t now = clock_.NowMillis();
    if (layout().TickToMillis(snowflake_->reserved_tick() + 1) - now < kReserveAheadMs / 2) {
      Status s = snowflake_->ReserveTicks(layout().MillisToTick(now + kReserveAheadMs));
      (void)s;  // logged and counted by PersistThrough; the generator retries on its own
    }
    lock.lock();
    wake_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stopping_; });
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
}

void Service::NoteResult(const Error& error) {
  std::lock_guard lock(mu_);
  last_error_ = error.message;
  last_error_ms_ = clock_.NowMillis();
}

Result<Id> Service::NextId() {
  Result<Id> id = snowflake_->NextId();
  if (id.ok()) {
    ids_issued_.fetch_add(1, std::memory_order_relaxed);
  } else {
    NoteResult(id.error());
  }
  return id;
}

Status Service::NextIds(std::span<Id> out) {
  Status s = snowflake_->NextIds(out);
  if (s.ok()) {
    ids_issued_.fetch_add(out.size(), std::memory_order_relaxed);
  } else {
    NoteResult(s.error());
  }
  return s;
}

Status Service::NextSegmentIds(std::string_view tag, std::span<std::int64_t> out) {
  Result<SegmentSequence*> seq = segments_->Sequence(tag);
  if (!seq.ok() && seq.error().code == ErrorCode::kNotFound && config_.segment_auto_create) {
    Status created = segment_store_->CreateTag({std::string(tag), 1, config_.segment_step});
    if (!created.ok() && created.error().message.find("already exists") == std::string::npos) {
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

bool Service::Ready(std::string* reason) {
  const Layout& l = layout();
  const std::int64_t now_ms = clock_.NowMillis();
  const std::int64_t now = l.MillisToTick(now_ms);
  if (now > l.max_tick()) {
    *reason = fmt::format("unavailable: layout {} exhausted on {}", l.name(),
                          FormatUtcMillis(l.end_millis()));
    return false;
  }
  const std::int64_t behind_ms = (snowflake_->newest_clock_tick() - now) * l.tick_millis();
  const auto& g = config_.generator;
  if (behind_ms > 0 &&
      (g.on_clock_backwards == ClockBackwardsPolicy::kFail ||
       (g.on_clock_backwards == ClockBackwardsPolicy::kWait &&
        behind_ms > g.max_backwards_wait.count()) ||
       (g.on_clock_backwards == ClockBackwardsPolicy::kContinue &&
        behind_ms > g.max_drift.count() + g.max_backwards_wait.count()))) {
    *reason = fmt::format(
        "clock_moved_backwards: the clock is {} ms behind time already used ({}), more than "
        "policy {} tolerates",
        behind_ms, FormatUtcMillis(l.TickToMillis(snowflake_->newest_clock_tick())),
        ClockBackwardsPolicyName(g.on_clock_backwards));
    return false;
  }
  if (l.TickToMillis(snowflake_->reserved_tick() + 1) <= now_ms) {
    std::lock_guard lock(mu_);
    *reason = "unavailable: the high-water mark cannot be persisted" +
              (last_error_.empty() ? std::string() : ": " + last_error_);
    return false;
  }
  return true;
}

std::string Service::InfoJson() {
  const Layout& l = layout();
  std::string reason;
  const bool ready = Ready(&reason);
  return fmt::format(
      "{{\"version\":\"{}\",\"uptime_s\":{},\"layout\":{{\"name\":{},\"time_bits\":{},"
      "\"datacenter_bits\":{},\"worker_bits\":{},\"sequence_bits\":{},\"tick_ms\":{},"
      "\"epoch\":\"{}\",\"order\":\"{}\",\"runs_out\":\"{}\"}},\"worker\":{{\"source\":\"{}\","
      "\"datacenter_id\":{},\"worker_id\":{}}},\"lease\":{{\"state\":\"{}\"}},"
      "\"hwm\":\"{}\",\"hwm_ms\":{},\"ready\":{},\"reason\":{}}}",
      kVersion, (clock_.NowMillis() - started_ms_) / 1000, JsonString(l.name()), l.time_bits(),
      l.datacenter_bits(), l.worker_bits(), l.sequence_bits(), l.tick_millis(),
      FormatUtcMillis(l.epoch_millis()), l.OrderName(), FormatUtcMillis(l.end_millis()),
      claim_->source(), claim_->datacenter_id(), claim_->worker_id(), "held (local lock file)",
      FormatUtcMillis(hwm_millis()), hwm_millis(), ready ? "true" : "false",
      JsonString(reason));
}

std::string Service::MetricsText() {
  std::string out;
  auto family = [&](std::string_view name, std::string_view type, std::string_view help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  const SnowflakeStats st = snowflake_->stats();
  family("sekka_ids_issued_total", "counter", "Ids issued, by engine.");
  out += fmt::format("sekka_ids_issued_total{{engine=\"snowflake\"}} {}\n", ids_issued_.load());
  family("sekka_sequence_waits_total", "counter", "Waits for the next tick because a tick's sequence was used up.");
  out += fmt::format("sekka_sequence_waits_total {}\n", st.sequence_waits);
  family("sekka_clock_backwards_total", "counter", "Calls that found the clock behind time already used.");
  out += fmt::format("sekka_clock_backwards_total {}\n", st.clock_backwards_events);
  family("sekka_clock_backwards_max_seconds", "gauge", "The largest backward clock step seen.");
  out += fmt::format("sekka_clock_backwards_max_seconds {}\n",
                     static_cast<double>(st.max_backwards_millis) / 1000.0);
  family("sekka_wait_seconds_total", "counter", "Time spent waiting for the clock.");
  out += fmt::format("sekka_wait_seconds_total {}\n", static_cast<double>(st.wait_millis) / 1000.0);
  family("sekka_worker_id", "gauge", "The worker id this process holds.");
  out += fmt::format("sekka_worker_id{{source=\"{}\",datacenter=\"{}\"}} {}\n", claim_->source(),
                     claim_->datacenter_id(), claim_->worker_id());
  family("sekka_lease_held", "gauge", "1 while this process holds its worker id.");
  out += "sekka_lease_held 1\n";
  family("sekka_hwm_timestamp_seconds", "gauge", "The persisted high-water mark (Unix time).");
  out += fmt::format("sekka_hwm_timestamp_seconds {:.3f}\n", static_cast<double>(hwm_millis()) / 1000.0);
  family("sekka_hwm_persist_seconds", "histogram", "Time to persist the high-water mark.");
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
  family("sekka_hwm_persist_errors_total", "counter", "Failed attempts to persist the high-water mark.");
  out += fmt::format("sekka_hwm_persist_errors_total {}\n", persist_errors_.load());
  family("sekka_requests_total", "counter", "Requests, by protocol, command and result.");
  for (int p = 0; p < 2; ++p) {
    for (int c = 0; c < static_cast<int>(Command::kCount_); ++c) {
      for (int r = 0; r < 2; ++r) {
        const std::uint64_t n = counters_[p][c][r].load(std::memory_order_relaxed);
        if (n == 0) continue;
        out += fmt::format("sekka_requests_total{{protocol=\"{}\",command=\"{}\",result=\"{}\"}} {}\n",
                           p == 0 ? "http" : "resp", CommandName(static_cast<Command>(c)),
                           r == 0 ? "ok" : "error", n);
      }
    }
  }
  const std::vector<const SegmentSequence*> tags = segments_->Sequences();
  std::vector<std::pair<std::string, SegmentStats>> seg;
  for (const SegmentSequence* q : tags) seg.emplace_back(q->tag(), q->stats());
  auto per_tag = [&](std::string_view name, std::string_view type, std::string_view help,
                     auto value) {
    family(name, type, help);
    for (const auto& [tag, st] : seg) out += fmt::format("{}{{tag=\"{}\"}} {}\n", name, tag, value(st));
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
  for (int p = 0; p < 2; ++p) {
    out += fmt::format("sekka_connections_open{{protocol=\"{}\"}} {}\n", p == 0 ? "http" : "resp",
                       open_[p].load());
  }
  family("sekka_connections_rejected_total", "counter",
         "Connections refused at the connection limit.");
  for (int p = 0; p < 2; ++p) {
    out += fmt::format("sekka_connections_rejected_total{{protocol=\"{}\"}} {}\n",
                       p == 0 ? "http" : "resp", rejected_[p].load());
  }
  return out;
}

}  // namespace sekka::server
