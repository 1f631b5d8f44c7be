// The `sekka` command line: argument parsing only; the work is in cli/commands.cc.

#include <CLI/CLI.hpp>
#include <string>

#include "cli/commands.h"
#include "sekka/codec.h"
#include "sekka/layout.h"

namespace {

constexpr const char* kVersion = "0.1.0";

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
  CLI::App app{"sekka: unique, roughly time-ordered 64-bit ids", "sekka"};
  app.set_version_flag("--version", kVersion);
  app.require_subcommand(1);
  app.fallthrough(false);
  const std::string layouts = "layout: a preset (" + Join(sekka::Layout::PresetNames()) +
                              ") or key=value pairs, e.g. time_bits=40,worker_bits=11,tick=2ms";

  GenFlags gen;
  CLI::App* gen_cmd = app.add_subcommand("gen", "Print new ids, one a line");
  gen_cmd->add_option("-n,--count", gen.count, "How many ids")->capture_default_str();
  gen_cmd->add_option("--layout", gen.layout, layouts)->capture_default_str();
  gen_cmd->add_option("--worker-id", gen.worker_id, "Worker id")->capture_default_str();
  gen_cmd
      ->add_option("--datacenter-id", gen.datacenter_id,
                   "Datacenter id, for layouts with datacenter bits")
      ->capture_default_str();
  gen_cmd->add_option("--format", gen.format, "dec, hex, base32, base62 or friendly")
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

  LayoutFlags layout;
  CLI::App* layout_cmd = app.add_subcommand(
      "layout", "Show a layout's bits, tick, epoch, capacity and the date it runs out");
  layout_cmd->add_option("layout", layout.layout, layouts)->capture_default_str();
  layout_cmd->add_flag("--json", layout.json, "As JSON");
  layout_cmd->add_flag("--list", layout.list, "List the preset names");

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

  const std::string kCommands = "allowed gen, decode, layout, bench";
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
  } catch (const CLI::ParseError& e) {
    return Fail(kExitUsage, std::string(e.what()) + " (see sekka --help)");
  }

  if (gen_cmd->parsed()) return RunGen(gen);
  if (decode_cmd->parsed()) return RunDecode(decode);
  if (layout_cmd->parsed()) return RunLayout(layout);
  if (bench_cmd->parsed()) return RunBench(bench);
  return Fail(kExitUsage, "no command given: " + kCommands);
}
