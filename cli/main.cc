// The `sekka` command line: argument parsing only; the work is in cli/commands.cc.

#include <fmt/format.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "sekka/codec.h"
#include "sekka/layout.h"
#include "sekka/segment_stores.h"
#include "server/config.h"

namespace {

constexpr const char* kVersion = SEKKA_VERSION;  // from CMakeLists.txt

// Old spellings a command still takes: one name per setting in every command (serve's, from
// server/config_keys.cc), the old one kept for scripts and noted as old when used.
struct OldFlag {
  std::string_view command;
  std::string_view old;
  std::string_view key;
};
constexpr OldFlag kOldFlags[] = {
    {"serve", "--worker-lock-dir", "worker.lock_dir"},
    {"gen", "--key-file", "opaque.key_file"},
    {"opaque", "--key-file", "opaque.key_file"},
};

// CLI11's names for the flag that sets `key` on `command`: serve's flag for it, then any old
// spelling `command` still takes.
std::string KeyFlagNames(std::string_view command, std::string_view key) {
  std::string names = sekka::server::FlagOf(key);
  for (const OldFlag& o : kOldFlags) {
    if (o.command == command && o.key == key) names += "," + std::string(o.old);
  }
  return names;
}

// A flag's help, naming the setting it is, as serve's flags do.
std::string KeyHelp(std::string_view help, std::string_view key) {
  return fmt::format("{} (config {})", help, key);
}

// Says on stderr, for each old spelling used, that it is old (it still works).
void NoteOldFlags(int argc, char** argv) {
  if (argc < 2) return;
  const std::string_view command = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string_view word = argv[i];
    for (const OldFlag& o : kOldFlags) {
      if (o.command == command && (word == o.old || word.starts_with(std::string(o.old) + "="))) {
        fmt::print(stderr, "sekka {}: {} is the old name of {}; it still works\n", command, o.old,
                   sekka::server::FlagOf(o.key));
      }
    }
  }
}

std::string Join(const std::vector<std::string_view>& names) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

// A subcommand: its CLI11 app, and what runs it once parsed (its flags live in the closure).
struct Subcommand {
  CLI::App* app;
  std::function<int()> run;
};

using namespace sekka::cli;

// sekka gen: new ids, one a line.
Subcommand AddGen(CLI::App& app, const std::string& layouts) {
  auto gen = std::make_shared<GenFlags>();
  CLI::App* cmd = app.add_subcommand("gen", "Print new ids, one a line");
  cmd->add_option("-n,--count", gen->count, "How many ids")->capture_default_str();
  cmd->add_option(KeyFlagNames("gen", "layout.preset"), gen->layout,
                  KeyHelp(layouts, "layout.preset"))
      ->capture_default_str();
  CLI::Option* worker = cmd->add_option(
      KeyFlagNames("gen", "worker.id"), gen->worker_id,
      KeyHelp("Worker id (default: the lowest free one of this host)", "worker.id"));
  cmd->add_option(KeyFlagNames("gen", "generator.max_startup_wait"), gen->max_startup_wait,
                  KeyHelp("Wait out a stored high-water mark this close, else refuse",
                          "generator.max_startup_wait"))
      ->capture_default_str();
  // Id flags are taken as text, so that an empty or out-of-range value is named as typed.
  cmd->add_option_function<std::string>(
      KeyFlagNames("gen", "generator.after_id"), [gen](const std::string& v) { gen->after_id = v; },
      KeyHelp("Print only ids above this one (the largest id of the system sekka takes over from)",
              "generator.after_id"));
  cmd->add_option(KeyFlagNames("gen", "worker.lock_dir"), gen->lock_dir,
                  KeyHelp("The host's worker-id locks and high-water marks, shared with sekka "
                          "serve (default: $SEKKA_WORKER_LOCK_DIR, else /var/lib/sekka/workers)",
                          "worker.lock_dir"));
  cmd->add_option(
         KeyFlagNames("gen", "worker.datacenter_id"), gen->datacenter_id,
         KeyHelp("Datacenter id, for layouts with datacenter bits", "worker.datacenter_id"))
      ->capture_default_str();
  cmd->add_option(KeyFlagNames("gen", "opaque.key_file"), gen->key_file,
                  KeyHelp("Opaque key file (--format opaque)", "opaque.key_file"));
  cmd->add_option("--kind", gen->kind, "snowflake, uuidv7 or ulid")->capture_default_str();
  cmd->add_option("--format", gen->format, "dec, hex, base32, base62, friendly or opaque")
      ->capture_default_str();
  cmd->add_option("--sequence-start", gen->sequence_start, "zero or random")->capture_default_str();
  cmd->add_flag("--descending", gen->descending, "Newer ids are smaller");
  return {cmd, [gen, worker] {
            gen->worker_id_set = worker->count() > 0;
            return RunGen(*gen);
          }};
}

