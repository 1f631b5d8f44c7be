#include "sekka/layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>

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

// docs/contract.md section 2. The discord and instagram rows use 64 bits as their owners define
// them; the top time bit is then the sign bit, which Layout::max_tick() keeps clear.
const std::vector<PresetRow>& Presets() {
  constexpr auto kStd = FieldOrder::kTimeWorkerSequence;
  static const std::vector<PresetRow> rows = {
      {"sekka", Row("sekka", 41, 1, kSekkaEpochMillis, 0, 10, 12, kStd)},
      {"twitter", Row("twitter", 41, 1, 1288834974657, 5, 5, 12, kStd)},
      {"discord", Row("discord", 42, 1, 1420070400000, 5, 5, 12, kStd)},
      {"instagram", Row("instagram", 41, 1, 1314220021721, 0, 13, 10, kStd)},
      {"sonyflake",
       Row("sonyflake", 39, 10, kSekkaEpochMillis, 0, 16, 8, FieldOrder::kTimeSequenceWorker)},
      // 2016-05-20T00:00:00+08:00.
      {"baidu", Row("baidu", 28, 1000, 1463673600000, 0, 22, 13, kStd)},
      // 38 bits of 10 ms ticks last 87 years (to 2112); 64 worker ids; 51,200 ids/s each.
      {"js53", Row("js53", 38, 10, kSekkaEpochMillis, 0, 6, 9, kStd, /*js_safe=*/true)},
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

Result<Layout> ParseLayout(std::string_view text) {
  if (text.find('=') == std::string_view::npos) return Layout::Preset(text);
  LayoutOptions o;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgument(fmt::format("layout item \"{}\" is not key=value", item));
    }
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    auto bits = [&](int& field) -> Status {
      int v = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || end != value.data() + value.size()) {
        return InvalidArgument(
            fmt::format("layout.{} = \"{}\" is not a whole number of bits", key, value));
      }
      field = v;
      return Status::Ok();
    };
    Status status;
    if (key == "time_bits") {
      status = bits(o.time_bits);
    } else if (key == "datacenter_bits") {
      status = bits(o.datacenter_bits);
    } else if (key == "worker_bits") {
      status = bits(o.worker_bits);
    } else if (key == "sequence_bits") {
      status = bits(o.sequence_bits);
    } else if (key == "tick") {
      Result<std::int64_t> ms = ParseDurationMillis(value);
      if (!ms.ok()) return InvalidArgument("layout.tick: " + ms.error().message);
      o.tick_millis = *ms;
    } else if (key == "epoch") {
      Result<std::int64_t> ms = ParseUtcMillis(value);
      if (!ms.ok()) return InvalidArgument("layout.epoch: " + ms.error().message);
      o.epoch_millis = *ms;
    } else if (key == "order") {
      Result<FieldOrder> order = ParseFieldOrder(value);
      if (!order.ok()) return std::move(order).error();
      o.order = *order;
    } else if (key == "js_safe") {
      if (value != "true" && value != "false") {
        return InvalidArgument(
            fmt::format("layout.js_safe = \"{}\": allowed true or false", value));
      }
      o.js_safe = value == "true";
    } else if (key == "name") {
      o.name = std::string(value);
    } else {
      return InvalidArgument(fmt::format(
          "layout key \"{}\" is not known: allowed time_bits, datacenter_bits, worker_bits, "
          "sequence_bits, tick, epoch, order, js_safe, name",
          key));
    }
    if (!status.ok()) return std::move(status).error();
  }
  return Layout::Create(o);
}

std::string Layout::OrderName() const {
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
  time_shift_ = d + w + s;
  const int total = time_shift_ + options_.time_bits;
  max_id_ = total >= 63 ? kMaxInt64 : (std::int64_t{1} << total) - 1;
  const std::int64_t field_max =
      options_.time_bits >= 63 ? kMaxInt64 : (std::int64_t{1} << options_.time_bits) - 1;
  max_tick_ = std::min(field_max, max_id_ >> time_shift_);
  // And never past the last tick whose end is an int64 of ms (292 million years), so that the
  // time of every tick an id can carry, and of the one after, is exact.
  max_tick_ = std::min(
      max_tick_,
      (kMaxInt64 - std::max<std::int64_t>(0, options_.epoch_millis)) / options_.tick_millis - 1);
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
  const int total = o.time_bits + o.datacenter_bits + o.worker_bits + o.sequence_bits;
  if (o.js_safe && total > 53) {
    return InvalidArgument(fmt::format(
        "layout bits sum to {} (time {} + datacenter {} + worker {} + sequence {}): a js-safe "
        "layout allows at most 53",
        total, o.time_bits, o.datacenter_bits, o.worker_bits, o.sequence_bits));
  }
  if (!o.js_safe && total != 63) {
    return InvalidArgument(fmt::format(
        "layout bits sum to {} (time {} + datacenter {} + worker {} + sequence {}): they must "
        "sum to 63 (or at most 53 with js_safe)",
        total, o.time_bits, o.datacenter_bits, o.worker_bits, o.sequence_bits));
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
  if (Status s = check("datacenter id", f.datacenter, options_.datacenter_bits); !s.ok()) {
    return std::move(s).error();
  }
  if (Status s = check("worker id", f.worker, options_.worker_bits); !s.ok()) {
    return std::move(s).error();
  }
  if (Status s = check("sequence", f.sequence, options_.sequence_bits); !s.ok()) {
    return std::move(s).error();
  }
  return (f.tick << time_shift_) | (f.datacenter << datacenter_shift_) |
         (f.worker << worker_shift_) | (f.sequence << sequence_shift_);
}

Result<IdFields> Layout::Decompose(Id id) const {
  if (id < 0 || id > max_id_) {
    return InvalidArgument(
        fmt::format("id {} is outside layout {}: allowed 0 to {}", id, options_.name, max_id_));
  }
  auto field = [id](int shift, int bits) {
    return (id >> shift) & ((std::int64_t{1} << bits) - 1);
  };
  IdFields f;
  f.tick = id >> time_shift_;
  f.datacenter = field(datacenter_shift_, options_.datacenter_bits);
  f.worker = field(worker_shift_, options_.worker_bits);
  f.sequence = field(sequence_shift_, options_.sequence_bits);
  return f;
}

}  // namespace sekka
