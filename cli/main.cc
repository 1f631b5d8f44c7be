// The `sekka` command line: argument parsing only; the work is in cli/commands.cc.

#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <string>

#include "cli/commands.h"
#include "sekka/codec.h"
#include "sekka/layout.h"
#include "server/config.h"

namespace {

constexpr const char* kVersion = SEKKA_VERSION;  // from CMakeLists.txt

std::string Join(const std::vector<std::string_view>& names) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sekka::cli;
  // Every file and dir sekka makes (states, locks, the SQLite store, CosId's machines) is kept
  // from other users: 0640 and 0750 at most, group-readable for a shared lock dir.
  ::umask(027);
  CLI::App app{"sekka: unique, roughly time-ordered 64-bit ids", "sekka"};
  app.set_version_flag("--version", kVersion);
  app.require_subcommand(1);
  app.fallthrough(false);
  const std::string layouts = "layout: a preset (" + Join(sekka::Layout::PresetNames()) +
                              ") or key=value pairs, e.g. time_bits=40,worker_bits=11,tick=2ms, "
                              "shard_bits=4,time_bits=37 or kind=random,time_bits=41";

  GenFlags gen;
  CLI::App* gen_cmd = app.add_subcommand("gen", "Print new ids, one a line");
  gen_cmd->add_option("-n,--count", gen.count, "How many ids")->capture_default_str();
  gen_cmd->add_option("--layout", gen.layout, layouts)->capture_default_str();
  CLI::Option* gen_worker = gen_cmd->add_option(
      "--worker-id", gen.worker_id, "Worker id (default: the lowest free one of this host)");
  gen_cmd
      ->add_option("--max-startup-wait", gen.max_startup_wait,
                   "Wait out a stored high-water mark this close, else refuse")
      ->capture_default_str();
  // Id flags are taken as text, so that an empty or out-of-range value is named as typed.
  gen_cmd->add_option_function<std::string>(
      "--after-id", [&gen](const std::string& v) { gen.after_id = v; },
      "Print only ids above this one (the largest id of the system sekka takes over from)");
  gen_cmd->add_option("--lock-dir", gen.lock_dir,
                      "The host's worker-id locks and high-water marks, shared with sekka serve "
                      "(default: $SEKKA_WORKER_LOCK_DIR, else /var/lib/sekka/workers)");
  gen_cmd
      ->add_option("--datacenter-id", gen.datacenter_id,
                   "Datacenter id, for layouts with datacenter bits")
      ->capture_default_str();
  gen_cmd->add_option("--key-file", gen.key_file, "Opaque key file (--format opaque)");
  gen_cmd->add_option("--kind", gen.kind, "snowflake, uuidv7 or ulid")->capture_default_str();
  gen_cmd->add_option("--format", gen.format, "dec, hex, base32, base62, friendly or opaque")
      ->capture_default_str();
  gen_cmd->add_option("--sequence-start", gen.sequence_start, "zero or random")
      ->capture_default_str();
  gen_cmd->add_flag("--descending", gen.descending, "Newer ids are smaller");

  DecodeFlags decode;
  CLI::App* decode_cmd =
      app.add_subcommand("decode", "Show time, datacenter, worker and sequence of ids");
  decode_cmd->add_option("ids", decode.ids, "Ids to decode (default: read them from stdin)");
  decode_cmd->add_option("--layout", decode.layout, layouts)->capture_default_str();
  decode_cmd
      ->add_option("--format", decode.format,
                   "Text form of the ids: dec, hex, base32, base62 or friendly")
      ->capture_default_str();
  decode_cmd->add_flag("--json", decode.json, "One JSON object a line");
  decode_cmd->add_flag("--descending", decode.descending,
                       "The ids are descending ones (as the layout key descending=true)");

  // check and stats read ids the same way.
  auto id_input = [&](CLI::App* cmd, std::vector<std::string>& files, std::string& layout,
                      std::string& db, std::string& query) {
    cmd->add_option("files", files, "Files of ids (default: stdin; - is stdin)");
    cmd->add_option("--layout", layout, layouts)->capture_default_str();
    cmd->add_option("--db", db, "A database to query: sqlite:PATH or postgres://...");
    cmd->add_option("--query", query, "With --db: SQL whose first column is the id");
  };
  CheckFlags check;
  CLI::App* check_cmd = app.add_subcommand(
      "check", "Find repeated ids, ids from the future, ids outside the layout, order breaks");
  id_input(check_cmd, check.files, check.layout, check.db, check.query);
  check_cmd->add_flag("--json", check.json, "As JSON");
  check_cmd->add_option("--examples", check.examples, "Examples kept of each finding")
      ->capture_default_str();
  check_cmd
      ->add_option("--future-tolerance", check.future_tolerance,
                   "Ids this far past now are not yet from the future")
      ->capture_default_str();

