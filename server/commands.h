// server/commands.h
//
// The protocol-neutral command layer: one table of what a client can ask of the server, each
// with its name, its arguments and their checks, whether the caller must be authenticated,
// whether it may wait for a store, and its handler; Redis's connection commands (AUTH, PING,
// ...) are rows too, run by the RESP front end. The front ends (server/http_handler.cc and the
// route files, server/resp_handler.cc, server/thrift_handler.cc) are adapters: they turn a
// request of their wire into a command and its arguments, and format the Reply in their wire's
// shape. A new protocol is a parser and a table of routes, never a copy of command logic.
//
// Thread-safety: the table is immutable; Execute may be called from any thread.

#ifndef SEKKA_SERVER_COMMANDS_H_
#define SEKKA_SERVER_COMMANDS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "sekka/codec.h"
#include "sekka/segment.h"
#include "server/service.h"

namespace sekka::server {

// The arguments of a command, as text (after the front end's own decoding).
using Args = std::span<const std::string_view>;

// What a command answers. Which alternative depends on the command (see kCommands).
// A status word ("created", "OK"): a simple string on RESP, where a text is a bulk string.
struct Word {
  std::string text;
};

using Reply = std::variant<std::int64_t,               // one id
                           std::vector<std::int64_t>,  // ids, in order
                           DecodedId,                  // a decoded snowflake id
                           SegmentGrant,               // a range of segment ids
                           MachineGrant,               // a machine id for a CosId client
                           Word,                       // a status word
                           std::string,                // a text: a UUID, a ULID, an opaque id
                           std::vector<std::string>>;  // texts: UUIDs, ULIDs

// Where a request that may wait runs: on one of the server's thread pools (server/server.cc),
// one per kind of wait, so that a wait of one kind never holds up requests of another: a hung
// segment store stalls no strict call, and two servers that forward strict calls to each other
// never wait on each other's pool of forwarded calls.
enum class Lane {
  kLoop,          // never waits: answered on the connection's event loop
  kStore,         // may wait for a segment store, the machine-id file, or the clock
  kStrict,        // may wait for a strict tag's leader on another server, or the coordinator
  kStrictLeader,  // STRICT.FORWARDED: this server's leadership (the coordinator), never another
};

// Every command's id: its row in the table (Spec). The front ends name commands by id, never
// by string.
enum class CommandId : std::uint8_t {
  kIdNext,
  kIdBatch,
  kIdDecode,
  kSegNext,
  kSegRange,
  kSegCreate,
  kSegTags,
  kSegStep,
  kSegDelete,
  kStrictNext,
  kStrictBatch,
  kStrictForwarded,
  kStrictCreate,
  kMachineDistribute,
  kMachineGuard,
  kMachineRevert,
  kOpaqueEncode,
  kOpaqueDecode,
  kOpaqueNext,
  kUuidNext,
  kUuidBatch,
  kUlidNext,
  kUlidBatch,
  kRandomNext,
  kRandomBatch,
  // The connection commands (Redis's, about the connection itself): no handler here, the RESP
  // front end (server/resp_handler.cc) runs them with the connection's session.
  kAuth,
  kHello,
  kQuit,
  kIncr,
  kIncrBy,
  kPing,
  kEcho,
  kInfo,
  kCommand,
  kConfig,
  kIdReply,
  kClient,
  kSelect,
  kCount_,
  // A route's own command, no row of the table and no RESP name (Leaf's GET /db).
  kRouteOnly = kCount_,
};

struct CommandSpec {
  CommandId id;
  Command command;        // its metrics label
  std::string_view name;  // "ID.BATCH": the RESP name, and the name in errors
  std::size_t min_args = 0;
  std::size_t max_args = 0;
  bool needs_auth = true;
  // True when the command may wait, with these arguments, for a segment store or for the clock
  // (a batch larger than a tick): the event loop then runs it on a blocking thread. Null:
  // never waits.
  bool (*may_block)(Service& service, Args args) = nullptr;
  // Runs with an argument count already checked. Errors: the service's, and kInvalidArgument
  // for an argument that fails its check (named, with what is allowed). Null for a connection
  // command.
  Result<Reply> (*run)(Service& service, Args args) = nullptr;
  Lane lane = Lane::kStore;  // where it runs when it may block
  std::string_view usage;    // its arguments, as `COMMAND DOCS` and docs/protocol.md show them
  // It issues ids or ranges, or changes state (false: it only reads). An HTTP route that runs
  // it refuses requests a browser sent from another site (http_handler.cc, CrossSite).
  bool changes = true;
};

// Every command of the table, in its order (RESP's COMMAND lists them).
std::span<const CommandSpec> Commands();

// The command with that id.
const CommandSpec& Spec(CommandId id);

// SEG.NEXT as HTTP GET routes run it: it never creates a tag (segment.auto_create applies to
// RESP's SEG.NEXT and POST /v1/segment/<tag>): a GET is what a web page makes a browser send
// unasked (an <img src>), and no peer's client creates tags with one.
const CommandSpec& SegNextOfExistingTag();

// The command of that name (case-insensitive), or null.
const CommandSpec* FindCommand(std::string_view name);

// Checks the argument count and runs the command (not a connection command: spec.run is set).
// Errors: kInvalidArgument "wrong number of arguments for 'id.batch' command" (Redis's words), and
// the command's own.
Result<Reply> Execute(Service& service, const CommandSpec& spec, Args args);
// Where Execute runs: kLoop when it cannot wait with these arguments (a bad argument count never
// waits), else the command's lane.
Lane LaneOf(Service& service, const CommandSpec& spec, Args args);

// `s` in lower case, cut at `max` characters (a command name in an error stays short).
std::string Lower(std::string_view s, std::size_t max = 64);

// A duration argument: ISO-8601 as Java writes it ("PT5M", CosId's safeGuardDuration) or
// sekka's ("5m"). Errors: kInvalidArgument naming both forms.
Result<std::int64_t> ParseAnyDuration(std::string_view what, std::string_view text);

// The most ids a strict request may ask for: a list like ID.BATCH's (server.max_batch), within
// one window (strict.window).
std::int64_t StrictBatchMax(const Service& service);

// A count argument: a decimal from 1 to `max`. Errors: kInvalidArgument naming both.
Result<std::int64_t> ParseCount(std::string_view what, std::string_view text, std::int64_t max);

// Compares a presented secret with the token in time that depends only on their lengths, so
// that response times do not reveal how much of a guess was right. False for an empty token.
bool TokenEquals(std::string_view presented, std::string_view token);

}  // namespace sekka::server

#endif  // SEKKA_SERVER_COMMANDS_H_
