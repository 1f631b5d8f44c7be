// server/service.h
//
// The server's protocol-neutral core: the generator with its worker id and high-water mark,
// readiness, info and metrics. HTTP and RESP handlers (server/http_handler.cc,
// server/resp_handler.cc) call it and format its results; the mapping of errors to HTTP statuses
// and RESP prefixes lives here, once.
//
// Thread-safety: every method may be called from any thread.

#ifndef SEKKA_SERVER_SERVICE_H_
#define SEKKA_SERVER_SERVICE_H_

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "sekka/codec.h"
#include "sekka/data_dir.h"
#include "sekka/leased_generator.h"
#include "sekka/machines.h"
#include "sekka/opaque.h"
#include "sekka/random_id.h"
#include "sekka/segment.h"
#include "sekka/snowflake.h"
#include "sekka/uuid.h"
#include "sekka/worker_lease.h"
#include "server/config.h"
#include "server/log.h"
#include "server/strict_tags.h"
#include "server/tag_series.h"

namespace sekka::server {

struct MetricsWriter;  // server/metrics.cc

inline constexpr const char* kVersion = SEKKA_VERSION;  // from CMakeLists.txt

// How an error travels on each protocol.
struct WireError {
  int http_status = 500;
  std::string_view http_code;    // "invalid_argument", ...
  std::string_view resp_prefix;  // "ERR", "CLOCKBACKWARDS", ...
};
WireError MapError(ErrorCode code);

enum class Protocol { kHttp = 0, kResp = 1, kThrift = 2 };
inline constexpr int kProtocols = 3;
std::string_view ProtocolName(Protocol protocol);
// Why the server closed a connection itself (sekka_connections_shed_total{reason}).
enum class ShedReason {
  kRequestTimeout = 0,   // a request not whole within server.request_timeout
  kSlowSender = 1,       // a partial request's connection, to make room at max_connections
  kMemory = 2,           // the connection buffering the most, past server.max_buffer_mib
  kAuthFailure = 3,      // wrong credentials (AUTH, HELLO AUTH, a bearer token)
  kTlsHandshake = 4,     // a TLS handshake that failed (no or a wrong client certificate, not TLS)
  kAuthTimeout = 5,      // no token presented within server.auth_timeout (server.auth_token set)
  kUnauthenticated = 6,  // a connection that presented no token, to make room for a new one
  kIdle = 7,             // the connection idle longest, to make room at max_connections (no token)
};
inline constexpr int kShedReasons = 8;
std::string_view ShedReasonName(ShedReason reason);
// Commands counted in sekka_requests_total.
enum class Command {
  kId,
  kIds,
  kDecode,
  kSegment,
  kInfo,
  kHealth,
  kReady,
  kMetrics,
  kLeafSnowflake,
  kLeafSegment,
  kLeafDecode,
  kPing,
  kEcho,
  kAuth,
  kHello,
  kCommand,
  kClient,
  kQuit,
  kSegmentRange,
  kSegmentCreate,
  kSegmentAdmin,  // SEG.TAGS, SEG.STEP, SEG.DELETE, /v1/tags
  kStrict,        // STRICT.NEXT, STRICT.BATCH, STRICT.FORWARDED, /v1/strict
  kWorker,        // Thrift get_worker_id, get_datacenter_id, get_timestamp
  kMachine,       // machine ids for CosId clients
  kOpaque,        // OPAQUE.ENCODE, OPAQUE.DECODE, /v1/opaque/...
  kUuid,          // UUID.NEXT, UUID.BATCH, /v1/uuid(s)
  kUlid,          // ULID.NEXT, ULID.BATCH, /v1/ulid(s)
  kRandom,        // RANDOM.NEXT, RANDOM.BATCH, /v1/random(s)
  kOther,
  kCount_
};
std::string_view CommandName(Command command);

// The worker id the service issues ids with now (it can change after a lost lease).
struct WorkerInfo {
  std::string source;
  std::int64_t datacenter_id = 0;
  std::int64_t worker_id = 0;
};

// A range of segment ids handed to a client that issues them itself (tinyid's nextSegmentId,
// CosId's nextMaxId): the ids in [range.begin, range.end) congruent to `remainder` mod `delta`.
struct SegmentGrant {
  IdRange range;
  std::int64_t delta = 1;
  std::int64_t remainder = 0;
};

// The parts a service is built from, every one required: the service opens nothing itself. The
// command line opens the real ones (cli/serve.cc); tests and the simulation pass memory ones
// and a FakeClock.
struct ServiceParts {
  Clock* clock = nullptr;  // must outlive the service
  // The worker-id lease of worker.source (backends/local_worker_lease.h for static, local and
  // hostname; a coordinator's for etcd and zookeeper).
  std::unique_ptr<WorkerLease> lease;
  // The data dir's states (backends/state_file.h: files under data.dir).
  std::unique_ptr<DataDir> data_dir;
  // segment.store (backends/segment_store_uri.h).
  std::unique_ptr<SegmentStore> segment_store;
  // The CosId machine ids (backends/machine_stores.h: the coordinator's, or the file
  // `machines` in data.dir).
  std::unique_ptr<MachineStore> machine_store;
  // The clock that judges when a machine id's holding lapsed (null: `clock`). The simulation
  // gives every server one (which steps back and ahead), so that its check of machine ids has
  // one time to judge by: servers whose clocks differ by X can hand a lapsed id out up to X
  // early, as docs/operations.md says.
  Clock* machine_clock = nullptr;
  // Why this server must not answer /machines ("" = it may): its store is its own file and it
  // is one of several servers (cli/serve.cc says how it knows).
  std::string machines_refusal;
  // False: no background thread, and no segment fetcher threads; the caller calls
  // RunBackgroundOnce(), which also makes the segment fetches (tests, simulation).
  bool background_thread = true;
  // Strict ids (server/strict_tags.h): off when its functions are empty (a worker.source
  // without a coordinator).
  StrictCoordination strict;
};

class Service {
 public:
  // Starts the snowflake engine (a LeasedGenerator over `parts.lease` and `parts.data_dir`: the
  // worker id, the wait past the stored high-water marks, the first hwm) and the other engines.
  // Errors: kInvalidArgument (configuration, a stored state of another layout), kUnavailable
  // (worker id held, coordinator unreachable, the clock too far behind the high-water mark),
  // kExhausted (no free worker id), kInternal (the data dir).
  static Result<std::unique_ptr<Service>> Start(const ServerConfig& config, ServiceParts parts);
  ~Service();