// sekka decode.
Subcommand AddDecode(CLI::App& app, const std::string& layouts) {
  auto decode = std::make_shared<DecodeFlags>();
  CLI::App* cmd = app.add_subcommand("decode", "Show time, datacenter, worker and sequence of ids");
  cmd->add_option("ids", decode->ids, "Ids to decode (default: read them from stdin)");
  cmd->add_option("--layout", decode->layout, layouts)->capture_default_str();
  cmd->add_option("--format", decode->format,
                  "Text form of the ids: dec, hex, base32, base62 or friendly")
      ->capture_default_str();
  cmd->add_flag("--json", decode->json, "One JSON object a line");
  cmd->add_flag("--descending", decode->descending,
                "The ids are descending ones (as the layout key descending=true)");
  return {cmd, [decode] { return RunDecode(*decode); }};
}

// check and stats read ids the same way.
void AddIdInput(CLI::App* cmd, const std::string& layouts, std::vector<std::string>& files,
                std::string& layout, std::string& db, std::string& query) {
  cmd->add_option("files", files, "Files of ids (default: stdin; - is stdin)");
  cmd->add_option("--layout", layout, layouts)->capture_default_str();
  cmd->add_option("--db", db, "A database to query: sqlite:PATH or postgres://...");
  cmd->add_option("--query", query, "With --db: SQL whose first column is the id");
}

// sekka check.
Subcommand AddCheck(CLI::App& app, const std::string& layouts) {
  auto check = std::make_shared<CheckFlags>();
  CLI::App* cmd = app.add_subcommand(
      "check", "Find repeated ids, ids from the future, ids outside the layout, order breaks");
  AddIdInput(cmd, layouts, check->files, check->layout, check->db, check->query);
  cmd->add_flag("--json", check->json, "As JSON");
  cmd->add_option("--examples", check->examples, "Examples kept of each finding")
      ->capture_default_str();
  cmd->add_option("--future-tolerance", check->future_tolerance,
                  "Ids this far past now are not yet from the future")
      ->capture_default_str();
  return {cmd, [check] { return RunCheck(*check); }};
}

// sekka stats.
Subcommand AddStats(CLI::App& app, const std::string& layouts) {
  auto stats = std::make_shared<StatsFlags>();
  CLI::App* cmd = app.add_subcommand(
      "stats", "The busy curve of ids: per interval, per worker, peaks, gaps, sequence use");
  AddIdInput(cmd, layouts, stats->files, stats->layout, stats->db, stats->query);
  cmd->add_option("--interval", stats->interval, "auto, or a duration: 100ms, 1s, 5m, 1h")
      ->capture_default_str();
  cmd->add_option("--top", stats->top, "Workers with a series of their own")->capture_default_str();
  cmd->add_flag("--json", stats->json, "As JSON");
  cmd->add_flag("--csv", stats->csv, "As CSV: start,worker,ids");
  cmd->add_option("--html", stats->html, "Also write a self-contained HTML page with charts");
  return {cmd, [stats] { return RunStats(*stats); }};
}

