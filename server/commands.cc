#include "server/commands.h"

#include <fmt/format.h>
#include <strings.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>

namespace sekka::server {
namespace {

Result<bool> ParseBool(std::string_view what, std::string_view text) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  return InvalidArgument(
      fmt::format("{} \"{}\" is not valid: allowed true or false", what, text.substr(0, 40)));
}

Result<Reply> NextIdCommand(Service& service, Args) {
  SEKKA_ASSIGN_OR_RETURN(auto id, service.NextId());
  return Reply(id);
}

Result<Reply> NextIdsCommand(Service& service, Args args) {
  SEKKA_ASSIGN_OR_RETURN(auto n, ParseCount("count", args[0], service.config().max_batch));
  std::vector<Id> ids(static_cast<std::size_t>(n));
  SEKKA_RETURN_IF_ERROR(service.NextIds(std::span<Id>(ids)));
  return Reply(std::move(ids));
}

Result<Reply> DecodeCommand(Service& service, Args args) {
  SEKKA_ASSIGN_OR_RETURN(auto id, ParseId(args[0], IdFormat::kDec, service.layout()));
  SEKKA_ASSIGN_OR_RETURN(auto d, service.Decode(id));
  return Reply(d);
}

// SEG.NEXT <tag> answers one id; SEG.NEXT <tag> <count> a list (of one, with a count of 1).
bool SegmentNextMayBlock(Service& service, Args args) {
  std::int64_t n = 1;
  if (args.size() == 2) {
    Result<std::int64_t> count = ParseCount("count", args[1], service.config().max_batch);
    if (!count.ok()) return false;  // answered at once
    n = *count;
  }
  return !service.SegmentBuffered(args[0], n);
}

template <bool kMayCreate>
Result<Reply> SegmentNextCommand(Service& service, Args args) {
  if (args.size() == 1) {
    std::int64_t id = 0;
    SEKKA_RETURN_IF_ERROR(service.NextSegmentIds(args[0], std::span(&id, 1), kMayCreate));
    return Reply(id);
  }
  SEKKA_ASSIGN_OR_RETURN(auto n, ParseCount("count", args[1], service.config().max_batch));
  std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
  SEKKA_RETURN_IF_ERROR(service.NextSegmentIds(args[0], std::span(ids), kMayCreate));
  return Reply(std::move(ids));
}

bool AlwaysMayBlock(Service&, Args) { return true; }

// ID.BATCH <count>: more ids than one tick of the layout holds wait for the clock (the
// generator sleeps to the next tick, 25 ms for 100,000 ids of 4,096 a ms), so such a batch runs
// off the event loop and the loop's other connections go on meanwhile.
bool BatchMayWait(Service& service, Args args) {
  Result<std::int64_t> n = ParseCount("count", args[0], service.config().max_batch);
  return n.ok() && *n > service.layout().ids_per_tick();
}

// SEG.RANGE <tag> [<step> [DENSE]]: a range straight from the store, for a client that issues
// the ids itself. Without a step, the tag's own. DENSE: the client issues every id of the range
// (CosId), so a tag of delta > 1 is refused before any range is taken.
Result<Reply> SegmentRangeCommand(Service& service, Args args) {
  std::int64_t step = 0;
  if (args.size() >= 2) {
    SEKKA_ASSIGN_OR_RETURN(auto n, ParseCount("step", args[1], service.config().segment_max_step));
    step = n;
  }
  const bool dense = args.size() == 3;
  if (dense && (args[2].size() != 5 || strncasecmp(args[2].data(), "DENSE", 5) != 0)) {
    return InvalidArgument(
        fmt::format("SEG.RANGE option \"{}\" is not valid: allowed DENSE", args[2].substr(0, 20)));
  }
  SEKKA_ASSIGN_OR_RETURN(auto grant, service.AllocateSegmentRange(args[0], step, dense));
  return Reply(grant);
}

// SEG.CREATE <tag> <start> <step>: creates a tag; one that exists is left as it is.
Result<Reply> SegmentCreateCommand(Service& service, Args args) {
  std::int64_t start = 0;
  const auto [p, ec] = std::from_chars(args[1].data(), args[1].data() + args[1].size(), start);
  if (ec != std::errc() || p != args[1].data() + args[1].size() || start < 1) {
    return InvalidArgument(fmt::format("start \"{}\" is not valid: allowed 1 to {}",
                                       args[1].substr(0, 40), INT64_MAX));
  }
  // A tag's step has one rule, the store's (`sekka segment step` too): segment.max_step bounds
  // the ranges this server fetches, not what a tag may say.
  SEKKA_ASSIGN_OR_RETURN(auto step, ParseCount("step", args[2], kMaxTagStep));
  Status s = service.CreateSegmentTag({std::string(args[0]), start, step});
  if (s.ok()) return Reply(Word{"created"});
  if (s.error().code == ErrorCode::kAlreadyExists) return Reply(Word{"exists"});
  return std::move(s).error();
}

// SEG.TAGS [<tag> | AFTER <tag>]: the store's rows (one tag, or a page of them), with what this
// server holds of each (JSON text).
Result<Reply> SegmentTagsCommand(Service& service, Args args) {
  if (args.size() == 2 && (args[0].size() != 5 || strncasecmp(args[0].data(), "AFTER", 5) != 0)) {
    return InvalidArgument(fmt::format("SEG.TAGS option \"{}\" is not valid: allowed AFTER <tag>",
                                       args[0].substr(0, 20)));
  }
  SEKKA_ASSIGN_OR_RETURN(auto json, args.size() == 2
                                        ? service.SegmentTagsJson("", args[1])
                                        : service.SegmentTagsJson(args.empty() ? "" : args[0]));
  return Reply(std::move(json));
}

// A change to the store's tags needs the token: with none set, anyone who reaches the port
// could delete every tag. Errors: kUnauthenticated naming the way that needs none.
Status AdminAllowed(Service& service, std::string_view command, std::string_view cli) {
  if (!service.config().auth_token.empty()) return Status::Ok();
  return Unauthenticated(fmt::format(
      "{} changes the segment store and is refused on a server without auth_token: set one, or "
      "run `sekka segment {}` where the store is reachable",
      command, cli));
}

// SEG.STEP <tag> <step>: sets the tag's step (JSON text of the tag after).
Result<Reply> SegmentStepCommand(Service& service, Args args) {
  SEKKA_RETURN_IF_ERROR(AdminAllowed(service, "SEG.STEP", "step"));
  SEKKA_ASSIGN_OR_RETURN(auto step, ParseCount("step", args[1], kMaxTagStep));  // as SEG.CREATE
  SEKKA_ASSIGN_OR_RETURN(auto json, service.SetSegmentStep(args[0], step));
  return Reply(std::move(json));
}

// SEG.DELETE <tag>: deletes the tag, leaving its tombstone (JSON text of the tag as it was).
Result<Reply> SegmentDeleteCommand(Service& service, Args args) {
  SEKKA_RETURN_IF_ERROR(AdminAllowed(service, "SEG.DELETE", "delete"));
  SEKKA_ASSIGN_OR_RETURN(auto json, service.DeleteSegmentTag(args[0]));
  return Reply(std::move(json));
}

// Strict commands wait only when this server must reach the coordinator or the tag's leader.
bool StrictMayBlock(Service& service, Args args) {
  std::int64_t n = 1;
  if (args.size() > 1) {
    const auto [p, ec] = std::from_chars(args[1].data(), args[1].data() + args[1].size(), n);
    if (ec != std::errc() || p != args[1].data() + args[1].size()) return false;  // refused
  }
  return !service.StrictReady(args[0], n);
}

// STRICT.NEXT <tag> answers one id; STRICT.NEXT <tag> <count> and STRICT.BATCH <tag> <count> a
// list: consecutive ids, each larger than every strict id of the tag answered before the
// request began (include/sekka/strict.h).
Result<Reply> StrictCommand(Service& service, Args args) {
  if (args.size() == 1) {
    SEKKA_ASSIGN_OR_RETURN(auto id, service.NextStrict(args[0], 1));
    return Reply(id);
  }
  SEKKA_ASSIGN_OR_RETURN(auto n, ParseCount("count", args[1], StrictBatchMax(service)));
  SEKKA_ASSIGN_OR_RETURN(auto first, service.NextStrict(args[0], n));
  std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) ids[static_cast<std::size_t>(i)] = first + i;
  return Reply(std::move(ids));
}

