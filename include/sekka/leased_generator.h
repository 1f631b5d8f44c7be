// include/sekka/leased_generator.h
//
// LeasedGenerator is the one place sekka issues snowflake ids under a worker id that another
// process could also take: `sekka serve` (every engine) and `sekka gen` both issue through it,
// and no other code stores a high-water mark (hwm). It owns, for one process:
//  1. the worker id, through a WorkerLease (every source is one: static, hostname, local, etcd,
//     ZooKeeper), the first acquire retried within the start-up budget when a coordinator timed
//     out;
//  2. the start floor: the largest of the lease's hwm, the data dir's copy and an `after` floor
//     (generator.after_id); the clock is waited past it, or the start is refused when that
//     wait is longer than max_startup_wait (CheckStartupWait);
//  3. the hwm: no id of a tick is issued before an hwm at or past that tick was stored by the
//     lease (fenced: only while this process holds the id) and copied into the data dir; hwms
//     reach ahead of the clock as far as the stores take (HwmWindow) and never decrease;
//  4. renewals every TTL / 3; a lease unconfirmed for a whole TTL, or refused, is lost, and no
//     id is issued until a lease is held again;
//  5. re-acquiring after a loss: the same generator goes on only when nobody stored an hwm past
//     its own for that id; otherwise a new generator starts past the new floor. A generator
//     that was replaced stays alive until the end (a thread may still be inside it) and can
//     never issue past the hwm it stored itself.
// From 3 and the lease's fencing (include/sekka/worker_lease.h): every id's tick is at or below
// an hwm its holder stored while holding the id, and every later holder starts above it.
//
// Two ways to run: with RunBackgroundOnce() called every ~100 ms by the owner (the server: an
// id never waits on I/O), or `inline_hwm` (sekka gen: one thread, the hwm is stored when the
// generator reaches it, no further ahead than the ids still to be made need).
//
// Thread-safety: NextId/NextIds/Ready/Snapshot from any thread; Start, RunBackgroundOnce and
// Stop from one thread (the owner's), never at once.

#ifndef SEKKA_LEASED_GENERATOR_H_
#define SEKKA_LEASED_GENERATOR_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sekka/clock.h"
#include "sekka/data_dir.h"
#include "sekka/snowflake.h"
#include "sekka/status.h"
#include "sekka/worker_lease.h"

