#include "sekka/layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "sekka/codec.h"

namespace sekka {
namespace {

constexpr std::int64_t kMaxInt64 = std::numeric_limits<std::int64_t>::max();

struct PresetRow {
  std::string_view name;
  LayoutOptions options;
};

LayoutOptions Row(std::string_view name, int time_bits, std::int64_t tick, std::int64_t epoch,
                  int dc, int worker, int seq, FieldOrder order, bool js_safe = false) {
  LayoutOptions o;
  o.name = std::string(name);
  o.time_bits = time_bits;
  o.tick_millis = tick;
  o.epoch_millis = epoch;
  o.datacenter_bits = dc;
  o.worker_bits = worker;
  o.sequence_bits = seq;
  o.order = order;
  o.js_safe = js_safe;
  return o;
}

LayoutOptions RandomRow(std::string_view name, int time_bits, int random_bits) {
  LayoutOptions o =
      Row(name, time_bits, 1, kSekkaEpochMillis, 0, 0, 0, FieldOrder::kTimeWorkerSequence);
  o.kind = LayoutKind::kRandom;
  o.random_bits = random_bits;
  return o;
}

// docs/contract.md section 2. The discord and instagram rows use 64 bits as their owners define
// them; the top time bit is then the sign bit, which Layout::max_tick() keeps clear.
const std::vector<PresetRow>& Presets() {
  constexpr auto kStd = FieldOrder::kTimeWorkerSequence;
  static const std::vector<PresetRow> rows = {
      {"sekka", Row("sekka", 41, 1, kSekkaEpochMillis, 0, 10, 12, kStd)},
      {"twitter", Row("twitter", 41, 1, 1288834974657, 5, 5, 12, kStd)},
      // Meituan Leaf's snowflake mode: Twitter's epoch, 10 worker bits, 12 sequence bits.
      {"leaf", Row("leaf", 41, 1, 1288834974657, 0, 10, 12, kStd)},
      {"discord", Row("discord", 42, 1, 1420070400000, 5, 5, 12, kStd)},
      {"instagram", Row("instagram", 41, 1, 1314220021721, 0, 13, 10, kStd)},
      // sonyflake v2 (its default epoch 2025-01-01); v1 is sonyflake-v1 (epoch 2014-09-01).
      {"sonyflake",
       Row("sonyflake", 39, 10, kSekkaEpochMillis, 0, 16, 8, FieldOrder::kTimeSequenceWorker)},
      {"sonyflake-v1",
       Row("sonyflake-v1", 39, 10, 1409529600000, 0, 16, 8, FieldOrder::kTimeSequenceWorker)},
      // 2016-05-20T00:00:00+08:00.
      {"baidu", Row("baidu", 28, 1000, 1463673600000, 0, 22, 13, kStd)},
      // 38 bits of 10 ms ticks last 87 years (to 2112); 64 worker ids; 51,200 ids/s each.
      {"js53", Row("js53", 38, 10, kSekkaEpochMillis, 0, 6, 9, kStd, /*js_safe=*/true)},
      // 41 bits of ms (to 2094) and 22 random bits: no worker id (docs/design.md "Random ids").
      {"random", RandomRow("random", 41, 22)},
  };
  return rows;
}

Error OutOfRange(std::string_view field, std::int64_t value, std::int64_t lo, std::int64_t hi) {
  return InvalidArgument(
      fmt::format("layout.{} = {} is out of range: allowed {} to {}", field, value, lo, hi));
}

}  // namespace

Result<FieldOrder> ParseFieldOrder(std::string_view text) {
  if (text == "time,worker,sequence" || text == "time,datacenter,worker,sequence" ||
      text == "standard") {
    return FieldOrder::kTimeWorkerSequence;
  }
  if (text == "time,sequence,worker" || text == "time,sequence,datacenter,worker" ||
      text == "sonyflake") {
    return FieldOrder::kTimeSequenceWorker;
  }
  return InvalidArgument(
      fmt::format("layout.order \"{}\" is not known: allowed \"time,worker,sequence\" (also "
                  "\"time,datacenter,worker,sequence\") or \"time,sequence,worker\"",
                  text));
}

std::string_view FieldOrderName(FieldOrder order) {
  return order == FieldOrder::kTimeSequenceWorker ? "time,sequence,worker"
                                                  : "time,datacenter,worker,sequence";
}

namespace {

// A "key=value,..." layout text split into its items, none of them applied yet.
struct LayoutItems {
  std::vector<std::pair<std::string_view, std::string>> items;  // in order; kind= is not one
  std::optional<Layout> base;  // "PRESET,key=value,...": the preset, then the keys over it
  bool random = false;
};

// Takes a kind= item: it must be a known kind that fits the preset given first, if any.
Status ApplyKind(std::string_view value, LayoutItems& parsed) {
  if (value != "snowflake" && value != "random") {
    return InvalidArgument(fmt::format("layout.kind = \"{}\": allowed snowflake or random", value));
  }
  if (parsed.base.has_value() && parsed.base->is_random() != (value == "random")) {
    return InvalidArgument(
        fmt::format("layout.kind = \"{}\" does not fit preset {}", value, parsed.base->name()));
  }
  parsed.random = value == "random";
  return Status::Ok();
}

// Splits `text` at its commas into an optional preset name first, kind=, and the other
// key=value items; the field names after order= join its value.
Result<LayoutItems> SplitLayoutItems(std::string_view text) {
  LayoutItems parsed;
  auto& items = parsed.items;
  for (bool first = true; !text.empty(); first = false) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos && first) {
      SEKKA_ASSIGN_OR_RETURN(auto preset, Layout::Preset(item));
      parsed.base = preset;
      parsed.random = preset.is_random();
      continue;
    }
    if (eq == std::string_view::npos && !items.empty() && items.back().first == "order") {
      items.back().second += ',';  // order=time,sequence,worker: the field names go on
      items.back().second += item;
      continue;
    }
    if (eq == std::string_view::npos) {
      return InvalidArgument(fmt::format(
          "layout item \"{}\" is not key=value: allowed a preset name first, then key=value "
          "items (the field names of order= may follow it: order=time,sequence,worker)",
          item));
    }
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "kind") {
      SEKKA_RETURN_IF_ERROR(ApplyKind(value, parsed));
    } else {
      items.emplace_back(key, std::string(value));
    }
  }
  return parsed;
}