// STRICT.FORWARDED <tag> <count>: the first of `count` consecutive ids, from this server's own
// leadership only (-LEASELOST when it does not lead the tag): what a follower's call runs.
Result<Reply> StrictForwardedCommand(Service& service, Args args) {
  SEKKA_ASSIGN_OR_RETURN(auto n, ParseCount("count", args[1], service.config().strict_window));
  SEKKA_ASSIGN_OR_RETURN(auto first, service.NextStrictAsLeader(args[0], n));
  return Reply(first);
}

// STRICT.CREATE <tag>: declares a strict tag for every server of the cluster (they serve it
// within kStrictDeclaredRefresh, without a restart): "created", or "exists".
Result<Reply> StrictCreateCommand(Service& service, Args args) {
  if (service.config().auth_token.empty()) {
    return Unauthenticated(
        "STRICT.CREATE declares a strict tag for the whole cluster and is refused on a server "
        "without auth_token: set one, or list the tag in strict.tags");
  }
  SEKKA_ASSIGN_OR_RETURN(auto created, service.DeclareStrictTag(args[0]));
  return Reply(Word{created ? "created" : "exists"});
}

// MACHINE.DISTRIBUTE <namespace> <machine bits> <instance> <stable> <guard duration>
Result<Reply> MachineDistributeCommand(Service& service, Args args) {
  SEKKA_ASSIGN_OR_RETURN(auto machines, service.machines());
  std::int64_t bits = 0;
  const auto [p, ec] = std::from_chars(args[1].data(), args[1].data() + args[1].size(), bits);
  if (ec != std::errc() || p != args[1].data() + args[1].size() || bits < 1 || bits > 16) {
    return InvalidArgument(
        fmt::format("machineBit \"{}\" is not valid: allowed 1 to 16", args[1].substr(0, 40)));
  }
  SEKKA_ASSIGN_OR_RETURN(auto stable, ParseBool("stable", args[3]));
  SEKKA_ASSIGN_OR_RETURN(auto guard, ParseAnyDuration("safeGuardDuration", args[4]));
  SEKKA_ASSIGN_OR_RETURN(
      auto grant, (machines)->Distribute(args[0], static_cast<int>(bits), args[2], stable, guard));
  return Reply(grant);
}

