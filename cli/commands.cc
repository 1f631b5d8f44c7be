#include "cli/commands.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "backends/local_worker_lease.h"
#include "sekka/codec.h"
#include "sekka/layout.h"
#include "sekka/leased_generator.h"
#include "sekka/opaque.h"
#include "sekka/random_id.h"
#include "sekka/secrets.h"
#include "sekka/snowflake.h"
#include "sekka/uuid.h"

namespace sekka::cli {
namespace {

using Json = nlohmann::ordered_json;

// A layout from a preset name or a custom spec, with the epoch checked against the clock;
// `descending` (a flag) sets the layout's direction as its key descending=true does.
Result<Layout> ResolveLayout(const std::string& text, bool descending = false) {
  Result<Layout> layout = ParseLayout(text);
  if (!layout.ok()) return layout;
  if (descending) layout = layout->WithDescending(true);
  if (!layout.ok()) return layout;
  SEKKA_RETURN_IF_ERROR(CheckEpochNotInFuture(*layout, SystemClock().NowMillis()));
  return layout;
}

// Exit code for an error from setting up (bad input) or from running.
int ExitFor(const Error& error, bool during_setup) {
  const bool usage =
      error.code == ErrorCode::kInvalidArgument || error.code == ErrorCode::kNotFound;
  return Fail(usage && during_setup ? kExitUsage : kExitFailure, error.message);
}

// An id given on the command line: a decimal number from 0 to 2^63 - 1, all of the text.
// Errors: kInvalidArgument naming the text as typed and what is allowed.
Result<std::int64_t> ParseIdFlag(std::string_view flag, std::string_view text) {
  std::int64_t id = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec == std::errc() && end == text.data() + text.size() && id >= 0) return id;
  return InvalidArgument(fmt::format("{} \"{}\" is not an id: allowed 0 to {}", flag, text,
                                     std::numeric_limits<std::int64_t>::max()));
}

std::string FormatRate(double rate) {
  return rate >= 1000 ? FormatThousands(rate) : fmt::format("{:.4g}", rate);
}

// A probability: "1.19e-07", "0.0312", or "> 0.9999" where it is a certainty in practice.
std::string FormatOdds(double p) {
  if (p > 0.9999) return "> 0.9999";
  return fmt::format("{:.3g}", p);
}

// A span of time in the unit that reads best: "42 s", "3.5 hours", "1.2e+04 years".
std::string FormatSpan(double seconds) {
  if (seconds < 120) return fmt::format("{:.3g} s", seconds);
  if (seconds < 7200) return fmt::format("{:.3g} minutes", seconds / 60);
  if (seconds < 172800) return fmt::format("{:.3g} hours", seconds / 3600);
  if (seconds < 86400 * 730.5) return fmt::format("{:.3g} days", seconds / 86400);
  return fmt::format("{:.3g} years", seconds / (86400 * 365.25));
}

Json DecodedJson(const DecodedId& d, const Layout& layout) {
  Json j{{"id", std::to_string(d.id)},
         {"time", FormatUtcMillis(d.timestamp_ms)},
         {"timestamp_ms", d.timestamp_ms}};
  if (layout.is_random()) {
    j["random"] = d.random;
  } else {
    j["datacenter"] = d.datacenter;
    j["worker"] = d.worker;
    j["sequence"] = d.sequence;
  }
  if (layout.shard_bits() > 0) j["shard"] = d.shard;
  return j;
}

// The fields of a decoded id after its time, as "key=value" pairs.
std::string DecodedFields(const DecodedId& d, const Layout& layout) {
  std::string out = layout.is_random() ? fmt::format("random={}", d.random)
                                       : fmt::format("datacenter={} worker={} sequence={}",
                                                     d.datacenter, d.worker, d.sequence);
  if (layout.shard_bits() > 0) out += fmt::format(" shard={}", d.shard);
  return out;
}

// Prints `count` ids, `chunk` at a time: `make(n, out)` appends n lines to `out`, which is
// written after each chunk (and, on an error, what was made before it).
int PrintInChunks(std::int64_t count, std::size_t chunk,
                  const std::function<Status(std::size_t, std::string&)>& make) {
  std::string out;
  for (std::int64_t left = count; left > 0;) {
    const auto n = static_cast<std::size_t>(std::min<std::int64_t>(left, chunk));
    const Status made = make(n, out);
    std::fwrite(out.data(), 1, out.size(), stdout);
    out.clear();
    if (!made.ok()) {
      std::fflush(stdout);
      return ExitFor(made.error(), false);
    }
    left -= static_cast<std::int64_t>(n);
  }
  if (std::fflush(stdout) != 0) return Fail(kExitFailure, "writing the ids to stdout failed");
  return kExitOk;
}

// Random ids (a random layout): nothing to lease, nothing to store. One id a call: a batch
// would share one tick and be kept distinct, which single ids from many processes are not;
// the odds `sekka layout --rate` prints are for those.
int GenRandom(const GenFlags& flags, const Layout& layout, OpaqueCodec* opaque, IdFormat format) {
  Result<std::unique_ptr<RandomIdGenerator>> made =
      RandomIdGenerator::Create(layout, SystemClock());
  if (!made.ok()) return ExitFor(made.error(), true);
  RandomIdGenerator& g = **made;
  return PrintInChunks(flags.count, 1024, [&](std::size_t n, std::string& out) -> Status {
    for (std::size_t i = 0; i < n; ++i) {
      SEKKA_ASSIGN_OR_RETURN(auto id, g.Next());
      out += opaque ? *opaque->EncodeText(id) : FormatId(id, format, layout);
      out += '\n';
    }
    return Status::Ok();
  });
}

}  // namespace