// The options the items go over.
LayoutOptions StartingOptions(const LayoutItems& parsed) {
  // Over the preset given first; else a random layout starts from the random preset, a
  // snowflake one from the sekka preset.
  LayoutOptions o;
  if (parsed.base.has_value()) {
    o = parsed.base->options();
  } else if (parsed.random) {
    o = RandomRow("custom", 41, 0);
  }
  return o;
}

// Refuses a key that names a field the layout's kind does not have.
Status CheckKeyFitsKind(std::string_view key, bool random) {
  if (random && (key == "datacenter_bits" || key == "worker_bits" || key == "sequence_bits" ||
                 key == "order" || key == "shard_bits")) {
    return InvalidArgument(
        fmt::format("layout key \"{}\" is not for kind=random (no worker id, no sequence): allowed "
                    "time_bits, random_bits, tick, epoch, js_safe, reverse_time, name",
                    key));
  }
  if (!random && key == "random_bits") {
    return InvalidArgument("layout key \"random_bits\" needs kind=random");
  }
  return Status::Ok();
}

// Sets `field` to `value` of layout key `key`, a whole number of bits.
Status ParseBits(std::string_view key, std::string_view value, int& field) {
  int v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size()) {
    return InvalidArgument(
        fmt::format("layout.{} = \"{}\" is not a whole number of bits", key, value));
  }
  field = v;
  return Status::Ok();
}

// Sets `field` to `value` of layout key `key`, true or false.
Status ParseFlag(std::string_view key, std::string_view value, bool& field) {
  if (value != "true" && value != "false") {
    return InvalidArgument(fmt::format("layout.{} = \"{}\": allowed true or false", key, value));
  }
  field = value == "true";
  return Status::Ok();
}

// Checks a layout's name= value.
Status CheckLayoutName(std::string_view value) {
  // Names go into messages and metric labels: plain characters only.
  const bool plain =
      !value.empty() && value.size() <= 64 && std::all_of(value.begin(), value.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-' || c == '.';
      });
  if (!plain) {
    return InvalidArgument(fmt::format("layout.name \"{}\": allowed 1 to 64 of A-Z a-z 0-9 _ - .",
                                       value.substr(0, 64)));
  }
  return Status::Ok();
}

