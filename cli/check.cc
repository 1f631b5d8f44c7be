// sekka check: reads ids (files, stdin, or a database query), checks them with IdChecker and
// prints what it found. Thin I/O around include/sekka/id_check.h and backends/id_query.h.

#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/id_input.h"
#include "sekka/clock.h"
#include "sekka/codec.h"
#include "sekka/id_check.h"

namespace sekka::cli {
namespace {

using Json = nlohmann::ordered_json;

Json ExamplesJson(const std::vector<CheckReport::Example>& examples, bool with_previous) {
  Json out = Json::array();
  for (const auto& e : examples) {
    Json j{{"position", e.position}, {"id", std::to_string(e.id)}};
    if (with_previous) {
      j["worker"] = e.worker;
      j["previous"] = std::to_string(e.previous);
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

namespace {

Json CheckJson(const CheckReport& r, const Layout& l, const IdTextScanner& scanner) {
  Json repeats = Json::array();
  for (const auto& e : r.repeat_examples) {
    repeats.push_back(
        {{"id", std::to_string(e.id)}, {"occurrences", e.occurrences}, {"positions", e.positions}});
  }
  Json bad = Json::array();
  for (const auto& b : scanner.bad_examples())
    bad.push_back({{"source", b.source}, {"line", b.line}, {"text", b.text}});
  Json j{{"layout", l.name()},
         {"ids", r.ids},
         {"distinct", r.distinct},
         {"repeated_values", r.repeated_values},
         {"repeats", r.repeats},
         {"repeat_examples", repeats},
         {"future", r.future},
         {"future_examples", ExamplesJson(r.future_examples, false)},
         {"before_epoch", r.before_epoch},
         {"before_epoch_examples", ExamplesJson(r.before_epoch_examples, false)},
         {"outside", r.outside},
         {"outside_examples", ExamplesJson(r.outside_examples, false)},
         {"order_breaks", r.order_breaks},
         {"order_break_examples", ExamplesJson(r.order_break_examples, true)},
         {"workers", r.workers},
         {"not_ids", scanner.bad_count()},
         {"not_id_examples", bad},
         {"first", r.ids > 0 ? FormatUtcMillis(r.first_ms) : ""},
         {"last", r.ids > 0 ? FormatUtcMillis(r.last_ms) : ""}};
  return j;
}

std::string CheckText(const CheckReport& r, const Layout& l, const IdTextScanner& scanner,
                      const CheckOptions& options) {
  std::string out = fmt::format("layout        {}\nids           {} ({} distinct)\n", l.name(),
                                FormatThousands(static_cast<double>(r.ids)),
                                FormatThousands(static_cast<double>(r.distinct)));
  out += fmt::format("repeated      {} ids repeat, {} extra occurrences{}\n",
                     FormatThousands(static_cast<double>(r.repeated_values)),
                     FormatThousands(static_cast<double>(r.repeats)),
                     r.repeats > 0 ? "  <- ids repeat" : "");
  for (const auto& e : r.repeat_examples) {
    out += fmt::format("  {} x{} at positions {}{}\n", e.id, e.occurrences,
                       fmt::join(e.positions, ", "),
                       e.positions.size() < e.occurrences ? ", ..." : "");
  }
  auto section = [&](std::string_view name, std::uint64_t count, std::string_view what,
                     const std::vector<CheckReport::Example>& examples) {
    out += fmt::format("{:<13} {} {}\n", name, FormatThousands(static_cast<double>(count)), what);
    for (const auto& e : examples) {
      if (name == "order breaks") {
        out += fmt::format("  position {}: worker {}: {} after {}\n", e.position, e.worker, e.id,
                           e.previous);
      } else {
        out += fmt::format("  position {}: {}\n", e.position, e.id);
      }
    }
  };
  section("future", r.future, fmt::format("(time past now + {} ms)", options.future_tolerance_ms),
          r.future_examples);
  section("before epoch", r.before_epoch, "(negative)", r.before_epoch_examples);
  section("outside", r.outside, fmt::format("(not ids of layout {})", l.name()),
          r.outside_examples);
  section("order breaks", r.order_breaks,
          fmt::format("(a worker's id below its previous one; {} workers)", r.workers),
          r.order_break_examples);
  out +=
      fmt::format("not ids       {}\n", FormatThousands(static_cast<double>(scanner.bad_count())));
  for (const auto& b : scanner.bad_examples())
    out += fmt::format("  {} line {}: \"{}\"\n", b.source, b.line, b.text);
  if (r.ids > r.before_epoch + r.outside) {
    out += fmt::format("time range    {} to {}\n", FormatUtcMillis(r.first_ms),
                       FormatUtcMillis(r.last_ms));
  }
  return out;
}

}  // namespace

int RunCheck(const CheckFlags& flags) {
  Result<Layout> layout = ParseLayout(flags.layout);
  if (!layout.ok()) return Fail(kExitUsage, layout.error().message);
  if (flags.examples < 0 || flags.examples > 1000) {
    return Fail(kExitUsage,
                fmt::format("--examples {} is out of range: allowed 0 to 1000", flags.examples));
  }
  Result<std::int64_t> tolerance = ParseDurationMillis(flags.future_tolerance);
  if (!tolerance.ok()) return Fail(kExitUsage, "--future-tolerance: " + tolerance.error().message);
  const IdInput input{flags.files, flags.db, flags.query};
  if (Status s = CheckIdInput(input); !s.ok()) return Fail(kExitUsage, s.error().message);
  CheckOptions options;
  options.layout = *layout;
  options.now_ms = SystemClock().NowMillis();
  options.future_tolerance_ms = *tolerance;
  options.examples = static_cast<std::size_t>(flags.examples);
  IdChecker checker(options);
  checker.Reserve(EstimateIds(input));
  IdTextScanner scanner;
  // As diff and grep do: 1 means ids repeat, so a check that could not run is 2, whatever
  // stopped it (an unreadable file, a database that refused the query).
  if (Status s = ReadIds(input, scanner, [&](std::span<const Id> ids) { checker.Add(ids); });
      !s.ok()) {
    return Fail(kExitUsage, s.error().message);
  }
  const CheckReport r = checker.Finish();
  if (flags.json) {
    std::cout << CheckJson(r, *layout, scanner).dump(2) << '\n';
  } else {
    std::cout << CheckText(r, *layout, scanner, options);
  }
  std::cout.flush();
  return r.repeats > 0 ? kExitFailure : kExitOk;
}

}  // namespace sekka::cli
