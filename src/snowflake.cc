// The snowflake generator. The algorithm is explained in docs/design.md ("The generator");
// in short:
//  - A *slot* is (tick << sequence_bits) | sequence. One atomic counter, next_slot_, holds the
//    next free slot, so slots are handed out in time order and a sequence that runs out carries
//    into the next tick by plain addition.
//  - Reserve() takes a run of slots with one compare-and-swap, after applying the clock rules
//    (newest_clock_tick_ tells a backward step from ids that ran ahead by borrowing) and the
//    sequence rules (never past the clock, or at most max_drift past it).
//  - NextId() hands out a thread's block of slots without touching shared memory while the
//    clock still reads the tick the block was taken in; NextIds() reserves whole runs.

#include "sekka/snowflake.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <random>

#include "sekka/codec.h"

namespace sekka {
namespace {

std::atomic<std::uint64_t> g_next_serial{1};

// The worker id's bits of every raw id. A descending id is max_id() - raw, which flips every
// field: the mirrored datacenter and worker flip back, so the id's fields name this worker.
std::uint64_t FixedBits(const Layout& layout, std::int64_t datacenter_id, std::int64_t worker_id) {
  if (layout.descending()) {
    datacenter_id = layout.datacenter_ids() - 1 - datacenter_id;
    worker_id = layout.worker_ids_per_datacenter() - 1 - worker_id;
  }
  return (static_cast<std::uint64_t>(datacenter_id) << layout.datacenter_shift()) |
         (static_cast<std::uint64_t>(worker_id) << layout.worker_shift());
}

std::uint64_t Mix(std::uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

template <typename Enum>
struct NamedValue {
  std::string_view name;
  Enum value;
};

template <typename Enum, std::size_t N>
Result<Enum> ParseNamed(std::string_view what, std::string_view text,
                        const NamedValue<Enum> (&table)[N]) {
  for (const auto& row : table) {
    if (row.name == text) return row.value;
  }
  std::string allowed;
  for (const auto& row : table) {
    if (!allowed.empty()) allowed += " | ";
    allowed += row.name;
  }
  return InvalidArgument(fmt::format("{} \"{}\" is not known: allowed {}", what, text, allowed));
}

template <typename Enum, std::size_t N>
std::string_view NameOf(Enum value, const NamedValue<Enum> (&table)[N]) {
  for (const auto& row : table) {
    if (row.value == value) return row.name;
  }
  return "?";
}

constexpr NamedValue<ClockBackwardsPolicy> kClockPolicies[] = {
    {"wait", ClockBackwardsPolicy::kWait},
    {"fail", ClockBackwardsPolicy::kFail},
    {"continue", ClockBackwardsPolicy::kContinue},
};
constexpr NamedValue<SequenceExhaustedPolicy> kSequencePolicies[] = {
    {"wait", SequenceExhaustedPolicy::kWait},
    {"borrow", SequenceExhaustedPolicy::kBorrow},
};
constexpr NamedValue<SequenceStart> kSequenceStarts[] = {
    {"zero", SequenceStart::kZero},
    {"random", SequenceStart::kRandom},
};

}  // namespace

Result<ClockBackwardsPolicy> ParseClockBackwardsPolicy(std::string_view text) {
  return ParseNamed("generator.on_clock_backwards", text, kClockPolicies);
}
Result<SequenceExhaustedPolicy> ParseSequenceExhaustedPolicy(std::string_view text) {
  return ParseNamed("generator.on_sequence_exhausted", text, kSequencePolicies);
}
Result<SequenceStart> ParseSequenceStart(std::string_view text) {
  return ParseNamed("generator.sequence_start", text, kSequenceStarts);
}
std::string_view ClockBackwardsPolicyName(ClockBackwardsPolicy policy) {
  return NameOf(policy, kClockPolicies);
}
std::string_view SequenceExhaustedPolicyName(SequenceExhaustedPolicy policy) {
  return NameOf(policy, kSequencePolicies);
}
std::string_view SequenceStartName(SequenceStart start) { return NameOf(start, kSequenceStarts); }

Result<std::unique_ptr<Snowflake>> Snowflake::Create(const SnowflakeOptions& options,
                                                     Clock& clock) {
  const Layout& layout = options.layout;
  if (options.datacenter_id != 0 || layout.datacenter_bits() > 0) {
    const std::int64_t max = layout.datacenter_ids() - 1;
    if (options.datacenter_id < 0 || options.datacenter_id > max) {
      return InvalidArgument(fmt::format(
          "datacenter id {} does not fit layout {} ({} datacenter bits): allowed 0 to {}",
          options.datacenter_id, layout.name(), layout.datacenter_bits(), max));
    }
  }
  if (layout.is_random()) {
    return InvalidArgument(fmt::format(
        "layout {} is a random layout (no worker id, no sequence): its ids come from a random "
        "generator (sekka gen, /v1/random, RANDOM.NEXT), not a snowflake",
        layout.name()));
  }
  const std::int64_t max_worker = layout.worker_ids_per_datacenter() - 1;
  if (options.worker_id < 0 || options.worker_id > max_worker) {
    return InvalidArgument(
        fmt::format("worker id {} does not fit layout {} ({} worker bits): allowed 0 to {}",
                    options.worker_id, layout.name(), layout.worker_bits(), max_worker));
  }
  constexpr std::chrono::milliseconds kHour{3'600'000};
  if (options.max_backwards_wait.count() < 0 || options.max_backwards_wait > kHour) {
    return InvalidArgument(
        fmt::format("generator.max_backwards_wait = {}ms is out of range: allowed 0ms to 1h",
                    options.max_backwards_wait.count()));
  }
  if (options.max_drift.count() < 0 || options.max_drift > kHour) {
    return InvalidArgument(
        fmt::format("generator.max_drift = {}ms is out of range: allowed 0ms to 1h",
                    options.max_drift.count()));
  }
  if (options.thread_block < 1 || options.thread_block > 4096) {
    return InvalidArgument(fmt::format(
        "generator.thread_block = {} is out of range: allowed 1 to 4096", options.thread_block));
  }
  SEKKA_RETURN_IF_ERROR(CheckEpochNotInFuture(layout, clock.NowMillis()));
  return std::unique_ptr<Snowflake>(new Snowflake(options, clock));
}

Snowflake::Snowflake(const SnowflakeOptions& options, Clock& clock)
    : options_(options),
      layout_(options_.layout),
      clock_(clock),
      serial_(g_next_serial.fetch_add(1, std::memory_order_relaxed)),
      sequence_bits_(layout_.sequence_bits()),
      time_shift_(layout_.time_shift()),
      slot_shift_(layout_.datacenter_bits() + layout_.worker_bits()),
      sequence_mask_((std::uint64_t{1} << layout_.sequence_bits()) - 1),
      fixed_bits_(FixedBits(layout_, options_.datacenter_id, options_.worker_id)),
      descending_(layout_.descending()),
      spread_(!layout_.ordered()),
      descend_base_(static_cast<std::uint64_t>(layout_.max_id())),
      max_drift_ticks_(options_.max_drift.count() / layout_.tick_millis()) {
  hwm_tick_.store(options_.store_hwm ? options_.start_hwm_tick
                                     : std::numeric_limits<std::int64_t>::max());
  if (options_.start_hwm_tick >= 0) {
    next_slot_.store(static_cast<std::uint64_t>(options_.start_hwm_tick + 1) << sequence_bits_);
    newest_clock_tick_.store(options_.start_hwm_tick);
  }
  random_seed_ = options_.random_seed;
  if (options_.sequence_start == SequenceStart::kRandom && random_seed_ == 0) {
    std::random_device device;
    random_seed_ = (static_cast<std::uint64_t>(device()) << 32) | device();
  }
}

Snowflake::~Snowflake() {
  // Forget this thread's block so that a generator created later at the same address, which
  // gets a new serial anyway, starts clean.
  if (thread_block_.owner == serial_) thread_block_ = ThreadBlock{};
}

SnowflakeStats Snowflake::stats() const {
  SnowflakeStats s;
  s.sequence_waits = sequence_waits_.load(std::memory_order_relaxed);
  s.clock_backwards_events = clock_backwards_events_.load(std::memory_order_relaxed);
  s.max_backwards_millis = max_backwards_millis_.load(std::memory_order_relaxed);
  s.wait_millis = wait_millis_.load(std::memory_order_relaxed);
  return s;
}

std::uint64_t Snowflake::StartSlot(std::int64_t tick) const {
  std::uint64_t sequence = 0;
  if (options_.sequence_start == SequenceStart::kRandom) {
    const std::uint64_t range = std::max<std::uint64_t>(1, (sequence_mask_ + 1) / 4);
    sequence = Mix(random_seed_ ^ static_cast<std::uint64_t>(tick)) % range;
  }
  return (static_cast<std::uint64_t>(tick) << sequence_bits_) | sequence;
}

Error Snowflake::BackwardsError(std::int64_t behind_ticks, std::int64_t now) const {
  const std::int64_t tick = layout_.tick_millis();
  std::string rule;
  switch (options_.on_clock_backwards) {
    case ClockBackwardsPolicy::kFail:
      rule = "policy fail tolerates no backward step";
      break;
    case ClockBackwardsPolicy::kWait:
      rule = fmt::format("policy wait tolerates up to {} ms", options_.max_backwards_wait.count());
      break;
    case ClockBackwardsPolicy::kContinue:
      rule = fmt::format("policy continue borrows at most {} ms and waits at most {} ms",
                         options_.max_drift.count(), options_.max_backwards_wait.count());
      break;
  }
  return {ErrorCode::kClockMovedBackwards,
          fmt::format("clock moved backwards by {} ms (it reads {}, ids were issued up to {}); {}",
                      behind_ticks * tick, FormatUtcMillis(layout_.TickToMillis(now)),
                      FormatUtcMillis(layout_.TickToMillis(now + behind_ticks)), rule)};
}

Error Snowflake::ExhaustedError() const {
  return Exhausted(fmt::format(
      "layout {} exhausted on {}: its {}-bit time field has run out (decoding still works)",
      layout_.name(), FormatUtcMillis(layout_.end_millis()), layout_.time_bits()));
}

void Snowflake::CountBackwardStep(std::int64_t behind_ticks) {
  const std::int64_t tick_millis = layout_.tick_millis();
  clock_backwards_events_.fetch_add(1, std::memory_order_relaxed);
  std::int64_t seen = max_backwards_millis_.load(std::memory_order_relaxed);
  while (behind_ticks * tick_millis > seen &&
         !max_backwards_millis_.compare_exchange_weak(seen, behind_ticks * tick_millis)) {
  }
}

std::int64_t Snowflake::WaitUntilTick(std::int64_t tick) {
  const std::int64_t tick_millis = layout_.tick_millis();
  const std::int64_t before = layout_.MillisToTick(clock_.NowMillis());
  clock_.SleepUntilMillis(layout_.TickToMillis(tick));
  const std::int64_t after = layout_.MillisToTick(clock_.NowMillisUncached());
  wait_millis_.fetch_add(static_cast<std::uint64_t>(std::max<std::int64_t>(0, after - before)) *
                             static_cast<std::uint64_t>(tick_millis),
                         std::memory_order_relaxed);
  return after;
}

bool Snowflake::TakeSlots(std::uint64_t count, bool within_tick, std::int64_t effective,
                          std::int64_t last_tick, Slots& slots) {
  const std::uint64_t limit = static_cast<std::uint64_t>(last_tick + 1) << sequence_bits_;
  std::uint64_t cur = next_slot_.load(std::memory_order_relaxed);
  for (;;) {
    const auto cur_tick = static_cast<std::int64_t>(cur >> sequence_bits_);
    const std::uint64_t first = cur_tick < effective ? StartSlot(effective) : cur;
    slots.first = first;
    if (first >= limit) return false;
    std::uint64_t end = std::min(first + count, limit);
    if (within_tick) end = std::min(end, ((first >> sequence_bits_) + 1) << sequence_bits_);
    if (next_slot_.compare_exchange_weak(cur, end, std::memory_order_relaxed)) {
      slots.end = end;
      return true;
    }
  }
}

Result<Snowflake::Slots> Snowflake::Reserve(std::uint64_t count, bool within_tick,
                                            std::int64_t now) {
  const std::int64_t max_wait_ticks = options_.max_backwards_wait.count() / layout_.tick_millis();
  const bool borrow = options_.on_sequence_exhausted == SequenceExhaustedPolicy::kBorrow;
  std::int64_t waited_ticks = 0;  // waiting for a backward clock, bounded by max_wait_ticks
  bool counted = false;

  for (;;) {
    bool behind_continued = false;  // kContinue on a clock behind `newest` (step 3 waits for it)
    // 1. The clock. `newest` is the newest tick any caller has read; a reading behind it is a
    // backward step once a fresh read confirms it (another thread may simply have read later,
    // or this thread's reading may be a cached one that a forward step has overtaken: then a
    // wait would return at once and the wait budget would be spent in a few microseconds).
    std::int64_t newest = newest_clock_tick_.load(std::memory_order_acquire);
    if (now < newest) now = layout_.MillisToTick(clock_.NowMillisUncached());
    std::int64_t effective = now;                        // the tick new ids are based on
    std::int64_t ahead = borrow ? max_drift_ticks_ : 0;  // ticks ids may run ahead of it
    if (now < newest) {
      const std::int64_t behind = newest - now;
      if (!counted) {
        counted = true;
        CountBackwardStep(behind);
      }
      switch (options_.on_clock_backwards) {
        case ClockBackwardsPolicy::kFail:
          return BackwardsError(behind, now);
        case ClockBackwardsPolicy::kWait:
          if (waited_ticks + behind > max_wait_ticks) return BackwardsError(behind, now);
          waited_ticks += behind;
          now = WaitUntilTick(newest);
          continue;
        case ClockBackwardsPolicy::kContinue:
          effective = newest;
          ahead = max_drift_ticks_;
          behind_continued = true;
          break;
      }
    } else if (now > newest) {
      // A failed exchange loads the newer tick another thread stored into `newest`: that is no
      // backward step of this reading (behind_continued stays false).
      while (newest < now && !newest_clock_tick_.compare_exchange_weak(newest, now)) {
      }
    }
    if (effective > layout_.max_tick()) {
      return ExhaustedError();
    }

    // 2. The slots: from the next free one (or the start of a newer tick) up to the last tick
    // the rules allow now, and never past the durably stored hwm.
    std::int64_t last_tick = std::min(effective + ahead, layout_.max_tick());
    Status hwm = Status::Ok();
    if (last_tick > hwm_tick_.load(std::memory_order_acquire)) {
      hwm = EnsureHwm(last_tick);
      last_tick = std::min(last_tick, hwm_tick_.load(std::memory_order_acquire));
      if (!hwm.ok() && last_tick < effective) return std::move(hwm).error();
    }
    Slots slots{0, 0, now};
    if (TakeSlots(count, within_tick, effective, last_tick, slots)) return slots;

    // 3. Nothing may be handed out now: the sequence of the allowed ticks is used up (or, under
    // kContinue, borrowing reached max_drift while the clock is behind). Wait for the clock,
    // while the hwm is stored further meanwhile. When the hwm ended the slots and the tick to
    // wait for is not ahead of the clock (borrowing or kContinue already reach past the hwm),
    // waiting would not wait: the hwm's error is the answer, never a loop that asks the store
    // again and again.
    const auto first_tick = static_cast<std::int64_t>(slots.first >> sequence_bits_);
    if (first_tick > layout_.max_tick()) {
      return ExhaustedError();
    }
    const std::int64_t target = first_tick - ahead;
    if (!hwm.ok() && target <= now) return std::move(hwm).error();
    if (behind_continued) {  // kContinue with the clock behind
      if (waited_ticks + (target - now) > max_wait_ticks) {
        return BackwardsError(newest - now, now);
      }
      waited_ticks += target - now;
    } else {
      sequence_waits_.fetch_add(1, std::memory_order_relaxed);
    }
    now = WaitUntilTick(target);
  }
}

Status Snowflake::EnsureHwm(std::int64_t tick) {
  if (!options_.store_hwm) return Status::Ok();
  std::lock_guard lock(hwm_mu_);
  if (hwm_tick_.load(std::memory_order_acquire) >= tick) return Status::Ok();
  SEKKA_ASSIGN_OR_RETURN(auto stored, options_.store_hwm(tick));
  if (stored > hwm_tick_.load(std::memory_order_relaxed)) {
    hwm_tick_.store(stored, std::memory_order_release);
  }
  return Status::Ok();
}

Result<Id> Snowflake::NextIdSlow(std::int64_t now) {
  const auto block = static_cast<std::uint64_t>(options_.thread_block);
  SEKKA_ASSIGN_OR_RETURN(auto slots, Reserve(block, /*within_tick=*/true, now));
  if (block > 1) thread_block_ = ThreadBlock{serial_, slots.clock_tick, slots.first + 1, slots.end};
  return Compose(slots.first);
}

Status Snowflake::NextIds(std::span<Id> out) {
  // The batch comes from the shared counter, past any block this thread holds: drop the block
  // so that this thread's ids keep increasing.
  if (thread_block_.owner == serial_) thread_block_ = ThreadBlock{};
  std::size_t filled = 0;
  std::int64_t now = layout_.MillisToTick(clock_.NowMillis());
  while (filled < out.size()) {
    SEKKA_ASSIGN_OR_RETURN(auto slots, Reserve(out.size() - filled, /*within_tick=*/false, now));
    Id* dst = out.data() + filled;
    const std::uint64_t n = slots.end - slots.first;
    for (std::uint64_t i = 0; i < n; ++i) dst[i] = Compose(slots.first + i);
    filled += n;
    if (filled < out.size()) now = layout_.MillisToTick(clock_.NowMillis());
  }
  return Status::Ok();
}

Result<std::vector<Id>> Snowflake::NextIds(std::size_t n) {
  std::vector<Id> ids(n);
  SEKKA_RETURN_IF_ERROR(NextIds(std::span<Id>(ids)));
  return ids;
}

}  // namespace sekka
