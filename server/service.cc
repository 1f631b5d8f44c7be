#include "server/service.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "sekka/secrets.h"
#include "server/http.h"
#include "server/log.h"

namespace sekka::server {
using http::JsonString;

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
  static constexpr std::string_view kNames[] = {"id",
                                                "ids",
                                                "decode",
                                                "segment",
                                                "info",
                                                "healthz",
                                                "readyz",
                                                "metrics",
                                                "leaf_snowflake",
                                                "leaf_segment",
                                                "leaf_decode",
                                                "ping",
                                                "echo",
                                                "auth",
                                                "hello",
                                                "command",
                                                "client",
                                                "quit",
                                                "segment_range",
                                                "segment_create",
                                                "segment_admin",
                                                "strict",
                                                "worker",
                                                "machine",
                                                "opaque",
                                                "uuid",
                                                "ulid",
                                                "random",
                                                "other"};
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
    case ShedReason::kTlsHandshake:
      return "tls_handshake";
    case ShedReason::kAuthTimeout:
      return "auth_timeout";
    case ShedReason::kUnauthenticated:
      return "unauthenticated";
    case ShedReason::kIdle:
      return "idle";
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

Service::~Service() {
  Stop();
  // The allocator's fetcher threads report failures through LeaseLogLine (log_mu_, declared
  // after it): they end here, before any member they use.
  segments_.reset();
}

Result<std::unique_ptr<Service>> Service::Start(const ServerConfig& config, ServiceParts parts) {
  if (parts.clock == nullptr || parts.lease == nullptr || parts.data_dir == nullptr ||
      parts.segment_store == nullptr || parts.machine_store == nullptr) {
    return InvalidArgument(
        "Service::Start needs every part: a clock, a lease, a data dir, a segment store and a "
        "machine store");
  }
  auto service = std::unique_ptr<Service>(new Service(config, *parts.clock));
  Service& s = *service;
  SEKKA_RETURN_IF_ERROR(s.StartIdCodecs());
  s.data_dir_ = std::move(parts.data_dir);
  SEKKA_RETURN_IF_ERROR(s.StartSnowflake(std::move(parts.lease)));
  s.StartSegments(parts);
  if (parts.strict.open_lease) {
    StrictOptions strict;
    strict.ttl = std::chrono::milliseconds(config.lease_ttl_ms);
    strict.window = config.strict_window;
    strict.planted_bug_start_at_bound = parts.strict.planted_bug_start_at_bound;
    s.strict_ = std::make_unique<StrictTags>(std::move(parts.strict), s.clock_, strict,
                                             parts.background_thread, config.strict_tags);
  }
  // Machine ids for CosId clients: a store that cannot be read fails those requests only.
  s.machine_store_ = std::move(parts.machine_store);
  s.machines_ = std::make_unique<MachineRegistry>(
      *s.machine_store_, parts.machine_clock != nullptr ? *parts.machine_clock : s.clock_);
  s.machines_refusal_ = std::move(parts.machines_refusal);
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

Status Service::StartIdCodecs() {
  const Layout& layout = config_.generator.layout;  // its epoch is checked by Snowflake::Create
  // Opaque ids: a key file that is configured but unusable stops the start (kInvalidArgument).
  if (!config_.opaque_key_file.empty()) {
    Result<std::vector<OpaqueKey>> keys = ReadOpaqueKeyFile(config_.opaque_key_file);
    if (!keys.ok()) return InvalidArgument("opaque.key_file: " + keys.error().message);
    Result<std::unique_ptr<OpaqueCodec>> codec = OpaqueCodec::Create(*keys, layout);
    if (!codec.ok()) return InvalidArgument("opaque.key_file: " + codec.error().message);
    opaque_ = std::move(codec).value();
    codec = OpaqueCodec::Create(*keys, config_.random_layout);
    if (!codec.ok()) return InvalidArgument("opaque.key_file: " + codec.error().message);
    random_opaque_ = std::move(codec).value();
  }
  // Random ids: nothing to lease or store; only the layout's epoch is checked.
  Result<std::unique_ptr<RandomIdGenerator>> randoms =
      RandomIdGenerator::Create(config_.random_layout, clock_);
  if (!randoms.ok()) return InvalidArgument("random.layout: " + randoms.error().message);
  randoms_ = std::move(randoms).value();
  return Status::Ok();
}

Status Service::StartSnowflake(std::unique_ptr<WorkerLease> lease) {
  // Snowflake ids: the worker id, the wait past the stored hwms and the first hwm stored, all
  // before the server says it is ready.
  LeasedGeneratorOptions lo;
  lo.generator = config_.generator;
  lo.coordinated = coordinated_;
  lo.ttl_ms = config_.lease_ttl_ms;
  lo.call_timeout_ms = CoordinatorCallTimeoutMs(config_);
  lo.hwm_ahead_ms = kHwmAheadMs;
  lo.max_startup_wait_ms = config_.max_startup_wait_ms;
  lo.after_ms = config_.after_floor_ms;
  lo.after_what = fmt::format("generator.after_id {}", config_.after_id);
  lo.force = config_.force;
  lo.log = [this](LeaseLogLevel level, std::string_view message, const std::string& fields,
                  bool repeats) { LeaseLogLine(level, message, fields, repeats); };
  SEKKA_ASSIGN_OR_RETURN(leased_,
                         LeasedGenerator::Start(lo, clock_, std::move(lease), data_dir_.get()));
  return Status::Ok();
}

void Service::StartSegments(ServiceParts& parts) {
  segment_store_ = std::move(parts.segment_store);
  SegmentOptions segment_options;
  segment_options.wait_deadline = std::chrono::milliseconds(config_.segment_wait_deadline_ms);
  segment_options.max_step = config_.segment_max_step;
  segment_options.max_tags = static_cast<std::size_t>(config_.segment_max_tags);
  // Without a background thread, its owner's RunBackgroundOnce makes the fetches too.
  segment_options.fetch_threads = parts.background_thread;
  segment_options.on_store_error = [this, store = config_.segment_store.shown()](
                                       std::string_view tag, const Error& error) {
    LeaseLogLine(LeaseLogLevel::kWarn, "the segment store failed a call",
                 fmt::format("tag={} store={} error={}", http::JsonString(tag),
                             http::JsonString(store.empty() ? "sqlite in the data dir" : store),
                             http::JsonString(RedactSecrets(error.message))),
                 /*repeats=*/true);
  };
  segments_ = std::make_unique<SegmentAllocator>(*segment_store_, clock_, segment_options);
  if (segment_store_->has_peer_tokens()) {
    // Read before the first request, as tinyid does at start; a failure is retried.
    const bool read = ReadTinyidTokens();
    if (parts.background_thread) {
      tokens_thread_ = std::thread([this, read] { RereadTinyidTokens(read); });
    }
  }
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
  if (strict_ != nullptr && !strict_->ticks_itself()) strict_->Tick();
}

void Service::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (reserver_.joinable()) reserver_.join();
  if (tokens_thread_.joinable()) tokens_thread_.join();
  if (strict_ != nullptr) strict_->StopCalls();  // before the server's loops their answers reach
  // The stored hwm covers every id issued; the id is free for others at once.
  if (leased_ != nullptr) (void)leased_->Stop();
}

bool Service::ReadTinyidTokens() {
  Result<std::vector<PeerToken>> rows = segment_store_->PeerTokens();
  if (!rows.ok()) {
    LeaseLogLine(LeaseLogLevel::kWarn, "tinyid's tokens could not be read",
                 fmt::format("error={}", JsonString(RedactSecrets(rows.error().message))),
                 /*repeats=*/true);
    return false;
  }
  if (rows->size() >= 100'000) {
    LeaseLogLine(LeaseLogLevel::kWarn, "tinyid's tokens: only the first 100,000 rows are read", "",
                 /*repeats=*/true);
  }
  std::map<std::string, std::set<std::string, std::less<>>, std::less<>> tokens;
  for (PeerToken& row : *rows) tokens[std::move(row.token)].insert(std::move(row.tag));
  std::lock_guard lock(tokens_mu_);
  tinyid_tokens_ = std::move(tokens);
  return true;
}

void Service::RereadTinyidTokens(bool read) {
  std::unique_lock lock(mu_);
  while (!wake_.wait_for(lock, std::chrono::seconds(read ? 60 : 5), [this] { return stopping_; })) {
    lock.unlock();
    read = ReadTinyidTokens();
    lock.lock();
  }
}

bool Service::TinyidTokenAllows(std::string_view tag, std::string_view token) const {
  if (token.empty()) return false;  // as tinyid: an empty token is no token
  std::lock_guard lock(tokens_mu_);
  auto it = tinyid_tokens_.find(token);
  return it != tinyid_tokens_.end() && it->second.find(tag) != it->second.end();
}

namespace {
// Why strict requests are refused on a server whose strict ids are off.
Error StrictOff() {
  return Unavailable(
      "strict ids need a coordinator: set worker.source to etcd, zookeeper or redis (every "
      "server of the cluster leads or forwards through it), or local for a server alone");
}
}  // namespace

Result<std::int64_t> Service::NextStrict(std::string_view tag, std::int64_t n) {
  if (strict_ == nullptr) return StrictOff();
  return strict_->Next(tag, n);
}

Result<bool> Service::DeclareStrictTag(std::string_view tag) {
  if (strict_ == nullptr) return StrictOff();
  return strict_->Declare(tag);
}

Result<std::int64_t> Service::NextStrictAsLeader(std::string_view tag, std::int64_t n) {
  if (strict_ == nullptr) return NextStrict(tag, n);
  return strict_->NextAsLeader(tag, n);
}

void Service::SetStrictAddress(const std::string& resp_address) {
  if (strict_ != nullptr) strict_->SetAddress(resp_address);
}

Status Service::NextSegmentIds(std::string_view tag, std::span<std::int64_t> out, bool may_create) {
  Result<SegmentSequence*> seq = segments_->Sequence(tag);
  if (!seq.ok() && seq.error().code == ErrorCode::kNotFound && config_.segment_auto_create &&
      may_create) {
    // One rule for every tag a client creates (SEG.CREATE too): at most segment.max_tags.
    Status created = CreateSegmentTag({std::string(tag), 1, config_.segment_step});
    if (!created.ok() && created.error().code != ErrorCode::kAlreadyExists) {
      return created;
    }
    seq = segments_->Sequence(tag);
  }
  SEKKA_RETURN_IF_ERROR(seq);
  if (out.size() == 1) {
    SEKKA_ASSIGN_OR_RETURN(auto id, (*seq)->NextId());
    out[0] = id;
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
  SEKKA_ASSIGN_OR_RETURN(auto info, segments_->GetTag(tag));
  SEKKA_RETURN_IF_ERROR(CheckServedRow(info));
  if (dense && info.delta != 1) {
    return InvalidArgument(fmt::format(
        "tag \"{}\" issues only ids with id % {} == {}, and this client issues every id of a "
        "range: use a tag with delta 1",
        tag, info.delta, info.remainder));
  }
  // Without a step, the tag's own, within what this server allows (segment.max_step).
  const std::int64_t size = step > 0 ? step : std::min(info.step, config_.segment_max_step);
  SEKKA_ASSIGN_OR_RETURN(auto range, segment_store_->Allocate(tag, size));
  SEKKA_RETURN_IF_ERROR(CheckServedRange(tag, range));
  return SegmentGrant{range, info.delta, info.remainder};
}

Result<MachineRegistry*> Service::machines() {
  if (!machines_refusal_.empty()) return Unavailable(machines_refusal_);
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

namespace {

std::string TagJson(const TagInfo& t, const SegmentSequence* served) {
  std::string out = fmt::format(
      "{{\"tag\":{},\"next_id\":\"{}\",\"step\":{},\"delta\":{},\"remainder\":{},\"served\":",
      JsonString(t.tag), t.next_id, t.step, t.delta, t.remainder);
  if (served == nullptr) return out + "null}";
  const SegmentStats st = served->stats();
  std::string ranges;
  for (const IdRange& r : st.buffered) {
    ranges += fmt::format("{}{{\"begin\":\"{}\",\"end\":\"{}\"}}", ranges.empty() ? "" : ",",
                          r.begin, r.end);
  }
  return out + fmt::format(
                   "{{\"issued\":{},\"remaining\":{},\"step\":{},\"fetches\":{},"
                   "\"fetch_errors\":{},\"ranges\":[{}],\"last_error\":{}}}}}",
                   st.issued, st.remaining, st.step, st.fetches, st.fetch_errors, ranges,
                   JsonString(st.last_error));
}

}  // namespace

const SegmentSequence* Service::Served(std::string_view tag) const {
  for (const SegmentSequence* q : segments_->Sequences()) {
    if (q->tag() == tag) return q;
  }
  return nullptr;
}

Result<std::string> Service::SegmentTagsJson(std::string_view tag, std::string_view after) {
  std::vector<TagInfo> rows;
  bool full = false;
  if (tag.empty()) {
    // One row more than a page says whether another page follows (a full last page said
    // next_after, and the page after it was empty).
    SEKKA_ASSIGN_OR_RETURN(rows, SegmentTagRows(after, kTagsPage + 1));
    full = rows.size() > kTagsPage;
    if (full) rows.resize(kTagsPage);
  } else {
    SEKKA_RETURN_IF_ERROR(ValidateTag(tag));
    SEKKA_ASSIGN_OR_RETURN(auto one, segment_store_->GetTag(tag));
    rows.push_back(std::move(one));
  }
  std::string out = "{\"tags\":[";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i > 0) out += ',';
    out += TagJson(rows[i], Served(rows[i].tag));
  }
  return out + "],\"next_after\":" + (full ? JsonString(rows.back().tag) : "null") + "}";
}

Result<std::vector<TagInfo>> Service::SegmentTagRows(std::string_view after, std::size_t rows) {
  if (!after.empty()) {
    SEKKA_RETURN_IF_ERROR(ValidateTag(after));
  }
  return segment_store_->ListTagsAfter(after, rows);
}

std::vector<std::pair<std::string, SegmentStats>> Service::ServedSegments() const {
  std::vector<std::pair<std::string, SegmentStats>> out;
  for (const SegmentSequence* q : segments_->Sequences()) out.emplace_back(q->tag(), q->stats());
  return out;
}

Result<std::string> Service::SetSegmentStep(std::string_view tag, std::int64_t step) {
  SEKKA_RETURN_IF_ERROR(segments_->SetStep(tag, step));
  SEKKA_ASSIGN_OR_RETURN(auto now, segment_store_->GetTag(tag));
  return TagJson(now, Served(tag));
}

Result<std::string> Service::DeleteSegmentTag(std::string_view tag) {
  SEKKA_RETURN_IF_ERROR(ValidateTag(tag));
  SEKKA_ASSIGN_OR_RETURN(auto was, segment_store_->DeleteTag(tag));
  return TagJson(was, Served(tag));
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
  // The description and the error may quote a coordinator's address (its own messages): each
  // text is redacted alone (over a whole page one '@' would swallow the fields after it).
  return fmt::format(
      "{{\"state\":\"{}\",\"coordinator\":{},\"cluster\":{},\"lease\":{},\"age_s\":{:.3f},"
      "\"renew_ms\":{:.3f},\"ttl_ms\":{},\"coordinator_calls\":{},\"last_error\":{}}}",
      snap.held ? "held" : "lost", JsonString(config_.coordinator.shown()),
      JsonString(config_.cluster), JsonString(RedactSecrets(snap.description)),
      static_cast<double>(clock_.NowMillis() - snap.acquired_millis) / 1000.0,
      static_cast<double>(snap.renew_micros) / 1000.0, config_.lease_ttl_ms, snap.coordinator_calls,
      JsonString(RedactSecrets(snap.lease_error)));
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
      "\"epoch\":\"{}\",\"order\":\"{}\",\"shard_bits\":{},\"reverse_time\":{},\"descending\":{},"
      "\"runs_out\":\"{}\"}},\"random_layout\":{{\"name\":{},\"time_bits\":{},\"random_bits\":{},"
      "\"tick_ms\":{},\"runs_out\":\"{}\"}},\"worker\":{{\"source\":\"{}\","
      "\"datacenter_id\":{},\"worker_id\":{}}},\"lease\":{},"
      "\"hwm\":\"{}\",\"hwm_ms\":{},\"ready\":{},\"reason\":{},\"io\":{},\"io_refused\":{}}}",
      kVersion, (clock_.NowMillis() - started_ms_) / 1000, JsonString(l.name()), l.time_bits(),
      l.datacenter_bits(), l.worker_bits(), l.sequence_bits(), l.tick_millis(),
      FormatUtcMillis(l.epoch_millis()), l.OrderName(), l.shard_bits(),
      l.reverse_time() ? "true" : "false", l.descending() ? "true" : "false",
      FormatUtcMillis(l.end_millis()), JsonString(random_layout().name()),
      random_layout().time_bits(), random_layout().random_bits(), random_layout().tick_millis(),
      FormatUtcMillis(random_layout().end_millis()), w.source, w.datacenter_id, w.worker_id,
      LeaseJson(), FormatUtcMillis(hwm_millis()), hwm_millis(), ready ? "true" : "false",
      JsonString(RedactSecrets(reason)), JsonString(io_), JsonString(io_refused_));
}

}  // namespace sekka::server