std::string FormatThousands(double value) {
  std::string digits = fmt::format("{:.0f}", value);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

int Fail(int exit_code, const std::string& message) {
  std::string line = RedactSecrets(message);
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::fprintf(stderr, "sekka: %s\n", line.c_str());
  return exit_code;
}

namespace {

// gen --kind uuidv7 | ulid: random bits instead of a worker id; nothing to lease or store.
int GenTimeOrdered(const GenFlags& flags) {
  const bool uuid = flags.kind == "uuidv7";
  TimeOrderedGenerator g(SystemClock(), uuid ? TimeOrderedKind::kUuidV7 : TimeOrderedKind::kUlid);
  std::vector<Uuid> batch(4096);
  return PrintInChunks(flags.count, batch.size(), [&](std::size_t n, std::string& out) {
    if (Status s = g.NextBatch(std::span(batch.data(), n)); !s.ok()) return s;
    for (std::size_t i = 0; i < n; ++i) {
      out += uuid ? FormatUuid(batch[i]) : FormatUlid(batch[i]);
      out += '\n';
    }
    return Status::Ok();
  });
}

// --format opaque: the text form of opaque ids, with the key file's newest key; null for any
// other format.
Result<std::unique_ptr<OpaqueCodec>> GenOpaque(const GenFlags& flags, const Layout& layout) {
  if (flags.format != "opaque") return std::unique_ptr<OpaqueCodec>();
  if (flags.key_file.empty()) {
    return InvalidArgument(
        "--format opaque needs --opaque-key-file (sekka opaque keygen makes one)");
  }
  SEKKA_ASSIGN_OR_RETURN(auto keys, ReadOpaqueKeyFile(flags.key_file));
  return OpaqueCodec::Create(keys, layout);
}

// The generator gen issues through. Every id gen prints is unique on this host, like the
// server's (docs/contract.md section 11): it issues through the same LeasedGenerator, its worker
// id held by a lock file in the host's worker lock dir (shared with every `sekka serve` of the
// host) and its hwm stored beside it. Errors: kInvalidArgument for a flag (named).
Result<std::unique_ptr<LeasedGenerator>> StartGen(const GenFlags& flags, const Layout& layout,
                                                  SequenceStart start, const std::string& dir) {
  const std::int64_t worker_id = flags.worker_id_set ? flags.worker_id : 0;  // static's
  LeasedGeneratorOptions options;
  options.generator.layout = layout;
  options.generator.sequence_start = start;
  options.generator.worker_id = worker_id;
  options.generator.datacenter_id = flags.datacenter_id;
  options.hwm_ahead_ms = 100;  // capped by the ids left: the next run has little to wait out
  options.inline_hwm = true;
  Result<std::int64_t> max_wait = ParseDurationMillis(flags.max_startup_wait);
  if (!max_wait.ok()) return InvalidArgument("--max-startup-wait: " + max_wait.error().message);
  options.max_startup_wait_ms = *max_wait;
  if (flags.after_id.has_value()) {
    SEKKA_ASSIGN_OR_RETURN(auto after, ParseIdFlag("--after-id", *flags.after_id));
    Result<std::int64_t> floor = AfterIdFloorMillis(layout, after);
    if (!floor.ok()) return InvalidArgument("--after-id: " + floor.error().message);
    options.after_ms = *floor;
    options.after_what = fmt::format("--after-id {}", after);
  }
  LocalLeaseOptions local;
  local.source = flags.worker_id_set ? "static" : "local";
  local.lock_dir = dir;
  local.worker_id = worker_id;
  local.layout = layout;
  WorkerLeaseOptions lo;
  // One identity per layout: a gen of another layout does not take these ids for its own.
  lo.identity = "sekka gen " + LayoutFingerprint(layout);
  lo.datacenter_id = flags.datacenter_id;
  lo.worker_count = layout.worker_ids_per_datacenter();
  // gen's hwm reaches no further than its ids need, so a next run waits a tick or so for its
  // own id: it keeps it, and runs one after another print increasing ids, after a clock step
  // back too.
  lo.keep_id = true;
  return LeasedGenerator::Start(options, SystemClock(), NewLocalWorkerLease(local, lo), nullptr);
}

// Prints `flags.count` ids of `generator`. Ids are made in runs of about one tick's worth and
// written through one large buffer, so that the formatting of one run fits in the wait for the
// next tick.
int PrintSnowflakes(const GenFlags& flags, LeasedGenerator& generator, const Layout& layout,
                    const OpaqueCodec* opaque, IdFormat format) {
  std::int64_t left = flags.count;
  const std::size_t chunk =
      static_cast<std::size_t>(std::min<std::int64_t>({flags.count, layout.ids_per_tick(), 65536}));
  std::vector<Id> ids(chunk);
  std::string out;
  out.reserve(1 << 20);
  while (left > 0) {
    const auto n = static_cast<std::size_t>(std::min<std::int64_t>(left, chunk));
    generator.SetIdsLeft(left);
    if (Status s = generator.NextIds(std::span<Id>(ids.data(), n)); !s.ok()) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      std::fflush(stdout);
      // Before the first id, a refusal (the lock dir's id space, bound at the first hwm store)
      // is the configuration's: exit 2, as at start.
      return ExitFor(s.error(), left == flags.count);
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (opaque != nullptr) {
        out += *opaque->EncodeText(ids[i]);  // the generator's ids are inside the layout
      } else if (format == IdFormat::kDec) {
        char buf[20];
        out.append(buf, FormatDec(ids[i], buf));
      } else {
        out += FormatId(ids[i], format, layout);
      }
      out += '\n';
    }
    if (out.size() > (1 << 20) - 4096 * kMaxIdTextSize) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
    left -= static_cast<std::int64_t>(n);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (std::fflush(stdout) != 0) return Fail(kExitFailure, "writing the ids to stdout failed");
  return kExitOk;
}

}  // namespace

int RunGen(const GenFlags& flags) {
  if (flags.count < 1) {
    return Fail(kExitUsage, fmt::format("-n {} is out of range: allowed 1 or more", flags.count));
  }
  if (flags.kind == "uuidv7" || flags.kind == "ulid") return GenTimeOrdered(flags);
  if (flags.kind != "snowflake") {
    return Fail(kExitUsage,
                fmt::format("--kind {} is not known: allowed snowflake, uuidv7, ulid", flags.kind));
  }
  Result<Layout> layout = ResolveLayout(flags.layout, flags.descending);
  if (!layout.ok()) return ExitFor(layout.error(), true);
  Result<std::unique_ptr<OpaqueCodec>> opaque = GenOpaque(flags, *layout);
  if (!opaque.ok()) return ExitFor(opaque.error(), true);
  Result<IdFormat> format =
      *opaque ? Result<IdFormat>(IdFormat::kDec) : ParseIdFormat(flags.format);
  if (!format.ok()) {
    return Fail(kExitUsage, format.error().message + ", or opaque (with --opaque-key-file)");
  }
  if (layout->is_random()) return GenRandom(flags, *layout, opaque->get(), *format);
  Result<SequenceStart> start = ParseSequenceStart(flags.sequence_start);
  if (!start.ok()) return ExitFor(start.error(), true);
  const char* env_dir = std::getenv("SEKKA_WORKER_LOCK_DIR");
  const std::string dir = !flags.lock_dir.empty()                  ? flags.lock_dir
                          : env_dir != nullptr && *env_dir != '\0' ? env_dir
                                                                   : kDefaultWorkerLockDir;
  Result<std::unique_ptr<LeasedGenerator>> leased = StartGen(flags, *layout, *start, dir);
  if (!leased.ok()) return ExitFor(leased.error(), true);
  const int code = PrintSnowflakes(flags, **leased, *layout, opaque->get(), *format);
  if (code == kExitOk) {
    std::fprintf(stderr, "sekka gen: worker id %lld (lock dir %s)\n",
                 static_cast<long long>((*leased)->generator().worker_id()), dir.c_str());
  }
  return code;
}

int RunDecode(const DecodeFlags& flags) {
  Result<Layout> layout = ResolveLayout(flags.layout, flags.descending);
  if (!layout.ok()) return ExitFor(layout.error(), true);
  Result<IdFormat> format = ParseIdFormat(flags.format);
  if (!format.ok()) return ExitFor(format.error(), true);

  int exit_code = kExitOk;
  auto decode_one = [&](const std::string& text) {
    // A UUID (36 characters with dashes) or a ULID (26): no other id text is that long.
    if (text.size() == 36 || text.size() == 26) {
      const bool uuid = text.size() == 36;
      Result<Uuid> u = uuid ? ParseUuid(text) : ParseUlid(text);
      if (!u.ok()) {
        exit_code = Fail(kExitUsage, u.error().message);
        return;
      }
      const std::int64_t ms = UuidMillis(*u);
      if (flags.json) {
        Json j = {{"id", text}, {"kind", uuid ? "uuid" : "ulid"}};
        if (uuid) j["version"] = UuidVersion(*u);
        j["time"] = FormatUtcMillis(ms);
        j["timestamp_ms"] = ms;
        std::cout << j.dump() << '\n';
      } else if (uuid) {
        // Only UUIDv7 (and v6's relative, not made here) carry Unix ms in front.
        std::cout << fmt::format(
            "{} kind=uuid version={}{}\n", text, UuidVersion(*u),
            UuidVersion(*u) == 7 ? fmt::format(" time={} timestamp_ms={}", FormatUtcMillis(ms), ms)
                                 : "");
      } else {
        std::cout << fmt::format("{} kind=ulid time={} timestamp_ms={}\n", text,
                                 FormatUtcMillis(ms), ms);
      }
      return;
    }
    Result<Id> id = ParseId(text, *format, *layout);
    Result<DecodedId> decoded =
        id.ok() ? DecodeId(*id, *layout) : Result<DecodedId>(std::move(id).error());
    if (!decoded.ok()) {
      exit_code = Fail(kExitUsage, decoded.error().message);
      return;
    }
    const DecodedId& d = *decoded;
    if (flags.json) {
      std::cout << DecodedJson(d, *layout).dump() << '\n';
    } else {
      std::cout << fmt::format("{} time={} timestamp_ms={} {}\n", d.id,
                               FormatUtcMillis(d.timestamp_ms), d.timestamp_ms,
                               DecodedFields(d, *layout));
    }
  };
  if (!flags.ids.empty()) {
    for (const std::string& text : flags.ids) decode_one(text);
  } else {
    std::string text;
    while (std::cin >> text) decode_one(text);
  }
  std::cout.flush();
  return exit_code;
}

Result<double> ParseRate(std::string_view text) {
  auto bad = [given = text] {  // as given: `text` is cut below ("5/x" said "5")
    return InvalidArgument(fmt::format(
        "--rate \"{}\" is not a rate: allowed a number with an optional k or M and an optional "
        "/s, /min, /h or /d, e.g. 5000/s, 20k/s, 1.5M/min",
        given.substr(0, 60)));
  };
  std::string_view unit = "/s";
  if (const std::size_t slash = text.find('/'); slash != std::string_view::npos) {
    unit = text.substr(slash);
    text = text.substr(0, slash);
  }
  double scale = 1;
  if (!text.empty() && (text.back() == 'k' || text.back() == 'K')) {
    scale = 1e3;
    text.remove_suffix(1);
  } else if (!text.empty() && text.back() == 'M') {
    scale = 1e6;
    text.remove_suffix(1);
  }
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
      !std::isfinite(value) || value < 0 || value > 1e12) {
    return bad();
  }
  double per = 0;
  if (unit == "/s") {
    per = 1;
  } else if (unit == "/min") {
    per = 60;
  } else if (unit == "/h") {
    per = 3600;
  } else if (unit == "/d") {
    per = 86400;
  } else {
    return bad();
  }
  return value * scale / per;
}

