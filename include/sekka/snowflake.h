// include/sekka/snowflake.h
//
// Snowflake turns (time, worker id, sequence) into ids whose numeric order follows generation
// time, without any I/O on the hot path. See docs/design.md for the clock rules and the
// concurrency design.
//
// Guarantees of one Snowflake:
//  - no id is ever returned twice, from any number of threads;
//  - the ids one thread receives strictly increase (strictly decrease with a descending layout);
//  - an id of a later tick is larger than every id of an earlier tick, whichever thread got it;
//  - with thread_block = 1, every id is larger than all ids returned before the call began,
//    in any thread (a single global order);
//  - a failed call changes nothing that could make a later call repeat an id.
//
// Thread-safety: NextId() and NextIds() may be called from any number of threads.

#ifndef SEKKA_SNOWFLAKE_H_
#define SEKKA_SNOWFLAKE_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "sekka/clock.h"
#include "sekka/layout.h"
#include "sekka/status.h"

namespace sekka {

// What to do when the clock reads earlier than time already used.
enum class ClockBackwardsPolicy {
  kWait,      // wait for the clock to catch up, at most max_backwards_wait, then fail
  kFail,      // fail at once with kClockMovedBackwards
  kContinue,  // keep counting on the last tick and borrow ticks up to max_drift (sonyflake)
};
// What to do when a tick's sequence is used up.
enum class SequenceExhaustedPolicy {
  kWait,    // wait for the next tick
  kBorrow,  // take future ticks, at most max_drift ahead of the clock
};
// Where each new tick's sequence starts.
enum class SequenceStart {
  kZero,    // at 0
  kRandom,  // at a random value in the lower quarter of the sequence range
};

Result<ClockBackwardsPolicy> ParseClockBackwardsPolicy(std::string_view text);
Result<SequenceExhaustedPolicy> ParseSequenceExhaustedPolicy(std::string_view text);
Result<SequenceStart> ParseSequenceStart(std::string_view text);
std::string_view ClockBackwardsPolicyName(ClockBackwardsPolicy policy);
std::string_view SequenceExhaustedPolicyName(SequenceExhaustedPolicy policy);
std::string_view SequenceStartName(SequenceStart start);

namespace snowflake_internal {
// A thread's block of sequence slots. A slot is (tick << sequence_bits) | sequence.
struct ThreadBlock {
  std::uint64_t owner = 0;       // serial of the generator the block belongs to
  std::int64_t clock_tick = -1;  // the clock's tick when the block was taken
  std::uint64_t next = 0;        // next slot to hand out
  std::uint64_t end = 0;         // one past the last slot
};
}  // namespace snowflake_internal

struct SnowflakeOptions {
  Layout layout = Layout::Default();
  // The worker id: its datacenter part (only for layouts with datacenter bits) and its worker
  // part. Each must fit its field.
  std::int64_t datacenter_id = 0;
  std::int64_t worker_id = 0;
  // Clock rules; see ClockBackwardsPolicy. Default: wait up to 1 s.
  ClockBackwardsPolicy on_clock_backwards = ClockBackwardsPolicy::kWait;
  std::chrono::milliseconds max_backwards_wait{1000};
  // Sequence rules; see SequenceExhaustedPolicy. Default: wait for the next tick.
  SequenceExhaustedPolicy on_sequence_exhausted = SequenceExhaustedPolicy::kWait;
  // How far ids may run ahead of the newest clock reading, for kBorrow and kContinue [0, 1 h].
  std::chrono::milliseconds max_drift{1000};
  // Where each tick's sequence starts. Default: zero.
  SequenceStart sequence_start = SequenceStart::kZero;
  // Seed for kRandom; 0 picks one from std::random_device.
  std::uint64_t random_seed = 0;
  // Sequence numbers one thread takes from the shared counter at a time [1, 4096]. A block is
  // only used within the tick it was taken in. 1 gives one global order across threads at the
  // price of one atomic operation per id; the default 16 lets threads scale (docs/design.md).
  int thread_block = 16;
  // The durable high-water mark (hwm). When set, no id of a tick past the hwm is issued before
  // store_hwm(tick) has returned a stored hwm (a tick) >= tick. It is called under a lock and
  // rarely: callers store hwms ahead of the clock and say so with EnsureHwm
  // (include/sekka/leased_generator.h).
  std::function<Result<std::int64_t>(std::int64_t tick)> store_hwm;
  // Ids start above this tick (the hwm of earlier holders of the worker id); -1: none.
  std::int64_t start_hwm_tick = -1;
};

// Counters since creation, for metrics.
struct SnowflakeStats {
  std::uint64_t sequence_waits = 0;          // waits for the next tick (sequence used up)
  std::uint64_t clock_backwards_events = 0;  // calls that saw the clock behind
  std::int64_t max_backwards_millis = 0;     // the largest backward step seen
  std::uint64_t wait_millis = 0;             // time spent waiting, in ms (rounded up)
};

class Snowflake {
 public:
  // Errors: kInvalidArgument if the worker id does not fit the layout, an option is out of
  // range, or the layout's epoch is in the future on `clock`.
  // `clock` must outlive the generator.
  static Result<std::unique_ptr<Snowflake>> Create(const SnowflakeOptions& options, Clock& clock);

  ~Snowflake();
  Snowflake(const Snowflake&) = delete;
  Snowflake& operator=(const Snowflake&) = delete;