  // Errors: kLeaseLost, kUnavailable (no hwm stored), kClockMovedBackwards, kExhausted.
  Result<Id> NextId() {
    Result<Id> id = leased_->NextId();
    if (id.ok()) ids_issued_.fetch_add(1, std::memory_order_relaxed);
    return id;
  }
  Status NextIds(std::span<Id> out) {
    Status s = leased_->NextIds(out);
    if (s.ok()) ids_issued_.fetch_add(out.size(), std::memory_order_relaxed);
    return s;
  }
  Result<DecodedId> Decode(Id id) const { return DecodeId(id, layout()); }
  // Ids of a segment tag; an unknown one is created first when `may_create` and
  // segment.auto_create. Errors: kNotFound (unknown tag), kInvalidArgument (bad tag name),
  // kUnavailable (the store), kExhausted.
  Status NextSegmentIds(std::string_view tag, std::span<std::int64_t> out, bool may_create);
  // A range of `step` ids of `tag` (0: the tag's own step) straight from the store, never
  // from this process's buffers, for a client that issues them itself. Errors: as
  // NextSegmentIds, and kInvalidArgument for a step outside 1 to segment.max_step, or, when
  // `dense` (the client issues every id of the range), for a tag of delta > 1.
  Result<SegmentGrant> AllocateSegmentRange(std::string_view tag, std::int64_t step,
                                            bool dense = false);
  // Creates a tag in the store for a client: only with segment.auto_create, and at most
  // segment.max_tags per process. Errors: kAlreadyExists, kNotFound (auto-create is off and the
  // tag does not exist), kExhausted, kInvalidArgument, kUnavailable.
  Status CreateSegmentTag(const TagInfo& tag);
  // Tag administration (SEG.TAGS, SEG.STEP, SEG.DELETE and /v1/tags), straight on the store.
  // `tag`'s row, or when `tag` is empty a page of kTagsPage tags named after `after`, each with
  // what this server holds of it, as JSON: {"tags":[{"tag":..,"next_id":"..","step":..,
  // "delta":..,"remainder":..,"served":{..}|null}],"next_after":".."|null} (next_after: where the
  // next page starts, when this one is full). Errors: kNotFound, kInvalidArgument (a bad name),
  // kUnavailable.
  static constexpr std::size_t kTagsPage = 1000;
  Result<std::string> SegmentTagsJson(std::string_view tag, std::string_view after = "");
  // A page of the store's rows: `rows` tags named after `after` ("": from the first).
  // Errors: kInvalidArgument (a bad `after`), kUnavailable.
  Result<std::vector<TagInfo>> SegmentTagRows(std::string_view after, std::size_t rows);
  // The tags this process serves, with their buffers and counters, in name order.
  std::vector<std::pair<std::string, SegmentStats>> ServedSegments() const;
  // tinyid's per-bizType tokens (SegmentStore::has_peer_tokens): on when the store keeps them;
  // then a thread reads them at start and every minute (as tinyid does), every 5 s while reads
  // fail.
  bool tinyid_tokens_on() const { return segment_store_->has_peer_tokens(); }
  // True when tiny_id_token, as last read, lets `token` ask for `tag`; false before a read
  // succeeded.
  bool TinyidTokenAllows(std::string_view tag, std::string_view token) const;
  // The store's SetStep and DeleteTag (segment.h), as JSON of one tag: after the change, and as it
  // was before the delete. Errors: theirs.
  Result<std::string> SetSegmentStep(std::string_view tag, std::int64_t step);
  Result<std::string> DeleteSegmentTag(std::string_view tag);
  // Strict ids (STRICT.NEXT, /v1/strict): `n` consecutive ids of `tag`, the first returned.
  // Errors: kInvalidArgument, kUnavailable (strict ids are off: no coordinator; no leader),
  // kExhausted.
  Result<std::int64_t> NextStrict(std::string_view tag, std::int64_t n);
  // The same, answered through `done` with no thread waiting (StrictTags::NextAsync); false
  // when only NextStrict can answer.
  bool NextStrictAsync(std::string_view tag, std::int64_t n, std::uint64_t requests,
                       StrictTags::Done done) {
    return strict_ != nullptr && strict_->NextAsync(tag, n, requests, std::move(done));
  }
  // The same, only from this server's own leadership (a forwarded call). Errors: kLeaseLost
  // when this server does not lead `tag`, and NextStrict's.
  Result<std::int64_t> NextStrictAsLeader(std::string_view tag, std::int64_t n);
  // True when NextStrict(tag, n) would not wait for the coordinator or another server.
  bool StrictReady(std::string_view tag, std::int64_t n) {
    return strict_ != nullptr && strict_->Ready(tag, n);
  }
  // STRICT.CREATE: declares a strict tag for the cluster (StrictTags::Declare); false when it
  // was declared already.
  Result<bool> DeclareStrictTag(std::string_view tag);
  // Where other servers forward strict calls to this one: its RESP address.
  void SetStrictAddress(const std::string& resp_address);
  // How the server's event loops do their I/O (Server::io, io_refused), for /v1/info. Before
  // the server runs.
  void SetIo(std::string io, std::string refused) {
    io_ = std::move(io);
    io_refused_ = std::move(refused);
  }
  const StrictTags* strict_tags() const { return strict_.get(); }
  // Ids the other engines issued (snowflake ids count themselves), for sekka_ids_issued_total.
  enum class Engine { kSegment = 0, kRandom = 1, kUuid = 2, kUlid = 3 };
  void CountIssued(Engine engine, std::uint64_t n) {
    issued_[static_cast<int>(engine)].fetch_add(n, std::memory_order_relaxed);
  }
  // UUIDv7 and ULID, from the service's clock.
  TimeOrderedGenerator& uuids() { return uuids_; }
  TimeOrderedGenerator& ulids() { return ulids_; }
  // Opaque ids (opaque.key_file); null when none is configured.
  const OpaqueCodec* opaque() const { return opaque_.get(); }
  // Random ids (random.layout), and their opaque codec (null without opaque.key_file).
  RandomIdGenerator& randoms() { return *randoms_; }
  const Layout& random_layout() const { return randoms_->layout(); }
  const OpaqueCodec* random_opaque() const { return random_opaque_.get(); }
  // The machine ids handed to CosId clients. Errors: kUnavailable when the store could not be
  // read at start.
  Result<MachineRegistry*> machines();
  // True when `n` ids of `tag` are buffered, so NextSegmentIds will not wait for the store.
  bool SegmentBuffered(std::string_view tag, std::int64_t n) const {
    return segments_->Buffered(tag, n);
  }

