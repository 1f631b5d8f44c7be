// include/sekka/layout.h
//
// A Layout is the bit split of an id: from the most significant bit, a zero sign bit, then
// time (in ticks since an epoch), datacenter, worker and sequence (Twitter order), or time,
// sequence, datacenter, worker (sonyflake order). Layouts come from named presets
// (Layout::Preset) or from LayoutOptions validated by Layout::Create. A Layout composes fields
// into an id and decomposes an id into its fields, and reports its capacity.
//
// Two kinds: snowflake (time, worker id, sequence: unique by construction) and random (time and
// random bits, no worker id: unique only with the odds RandomClashOdds states, for stores that
// enforce uniqueness on insert).
//
// Two options spread ids over a range-partitioned key space (no hot last range):
//   shard_bits=N    N bits on top, a hash of the other fields (TiDB's AUTO_RANDOM shard bits);
//                   ids of one worker increase only within each of the 2^N shards
//   reverse_time    the time field's bits reversed (Spanner's bit-reversed sequences): ids have
//                   no time order at all
// Both are functions of the fields, so decoding recovers every field (and checks the shard).
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

// What the bits below the time field are.
enum class LayoutKind {
  kSnowflake,  // datacenter, worker, sequence
  kRandom,     // random bits only
};

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
  LayoutKind kind = LayoutKind::kSnowflake;
  // Random layouts: bits of randomness below the time field [1, 47]; the datacenter, worker
  // and sequence bits are then 0.
  int random_bits = 0;
  // Snowflake layouts: bits on top derived from the other fields [0, 15].
  int shard_bits = 0;
  // The time field's bits reversed.
  bool reverse_time = false;
  // Newer ids are smaller: an id is max_id() minus the upward id of the same time and sequence,
  // and its datacenter and worker fields are kept as they are, so that an id's worker field
  // names its worker in either direction (docs/design.md, "Directions") [snowflake layouts
  // without shard_bits or reverse_time].
  bool descending = false;
};

// The fields of one id. `tick` counts ticks since the layout's epoch.
struct IdFields {
  std::int64_t tick = 0;
  std::int64_t datacenter = 0;
  std::int64_t worker = 0;
  std::int64_t sequence = 0;
  std::int64_t random = 0;  // random layouts

  bool operator==(const IdFields&) const = default;
};

class Layout;

// Parses a layout from text: a preset name ("twitter"), or a comma-separated list of
// key=value pairs over the sekka preset's values, with keys time_bits, datacenter_bits,
// worker_bits, sequence_bits, tick ("10ms", "1s"), epoch (ms or ISO 8601), order, js_safe
// (true/false), shard_bits, reverse_time (true/false), descending (true/false) and name; e.g.
// "time_bits=40,worker_bits=11,tick=2ms". With kind=random the keys are time_bits, random_bits
// (default: the rest of 63 bits, or of 53 with js_safe), tick, epoch, js_safe, reverse_time and
// name; e.g. "kind=random,time_bits=41".
// Errors: kNotFound for an unknown preset; kInvalidArgument naming a bad key or value.
Result<Layout> ParseLayout(std::string_view text);

// The odds that random ids clash (kind random), for ids made at `ids_per_second` across all
// generators of the layout, arriving at random (a Poisson process): with λ ids per tick on
// average, a tick holds λ²/2 pairs on average, each alike with odds 2^-random_bits (the
// birthday bound), so
//   per_tick = 1 - exp(-λ² / 2^(random_bits+1)),  per_day = 1 - (1 - per_tick)^(ticks a day).
struct ClashOdds {
  double ids_per_tick = 0;      // λ
  double per_tick = 0;          // at least one clash in a tick
  double per_day = 0;           // at least one clash in a day
  double expected_per_day = 0;  // clashes a day on average
  double ids_per_day = 0;
};
ClashOdds RandomClashOdds(const Layout& layout, double ids_per_second);

// A one-line description of everything that maps a slot to an id: bits, tick, epoch, order,
// and the options beyond them (shard_bits, reverse_time, descending). Stored with every hwm: a
// state of another fingerprint belongs to another id space.
std::string LayoutFingerprint(const Layout& layout);
// The preset whose fingerprint `fingerprint` is ("twitter"), or "" for any other layout.
std::string PresetOfFingerprint(std::string_view fingerprint);

