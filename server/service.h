// server/service.h
//
// The server's protocol-neutral core: the generator with its worker id and high-water mark,
// readiness, info and metrics. HTTP and RESP handlers (server/handlers.cc) call it and format
// its results; the mapping of errors to HTTP statuses and RESP prefixes lives here, once.
//
// Thread-safety: every method may be called from any thread.

#ifndef SEKKA_SERVER_SERVICE_H_
#define SEKKA_SERVER_SERVICE_H_

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "sekka/codec.h"
#include "sekka/segment.h"
#include "sekka/snowflake.h"
#include "sekka/worker_lease.h"
#include "server/config.h"
#include "server/worker_id.h"

namespace sekka::server {

// How an error travels on each protocol.
struct WireError {
  int http_status = 500;
  std::string_view http_code;    // "invalid_argument", ...
  std::string_view resp_prefix;  // "ERR", "CLOCKBACKWARDS", ...
};
WireError MapError(ErrorCode code);

enum class Protocol { kHttp = 0, kResp = 1 };
// Commands counted in sekka_requests_total.
enum class Command {
  kId, kIds, kDecode, kSegment, kInfo, kHealth, kReady, kMetrics, kLeafSnowflake,
  kLeafSegment, kLeafDecode, kPing, kEcho, kAuth, kHello, kCommand, kClient, kQuit, kOther,
  kCount_
};
std::string_view CommandName(Command command);

// The worker id the service issues ids with now (it can change after a lost lease).
struct WorkerInfo {
  std::string source;
  std::int64_t datacenter_id = 0;
  std::int64_t worker_id = 0;
};

class Service {
 public:
  // Claims the worker id (locally, or as a lease at etcd or ZooKeeper), checks and waits out
  // the stored high-water mark (the local one and the coordinator's), creates the generator and
  // makes the first reservation. Errors: kInvalidArgument (configuration, a stored state of
  // another layout), kUnavailable (worker id held, coordinator unreachable, the clock too far
  // behind the high-water mark), kExhausted (no free worker id), kInternal (the data dir).
  static Result<std::unique_ptr<Service>> Start(const ServerConfig& config, Clock& clock,
                                                const std::string& identity);
  ~Service();

  Result<Id> NextId();
  Status NextIds(std::span<Id> out);
  Result<DecodedId> Decode(Id id) const { return DecodeId(id, layout()); }
  // Ids of a segment tag. Errors: kNotFound (unknown tag, unless segment.auto_create),
  // kInvalidArgument (bad tag name), kUnavailable (the store), kExhausted.
  Status NextSegmentIds(std::string_view tag, std::span<std::int64_t> out);

  // True when ids can be issued now; otherwise `reason` says why.
  bool Ready(std::string* reason);
  std::string InfoJson();
  std::string MetricsText();

  void CountRequest(Protocol protocol, Command command, bool ok) {
    counters_[static_cast<int>(protocol)][static_cast<int>(command)][ok ? 0 : 1].fetch_add(
        1, std::memory_order_relaxed);
  }
  void ConnectionOpened(Protocol p) { open_[static_cast<int>(p)].fetch_add(1); }
  void ConnectionClosed(Protocol p) { open_[static_cast<int>(p)].fetch_sub(1); }
  void ConnectionRejected(Protocol p) { rejected_[static_cast<int>(p)].fetch_add(1); }

  const ServerConfig& config() const { return config_; }
  const Layout& layout() const { return config_.generator.layout; }
  WorkerInfo worker() const;
  bool coordinated() const { return lease_ != nullptr; }
  std::int64_t hwm_millis() const { return hwm_millis_.load(); }

  // Persists the final reservation and stops the background thread.
  void Stop();

 private:
  Service(const ServerConfig& config, Clock& clock);
  Result<std::int64_t> PersistThrough(std::int64_t tick);
  void KeepReserving();
  void NoteResult(const Error& error);
  Error LeaseLostError();
  std::string LeaseJson();
  Snowflake& generator() const { return *generator_.load(std::memory_order_acquire); }
  // Coordinated mode (worker.source etcd or zookeeper); all but CheckConfirmed run on the
  // reserver thread (or in Start, before it exists).
  Result<std::int64_t> CheckConfirmed(std::int64_t tick);  // reserve_ticks: no I/O
  Status ExtendReservation();
  // Counts a coordinator call; a failure is logged and kept for /readyz and /v1/info.
  Status CoordinatorCall(const char* what, Status status);
  void MarkLost(const std::string& why);
  void TryReacquire();
  void KeepLease();
  Result<std::unique_ptr<Snowflake>> NewGenerator(std::int64_t datacenter_id,
                                                  std::int64_t worker_id,
                                                  std::int64_t start_after_tick);

  ServerConfig config_;
  Clock& clock_;
  std::unique_ptr<WorkerIdClaim> claim_;   // local sources
  std::unique_ptr<WorkerLease> lease_;     // etcd, zookeeper
  int data_dir_lock_ = -1;                 // coordinated: one process per data dir
  std::string state_path_;                 // reserver thread (and Start)
  std::atomic<Snowflake*> generator_{nullptr};
  std::vector<std::unique_ptr<Snowflake>> generators_;  // every one made; reserver thread
  std::atomic<std::int64_t> datacenter_id_{0};
  std::atomic<std::int64_t> worker_id_{0};
  // Coordinated mode.
  std::atomic<bool> lease_lost_{false};
  std::atomic<std::int64_t> confirmed_tick_{-1};  // reserved at the coordinator and on disk
  std::atomic<std::int64_t> lease_acquired_ms_{0};
  std::atomic<std::int64_t> renew_micros_{0};     // the last Renew's latency
  std::atomic<std::uint64_t> coordinator_calls_{0};
  std::atomic<std::uint64_t> coordinator_errors_{0};
  std::atomic<std::uint64_t> leases_lost_{0};
  std::chrono::steady_clock::time_point last_renew_ok_{};   // reserver thread
  std::chrono::steady_clock::time_point last_renew_try_{};  // reserver thread
  std::chrono::steady_clock::time_point next_reacquire_{};  // reserver thread
  std::chrono::steady_clock::time_point next_extend_{};     // reserver thread
  std::unique_ptr<SegmentStore> segment_store_;
  std::unique_ptr<SegmentAllocator> segments_;  // destroyed before segment_store_
  const std::int64_t started_ms_;

  std::atomic<std::int64_t> hwm_millis_{0};
  std::atomic<std::uint64_t> ids_issued_{0};
  std::atomic<std::uint64_t> persist_count_{0};
  std::atomic<std::uint64_t> persist_errors_{0};
  std::atomic<std::uint64_t> persist_micros_total_{0};
  static constexpr std::array<std::int64_t, 8> kPersistBucketsMicros = {
      100, 500, 1000, 5000, 10000, 50000, 100000, 1000000};
  std::array<std::atomic<std::uint64_t>, 9> persist_buckets_{};
  std::array<std::array<std::array<std::atomic<std::uint64_t>, 2>,
                        static_cast<int>(Command::kCount_)>, 2>
      counters_{};
  std::array<std::atomic<std::int64_t>, 2> open_{};
  std::array<std::atomic<std::uint64_t>, 2> rejected_{};

  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;       // guarded by mu_
  std::string last_error_;      // guarded by mu_: why ids failed last, for /readyz
  std::string lease_error_;     // guarded by mu_: why the lease was lost or not confirmed
  std::int64_t last_error_ms_ = 0;  // guarded by mu_
  std::thread reserver_;
};

}  // namespace sekka::server

#endif  // SEKKA_SERVER_SERVICE_H_