  // OK when ids can be issued now. Errors: kClockMovedBackwards, kLeaseLost, kUnavailable
  // (the hwm could not be stored), kExhausted (the layout ran out).
  Status Ready();
  std::string InfoJson();
  // /metrics: rendered at most once a second (kMetricsCacheMs; the cached text meanwhile),
  // with series of their own for server.metrics_tags tags at most.
  std::string MetricsText();
  static constexpr std::int64_t kMetricsCacheMs = 1000;
  // The status page's data (/ui/data): the state now and, per second over the last ten
  // minutes, ids issued by engine and tag, requests and connections.
  std::string UiJson();
  // Records a sample for UiJson when a second has passed since the last (the background
  // thread calls it; tests may too).
  void SampleUi();

  void CountRequest(Protocol protocol, Command command, bool ok) {
    counters_[static_cast<int>(protocol)][static_cast<int>(command)][ok ? 0 : 1].fetch_add(
        1, std::memory_order_relaxed);
  }
  void ConnectionOpened(Protocol p) { open_[static_cast<int>(p)].fetch_add(1); }
  void ConnectionClosed(Protocol p) { open_[static_cast<int>(p)].fetch_sub(1); }
  void ConnectionRejected(Protocol p) { rejected_[static_cast<int>(p)].fetch_add(1); }
  // A connection the server closed because it broke a limit (connection.cc and server.cc say
  // which).
  void ConnectionShed(ShedReason r) { shed_[static_cast<int>(r)].fetch_add(1); }