// sekka layout.
Subcommand AddLayout(CLI::App& app, const std::string& layouts) {
  auto layout = std::make_shared<LayoutFlags>();
  CLI::App* cmd = app.add_subcommand(
      "layout", "Show a layout's bits, tick, epoch, capacity and the date it runs out");
  cmd->add_option("layout", layout->layout, layouts)->capture_default_str();
  cmd->add_flag("--json", layout->json, "As JSON");
  cmd->add_flag("--list", layout->list, "List the preset names");
  cmd->add_option_function<std::string>(
      "--max-id", [layout](const std::string& v) { layout->max_id = v; },
      "The largest id an existing system issued: whether and when this layout can take over "
      "without repeats or order breaks");
  cmd->add_option("--rate", layout->rate,
                  "Ids per second across all generators (e.g. 5000/s, 20k/s, 1M/min): "
                  "the odds of a clash (random layouts) or the worker ids it needs");
  return {cmd, [layout] { return RunLayout(*layout); }};
}

// sekka bench.
Subcommand AddBench(CLI::App& app, const std::string& layouts) {
  auto bench = std::make_shared<BenchFlags>();
  CLI::App* cmd =
      app.add_subcommand("bench", "Measure in-process generation (ids/s) for 1..N threads");
  cmd->add_option("--layout", bench->layout, layouts)->capture_default_str();
  cmd->add_option("--threads", bench->max_threads, "Up to this many threads")
      ->capture_default_str();
  cmd->add_option("--seconds", bench->seconds, "Length of each measurement")->capture_default_str();
  cmd->add_option("--batch", bench->batch, "Ids per NextIds call")->capture_default_str();
  cmd->add_flag("--json", bench->json, "As JSON");
  return {cmd, [bench] { return RunBench(*bench); }};
}

// sekka opaque keygen|encode|decode.
Subcommand AddOpaque(CLI::App& app, const std::string& layouts) {
  auto opaque = std::make_shared<OpaqueFlags>();
  CLI::App* cmd = app.add_subcommand(
      "opaque", "Opaque ids: ids encrypted with FF1 that outsiders cannot count or walk");
  cmd->require_subcommand(1);
  CLI::App* op_keygen = cmd->add_subcommand("keygen", "Print a key file line (a new key)");
  op_keygen->add_option("--version", opaque->version, "The key's version character")
      ->capture_default_str();
  op_keygen->add_option("--out", opaque->out,
                        "Write the key file here, made 0600 (never over an existing file); "
                        "default: print it");
  CLI::App* op_encode = cmd->add_subcommand("encode", "Ids to opaque ids");
  op_encode->add_flag("--numeric", opaque->numeric, "The opaque number, not the text form");
  CLI::App* op_decode = cmd->add_subcommand("decode", "Opaque ids (text or number) to ids");
  op_decode->add_option("--version", opaque->version,
                        "Key version for numeric opaque ids (default: the newest)");
  for (CLI::App* sub : {op_encode, op_decode}) {
    sub->add_option("values", opaque->values, "Ids or opaque ids")->required();
    sub->add_option(KeyFlagNames("opaque", "opaque.key_file"), opaque->key_file,
                    KeyHelp("The opaque key file", "opaque.key_file"))
        ->required();
    sub->add_option("--layout", opaque->layout, layouts)->capture_default_str();
  }
  return {
      cmd, [opaque, op_keygen, op_encode, op_decode] {
        opaque->action = op_keygen->parsed() ? "keygen" : op_encode->parsed() ? "encode" : "decode";
        if (op_decode->parsed() && op_decode->count("--version") == 0) opaque->version.clear();
        return RunOpaque(*opaque);
      }};
}