// sekka layout P --max-id N: whether layout P can follow a system whose largest id is N, issuing
// only ids above it (so nothing repeats and the order holds), from when and until when.
int PrintTakeOver(const Layout& l, Id max_id, std::int64_t now, bool json) {
  if (now > l.end_millis()) {
    return Fail(kExitFailure, fmt::format("layout {} cannot take over after id {}: it ran out on "
                                          "{} and issues no ids now",
                                          l.name(), max_id, FormatUtcMillis(l.end_millis())));
  }
  Result<std::int64_t> floor = AfterIdFloorMillis(l, max_id);
  if (!floor.ok()) return Fail(kExitFailure, floor.error().message);
  const std::int64_t from = *floor + 1;
  const bool now_ok = now >= from;
  if (json) {
    Json j{{"layout", l.name()},
           {"max_id", std::to_string(max_id)},
           {"above_from", FormatUtcMillis(from)},
           {"above_from_ms", from},
           {"now", now_ok},
           {"until", FormatUtcMillis(l.end_millis())}};
    std::cout << j.dump() << '\n';
  } else if (now_ok) {
    std::cout << fmt::format(
        "layout {} can take over after id {}: its ids are above it from {} (now), until the "
        "layout runs out on {}; start with --after-id {} (generator.after_id)\n",
        l.name(), max_id, FormatUtcMillis(from), FormatUtcMillis(l.end_millis()), max_id);
  } else {
    std::cout << fmt::format(
        "layout {} cannot take over after id {} now: its ids are above it only from {} ({:.1f} "
        "days from now); before that they would sort below it, and could repeat ids it issued. "
        "Use a layout whose ids are already above it (the old system's own, e.g. leaf or "
        "sonyflake-v1, or an earlier epoch)\n",
        l.name(), max_id, FormatUtcMillis(from), static_cast<double>(from - now) / 86'400'000.0);
  }
  return now_ok ? kExitOk : kExitFailure;
}