  const ServerConfig& config() const { return config_; }
  // The service's clock (the server's limits read its monotonic time: server/admission.h).
  Clock& clock() const { return clock_; }
  const Layout& layout() const { return config_.generator.layout; }
  WorkerInfo worker() const;
  // The wall clock, in Unix milliseconds (Thrift's get_timestamp).
  std::int64_t now_millis() const { return clock_.NowMillis(); }
  std::int64_t hwm_millis() const { return leased_->hwm_millis(); }
  // The generator ids come from now. One that a lost lease replaced stays alive (and refuses
  // ticks past the hwm stored for it) until the service ends.
  Snowflake& generator() const { return leased_->generator(); }

  // One round of the background work: the leased generator's (renew, re-acquire, store the
  // next hwm) and the status page's sample. The background thread calls it every 100 ms;
  // without one (ServiceParts::background_thread) the caller does.
  void RunBackgroundOnce();

  // Stops the background thread and gives the worker id back.
  void Stop();

 private:
  Service(const ServerConfig& config, Clock& clock);
  // Start's steps: opaque ids' codecs and the random ids' generator (a configured key file
  // that is unusable stops the start); the snowflake engine on `lease`; the segment engine on
  // the parts' store (and tinyid's tokens, where the store keeps them).
  Status StartIdCodecs();
  Status StartSnowflake(std::unique_ptr<WorkerLease> lease);
  void StartSegments(ServiceParts& parts);
  // The leased generator's log lines, repeating failures limited to one per 10 s.
  void LeaseLogLine(LeaseLogLevel level, std::string_view message, const std::string& fields,
                    bool repeats);
  std::string LeaseJson();
  // MetricsText's parts (server/metrics.cc).
  void AppendIdMetrics(MetricsWriter& w);
  void AppendLeaseMetrics(MetricsWriter& w);
  void AppendRequestMetrics(MetricsWriter& w);
  void AppendSegmentMetrics(MetricsWriter& w);
  void AppendStrictMetrics(MetricsWriter& w);
  // The sequence of `tag` this process serves, or null.
  const SegmentSequence* Served(std::string_view tag) const;
  void AppendConnectionMetrics(MetricsWriter& w);
  bool stopping();