// Sets the field of `o` that layout key `key` names to `value`.
Status ApplyLayoutItem(std::string_view key, std::string_view value, LayoutOptions& o) {
  if (key == "time_bits") return ParseBits(key, value, o.time_bits);
  if (key == "datacenter_bits") return ParseBits(key, value, o.datacenter_bits);
  if (key == "worker_bits") return ParseBits(key, value, o.worker_bits);
  if (key == "sequence_bits") return ParseBits(key, value, o.sequence_bits);
  if (key == "random_bits") return ParseBits(key, value, o.random_bits);
  if (key == "shard_bits") return ParseBits(key, value, o.shard_bits);
  if (key == "tick") {
    Result<std::int64_t> ms = ParseDurationMillis(value);
    if (!ms.ok()) return InvalidArgument("layout.tick: " + ms.error().message);
    o.tick_millis = *ms;
    return Status::Ok();
  }
  if (key == "epoch") {
    Result<std::int64_t> ms = ParseUtcMillis(value);
    if (!ms.ok()) return InvalidArgument("layout.epoch: " + ms.error().message);
    o.epoch_millis = *ms;
    return Status::Ok();
  }
  if (key == "order") {
    SEKKA_ASSIGN_OR_RETURN(o.order, ParseFieldOrder(value));
    return Status::Ok();
  }
  if (key == "js_safe") return ParseFlag(key, value, o.js_safe);
  if (key == "reverse_time" || key == "descending") {
    return ParseFlag(key, value, key == "reverse_time" ? o.reverse_time : o.descending);
  }
  if (key == "name") {
    SEKKA_RETURN_IF_ERROR(CheckLayoutName(value));
    o.name = std::string(value);
    return Status::Ok();
  }
  return InvalidArgument(fmt::format(
      "layout key \"{}\" is not known: allowed kind, time_bits, datacenter_bits, "
      "worker_bits, sequence_bits, random_bits, shard_bits, tick, epoch, order, js_safe, "
      "reverse_time, descending, name",
      key));
}

}  // namespace

Result<Layout> ParseLayout(std::string_view text) {
  if (text.find('=') == std::string_view::npos) return Layout::Preset(text);
  SEKKA_ASSIGN_OR_RETURN(LayoutItems parsed, SplitLayoutItems(text));
  const bool random = parsed.random;
  LayoutOptions o = StartingOptions(parsed);
  bool random_bits_set = false;
  for (const auto& item : parsed.items) {
    // Plain names, not a structured binding: clang before 16 cannot capture one in a lambda.
    const std::string_view key = item.first, value = item.second;
    SEKKA_RETURN_IF_ERROR(CheckKeyFitsKind(key, random));
    SEKKA_RETURN_IF_ERROR(ApplyLayoutItem(key, value, o));
    if (key == "random_bits") random_bits_set = true;
  }
  if (random && !random_bits_set) o.random_bits = (o.js_safe ? 53 : 63) - o.time_bits;
  return Layout::Create(o);
}

std::string Layout::OrderName() const {
  if (is_random()) return "time,random";
  const bool dc = options_.datacenter_bits > 0;
  if (options_.order == FieldOrder::kTimeSequenceWorker) {
    return dc ? "time,sequence,datacenter,worker" : "time,sequence,worker";
  }
  return dc ? "time,datacenter,worker,sequence" : "time,worker,sequence";
}

Layout::Layout(const LayoutOptions& options) : options_(options) {
  const int d = options_.datacenter_bits, w = options_.worker_bits, s = options_.sequence_bits;
  if (options_.order == FieldOrder::kTimeSequenceWorker) {
    worker_shift_ = 0;
    datacenter_shift_ = w;
    sequence_shift_ = w + d;
  } else {
    sequence_shift_ = 0;
    worker_shift_ = s;
    datacenter_shift_ = s + w;
  }
  time_shift_ = d + w + s + options_.random_bits;
  shard_shift_ = time_shift_ + options_.time_bits;
  const int total = shard_shift_ + options_.shard_bits;
  max_id_ = total >= 63 ? kMaxInt64 : (std::int64_t{1} << total) - 1;
  const std::int64_t field_max =
      options_.time_bits >= 63 ? kMaxInt64 : (std::int64_t{1} << options_.time_bits) - 1;
  max_tick_ = std::min(field_max, max_id_ >> time_shift_);
  // And never past the last tick that ends by 9999-12-31 (ISO 8601's last four-digit year), so
  // that the time of every tick an id can carry, and of the one after, is a date sekka can
  // write (62 bits of 1 s ticks said "year -6911": issue 24, finding 10).
  constexpr std::int64_t kLastMillis = 253'402'300'799'999;  // 9999-12-31T23:59:59.999Z
  max_tick_ = std::min(
      max_tick_,
      (kLastMillis - std::max<std::int64_t>(0, options_.epoch_millis)) / options_.tick_millis - 1);
}