// The floor a layout takes over from after an earlier system's ids: every id of a tick later than
// the one `after_id` reads as in this layout is greater than `after_id`. Returns the last ms of
// that tick (generator.after_id, gen --after-id: ids are issued only once the clock is past it,
// as past a stored hwm). Errors: kInvalidArgument naming why no id can be above `after_id`: a
// layout whose ids keep no order (shard_bits, reverse_time, random) or descend, an id outside
// the layout, or an id in the layout's last tick.
Result<std::int64_t> AfterIdFloorMillis(const Layout& layout, Id after_id);

// Checks that `layout`'s epoch is not after `now_ms` (a generator cannot issue ids before it).
// Errors: kInvalidArgument naming the epoch and the clock's reading.
Status CheckEpochNotInFuture(const Layout& layout, std::int64_t now_ms);

class Layout {
 public:
  // Validates `options`. Errors: kInvalidArgument naming the field and its allowed range.
  static Result<Layout> Create(const LayoutOptions& options);

  // A named preset: sekka (default), twitter, discord, instagram, sonyflake, baidu, js53,
  // random (41 bits of ms and 22 random bits).
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
  LayoutKind kind() const { return options_.kind; }
  bool is_random() const { return options_.kind == LayoutKind::kRandom; }
  int random_bits() const { return options_.random_bits; }
  int shard_bits() const { return options_.shard_bits; }
  bool reverse_time() const { return options_.reverse_time; }
  bool descending() const { return options_.descending; }
  // This layout with `descending` set as given. Errors: as Create (a descending layout must be
  // an ordered snowflake layout).
  Result<Layout> WithDescending(bool descending) const;
  // Whether ids keep their time order (no shard bits, time not reversed).
  bool ordered() const { return options_.shard_bits == 0 && !options_.reverse_time; }
  // One line on the order its ids keep and lose.
  std::string OrderingNote() const;
  // The options beyond the classic fields, as " key=value" pairs ("" for a classic snowflake
  // layout): appended to fingerprints so that those of classic layouts never change.
  std::string ExtraOptions() const;
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

  // From the plain value of the fields at their positions (the time field not reversed, no
  // shard bits) to the id: reverses the time field and adds the shard bits as the layout asks.
  // The identity for an ordered() layout.
  std::uint64_t Spread(std::uint64_t plain) const {
    if (options_.reverse_time) {
      const std::uint64_t low = plain & ((std::uint64_t{1} << time_shift_) - 1);
      plain = (ReverseBits(plain >> time_shift_, options_.time_bits) << time_shift_) | low;
    }
    if (options_.shard_bits > 0) plain |= ShardOf(plain) << shard_shift_;
    return plain;
  }
  // The shard bits of the id whose other bits are `plain` (0 without shard bits).
  std::uint64_t ShardOf(std::uint64_t plain) const {
    if (options_.shard_bits == 0) return 0;
    // splitmix64's finalizer: every bit of the fields moves the shard.
    std::uint64_t z = plain + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (z ^ (z >> 31)) >> (64 - options_.shard_bits);
  }
  // The lowest `bits` bits of `value` in reverse order.
  static std::uint64_t ReverseBits(std::uint64_t value, int bits) {
    std::uint64_t v = value;
    v = ((v >> 1) & 0x5555555555555555ULL) | ((v & 0x5555555555555555ULL) << 1);
    v = ((v >> 2) & 0x3333333333333333ULL) | ((v & 0x3333333333333333ULL) << 2);
    v = ((v >> 4) & 0x0f0f0f0f0f0f0f0fULL) | ((v & 0x0f0f0f0f0f0f0f0fULL) << 4);
    v = __builtin_bswap64(v);
    return bits == 0 ? 0 : v >> (64 - bits);
  }

  // Bit positions of each field, for fast composition (see Snowflake).
  int time_shift() const { return time_shift_; }
  int shard_shift() const { return shard_shift_; }
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
  int shard_shift_ = 0;
  std::int64_t max_tick_ = 0;
  Id max_id_ = 0;
};

}  // namespace sekka

#endif  // SEKKA_LAYOUT_H_