// MACHINE.GUARD <namespace> <instance> <guard duration>
Result<Reply> MachineGuardCommand(Service& service, Args args) {
  SEKKA_ASSIGN_OR_RETURN(auto machines, service.machines());
  SEKKA_ASSIGN_OR_RETURN(auto guard, ParseAnyDuration("safeGuardDuration", args[2]));
  SEKKA_RETURN_IF_ERROR((machines)->Guard(args[0], args[1], guard));
  return Reply(Word{"OK"});
}

// MACHINE.REVERT <namespace> <instance>
Result<Reply> MachineRevertCommand(Service& service, Args args) {
  SEKKA_ASSIGN_OR_RETURN(auto machines, service.machines());
  SEKKA_RETURN_IF_ERROR((machines)->Revert(args[0], args[1]));
  return Reply(Word{"OK"});
}

Result<const OpaqueCodec*> Opaque(Service& service) {
  if (service.opaque() == nullptr) {
    return InvalidArgument("opaque ids are off: set opaque.key_file (sekka opaque keygen)");
  }
  return service.opaque();
}

// OPAQUE.ENCODE <id>: the text form under the newest key.
Result<Reply> OpaqueEncodeCommand(Service& service, Args args) {
  SEKKA_ASSIGN_OR_RETURN(auto codec, Opaque(service));
  SEKKA_ASSIGN_OR_RETURN(auto id, ParseId(args[0], IdFormat::kDec, service.layout()));
  SEKKA_ASSIGN_OR_RETURN(auto text, (codec)->EncodeText(id));
  return Reply(std::move(text));
}