namespace {

// What `sekka layout --rate` adds: for a random layout the odds of a clash, for a snowflake one
// the worker ids the rate keeps busy (each makes at most ids_per_second()).
struct RateNote {
  std::optional<double> rate;
  std::optional<ClashOdds> odds;
  std::int64_t workers_needed = 0;
};

Json LayoutJson(const Layout& l, bool expired, const RateNote& r) {
  const std::optional<double>& rate = r.rate;
  const std::optional<ClashOdds>& odds = r.odds;
  const std::int64_t workers_needed = r.workers_needed;
  Json j{{"name", l.name()},
         {"kind", l.is_random() ? "random" : "snowflake"},
         {"time_bits", l.time_bits()}};
  if (l.is_random()) {
    j["random_bits"] = l.random_bits();
  } else {
    j["datacenter_bits"] = l.datacenter_bits();
    j["worker_bits"] = l.worker_bits();
    j["sequence_bits"] = l.sequence_bits();
    j["shard_bits"] = l.shard_bits();
  }
  j["reverse_time"] = l.reverse_time();
  j["descending"] = l.descending();
  j["order"] = l.OrderName();
  j["ordering"] = l.OrderingNote();
  j["tick_ms"] = l.tick_millis();
  j["epoch"] = FormatUtcMillis(l.epoch_millis());
  j["epoch_ms"] = l.epoch_millis();
  j["js_safe"] = l.options().js_safe;
  if (!l.is_random()) {
    j["ids_per_tick"] = l.ids_per_tick();
    j["ids_per_second"] = l.ids_per_second();
    j["worker_ids"] = l.worker_ids();
    j["datacenter_ids"] = l.datacenter_ids();
  }
  j["max_id"] = std::to_string(l.max_id());
  j["runs_out"] = FormatUtcMillis(l.end_millis());
  j["runs_out_ms"] = l.end_millis();
  j["expired"] = expired;
  if (odds) {
    j["rate"] = {{"ids_per_second", *rate},
                 {"ids_per_tick", odds->ids_per_tick},
                 {"clash_per_tick", odds->per_tick},
                 {"clash_per_day", odds->per_day},
                 {"expected_clashes_per_day", odds->expected_per_day}};
  } else if (rate) {
    j["rate"] = {{"ids_per_second", *rate}, {"worker_ids_needed", workers_needed}};
  }
  return j;
}

void PrintLayout(const Layout& l, bool expired, const RateNote& r) {
  const std::optional<double>& rate = r.rate;
  const std::optional<ClashOdds>& odds = r.odds;
  const std::int64_t workers_needed = r.workers_needed;
  std::string bits, capacity;
  if (l.is_random()) {
    bits = fmt::format("time {} | random {}", l.time_bits(), l.random_bits());
    capacity =
        fmt::format("2^{} random values per tick, no worker ids (clashes are possible: see --rate)",
                    l.random_bits());
  } else {
    bits = fmt::format("{}time {} | datacenter {} | worker {} | sequence {}",
                       l.shard_bits() > 0 ? fmt::format("shard {} | ", l.shard_bits()) : "",
                       l.time_bits(), l.datacenter_bits(), l.worker_bits(), l.sequence_bits());
    std::string workers = FormatThousands(static_cast<double>(l.worker_ids()));
    if (l.datacenter_bits() > 0) {
      workers += fmt::format(" ({} datacenters x {} workers)", l.datacenter_ids(),
                             l.worker_ids_per_datacenter());
    }
    capacity = fmt::format("{} ids per tick per worker, {} ids/s per worker, {} worker ids",
                           FormatThousands(static_cast<double>(l.ids_per_tick())),
                           FormatThousands(l.ids_per_second()), workers);
  }
  std::cout << fmt::format(
      "layout     {}\n"
      "bits       {}  (order {}{}{})\n"
      "tick       {} ms\n"
      "epoch      {} ({} ms)\n"
      "capacity   {}\n"
      "ordering   {}\n"
      "max id     {}\n"
      "runs out   {}{}\n",
      l.name(), bits, l.OrderName(), l.reverse_time() ? ", time bit-reversed" : "",
      l.options().js_safe ? ", js-safe" : "", l.tick_millis(), FormatUtcMillis(l.epoch_millis()),
      l.epoch_millis(), capacity, l.OrderingNote(), l.max_id(), FormatUtcMillis(l.end_millis()),
      expired ? "  (expired: generation fails, decoding works)" : "");
  if (odds) {
    std::cout << fmt::format(
        "rate       {} ids/s: {:.4g} ids per tick on average\n"
        "clash      odds of at least one: {} per tick, {} per day; {:.3g} a day on average{}\n",
        FormatRate(*rate), odds->ids_per_tick, FormatOdds(odds->per_tick),
        FormatOdds(odds->per_day), odds->expected_per_day,
        odds->expected_per_day > 0 ? ", one every " + FormatSpan(86400.0 / odds->expected_per_day)
                                   : "");
  } else if (rate) {
    std::cout << fmt::format("rate       {} ids/s: keeps at least {} worker id{} busy{}\n",
                             FormatRate(*rate), workers_needed, workers_needed == 1 ? "" : "s",
                             workers_needed > l.worker_ids() ? " (more than the layout has)" : "");
  }
}

}  // namespace