Result<Layout> Layout::Create(const LayoutOptions& o) {
  if (o.time_bits < 16 || o.time_bits > 63) return OutOfRange("time_bits", o.time_bits, 16, 63);
  if (o.datacenter_bits < 0 || o.datacenter_bits > 31) {
    return OutOfRange("datacenter_bits", o.datacenter_bits, 0, 31);
  }
  if (o.worker_bits < 0 || o.worker_bits > 31) {
    return OutOfRange("worker_bits", o.worker_bits, 0, 31);
  }
  if (o.sequence_bits < 0 || o.sequence_bits > 31) {
    return OutOfRange("sequence_bits", o.sequence_bits, 0, 31);
  }
  if (o.kind == LayoutKind::kRandom) {
    if (o.random_bits < 1 || o.random_bits > 47) {
      return OutOfRange("random_bits", o.random_bits, 1, 47);
    }
    if (o.datacenter_bits != 0 || o.worker_bits != 0 || o.sequence_bits != 0 || o.shard_bits != 0 ||
        o.order != FieldOrder::kTimeWorkerSequence) {
      return InvalidArgument(
          "a random layout has only time and random bits: datacenter_bits, worker_bits, "
          "sequence_bits and shard_bits must be 0 (spread its ids with reverse_time)");
    }
  } else {
    if (o.random_bits != 0) {
      return InvalidArgument(
          fmt::format("layout.random_bits = {} needs kind=random: allowed 0", o.random_bits));
    }
    if (o.shard_bits < 0 || o.shard_bits > 15) {
      return OutOfRange("shard_bits", o.shard_bits, 0, 15);
    }
  }
  if (o.descending && (o.kind == LayoutKind::kRandom || o.shard_bits > 0 || o.reverse_time)) {
    return InvalidArgument(
        "descending=true needs an ordered layout: a random layout, shard_bits or reverse_time "
        "leave its ids no order to reverse");
  }
  if (o.tick_millis < 1 || o.tick_millis > 1000) {
    return InvalidArgument(fmt::format(
        "layout.tick = {}ms is out of range: allowed 1ms to 1000ms in whole milliseconds",
        o.tick_millis));
  }
  if (o.epoch_millis < 0) {
    return InvalidArgument(
        fmt::format("layout.epoch = {} is before 1970-01-01T00:00:00Z: allowed from then to now",
                    o.epoch_millis));
  }
  const int total = o.time_bits + o.datacenter_bits + o.worker_bits + o.sequence_bits +
                    o.random_bits + o.shard_bits;
  const std::string parts =
      o.kind == LayoutKind::kRandom
          ? fmt::format("time {} + random {}", o.time_bits, o.random_bits)
          : fmt::format("time {} + datacenter {} + worker {} + sequence {}{}", o.time_bits,
                        o.datacenter_bits, o.worker_bits, o.sequence_bits,
                        o.shard_bits > 0 ? fmt::format(" + shard {}", o.shard_bits) : "");
  if (o.js_safe && total > 53) {
    return InvalidArgument(fmt::format(
        "layout bits sum to {} ({}): a js-safe layout allows at most 53", total, parts));
  }
  if (!o.js_safe && total != 63) {
    return InvalidArgument(
        fmt::format("layout bits sum to {} ({}): they must sum to 63 (or at most 53 with js_safe)",
                    total, parts));
  }
  return Layout(o);
}

Result<Layout> Layout::Preset(std::string_view name) {
  for (const PresetRow& row : Presets()) {
    if (row.name == name) return Layout(row.options);
  }
  return NotFound(fmt::format("layout preset \"{}\" is not known: allowed {}", name,
                              fmt::join(PresetNames(), ", ")));
}

Layout Layout::Default() { return Layout(Presets().front().options); }