// OPAQUE.DECODE <text or number>: the id (a number with the newest key).
Result<Reply> OpaqueDecodeCommand(Service& service, Args args) {
  SEKKA_ASSIGN_OR_RETURN(auto codec, Opaque(service));
  const bool digits =
      !args[0].empty() && args[0].find_first_not_of("0123456789") == std::string_view::npos;
  Result<Id> id =
      digits ? ParseId(args[0], IdFormat::kDec, service.layout()) : (codec)->DecodeText(args[0]);
  if (id.ok() && digits) id = (codec)->Decode(*id);
  SEKKA_RETURN_IF_ERROR(id);
  return Reply(*id);
}

// OPAQUE.NEXT: a new id, as opaque text.
Result<Reply> OpaqueNextCommand(Service& service, Args) {
  SEKKA_ASSIGN_OR_RETURN(auto codec, Opaque(service));
  SEKKA_ASSIGN_OR_RETURN(auto id, service.NextId());
  SEKKA_ASSIGN_OR_RETURN(auto text, (codec)->EncodeText(id));
  return Reply(std::move(text));
}

// UUID.NEXT, ULID.NEXT: one text; UUID.BATCH <n>, ULID.BATCH <n>: a list.
template <TimeOrderedKind kKind>
Result<Reply> TimeOrderedCommand(Service& service, Args args) {
  TimeOrderedGenerator& g = kKind == TimeOrderedKind::kUuidV7 ? service.uuids() : service.ulids();
  const auto engine =
      kKind == TimeOrderedKind::kUuidV7 ? Service::Engine::kUuid : Service::Engine::kUlid;
  auto text = [](const Uuid& u) {
    return kKind == TimeOrderedKind::kUuidV7 ? FormatUuid(u) : FormatUlid(u);
  };
  if (args.empty()) {
    SEKKA_ASSIGN_OR_RETURN(auto u, g.Next());
    service.CountIssued(engine, 1);
    return Reply(text(u));
  }
  SEKKA_ASSIGN_OR_RETURN(auto n, ParseCount("count", args[0], service.config().max_batch));
  std::vector<Uuid> ids(static_cast<std::size_t>(n));
  SEKKA_RETURN_IF_ERROR(g.NextBatch(ids));
  service.CountIssued(engine, ids.size());
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (const Uuid& u : ids) out.push_back(text(u));
  return Reply(std::move(out));
}

// RANDOM.NEXT: one random id; RANDOM.BATCH <n>: n distinct ones (random.layout).
Result<Reply> RandomCommand(Service& service, Args args) {
  if (args.empty()) {
    SEKKA_ASSIGN_OR_RETURN(auto id, service.randoms().Next());
    service.CountIssued(Service::Engine::kRandom, 1);
    return Reply(id);
  }
  SEKKA_ASSIGN_OR_RETURN(auto n, ParseCount("count", args[0], service.config().max_batch));
  std::vector<Id> ids(static_cast<std::size_t>(n));
  SEKKA_RETURN_IF_ERROR(service.randoms().NextIds(ids));
  service.CountIssued(Service::Engine::kRandom, ids.size());
  return Reply(std::move(ids));
}

constexpr std::size_t kAny = std::numeric_limits<std::size_t>::max();