int RunLayout(const LayoutFlags& flags) {
  if (flags.list) {
    for (std::string_view name : Layout::PresetNames()) std::cout << name << '\n';
    return kExitOk;
  }
  Result<Layout> layout = ResolveLayout(flags.layout);
  if (!layout.ok()) return ExitFor(layout.error(), true);
  RateNote note;
  if (!flags.rate.empty()) {
    Result<double> parsed = ParseRate(flags.rate);
    if (!parsed.ok()) return ExitFor(parsed.error(), true);
    note.rate = *parsed;
  }
  const Layout& l = *layout;
  const std::int64_t now = SystemClock().NowMillis();
  if (flags.max_id.has_value()) {
    Result<std::int64_t> max_id = ParseIdFlag("--max-id", *flags.max_id);
    if (!max_id.ok()) return Fail(kExitUsage, max_id.error().message);
    return PrintTakeOver(l, *max_id, now, flags.json);
  }
  if (note.rate && l.is_random()) note.odds = RandomClashOdds(l, *note.rate);
  if (note.rate && !l.is_random()) {
    note.workers_needed = static_cast<std::int64_t>(std::ceil(*note.rate / l.ids_per_second()));
  }
  const bool expired = l.end_millis() <= now;
  if (flags.json) {
    std::cout << LayoutJson(l, expired, note).dump(2) << '\n';
  } else {
    PrintLayout(l, expired, note);
  }
  return kExitOk;
}