  StatsFlags stats;
  CLI::App* stats_cmd = app.add_subcommand(
      "stats", "The busy curve of ids: per interval, per worker, peaks, gaps, sequence use");
  id_input(stats_cmd, stats.files, stats.layout, stats.db, stats.query);
  stats_cmd->add_option("--interval", stats.interval, "auto, or a duration: 100ms, 1s, 5m, 1h")
      ->capture_default_str();
  stats_cmd->add_option("--top", stats.top, "Workers with a series of their own")
      ->capture_default_str();
  stats_cmd->add_flag("--json", stats.json, "As JSON");
  stats_cmd->add_flag("--csv", stats.csv, "As CSV: start,worker,ids");
  stats_cmd->add_option("--html", stats.html, "Also write a self-contained HTML page with charts");

  LayoutFlags layout;
  CLI::App* layout_cmd = app.add_subcommand(
      "layout", "Show a layout's bits, tick, epoch, capacity and the date it runs out");
  layout_cmd->add_option("layout", layout.layout, layouts)->capture_default_str();
  layout_cmd->add_flag("--json", layout.json, "As JSON");
  layout_cmd->add_flag("--list", layout.list, "List the preset names");
  layout_cmd->add_option_function<std::string>(
      "--max-id", [&layout](const std::string& v) { layout.max_id = v; },
      "The largest id an existing system issued: whether and when this layout can take over "
      "without repeats or order breaks");
  layout_cmd->add_option("--rate", layout.rate,
                         "Ids per second across all generators (e.g. 5000/s, 20k/s, 1M/min): "
                         "the odds of a clash (random layouts) or the worker ids it needs");

  BenchFlags bench;
  CLI::App* bench_cmd =
      app.add_subcommand("bench", "Measure in-process generation (ids/s) for 1..N threads");
  bench_cmd->add_option("--layout", bench.layout, layouts)->capture_default_str();
  bench_cmd->add_option("--threads", bench.max_threads, "Up to this many threads")
      ->capture_default_str();
  bench_cmd->add_option("--seconds", bench.seconds, "Length of each measurement")
      ->capture_default_str();
  bench_cmd->add_option("--batch", bench.batch, "Ids per NextIds call")->capture_default_str();
  bench_cmd->add_flag("--json", bench.json, "As JSON");

  OpaqueFlags opaque;
  CLI::App* opaque_cmd = app.add_subcommand(
      "opaque", "Opaque ids: ids encrypted with FF1 that outsiders cannot count or walk");
  opaque_cmd->require_subcommand(1);
  CLI::App* op_keygen = opaque_cmd->add_subcommand("keygen", "Print a key file line (a new key)");
  op_keygen->add_option("--version", opaque.version, "The key's version character")
      ->capture_default_str();
  CLI::App* op_encode = opaque_cmd->add_subcommand("encode", "Ids to opaque ids");
  op_encode->add_flag("--numeric", opaque.numeric, "The opaque number, not the text form");
  CLI::App* op_decode = opaque_cmd->add_subcommand("decode", "Opaque ids (text or number) to ids");
  op_decode->add_option("--version", opaque.version,
                        "Key version for numeric opaque ids (default: the newest)");
  for (CLI::App* sub : {op_encode, op_decode}) {
    sub->add_option("values", opaque.values, "Ids or opaque ids")->required();
    sub->add_option("--key-file", opaque.key_file, "The opaque key file")->required();
    sub->add_option("--layout", opaque.layout, layouts)->capture_default_str();
  }