constexpr std::array<CommandSpec, static_cast<std::size_t>(CommandId::kCount_)> kCommands = {{
    // id, label, name, arguments (min, max), auth, may block, handler, lane, usage
    {CommandId::kIdNext, Command::kId, "ID.NEXT", 0, 0, true, nullptr, NextIdCommand, Lane::kStore,
     ""},
    {CommandId::kIdBatch, Command::kIds, "ID.BATCH", 1, 1, true, BatchMayWait, NextIdsCommand,
     Lane::kStore, "<count>"},
    {CommandId::kIdDecode, Command::kDecode, "ID.DECODE", 1, 1, true, nullptr, DecodeCommand,
     Lane::kStore, "<id>", /*changes=*/false},
    {CommandId::kSegNext, Command::kSegment, "SEG.NEXT", 1, 2, true, SegmentNextMayBlock,
     SegmentNextCommand<true>, Lane::kStore, "<tag> [<count>]"},
    {CommandId::kSegRange, Command::kSegmentRange, "SEG.RANGE", 1, 3, true, AlwaysMayBlock,
     SegmentRangeCommand, Lane::kStore, "<tag> [<step> [DENSE]]"},
    {CommandId::kSegCreate, Command::kSegmentCreate, "SEG.CREATE", 3, 3, true, AlwaysMayBlock,
     SegmentCreateCommand, Lane::kStore, "<tag> <start> <step>"},
    // Tag administration, on the store itself (changes need auth_token set: AdminAllowed).
    {CommandId::kSegTags, Command::kSegmentAdmin, "SEG.TAGS", 0, 2, true, AlwaysMayBlock,
     SegmentTagsCommand, Lane::kStore, "[<tag> | AFTER <tag>]", /*changes=*/false},
    {CommandId::kSegStep, Command::kSegmentAdmin, "SEG.STEP", 2, 2, true, AlwaysMayBlock,
     SegmentStepCommand, Lane::kStore, "<tag> <step>"},
    {CommandId::kSegDelete, Command::kSegmentAdmin, "SEG.DELETE", 1, 1, true, AlwaysMayBlock,
     SegmentDeleteCommand, Lane::kStore, "<tag>"},
    // Strict ids: led here, or forwarded to the tag's leader (both may wait).
    {CommandId::kStrictNext, Command::kStrict, "STRICT.NEXT", 1, 2, true, StrictMayBlock,
     StrictCommand, Lane::kStrict, "<tag> [<count>]"},
    {CommandId::kStrictBatch, Command::kStrict, "STRICT.BATCH", 2, 2, true, StrictMayBlock,
     StrictCommand, Lane::kStrict, "<tag> <count>"},
    {CommandId::kStrictForwarded, Command::kStrict, "STRICT.FORWARDED", 2, 2, true, StrictMayBlock,
     StrictForwardedCommand, Lane::kStrictLeader, "<tag> <count>"},
    {CommandId::kStrictCreate, Command::kStrict, "STRICT.CREATE", 1, 1, true, AlwaysMayBlock,
     StrictCreateCommand, Lane::kStrict, "<tag>"},
    // Machine ids for CosId clients: each change is stored (fsync) before it is answered.
    {CommandId::kMachineDistribute, Command::kMachine, "MACHINE.DISTRIBUTE", 5, 5, true,
     AlwaysMayBlock, MachineDistributeCommand, Lane::kStore,
     "<namespace> <bits> <instance> <stable> <guard>"},
    {CommandId::kMachineGuard, Command::kMachine, "MACHINE.GUARD", 3, 3, true, AlwaysMayBlock,
     MachineGuardCommand, Lane::kStore, "<namespace> <instance> <guard>"},
    {CommandId::kMachineRevert, Command::kMachine, "MACHINE.REVERT", 2, 2, true, AlwaysMayBlock,
     MachineRevertCommand, Lane::kStore, "<namespace> <instance>"},
    // Opaque ids (opaque.key_file).
    {CommandId::kOpaqueEncode, Command::kOpaque, "OPAQUE.ENCODE", 1, 1, true, nullptr,
     OpaqueEncodeCommand, Lane::kStore, "<id>"},
    {CommandId::kOpaqueDecode, Command::kOpaque, "OPAQUE.DECODE", 1, 1, true, nullptr,
     OpaqueDecodeCommand, Lane::kStore, "<opaque>", /*changes=*/false},
    {CommandId::kOpaqueNext, Command::kId, "OPAQUE.NEXT", 0, 0, true, nullptr, OpaqueNextCommand,
     Lane::kStore, ""},
    // UUIDv7 and ULID.
    {CommandId::kUuidNext, Command::kUuid, "UUID.NEXT", 0, 0, true, nullptr,
     TimeOrderedCommand<TimeOrderedKind::kUuidV7>, Lane::kStore, ""},
    {CommandId::kUuidBatch, Command::kUuid, "UUID.BATCH", 1, 1, true, nullptr,
     TimeOrderedCommand<TimeOrderedKind::kUuidV7>, Lane::kStore, "<count>"},
    {CommandId::kUlidNext, Command::kUlid, "ULID.NEXT", 0, 0, true, nullptr,
     TimeOrderedCommand<TimeOrderedKind::kUlid>, Lane::kStore, ""},
    {CommandId::kUlidBatch, Command::kUlid, "ULID.BATCH", 1, 1, true, nullptr,
     TimeOrderedCommand<TimeOrderedKind::kUlid>, Lane::kStore, "<count>"},
    // Random ids (random.layout): no worker id, odds of a clash as `sekka layout --rate` says.
    {CommandId::kRandomNext, Command::kRandom, "RANDOM.NEXT", 0, 0, true, nullptr, RandomCommand,
     Lane::kStore, ""},
    {CommandId::kRandomBatch, Command::kRandom, "RANDOM.BATCH", 1, 1, true, nullptr, RandomCommand,
     Lane::kStore, "<count>"},
    // Redis's connection commands, run by the RESP front end (server/resp_handler.cc).
    {CommandId::kAuth, Command::kAuth, "AUTH", 1, 2, false, nullptr, nullptr, Lane::kLoop,
     "[<user>] <password>"},
    {CommandId::kHello, Command::kHello, "HELLO", 0, kAny, false, nullptr, nullptr, Lane::kLoop,
     "[2] [AUTH <user> <password>] [SETNAME <name>]"},
    {CommandId::kQuit, Command::kQuit, "QUIT", 0, kAny, false, nullptr, nullptr, Lane::kLoop, ""},
    {CommandId::kIncr, Command::kSegment, "INCR", 1, 1, true, nullptr, nullptr, Lane::kLoop,
     "<tag>"},
    {CommandId::kIncrBy, Command::kSegment, "INCRBY", 2, 2, true, nullptr, nullptr, Lane::kLoop,
     "<tag> 1"},
    {CommandId::kPing, Command::kPing, "PING", 0, 1, true, nullptr, nullptr, Lane::kLoop,
     "[<message>]"},
    {CommandId::kEcho, Command::kEcho, "ECHO", 1, 1, true, nullptr, nullptr, Lane::kLoop,
     "<message>"},
    {CommandId::kInfo, Command::kInfo, "INFO", 0, kAny, true, nullptr, nullptr, Lane::kLoop,
     "[<section>]"},
    {CommandId::kCommand, Command::kCommand, "COMMAND", 0, kAny, true, nullptr, nullptr,
     Lane::kLoop, "[COUNT | LIST | INFO <name>... | DOCS [<name>...]]"},
    {CommandId::kConfig, Command::kOther, "CONFIG", 1, kAny, true, nullptr, nullptr, Lane::kLoop,
     "GET save | GET appendonly"},
    {CommandId::kIdReply, Command::kClient, "ID.REPLY", 1, 1, true, nullptr, nullptr, Lane::kLoop,
     "STRING | INTEGER"},
    {CommandId::kClient, Command::kClient, "CLIENT", 1, kAny, true, nullptr, nullptr, Lane::kLoop,
     "SETNAME <name> | GETNAME | SETINFO ..."},
    {CommandId::kSelect, Command::kOther, "SELECT", 1, 1, true, nullptr, nullptr, Lane::kLoop, "0"},
}};