// sekka segment create|list|show|step|delete|import.
Subcommand AddSegment(CLI::App& app, const std::string& /*layouts*/) {
  auto segment = std::make_shared<SegmentFlags>();
  CLI::App* cmd = app.add_subcommand(
      "segment", "Manage segment tags: create, list, show, step, delete, import");
  cmd->require_subcommand(1);
  const std::string store_help = "Segment store: " + sekka::SegmentStoreForms();
  CLI::App* seg_create = cmd->add_subcommand("create", "Create a tag");
  seg_create->add_option("tag", segment->tag, "Tag name")->required();
  seg_create->add_option("--start", segment->start, "First id")->capture_default_str();
  seg_create->add_option("--step", segment->step, "Default range size")->capture_default_str();
  seg_create->add_option("--delta", segment->delta, "Issue ids with id % delta == remainder")
      ->capture_default_str();
  seg_create->add_option("--remainder", segment->remainder, "See --delta")->capture_default_str();
  CLI::App* seg_list = cmd->add_subcommand("list", "List the tags");
  CLI::App* seg_show = cmd->add_subcommand("show", "Show one tag");
  seg_show->add_option("tag", segment->tag, "Tag name")->required();
  CLI::App* seg_step =
      cmd->add_subcommand("step", "Set a tag's step (servers take it at their next range)");
  seg_step->add_option("tag", segment->tag, "Tag name")->required();
  seg_step->add_option("step", segment->step, "The new step, 1 or more")->required();
  CLI::App* seg_delete = cmd->add_subcommand(
      "delete", "Delete a tag; it can be created again only at or above its next id");
  seg_delete->add_option("tag", segment->tag, "Tag name")->required();
  CLI::App* seg_import = cmd->add_subcommand(
      "import",
      "Move a tag from Leaf's or tinyid's table into sekka's on the same MySQL database, while "
      "their servers run: sekka starts at the row's next id, the row is raised past it");
  seg_import->add_option("tag", segment->tag, "Tag name (Leaf's biz_tag, tinyid's biz_type)")
      ->required();
  seg_import->add_option("--from", segment->from, "The peer's table: leaf or tinyid")->required();
  for (CLI::App* sub : {seg_create, seg_list, seg_show, seg_step, seg_delete, seg_import}) {
    sub->add_option(KeyFlagNames("segment", "segment.store"), segment->store,
                    KeyHelp(store_help, "segment.store"));
    sub->add_option(KeyFlagNames("segment", "data.dir"), segment->data_dir,
                    KeyHelp("Data directory", "data.dir"))
        ->capture_default_str();
    sub->add_flag("--json", segment->json, "As JSON");
  }
  return {cmd, [segment, cmd] {
            segment->action = cmd->get_subcommands().front()->get_name();
            return RunSegment(*segment);
          }};
}

// --config and a flag for every setting of serve's configuration (its one table,
// server/config_keys.cc) on `cmd`; the function returned puts the flags given into `flags`.
std::function<void()> AddConfigFlags(CLI::App* cmd, std::string_view command, ServeFlags& flags) {
  cmd->add_option("--config", flags.config_file, "TOML configuration file");
  auto table = std::make_shared<std::vector<sekka::server::ServeFlag>>(sekka::server::ServeFlags());
  auto values = std::make_shared<std::vector<std::string>>(table->size());
  for (std::size_t i = 0; i < table->size(); ++i) {
    const sekka::server::ServeFlag& f = (*table)[i];
    cmd->add_option(KeyFlagNames(command, f.key), (*values)[i], f.help)->type_name(f.type_name);
  }
  return [cmd, table, values, &flags] {
    for (std::size_t i = 0; i < table->size(); ++i) {
      if (cmd->count((*table)[i].flag) > 0)
        flags.values.emplace_back((*table)[i].key, (*values)[i]);
    }
  };
}

