// include/sekka/layout.h
//
// A Layout is the bit split of an id: from the most significant bit, a zero sign bit, then
// time (in ticks since an epoch), datacenter, worker and sequence (Twitter order), or time,
// sequence, datacenter, worker (sonyflake order). Layouts come from named presets
// (Layout::Preset) or from LayoutOptions validated by Layout::Create. A Layout composes fields
// into an id and decomposes an id into its fields, and reports its capacity.
//
// Thread-safety: a Layout is an immutable value.

#ifndef SEKKA_LAYOUT_H_
#define SEKKA_LAYOUT_H_

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "sekka/status.h"

namespace sekka {

// An id: a non-negative int64 below 2^63.
using Id = std::int64_t;

// The order of the fields below the time field.
enum class FieldOrder {
  kTimeWorkerSequence,  // 0 | time | datacenter | worker | sequence (Twitter, sekka, ...)
  kTimeSequenceWorker,  // 0 | time | sequence | datacenter | worker (sonyflake)
};

// Parses "time,worker,sequence" / "time,datacenter,worker,sequence" or "time,sequence,worker"
// (also "standard" / "sonyflake"). Errors: kInvalidArgument naming the allowed values.
Result<FieldOrder> ParseFieldOrder(std::string_view text);
std::string_view FieldOrderName(FieldOrder order);

// 2025-01-01T00:00:00Z in milliseconds since the Unix epoch: the default epoch.
inline constexpr std::int64_t kSekkaEpochMillis = 1735689600000;

// The fields of a custom layout. Validation rules (Layout::Create) are in brackets.
struct LayoutOptions {
  // A name for messages and reports; presets use their own.
  std::string name = "custom";
  // Bits of the time field [16, 63].
  int time_bits = 41;
  // Bits of the datacenter part of the worker id [0, 31].
  int datacenter_bits = 0;
  // Bits of the worker part of the worker id [0, 31].
  int worker_bits = 10;
  // Bits of the sequence [0, 31].
  int sequence_bits = 12;
  // Length of one tick in milliseconds [1, 1000].
  std::int64_t tick_millis = 1;
  // Start of time in milliseconds since the Unix epoch [>= 0; not in the future, which is
  // checked where a clock is at hand: Snowflake::Create].
  std::int64_t epoch_millis = kSekkaEpochMillis;
  FieldOrder order = FieldOrder::kTimeWorkerSequence;
  // When true every id stays below 2^53 (exact in JavaScript numbers): the bits may sum to at
  // most 53. When false they sum to exactly 63.
  bool js_safe = false;
};

// The fields of one id. `tick` counts ticks since the layout's epoch.
struct IdFields {
  std::int64_t tick = 0;
  std::int64_t datacenter = 0;
  std::int64_t worker = 0;
  std::int64_t sequence = 0;

  bool operator==(const IdFields&) const = default;
};

class Layout;

// Parses a layout from text: a preset name ("twitter"), or a comma-separated list of
// key=value pairs over the sekka preset's values, with keys time_bits, datacenter_bits,
// worker_bits, sequence_bits, tick ("10ms", "1s"), epoch (ms or ISO 8601), order, js_safe
// (true/false) and name; e.g. "time_bits=40,worker_bits=11,tick=2ms".
// Errors: kNotFound for an unknown preset; kInvalidArgument naming a bad key or value.
Result<Layout> ParseLayout(std::string_view text);

class Layout {
 public:
  // Validates `options`. Errors: kInvalidArgument naming the field and its allowed range.
  static Result<Layout> Create(const LayoutOptions& options);

  // A named preset: sekka (default), twitter, discord, instagram, sonyflake, baidu, js53.
  // Errors: kNotFound naming the presets.
  static Result<Layout> Preset(std::string_view name);
  // The default preset, "sekka".
  static Layout Default();
  static const std::vector<std::string_view>& PresetNames();

  const LayoutOptions& options() const { return options_; }
  const std::string& name() const { return options_.name; }
  int time_bits() const { return options_.time_bits; }
  int datacenter_bits() const { return options_.datacenter_bits; }
  int worker_bits() const { return options_.worker_bits; }
  int sequence_bits() const { return options_.sequence_bits; }
  std::int64_t tick_millis() const { return options_.tick_millis; }
  std::int64_t epoch_millis() const { return options_.epoch_millis; }
  FieldOrder order() const { return options_.order; }
  // The field order as text, naming the datacenter only where the layout has datacenter bits:
  // "time,worker,sequence", "time,datacenter,worker,sequence", "time,sequence,worker", ...
  std::string OrderName() const;

  // Capacity.
  std::int64_t ids_per_tick() const { return std::int64_t{1} << options_.sequence_bits; }
  double ids_per_second() const {
    return static_cast<double>(ids_per_tick()) * 1000.0 / static_cast<double>(tick_millis());
  }
  std::int64_t datacenter_ids() const { return std::int64_t{1} << options_.datacenter_bits; }
  std::int64_t worker_ids_per_datacenter() const { return std::int64_t{1} << options_.worker_bits; }
  // All worker ids (datacenters x workers).
  std::int64_t worker_ids() const { return datacenter_ids() * worker_ids_per_datacenter(); }
  std::int64_t max_sequence() const { return ids_per_tick() - 1; }
  // The last tick an id can carry: limited by the time field and by ids staying below 2^63
  // (the discord and instagram presets use 64 bits, so their top time bit is unusable).
  std::int64_t max_tick() const { return max_tick_; }
  // The first instant, in ms since the Unix epoch, that the time field cannot represent.
  std::int64_t end_millis() const;
  // The largest id the layout can produce (2^63 - 1, or 2^bits - 1 for a js-safe layout).
  Id max_id() const { return max_id_; }

  // Milliseconds since the Unix epoch at the start of `tick`, saturating at the int64 range (a
  // 63-bit time field of 1 s ticks reaches far past it).
  std::int64_t TickToMillis(std::int64_t tick) const {
    std::int64_t ms = 0;
    if (__builtin_mul_overflow(tick, options_.tick_millis, &ms) ||
        __builtin_add_overflow(ms, options_.epoch_millis, &ms)) {
      return tick < 0 ? std::numeric_limits<std::int64_t>::min()
                      : std::numeric_limits<std::int64_t>::max();
    }
    return ms;
  }
  // The tick containing `unix_millis` (floor); negative before the epoch.
  std::int64_t MillisToTick(std::int64_t unix_millis) const {
    const std::int64_t since_epoch = unix_millis - options_.epoch_millis;
    const std::int64_t tick = options_.tick_millis;
    if (tick == 1) return since_epoch;
    return since_epoch >= 0 ? since_epoch / tick : -((tick - 1 - since_epoch) / tick);
  }

  // Errors: kInvalidArgument naming the field that does not fit; kExhausted when the tick is
  // past max_tick().
  Result<Id> Compose(const IdFields& fields) const;
  // Errors: kInvalidArgument if `id` is negative or above max_id().
  Result<IdFields> Decompose(Id id) const;

  // Bit positions of each field, for fast composition (see Snowflake).
  int time_shift() const { return time_shift_; }
  int datacenter_shift() const { return datacenter_shift_; }
  int worker_shift() const { return worker_shift_; }
  int sequence_shift() const { return sequence_shift_; }

 private:
  explicit Layout(const LayoutOptions& options);

  LayoutOptions options_;
  int time_shift_ = 0;
  int datacenter_shift_ = 0;
  int worker_shift_ = 0;
  int sequence_shift_ = 0;
  std::int64_t max_tick_ = 0;
  Id max_id_ = 0;
};

}  // namespace sekka

#endif  // SEKKA_LAYOUT_H_