const std::vector<std::string_view>& Layout::PresetNames() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (const PresetRow& row : Presets()) v.push_back(row.name);
    return v;
  }();
  return names;
}

std::int64_t Layout::end_millis() const {
  const __int128 end =
      static_cast<__int128>(max_tick_ + 1) * options_.tick_millis + options_.epoch_millis;
  return end > kMaxInt64 ? kMaxInt64 : static_cast<std::int64_t>(end);
}

Result<Id> Layout::Compose(const IdFields& f) const {
  if (f.tick < 0) {
    return InvalidArgument(fmt::format("tick {} is before the layout's epoch", f.tick));
  }
  if (f.tick > max_tick_) {
    return Exhausted(fmt::format("layout {} exhausted on {}: tick {} is past its last tick {}",
                                 options_.name, FormatUtcMillis(end_millis()), f.tick, max_tick_));
  }
  auto check = [](std::string_view field, std::int64_t value, int bits) -> Status {
    const std::int64_t max = (std::int64_t{1} << bits) - 1;
    if (value < 0 || value > max) {
      return InvalidArgument(
          fmt::format("{} {} does not fit {} bits: allowed 0 to {}", field, value, bits, max));
    }
    return Status::Ok();
  };
  SEKKA_RETURN_IF_ERROR(check("datacenter id", f.datacenter, options_.datacenter_bits));
  SEKKA_RETURN_IF_ERROR(check("worker id", f.worker, options_.worker_bits));
  SEKKA_RETURN_IF_ERROR(check("sequence", f.sequence, options_.sequence_bits));
  SEKKA_RETURN_IF_ERROR(check("random", f.random, options_.random_bits));
  if (options_.descending) {
    // The upward id of the mirrored datacenter and worker: subtracting it from max_id() flips
    // every field, which turns those two back (Layout::Decompose undoes both).
    const auto plain = static_cast<std::uint64_t>(
        (f.tick << time_shift_) | ((datacenter_ids() - 1 - f.datacenter) << datacenter_shift_) |
        ((worker_ids_per_datacenter() - 1 - f.worker) << worker_shift_) |
        (f.sequence << sequence_shift_));
    return max_id_ - static_cast<Id>(plain);
  }
  const auto plain = static_cast<std::uint64_t>(
      (f.tick << time_shift_) | (f.datacenter << datacenter_shift_) | (f.worker << worker_shift_) |
      (f.sequence << sequence_shift_) | f.random);
  return static_cast<Id>(Spread(plain));
}

Result<IdFields> Layout::Decompose(Id id) const {
  if (id < 0 || id > max_id_) {
    return InvalidArgument(
        fmt::format("id {} is outside layout {}: allowed 0 to {}", id, options_.name, max_id_));
  }
  auto field = [](std::int64_t value, int shift, int bits) {
    return (value >> shift) & ((std::int64_t{1} << bits) - 1);
  };
  std::int64_t plain = options_.descending ? max_id_ - id : id;
  if (options_.shard_bits > 0) {
    plain = field(id, 0, shard_shift_);
    const std::uint64_t shard = static_cast<std::uint64_t>(id) >> shard_shift_;
    if (ShardOf(static_cast<std::uint64_t>(plain)) != shard) {
      return InvalidArgument(fmt::format(
          "id {} is not an id of layout {}: its shard bits are {}, its other fields give {}", id,
          options_.name, shard, ShardOf(static_cast<std::uint64_t>(plain))));
    }
  }
  IdFields f;
  f.tick = plain >> time_shift_;
  if (options_.reverse_time) {
    f.tick = static_cast<std::int64_t>(
        ReverseBits(static_cast<std::uint64_t>(f.tick), options_.time_bits));
  }
  f.datacenter = field(plain, datacenter_shift_, options_.datacenter_bits);
  f.worker = field(plain, worker_shift_, options_.worker_bits);
  f.sequence = field(plain, sequence_shift_, options_.sequence_bits);
  f.random = field(plain, 0, options_.random_bits);
  if (options_.descending) {
    f.datacenter = datacenter_ids() - 1 - f.datacenter;
    f.worker = worker_ids_per_datacenter() - 1 - f.worker;
  }
  return f;
}