// sekka serve: its flags come from the configuration's one table.
Subcommand AddServe(CLI::App& app, const std::string& /*layouts*/) {
  auto serve = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "Run the server: HTTP on 127.0.0.1:8080 and the Redis protocol on 127.0.0.1:6380");
  cmd->add_flag("--print-config", serve->print_config, "Print the effective configuration");
  std::function<void()> collect = AddConfigFlags(cmd, "serve", *serve);
  auto force = std::make_shared<bool>(false);
  cmd->add_flag("--force", *force, "Start despite a stored state of another layout");
  return {cmd, [serve, collect, force] {
            collect();
            if (*force) serve->values.emplace_back("generator.force", "true");
            return RunServe(*serve);
          }};
}

// sekka strict create <tag>: serve's configuration (file, environment, flags) finds the
// coordinator.
Subcommand AddStrict(CLI::App& app, const std::string& /*layouts*/) {
  auto serve = std::make_shared<ServeFlags>();
  auto tag = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("strict", "Strict tags: create (declare for the cluster)");
  cmd->require_subcommand(1);
  CLI::App* create = cmd->add_subcommand(
      "create", "Declare a strict tag at the cluster's coordinator: every server serves it");
  create->add_option("tag", *tag, "Tag name")->required();
  std::function<void()> collect = AddConfigFlags(create, "strict", *serve);
  return {cmd, [serve, tag, collect] {
            collect();
            return RunStrictCreate(*serve, *tag);
          }};
}

// CLI11's parse errors as sekka says them: "Could not convert: --worker-id = abc" names the
// flag, the value and what is allowed (every option CLI11 converts is a number).
std::string UsageError(const CLI::ParseError& e) {
  std::string what = e.what();
  // Arguments nothing took: their flags by name, never their values (a mistyped
  // `--auth-tokn <token>` would print the token on the terminal and into logs).
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr && what.find(": ") != what.npos) {
    std::string flags;
    std::istringstream words(what.substr(what.find(": ") + 2));
    // Only what has a long flag's shape, cut at '=' (`--auth-tokn=<token>`): a value may
    // begin with '-' too, and is never shown.
    for (std::string word; words >> word;) {
      word = word.substr(0, word.find('='));
      const bool flag_shaped =
          word.size() > 2 && word.size() <= 40 && word.starts_with("--") &&
          word.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos;
      if (flag_shaped) flags += (flags.empty() ? "" : " ") + word;
    }
    return fmt::format("{}: {} (other words not shown; see sekka --help)",
                       flags.empty() ? "an argument was not expected" : "unknown flag",
                       flags.empty() ? "a value with no flag before it" : flags);
  }
  const std::size_t colon = what.find(": "), eq = what.find(" = ");
  if (dynamic_cast<const CLI::ConversionError*>(&e) != nullptr && colon != std::string::npos &&
      eq != std::string::npos && eq > colon) {
    what = what.substr(colon + 2, eq - colon - 2) + " \"" + what.substr(eq + 3) +
           "\" is not valid: allowed a number";
  }
  return what + " (see sekka --help)";
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
  const Subcommand subcommands[] = {AddGen(app, layouts),    AddDecode(app, layouts),
                                    AddLayout(app, layouts), AddCheck(app, layouts),
                                    AddStats(app, layouts),  AddBench(app, layouts),
                                    AddServe(app, layouts),  AddSegment(app, layouts),
                                    AddOpaque(app, layouts), AddStrict(app, layouts)};
  const std::string kCommands =
      "allowed gen, decode, layout, check, stats, bench, serve, segment, opaque, strict";
  if (argc < 2) return Fail(kExitUsage, "no command given: " + kCommands);
  const std::string first = argv[1];
  bool known = false;
  for (const CLI::App* sub : app.get_subcommands({})) known = known || sub->get_name() == first;
  if (!first.empty() && first[0] != '-' && !known) {
    return Fail(kExitUsage, "unknown command '" + first + "': " + kCommands);
  }
  NoteOldFlags(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    return Fail(kExitUsage, UsageError(e));
  }
  for (const Subcommand& sub : subcommands) {
    if (sub.app->parsed()) return sub.run();
  }
  return Fail(kExitUsage, "no command given: " + kCommands);
}