namespace sekka {

enum class LeaseLogLevel { kInfo, kWarn, kError };
// Where the generator's events go: a message and "key=value ..." fields (server/log.h's shape).
// `repeats` marks a failure that can come every round while it lasts (a coordinator down, a full
// disk): the receiver limits those, by message.
using LeaseLog = std::function<void(LeaseLogLevel level, std::string_view message,
                                    const std::string& fields, bool repeats)>;

struct LeasedGeneratorOptions {
  // The layout and clock rules. Its worker and datacenter ids are checked against the layout
  // before anything is claimed (set them to what the lease was asked for, so that the errors
  // name them), then replaced by the lease's; its hwm fields are this class's.
  SnowflakeOptions generator;
  // True for etcd and ZooKeeper: the lease's hwm is copied into the data dir, the worker id is
  // remembered as preferred, and a timed-out first acquire is asked again.
  bool coordinated = false;
  // A lease not renewed for this long is lost (renewed every ttl / 3).
  std::int64_t ttl_ms = 10'000;
  // One coordinator call's budget: a first acquire that failed kUnavailable after using at least
  // half of it timed out, and is asked again.
  std::int64_t call_timeout_ms = 2'000;
  // The least reach of the stored hwm ahead of the clock (plus the generator's max_drift); it
  // grows with slow stores (HwmWindow).
  std::int64_t hwm_ahead_ms = 4'000;
  // The longest wait past a stored hwm at start or re-acquire; a longer one is refused.
  std::int64_t max_startup_wait_ms = 10'000;
  // A floor besides the hwms, in ms (generator.after_id's time); 0: none. `after_what` names
  // it in messages ("generator.after_id 123").
  std::int64_t after_ms = 0;
  std::string after_what;
  // Start even when the data dir's state was made with another layout (its hwm stays a floor).
  bool force = false;
  // sekka gen: no background work; the hwm is stored from inside the generator, covering at
  // most the ids still to be made (SetIdsLeft).
  bool inline_hwm = false;
  // Events (lease taken, lost, held again, waits, failed calls). Null: none.
  LeaseLog log;
};

// What /v1/info, /ui and /metrics show (the worker id is the generator's: generator()).
struct LeaseSnapshot {
  bool held = true;                  // false while the lease is lost
  std::int64_t hwm_millis = 0;       // the largest hwm stored by this process
  std::int64_t acquired_millis = 0;  // when the lease was last acquired (wall clock)
  std::int64_t renew_micros = 0;     // the last renewal's latency
  std::uint64_t coordinator_calls = 0;
  std::uint64_t coordinator_errors = 0;
  std::uint64_t leases_lost = 0;
  std::string description;  // lease->Describe() as last seen
  std::string lease_error;  // why the lease was lost or not confirmed
  std::string store_error;  // why the last hwm was not stored
  // Stores of the hwm: count, errors, total time and a histogram over kHwmStoreBucketsMicros.
  std::uint64_t stores = 0;
  std::uint64_t store_errors = 0;
  std::uint64_t store_micros = 0;
  std::array<std::uint64_t, 9> store_buckets{};
  std::int64_t reach_ms = 0;  // how far ahead the next hwm reaches now (HwmWindow)
};
inline constexpr std::array<std::int64_t, 8> kHwmStoreBucketsMicros = {
    100, 500, 1000, 5000, 10000, 50000, 100000, 1000000};

// How far ahead of the clock the next hwm reaches, and when it is stored again, from how long
// the last stores took, so that a busy disk or a slow coordinator slows ids at most:
//  1. S is the slowest of the last kHwmStoresRemembered stores (failed ones too).
//  2. The reach is 4 S, at least `least_ms` (hwm_ahead_ms), at most `most_ms`
//     (max_startup_wait - max_drift - 1 s, a second left for a clock step; and not below 1 s):
//     a restart that keeps its id, or the id's next holder, waits past the last hwm within
//     max_startup_wait. Where most_ms is below least_ms, most_ms wins.
//  3. The next hwm is stored when less than max_drift + `margin_ms` is left: half the reach, or
//     2 S where that is more, always leaving 500 ms between stores (at a small reach, half).
//  4. A store reaches past the next one's end while two stores take less than the reach plus
//     max_drift: with the defaults, stores of up to 2.5 s at once from a quiet disk, and of up
//     to 4.5 s once the window has grown, slow ids down to more stores, never a gap. A slower
//     disk stops ids for what each store takes beyond that. (With a coordinator, the renewal
//     on the same thread comes between: about a third less.)
struct HwmWindow {
  std::int64_t reach_ms;
  std::int64_t margin_ms;
};
inline constexpr std::size_t kHwmStoresRemembered = 32;
HwmWindow ComputeHwmWindow(std::int64_t slowest_store_ms, std::int64_t least_ms,
                           std::int64_t most_ms);

class LeasedGenerator {
 public:
  // Takes the worker id, waits past the start floor (renewing meanwhile), makes the generator
  // and stores the first hwm. `data_dir` may be null (sekka gen: the lease's state is the only
  // copy). Errors: kInvalidArgument (options, a data dir state of another layout without
  // force), kUnavailable (id held, coordinator unreachable, a wait longer than allowed),
  // kExhausted (no free worker id), kLeaseLost, kInternal (the data dir).
  static Result<std::unique_ptr<LeasedGenerator>> Start(const LeasedGeneratorOptions& options,
                                                        Clock& clock,
                                                        std::unique_ptr<WorkerLease> lease,
                                                        DataDir* data_dir);
  ~LeasedGenerator();  // releases the lease if Stop was not called