  SegmentFlags segment;
  CLI::App* segment_cmd = app.add_subcommand("segment", "Manage segment tags: create, list, show");
  segment_cmd->require_subcommand(1);
  const std::string store_help =
      "Segment store: \"\" = SQLite in the data dir, sqlite:PATH or postgres://...";
  CLI::App* seg_create = segment_cmd->add_subcommand("create", "Create a tag");
  seg_create->add_option("tag", segment.tag, "Tag name")->required();
  seg_create->add_option("--start", segment.start, "First id")->capture_default_str();
  seg_create->add_option("--step", segment.step, "Default range size")->capture_default_str();
  seg_create->add_option("--delta", segment.delta, "Issue ids with id % delta == remainder")
      ->capture_default_str();
  seg_create->add_option("--remainder", segment.remainder, "See --delta")->capture_default_str();
  CLI::App* seg_list = segment_cmd->add_subcommand("list", "List the tags");
  CLI::App* seg_show = segment_cmd->add_subcommand("show", "Show one tag");
  seg_show->add_option("tag", segment.tag, "Tag name")->required();
  for (CLI::App* sub : {seg_create, seg_list, seg_show}) {
    sub->add_option("--segment-store", segment.store, store_help);
    sub->add_option("--data-dir", segment.data_dir, "Data directory")->capture_default_str();
    sub->add_flag("--json", segment.json, "As JSON");
  }

  ServeFlags serve;
  CLI::App* serve_cmd = app.add_subcommand(
      "serve", "Run the server: HTTP on 127.0.0.1:8080 and the Redis protocol on 127.0.0.1:6380");
  serve_cmd->add_option("--config", serve.config_file, "TOML configuration file");
  serve_cmd->add_flag("--print-config", serve.print_config, "Print the effective configuration");
  // The flags come from the configuration's one table (server/config.cc).
  const std::vector<sekka::server::ServeFlag> serve_flags = sekka::server::ServeFlags();
  std::vector<std::string> serve_values(serve_flags.size());
  for (std::size_t i = 0; i < serve_flags.size(); ++i) {
    serve_cmd->add_option(serve_flags[i].flag, serve_values[i], serve_flags[i].help)
        ->type_name(serve_flags[i].type_name);
  }
  bool serve_force = false;
  serve_cmd->add_flag("--force", serve_force, "Start despite a stored state of another layout");

  const std::string kCommands =
      "allowed gen, decode, layout, check, stats, bench, serve, segment, opaque";
  if (argc < 2) return Fail(kExitUsage, "no command given: " + kCommands);
  const std::string first = argv[1];
  bool known = false;
  for (const CLI::App* sub : app.get_subcommands({})) known = known || sub->get_name() == first;
  if (!first.empty() && first[0] != '-' && !known) {
    return Fail(kExitUsage, "unknown command '" + first + "': " + kCommands);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ConversionError& e) {
    // CLI11 says "Could not convert: --worker-id = abc"; sekka names the flag, the value and
    // what is allowed (every option CLI11 converts is a number).
    std::string what = e.what();
    const std::size_t colon = what.find(": "), eq = what.find(" = ");
    if (colon != std::string::npos && eq != std::string::npos && eq > colon) {
      what = what.substr(colon + 2, eq - colon - 2) + " \"" + what.substr(eq + 3) +
             "\" is not valid: allowed a number";
    }
    return Fail(kExitUsage, what + " (see sekka --help)");
  } catch (const CLI::ParseError& e) {
    return Fail(kExitUsage, std::string(e.what()) + " (see sekka --help)");
  }

  if (gen_cmd->parsed()) {
    gen.worker_id_set = gen_worker->count() > 0;
    return RunGen(gen);
  }
  if (decode_cmd->parsed()) return RunDecode(decode);
  if (layout_cmd->parsed()) return RunLayout(layout);
  if (check_cmd->parsed()) return RunCheck(check);
  if (stats_cmd->parsed()) return RunStats(stats);
  if (bench_cmd->parsed()) return RunBench(bench);
  if (opaque_cmd->parsed()) {
    opaque.action = op_keygen->parsed() ? "keygen" : op_encode->parsed() ? "encode" : "decode";
    if (op_decode->parsed() && op_decode->count("--version") == 0) opaque.version.clear();
    return RunOpaque(opaque);
  }
  if (segment_cmd->parsed()) {
    segment.action = seg_create->parsed() ? "create" : seg_list->parsed() ? "list" : "show";
    return RunSegment(segment);
  }
  if (serve_cmd->parsed()) {
    for (std::size_t i = 0; i < serve_flags.size(); ++i) {
      if (serve_cmd->count(serve_flags[i].flag) > 0) {
        serve.values.emplace_back(serve_flags[i].key, serve_values[i]);
      }
    }
    if (serve_force) serve.values.emplace_back("generator.force", "true");
    return RunServe(serve);
  }
  return Fail(kExitUsage, "no command given: " + kCommands);
}