namespace {

// Ids per second of `threads` threads calling one generator of `layout` for `seconds`: NextId,
// or NextIds of `batch` when `batch` > 0. Each thread makes at least one round, so a run on a
// busy machine, whose threads start after the deadline, still measures something.
Result<double> MeasureBench(const Layout& layout, int threads, int batch, double seconds) {
  SnowflakeOptions options;
  options.layout = layout;
  SEKKA_ASSIGN_OR_RETURN(auto made, Snowflake::Create(options, SystemClock()));
  Snowflake& snowflake = *made;
  std::atomic<std::uint64_t> total{0};
  std::atomic<bool> failed{false};
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      std::vector<Id> ids(static_cast<std::size_t>(std::max(batch, 1)));
      std::uint64_t made_ids = 0;
      do {
        if (batch > 0) {
          if (!snowflake.NextIds(std::span<Id>(ids)).ok()) failed = true;
          made_ids += ids.size();
        } else {
          for (int i = 0; i < 1024; ++i) {
            if (!snowflake.NextId().ok()) failed = true;
          }
          made_ids += 1024;
        }
      } while (std::chrono::steady_clock::now() < deadline && !failed.load());
      total += made_ids;
    });
  }
  for (auto& w : workers) w.join();
  if (failed) return Unavailable("generation failed during the benchmark");
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(total.load()) / elapsed;
}

}  // namespace