// Each row sits at its id's place, so that Spec(id) is an index.
constexpr bool RowsInIdOrder() {
  for (std::size_t i = 0; i < kCommands.size(); ++i) {
    if (static_cast<std::size_t>(kCommands[i].id) != i) return false;
  }
  return true;
}
static_assert(RowsInIdOrder(), "kCommands: every row at its CommandId's place");

}  // namespace

std::span<const CommandSpec> Commands() { return kCommands; }

const CommandSpec& Spec(CommandId id) { return kCommands[static_cast<std::size_t>(id)]; }

const CommandSpec& SegNextOfExistingTag() {
  static const CommandSpec spec = [] {
    CommandSpec s = Spec(CommandId::kSegNext);
    s.run = SegmentNextCommand<false>;
    return s;
  }();
  return spec;
}

const CommandSpec* FindCommand(std::string_view name) {
  for (const CommandSpec& spec : kCommands) {
    if (name.size() == spec.name.size() &&
        strncasecmp(name.data(), spec.name.data(), name.size()) == 0) {
      return &spec;
    }
  }
  return nullptr;
}

Result<Reply> Execute(Service& service, const CommandSpec& spec, Args args) {
  if (args.size() < spec.min_args || args.size() > spec.max_args) {
    return InvalidArgument(
        fmt::format("wrong number of arguments for '{}' command", Lower(spec.name)));
  }
  if (spec.run == nullptr) {  // a connection command: the RESP front end's
    return InvalidArgument(
        fmt::format("'{}' is a command about a RESP connection: send it on one", Lower(spec.name)));
  }
  return spec.run(service, args);
}