  ServerConfig config_;
  Clock& clock_;
  const bool coordinated_;  // worker.source etcd or zookeeper
  std::unique_ptr<DataDir> data_dir_;
  std::unique_ptr<LeasedGenerator> leased_;  // the snowflake engine
  std::unique_ptr<SegmentStore> segment_store_;
  std::unique_ptr<SegmentAllocator> segments_;  // destroyed before segment_store_
  std::unique_ptr<StrictTags> strict_;          // null: strict ids are off
  std::unique_ptr<OpaqueCodec> opaque_;
  std::unique_ptr<OpaqueCodec> random_opaque_;
  std::unique_ptr<RandomIdGenerator> randoms_;
  TimeOrderedGenerator uuids_{clock_, TimeOrderedKind::kUuidV7};
  TimeOrderedGenerator ulids_{clock_, TimeOrderedKind::kUlid};
  std::unique_ptr<MachineStore> machine_store_;
  std::unique_ptr<MachineRegistry> machines_;
  std::string machines_refusal_;  // ServiceParts::machines_refusal
  const std::int64_t started_ms_;

  std::atomic<std::uint64_t> ids_issued_{0};            // snowflake
  std::array<std::atomic<std::uint64_t>, 4> issued_{};  // by Engine
  std::atomic<std::int64_t> tags_created_{0};           // by clients (CreateSegmentTag)
  std::array<
      std::array<std::array<std::atomic<std::uint64_t>, 2>, static_cast<int>(Command::kCount_)>,
      kProtocols>
      counters_{};
  std::array<std::atomic<std::int64_t>, kProtocols> open_{};
  std::array<std::atomic<std::uint64_t>, kProtocols> rejected_{};
  std::array<std::atomic<std::uint64_t>, kShedReasons> shed_{};

  // The status page's history (SampleUi), a sample a second for ten minutes.
  struct UiSample {
    std::int64_t t_ms = 0;
    std::uint64_t snowflake = 0;  // ids issued, cumulative
    std::uint64_t requests = 0;   // requests, cumulative
    std::int64_t connections = 0;
    std::vector<std::pair<std::string, std::uint64_t>> tags;  // segment ids issued, cumulative
  };
  std::mutex ui_mu_;
  std::mutex metrics_mu_;           // MetricsText's cache:
  std::string metrics_text_;        //   the text last rendered, guarded by metrics_mu_
  std::int64_t metrics_at_ms_ = 0;  //   and when (monotonic), guarded by metrics_mu_
  TagSeries metrics_tags_;  // which tags have /metrics series of their own; guarded by metrics_mu_
  std::deque<UiSample> ui_history_;  // guarded by ui_mu_
  std::int64_t ui_last_mono_ = -1;   // guarded by ui_mu_

  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  std::mutex log_mu_;
  // One limiter per repeating lease message. Guarded by log_mu_.
  std::map<std::string, LogLimiter, std::less<>> repeating_logs_;
  std::thread reserver_;
  // tinyid's tokens: token -> the tags it may ask for, as last read; guarded by tokens_mu_.
  // Reads them once; false (logged) when the read failed.
  bool ReadTinyidTokens();
  // tokens_thread_: reads them again a minute after a read, 5 s after a failed one.
  void RereadTinyidTokens(bool read);
  mutable std::mutex tokens_mu_;
  std::map<std::string, std::set<std::string, std::less<>>, std::less<>> tinyid_tokens_;
  std::thread tokens_thread_;
  std::string io_;          // SetIo
  std::string io_refused_;  // SetIo
};

}  // namespace sekka::server

#endif  // SEKKA_SERVER_SERVICE_H_