  // The next id.
  // Errors: kClockMovedBackwards (with the size of the step), kExhausted (the layout's time
  // field ran out, naming the date).
  Result<Id> NextId() {
    const std::int64_t now = layout_.MillisToTick(clock_.NowMillis());
    ThreadBlock& block = thread_block_;
    if (block.owner == serial_ && block.clock_tick == now && block.next < block.end) {
      return Compose(block.next++);
    }
    return NextIdSlow(now);
  }

  // Fills `out` with ids in increasing order (decreasing with a descending layout), at a far lower
  // cost per id than NextId(). On error, `out` holds no usable ids.
  // Errors: as NextId().
  Status NextIds(std::span<Id> out);
  // The same, returning a vector of `n` ids.
  Result<std::vector<Id>> NextIds(std::size_t n);

  const Layout& layout() const { return layout_; }
  const SnowflakeOptions& options() const { return options_; }
  std::int64_t datacenter_id() const { return options_.datacenter_id; }
  std::int64_t worker_id() const { return options_.worker_id; }
  SnowflakeStats stats() const;

  // Makes sure the hwm is at or past `tick`, calling options().store_hwm if it is not. Errors:
  // whatever store_hwm returns. Without store_hwm, always OK.
  Status EnsureHwm(std::int64_t tick);
  // The newest tick read from the clock (a clock reading behind it is a backward step).
  std::int64_t newest_clock_tick() const {
    return newest_clock_tick_.load(std::memory_order_acquire);
  }
  // The hwm: the last tick ids may be issued in (max int64 without store_hwm).
  std::int64_t hwm_tick() const { return hwm_tick_.load(std::memory_order_acquire); }

 private:
  using ThreadBlock = snowflake_internal::ThreadBlock;
  struct Slots {
    std::uint64_t first = 0;
    std::uint64_t end = 0;
    std::int64_t clock_tick = 0;
  };

  Snowflake(const SnowflakeOptions& options, Clock& clock);

  Id Compose(std::uint64_t slot) const {
    std::uint64_t raw;
    if (options_.layout.order() == FieldOrder::kTimeSequenceWorker) {
      raw = (slot << slot_shift_) | fixed_bits_;
    } else {
      raw = ((slot >> sequence_bits_) << time_shift_) | (slot & sequence_mask_) | fixed_bits_;
    }
    if (spread_) raw = layout_.Spread(raw);
    return static_cast<Id>(descending_ ? descend_base_ - raw : raw);
  }

  Result<Id> NextIdSlow(std::int64_t now);
  // Takes up to `count` consecutive slots from the shared counter, applying the clock and
  // sequence rules (it may wait). With `within_tick`, all slots share one tick.
  Result<Slots> Reserve(std::uint64_t count, bool within_tick, std::int64_t now);
  // Reserve()'s step 1: counts a backward clock step of `behind_ticks` in the stats.
  void CountBackwardStep(std::int64_t behind_ticks);
  // Sleeps until the clock reaches `tick`, counting the wait in the stats. Returns the tick the
  // clock reads then.
  std::int64_t WaitUntilTick(std::int64_t tick);
  // Reserve()'s step 2: moves the shared counter past up to `count` slots (of one tick with
  // `within_tick`), from the next free one (or the start of tick `effective`, when the counter
  // is behind it) to the end of tick `last_tick` at most, and returns true with them in
  // [slots.first, slots.end). False when none is left before that end: slots.first is then the
  // slot that would have come next.
  bool TakeSlots(std::uint64_t count, bool within_tick, std::int64_t effective,
                 std::int64_t last_tick, Slots& slots);
  std::uint64_t StartSlot(std::int64_t tick) const;
  Error BackwardsError(std::int64_t behind_ticks, std::int64_t now) const;
  Error ExhaustedError() const;

  static inline thread_local ThreadBlock thread_block_{};

  const SnowflakeOptions options_;
  const Layout& layout_;
  Clock& clock_;
  const std::uint64_t serial_;
  // Precomputed from the layout for Compose().
  const int sequence_bits_;
  const int time_shift_;
  const int slot_shift_;
  const std::uint64_t sequence_mask_;
  const std::uint64_t fixed_bits_;
  const bool descending_;
  const bool spread_;  // shard bits or a reversed time field (never with descending_)
  // max_id(): a descending id is this minus the raw id of the mirrored worker (Layout::Compose).
  const std::uint64_t descend_base_;
  const std::int64_t max_drift_ticks_;
  std::uint64_t random_seed_ = 0;

  // The shared counter: the next free slot. And the newest clock tick seen, to tell a
  // backward clock step from ids that ran ahead of the clock by borrowing.
  alignas(64) std::atomic<std::uint64_t> next_slot_{0};
  std::atomic<std::int64_t> newest_clock_tick_{0};

  std::atomic<std::int64_t> hwm_tick_{0};
  std::mutex hwm_mu_;  // serializes store_hwm calls

  alignas(64) std::atomic<std::uint64_t> sequence_waits_{0};
  std::atomic<std::uint64_t> clock_backwards_events_{0};
  std::atomic<std::int64_t> max_backwards_millis_{0};
  std::atomic<std::uint64_t> wait_millis_{0};
};

}  // namespace sekka

#endif  // SEKKA_SNOWFLAKE_H_