std::string Layout::OrderingNote() const {
  if (options_.reverse_time) {
    return "none: the time field is bit-reversed, so ids spread over the whole key space and "
           "sort in no time order (decode them to sort by time)";
  }
  if (options_.shard_bits > 0) {
    return fmt::format(
        "by time only within each of {} shards (the top {} bits, a hash of the other fields): "
        "ids spread over {} key ranges; across shards they do not sort by time",
        std::int64_t{1} << options_.shard_bits, options_.shard_bits,
        std::int64_t{1} << options_.shard_bits);
  }
  if (is_random()) return "by tick: ids of one tick sort at random among themselves";
  if (options_.descending) {
    return "by time, descending: ids of one worker decrease; all workers' ids sort by tick, "
           "the newest first";
  }
  return "by time: ids of one worker increase; all workers' ids sort by tick";
}

std::string Layout::ExtraOptions() const {
  std::string out;
  if (is_random()) out += fmt::format(" kind=random random_bits={}", options_.random_bits);
  if (options_.shard_bits > 0) out += fmt::format(" shard_bits={}", options_.shard_bits);
  if (options_.reverse_time) out += " reverse_time=true";
  if (options_.descending) out += " descending=true";
  return out;
}

Result<Layout> Layout::WithDescending(bool descending) const {
  LayoutOptions o = options_;
  o.descending = descending;
  return Create(o);
}

std::string LayoutFingerprint(const Layout& l) {
  return fmt::format(
      "time_bits={} datacenter_bits={} worker_bits={} sequence_bits={} tick_ms={} "
      "epoch_ms={} order={}{}",
      l.time_bits(), l.datacenter_bits(), l.worker_bits(), l.sequence_bits(), l.tick_millis(),
      l.epoch_millis(), l.OrderName(), l.ExtraOptions());
}

std::string PresetOfFingerprint(std::string_view fingerprint) {
  for (std::string_view name : Layout::PresetNames()) {
    const Result<Layout> preset = Layout::Preset(name);
    if (preset.ok() && LayoutFingerprint(*preset) == fingerprint) return std::string(name);
  }
  return "";
}

Result<std::int64_t> AfterIdFloorMillis(const Layout& l, Id after_id) {
  if (!l.ordered() || l.descending() || l.is_random()) {
    return InvalidArgument(
        fmt::format("after_id needs a layout whose ids grow with time: layout {} has {}", l.name(),
                    l.is_random()    ? "random bits"
                    : l.descending() ? "descending ids"
                                     : "shard_bits or "
                                       "reverse_time"));
  }
  if (after_id < 0 || after_id > l.max_id()) {
    return InvalidArgument(fmt::format("after_id {} is outside layout {}: allowed 0 to {}",
                                       after_id, l.name(), l.max_id()));
  }
  const std::int64_t tick = after_id >> l.time_shift();
  if (tick >= l.max_tick()) {
    return InvalidArgument(fmt::format(
        "layout {} cannot issue ids above {}: that id reads as {}, and the layout's time runs "
        "out on {}; choose a layout with a later end or an earlier epoch",
        l.name(), after_id, FormatUtcMillis(l.TickToMillis(tick)),
        FormatUtcMillis(l.end_millis())));
  }
  return l.TickToMillis(tick + 1) - 1;
}

Status CheckEpochNotInFuture(const Layout& layout, std::int64_t now_ms) {
  if (layout.epoch_millis() <= now_ms) return Status::Ok();
  return InvalidArgument(
      fmt::format("layout.epoch {} is in the future (the clock reads {}): allowed up to now",
                  FormatUtcMillis(layout.epoch_millis()), FormatUtcMillis(now_ms)));
}

ClashOdds RandomClashOdds(const Layout& layout, double ids_per_second) {
  ClashOdds odds;
  const double tick_seconds = static_cast<double>(layout.tick_millis()) / 1000.0;
  const double ticks_per_day = 86400.0 / tick_seconds;
  odds.ids_per_tick = ids_per_second * tick_seconds;
  odds.ids_per_day = ids_per_second * 86400.0;
  // Expected alike pairs in a tick: λ²/2 pairs, each alike with odds 2^-random_bits.
  const double pairs = odds.ids_per_tick * odds.ids_per_tick / 2.0;
  const double mean = pairs / std::ldexp(1.0, layout.random_bits());
  odds.per_tick = -std::expm1(-mean);
  odds.expected_per_day = mean * ticks_per_day;
  odds.per_day = -std::expm1(-odds.expected_per_day);
  return odds;
}

}  // namespace sekka