int RunBench(const BenchFlags& flags) {
  if (flags.max_threads < 1 || flags.max_threads > 256) {
    return Fail(kExitUsage,
                fmt::format("--threads {} is out of range: allowed 1 to 256", flags.max_threads));
  }
  if (!(flags.seconds > 0 && flags.seconds <= 60)) {
    return Fail(kExitUsage, fmt::format("--seconds {} is out of range: allowed above 0 up to 60",
                                        flags.seconds));
  }
  if (flags.batch < 1 || flags.batch > 1'000'000) {
    return Fail(kExitUsage,
                fmt::format("--batch {} is out of range: allowed 1 to 1000000", flags.batch));
  }
  Result<Layout> layout = ResolveLayout(flags.layout);
  if (!layout.ok()) return ExitFor(layout.error(), true);

  struct Row {
    int threads;
    std::string mode;
    double ids_per_second;
  };
  std::vector<Row> rows;
  for (const bool batch : {false, true}) {
    for (int threads = 1; threads <= flags.max_threads; ++threads) {
      Result<double> rate = MeasureBench(*layout, threads, batch ? flags.batch : 0, flags.seconds);
      if (!rate.ok()) return Fail(kExitFailure, rate.error().message);
      rows.push_back({threads, batch ? fmt::format("NextIds({})", flags.batch) : "NextId", *rate});
    }
  }
  const double ceiling = layout->ids_per_second();
  if (flags.json) {
    Json j{{"layout", layout->name()},
           {"ceiling_ids_per_second", ceiling},
           {"results", Json::array()}};
    for (const Row& r : rows) {
      j["results"].push_back(
          {{"threads", r.threads}, {"mode", r.mode}, {"ids_per_second", r.ids_per_second}});
    }
    std::cout << j.dump(2) << '\n';
    return kExitOk;
  }
  std::cout << fmt::format("layout {}: ceiling {} ids/s per worker\n", layout->name(),
                           FormatThousands(ceiling));
  std::cout << fmt::format("{:>7}  {:<16} {:>16}  {:>9}\n", "threads", "call", "ids/s", "ceiling");
  for (const Row& r : rows) {
    std::cout << fmt::format("{:>7}  {:<16} {:>16}  {:>8.1f}%\n", r.threads, r.mode,
                             FormatThousands(r.ids_per_second), 100.0 * r.ids_per_second / ceiling);
  }
  return kExitOk;
}