  // Errors: kLeaseLost, kUnavailable (no hwm stored this far), kClockMovedBackwards, kExhausted.
  Result<Id> NextId() {
    if (lost_.load(std::memory_order_acquire)) [[unlikely]]
      return LostError();
    return generator().NextId();
  }
  Status NextIds(std::span<Id> out) {
    if (lost_.load(std::memory_order_acquire)) [[unlikely]]
      return LostError();
    return generator().NextIds(out);
  }
  // inline_hwm: ids still to be made; the next hwm covers no more than these need.
  void SetIdsLeft(std::int64_t n) { ids_left_ = n; }

  // OK when ids can be issued now as far as the lease and the hwm go. Errors: kLeaseLost,
  // kUnavailable (the hwm could not be stored past now).
  Status Ready() const;
  LeaseSnapshot Snapshot() const;
  // Snapshot().hwm_millis alone.
  std::int64_t hwm_millis() const;
  // The generator ids come from now.
  Snowflake& generator() const { return *current_.load(std::memory_order_acquire); }
  const Layout& layout() const { return options_.generator.layout; }

  // One round of the background work: renew, notice a lost lease, re-acquire, and store the
  // next hwm when it runs low (HwmWindow). `stopping` ends a wait early.
  void RunBackgroundOnce(const std::function<bool()>& stopping = {});
  // Gives the worker id back (the hwm stays). Errors: the lease's Release.
  Status Stop();

 private:
  struct Held;  // a generator and the hwm stored for it

  LeasedGenerator(const LeasedGeneratorOptions& options, Clock& clock,
                  std::unique_ptr<WorkerLease> lease, DataDir* data_dir);
  Result<LeaseGrant> FirstAcquire();
  // The floor of the granted id: the largest of its hwm at the lease, the data dir's copy and
  // after_ms; `where` names the one that won, for messages.
  Result<std::int64_t> Floor(const LeaseGrant& grant, std::string* where);
  Status WaitPast(std::int64_t floor_ms, const std::function<bool()>& stopping);
  Status Begin(const LeaseGrant& grant, std::int64_t floor_ms);
  Result<std::int64_t> CheckStored(const Held& held, std::int64_t tick) const;
  // `log`: a failure is logged (not at start, where the error that ends it is its one line).
  Result<std::int64_t> StoreHwm(Held& held, std::int64_t at_least_tick, bool log = true);
  // The window the last stores make (HwmWindow). Owner thread.
  HwmWindow Window() const;
  // Counts a call to the lease (and logs a failure when `log`).
  Status Call(const char* what, Status status, bool log = true);
  Status Renew();
  void MarkLost(const std::string& why);
  void TryReacquire(const std::function<bool()>& stopping);
  Error LostError() const;
  void Emit(LeaseLogLevel level, std::string_view message, const std::string& fields,
            bool repeats = false) const;

  const LeasedGeneratorOptions options_;
  const std::string fingerprint_;  // LayoutFingerprint(layout()), for the data dir's states
  Clock& clock_;
  std::unique_ptr<WorkerLease> lease_;
  DataDir* const data_dir_;
  std::atomic<Snowflake*> current_{nullptr};
  std::vector<std::unique_ptr<Held>> held_;  // every generator made, the current one last
  std::atomic<bool> lost_{false};
  std::int64_t ids_left_ = 0;  // inline_hwm
  // Owner thread, on clock_.MonotonicMillis().
  std::int64_t last_renew_ok_ms_ = 0;
  std::int64_t last_renew_try_ms_ = 0;
  std::int64_t next_reacquire_ms_ = 0;
  std::int64_t next_store_ms_ = 0;
  // The last stores' durations, on clock_ (a ring): the window (Window).
  std::array<std::int64_t, kHwmStoresRemembered> store_ms_{};
  std::size_t store_count_ = 0;

  mutable std::mutex mu_;
  LeaseSnapshot snap_;  // guarded by mu_
};

// The least reach of the hwm ahead of the clock, on every source: stored every 2 s, so that a
// store or coordinator call of up to 2 s goes unnoticed before the window has grown.
inline constexpr std::int64_t kHwmAheadMs = 4000;

}  // namespace sekka

#endif  // SEKKA_LEASED_GENERATOR_H_