Lane LaneOf(Service& service, const CommandSpec& spec, Args args) {
  if (spec.may_block == nullptr) return Lane::kLoop;
  if (args.size() < spec.min_args || args.size() > spec.max_args) return Lane::kLoop;
  return spec.may_block(service, args) ? spec.lane : Lane::kLoop;
}

std::string Lower(std::string_view s, std::size_t max) {
  std::string out(s.substr(0, max));
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Result<std::int64_t> ParseAnyDuration(std::string_view what, std::string_view text) {
  Result<std::int64_t> ms = !text.empty() && (text[0] == 'P' || text[0] == 'p')
                                ? ParseIsoDurationMillis(text)
                                : ParseDurationMillis(text);
  if (!ms.ok()) {
    return InvalidArgument(
        fmt::format("{} \"{}\" is not valid: allowed ISO-8601 such as PT5M, "
                    "or a number with ms, s, m or h",
                    what, text.substr(0, 40)));
  }
  return ms;
}

std::int64_t StrictBatchMax(const Service& service) {
  return std::min(service.config().strict_window, service.config().max_batch);
}

Result<std::int64_t> ParseCount(std::string_view what, std::string_view text, std::int64_t max) {
  std::int64_t n = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || ptr != text.data() + text.size() || n < 1 || n > max) {
    return InvalidArgument(
        fmt::format("{} \"{}\" is not valid: allowed 1 to {}", what, text.substr(0, 40), max));
  }
  return n;
}

bool TokenEquals(std::string_view presented, std::string_view token) {
  unsigned char diff = presented.size() == token.size() ? 0 : 1;
  for (std::size_t i = 0; i < presented.size(); ++i) {
    diff |= static_cast<unsigned char>(presented[i] ^
                                       token[i % std::max<std::size_t>(1, token.size())]);
  }
  return diff == 0 && !token.empty();
}

}  // namespace sekka::server