namespace {

// Makes `path` with `text`, readable by its owner only (a key file the next command takes,
// whatever the umask), and never over an existing file (a key lost is every opaque id lost).
int WriteNewPrivateFile(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Fail(kExitUsage,
                errno == EEXIST
                    ? fmt::format("--out \"{}\" exists: keygen never writes over a key file (to "
                                  "rotate, add a key: sekka opaque keygen --version b >> {})",
                                  path, path)
                    : fmt::format("--out \"{}\" cannot be made: {}", path, std::strerror(errno)));
  }
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(path.c_str());
      return Fail(kExitUsage, fmt::format("--out \"{}\" cannot be written: {}", path, why));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) {
    return Fail(kExitUsage,
                fmt::format("--out \"{}\" cannot be written: {}", path, std::strerror(errno)));
  }
  return kExitOk;
}

}  // namespace

int RunOpaque(const OpaqueFlags& flags) {
  if (flags.action == "keygen") {
    if (flags.version.size() != 1) {
      return Fail(kExitUsage, fmt::format("--version \"{}\": allowed one character of 0-9A-Za-z",
                                          flags.version));
    }
    Result<std::string> line = NewOpaqueKeyLine(flags.version[0]);
    if (!line.ok()) return ExitFor(line.error(), true);
    const std::string text = "# sekka opaque key, made " +
                             FormatUtcMillis(SystemClock().NowMillis()) +
                             ": keep it secret; add newer keys below it to rotate\n" + *line + '\n';
    if (flags.out.empty()) {
      std::cout << text;
      return kExitOk;
    }
    return WriteNewPrivateFile(flags.out, text);
  }
  if (flags.key_file.empty()) {
    return Fail(kExitUsage,
                "--opaque-key-file is required (sekka opaque keygen --out FILE makes one)");
  }
  Result<Layout> layout = ParseLayout(flags.layout);
  if (!layout.ok()) return ExitFor(layout.error(), true);
  Result<std::vector<OpaqueKey>> keys = ReadOpaqueKeyFile(flags.key_file);
  if (!keys.ok()) return ExitFor(keys.error(), true);
  Result<std::unique_ptr<OpaqueCodec>> codec = OpaqueCodec::Create(*keys, *layout);
  if (!codec.ok()) return ExitFor(codec.error(), true);
  if (flags.values.empty()) return Fail(kExitUsage, "give one or more values");
  std::string out;
  for (const std::string& value : flags.values) {
    if (flags.action == "encode") {
      Result<Id> id = ParseId(value, IdFormat::kDec, *layout);
      if (!id.ok()) return ExitFor(id.error(), true);
      if (flags.numeric) {
        Result<Id> opaque = (*codec)->Encode(*id);
        if (!opaque.ok()) return ExitFor(opaque.error(), true);
        out += fmt::format("{}\n", *opaque);
      } else {
        Result<std::string> text = (*codec)->EncodeText(*id);
        if (!text.ok()) return ExitFor(text.error(), true);
        out += *text + "\n";
      }
      continue;
    }
    // decode: all digits is the numeric form (newest key, or --version), else the text form.
    const bool digits =
        !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
    Result<Id> id = Internal("unreachable");
    if (digits) {
      Result<Id> number = ParseId(value, IdFormat::kDec, *layout);
      if (!number.ok()) return ExitFor(number.error(), true);
      id = (*codec)->Decode(*number, flags.version.empty() ? 0 : flags.version[0]);
    } else {
      id = (*codec)->DecodeText(value);
    }
    if (!id.ok()) return ExitFor(id.error(), true);
    out += fmt::format("{}\n", *id);
  }
  std::cout << out;
  return kExitOk;
}

}  // namespace sekka::cli
