// cli/commands.h
//
// The `sekka` subcommands, separate from argument parsing (cli/main.cc) so that each is a plain
// function of its options. Each returns the process exit code: 0 success, 1 runtime failure,
// 2 bad usage or configuration. Errors go to stderr as one line.

#ifndef SEKKA_CLI_COMMANDS_H_
#define SEKKA_CLI_COMMANDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backends/coordinator_access.h"
#include "sekka/clock.h"
#include "sekka/status.h"
#include "server/config.h"
#include "server/strict_tags.h"

namespace sekka::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Prints "sekka: <message>" on stderr, folded to one line, and returns `exit_code`.
int Fail(int exit_code, const std::string& message);
// "1,234,567" for 1234567.4 (rounded, commas every three digits).
std::string FormatThousands(double value);

struct GenFlags {
  std::int64_t count = 1;
  std::string layout = "sekka";
  std::int64_t worker_id = 0;
  std::int64_t datacenter_id = 0;
  std::string format = "dec";
  std::string sequence_start = "zero";
  bool descending = false;
  bool worker_id_set = false;  // --worker-id given: that id (static), else the lowest free
  std::string lock_dir;        // "" = $SEKKA_WORKER_LOCK_DIR, else kDefaultWorkerLockDir
  std::string max_startup_wait = "10s";  // a stored hwm this close is waited out, else refused
  std::optional<std::string> after_id;   // --after-id, as typed: only ids above it
  std::string key_file;                  // --format opaque: the opaque key file
  std::string kind = "snowflake";        // snowflake | uuidv7 | ulid
};
int RunGen(const GenFlags& flags);

struct DecodeFlags {
  std::string layout = "sekka";
  std::string format = "dec";
  bool json = false;
  bool descending = false;       // the ids are descending ones (layout key descending=true)
  std::vector<std::string> ids;  // empty: read ids from stdin
};
int RunDecode(const DecodeFlags& flags);

// sekka opaque keygen|encode|decode: opaque ids (include/sekka/opaque.h).
struct OpaqueFlags {
  std::string action;  // keygen | encode | decode
  std::string key_file;
  std::string out;  // keygen: the key file to make (0600, never overwritten); "" = stdout
  std::string layout = "sekka";
  std::string version = "1";  // keygen: the new key's version character; decode: "" = from text
  bool numeric = false;       // encode: the opaque number instead of the text form
  std::vector<std::string> values;  // ids to encode, opaque ids (text or numbers) to decode
};
int RunOpaque(const OpaqueFlags& flags);

struct LayoutFlags {
  std::string layout = "sekka";
  bool json = false;
  bool list = false;
  std::string rate;  // "" = no rate; "5000/s", "20k/s", "1M/min", ...
  // --max-id: the largest id an existing system issued; says whether and from when to until
  // when the layout issues only ids above it (AfterIdFloorMillis).
  std::optional<std::string> max_id;  // --max-id, as typed
};
// Parses a rate: a number (decimal point allowed) with an optional k or M, and an optional unit
// /s (the default), /min, /h or /d. Returns ids per second. Errors: kInvalidArgument naming the
// form.
sekka::Result<double> ParseRate(std::string_view text);
int RunLayout(const LayoutFlags& flags);

// sekka check: repeated ids and other signs of trouble in ids read from files, stdin or a
// database query (include/sekka/id_check.h). Exit 1 when an id repeats.
struct CheckFlags {
  std::string layout = "sekka";
  std::vector<std::string> files;  // none (and no db): stdin; "-" is stdin
  std::string db;                  // sqlite:PATH or postgres://...
  std::string query;               // with db
  bool json = false;
  int examples = 10;
  std::string future_tolerance = "60s";
};
int RunCheck(const CheckFlags& flags);

// sekka stats: the busy curve of ids (include/sekka/id_stats.h) as text, CSV, JSON or a
// self-contained HTML page with charts.
struct StatsFlags {
  std::string layout = "sekka";
  std::vector<std::string> files;
  std::string db;
  std::string query;
  std::string interval = "auto";  // or a duration: "1s", "5m"
  int top = 10;
  bool json = false;
  bool csv = false;
  std::string html;  // a file to write
};
int RunStats(const StatsFlags& flags);

struct BenchFlags {
  std::string layout = "sekka";
  int max_threads = 2;
  double seconds = 1.0;  // per measurement
  int batch = 1000;
  bool json = false;
};
int RunBench(const BenchFlags& flags);

struct ServeFlags {
  std::string config_file;
  bool print_config = false;
  // "section.key" = value pairs from flags, applied after the file and the environment.
  std::vector<std::pair<std::string, std::string>> values;
};
int RunServe(const ServeFlags& flags);
// sekka strict create <tag>: declares a strict tag at the cluster's coordinator, as STRICT.CREATE
// does (every server serves it within seconds), with serve's configuration (`flags`) to find
// the coordinator. Prints "created" or "exists".
int RunStrictCreate(const ServeFlags& flags, const std::string& tag);

struct SegmentFlags {
  std::string action;  // create | list | show | step | delete | import
  std::string tag;
  std::string from;  // import: the peer's table, leaf or tinyid
  std::int64_t start = 1;
  std::int64_t step = 1000;
  std::int64_t delta = 1;  // ids with id % delta == remainder (tinyid's multi-database setups)
  std::int64_t remainder = 0;
  std::string store;  // segment.store URI; "" = SQLite in the data dir
  std::string data_dir = "./sekka-data";
  bool json = false;
};
int RunSegment(const SegmentFlags& flags);

// What StrictCoordinationOf would refuse in `config` (strict.tls_ca_file, with TLS on the
// listeners and a coordinated worker.source): checked before --print-config too.
Status CheckStrictForwarding(const server::ServerConfig& config);
// Strict ids of a server alone (worker.source local, static or hostname): each tag's bound in
// the data dir (<data.dir>/strict/<tag>/, the host-local lease's lock and state file), this
// server the leader of every tag, nothing forwarded (cli/strict.cc).
server::StrictCoordination LocalStrictCoordination(const server::ServerConfig& config,
                                                   Clock* clock);
// The address a server alone gives itself for LocalStrictCoordination (nothing dials it).
inline constexpr const char* kLocalStrictAddress = "local";
// Declares `tag` for the cluster at its coordinator (what STRICT.CREATE does through a server):
// false when it was declared already.
Result<bool> DeclareStrictTag(const server::ServerConfig& config, const CoordinatorAccess& access,
                              Clock* clock, const std::string& tag);
// How `sekka serve` reaches its cluster for strict ids, of worker.source and worker.coordinator
// (cli/strict.cc).
Result<server::StrictCoordination> StrictCoordinationOf(const server::ServerConfig& config,
                                                        const CoordinatorAccess& access,
                                                        Clock* clock);

}  // namespace sekka::cli

#endif  // SEKKA_CLI_COMMANDS_H_
