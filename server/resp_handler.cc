// RESP: the command table's commands by their names, and Redis's connection commands (AUTH,
// HELLO, PING, COMMAND, ...) for its clients and tools (docs/protocol.md, "RESP").

#include <fmt/format.h>
#include <strings.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <string>
#include <variant>
#include <vector>

#include "sekka/secrets.h"
#include "server/commands.h"
#include "server/handlers.h"
#include "server/log.h"
#include "server/resp.h"

namespace sekka::server {
namespace {

bool Is(std::string_view arg, std::string_view name) {
  return arg.size() == name.size() && strncasecmp(arg.data(), name.data(), name.size()) == 0;
}

// AUTH's and HELLO's one rule, as Redis's single default user: the user "default" (AUTH with no
// user means it) and the server's token.
bool CredentialsMatch(Service& service, std::string_view user, std::string_view password) {
  return TokenEquals(password, service.config().auth_token) && Is(user, "default");
}

// A client name as Redis takes one: printable, no spaces ("" clears it).
constexpr std::string_view kBadClientName =
    "ERR Client names cannot contain spaces, newlines or special characters.";
bool ValidClientName(std::string_view name) {
  return std::all_of(name.begin(), name.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

void WrongArgs(std::string& out, std::string_view name) {
  resp::AppendError(out,
                    fmt::format("ERR wrong number of arguments for '{}' command", Lower(name)));
}

void RespError(std::string& out, const Error& e) {
  resp::AppendError(out,
                    fmt::format("{} {}", MapError(e.code).resp_prefix, RedactSecrets(e.message)));
}

std::string InfoText(Service& service, std::string_view section) {
  std::string out;
  const bool all =
      section.empty() || Is(section, "all") || Is(section, "everything") || Is(section, "default");
  if (all || Is(section, "server")) {
    out += fmt::format(
        "# Server\r\nsekka_version:{}\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\n"
        "layout:{}\r\nworker_id:{}\r\ndatacenter_id:{}\r\n",
        kVersion, service.layout().name(), service.worker().worker_id,
        service.worker().datacenter_id);
  }
  if (all || Is(section, "sekka")) {
    out += fmt::format("# Sekka\r\nhwm:{}\r\nhwm_ms:{}\r\n", FormatUtcMillis(service.hwm_millis()),
                       service.hwm_millis());
  }
  return out;
}

// The command a RESP request runs, with its arguments in `command_args`; null for an unknown
// one. INCR <tag> and INCRBY <tag> 1 are Redis clients' names for SEG.NEXT <tag> (other forms
// are the INCR row's, a connection command that answers them).
const CommandSpec* RespCommand(Args args, Args& command_args) {
  const std::string_view name = args[0];
  if ((Is(name, "INCR") && args.size() == 2) ||
      (Is(name, "INCRBY") && args.size() == 3 && args[2] == "1")) {
    command_args = args.subspan(1, 1);
    return &Spec(CommandId::kSegNext);
  }
  const CommandSpec* spec = FindCommand(name);
  if (spec != nullptr) command_args = args.subspan(1);
  return spec;
}

// An id as a RESP integer, or as a decimal bulk string (ID.REPLY STRING).
void AppendId(std::string& out, std::int64_t id, bool as_string) {
  if (!as_string) {
    resp::AppendInteger(out, id);
    return;
  }
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, id);
  resp::AppendBulk(out, std::string_view(buf, static_cast<std::size_t>(end - buf)));
}

// `string_ids`: ids (an integer or a list of integers: ID.NEXT, ID.BATCH, SEG.NEXT, INCR,
// RANDOM.*, OPAQUE.DECODE) as decimal bulk strings.
void AppendReply(std::string& out, const Reply& reply, bool string_ids) {
  if (const auto* id = std::get_if<std::int64_t>(&reply)) {
    AppendId(out, *id, string_ids);
  } else if (const auto* ids = std::get_if<std::vector<std::int64_t>>(&reply)) {
    out.reserve(out.size() + ids->size() * 27 + 16);
    resp::AppendArrayHeader(out, ids->size());
    for (std::int64_t v : *ids) AppendId(out, v, string_ids);
  } else if (const auto* d = std::get_if<DecodedId>(&reply)) {
    resp::AppendArrayHeader(out, d->sharded ? 12 : 10);
    resp::AppendBulk(out, "time");
    resp::AppendBulk(out, FormatUtcMillis(d->timestamp_ms));
    resp::AppendBulk(out, "timestamp_ms");
    resp::AppendInteger(out, d->timestamp_ms);
    resp::AppendBulk(out, "datacenter");
    resp::AppendInteger(out, d->datacenter);
    resp::AppendBulk(out, "worker");
    resp::AppendInteger(out, d->worker);
    resp::AppendBulk(out, "sequence");
    resp::AppendInteger(out, d->sequence);
    if (d->sharded) {
      resp::AppendBulk(out, "shard");
      resp::AppendInteger(out, d->shard);
    }
  } else if (const auto* texts = std::get_if<std::vector<std::string>>(&reply)) {
    resp::AppendArrayHeader(out, texts->size());
    for (const std::string& t : *texts) resp::AppendBulk(out, t);
  } else if (const auto* m = std::get_if<MachineGrant>(&reply)) {
    // MACHINE.DISTRIBUTE: the machine id and the time to wait past.
    resp::AppendArrayHeader(out, 2);
    resp::AppendInteger(out, m->machine_id);
    resp::AppendInteger(out, m->last_timestamp_ms);
  } else if (const auto* g = std::get_if<SegmentGrant>(&reply)) {
    // SEG.RANGE: begin, end (exclusive), delta, remainder.
    resp::AppendArrayHeader(out, 4);
    resp::AppendInteger(out, g->range.begin);
    resp::AppendInteger(out, g->range.end);
    resp::AppendInteger(out, g->delta);
    resp::AppendInteger(out, g->remainder);
  } else if (const auto* word = std::get_if<Word>(&reply)) {
    resp::AppendSimple(out, word->text);
  } else {
    resp::AppendBulk(out, std::get<std::string>(reply));
  }
}

// One RESP command of a connection: what the connection commands below get.
struct RespCall {
  Service& service;
  Session& session;
  const std::vector<std::string_view>& args;
  std::string& out;
  bool& close;
  std::string_view name() const { return args[0]; }
  std::size_t argc() const { return args.size(); }
  bool Error(std::string_view text) {  // always false: the command failed
    resp::AppendError(out, text);
    return false;
  }
  bool WrongArgs() {
    ::sekka::server::WrongArgs(out, name());
    return false;
  }
  // Wrong credentials: the connection's last reply, answered late (connection.cc).
  bool WrongPass() {
    session.auth_failed = close = true;
    return Error("WRONGPASS invalid username-password pair or user is disabled.");
  }
};

// The commands about the connection itself (Redis's, for its clients and tools), each true
// when it succeeded. The ids are the command table's (server/commands.h).
bool AuthCommand(RespCall& c) {
  if (c.argc() < 2 || c.argc() > 3) return c.WrongArgs();
  if (c.service.config().auth_token.empty()) {
    return c.Error(
        "ERR AUTH <password> called without any password configured for the default user. Are "
        "you sure your configuration is correct?");
  }
  if (!CredentialsMatch(c.service, c.argc() == 3 ? c.args[1] : "default", c.args.back())) {
    return c.WrongPass();
  }
  c.session.Authenticate();
  resp::AppendSimple(c.out, "OK");
  return true;
}

// A browser's request on the RESP port (a web page's fetch or form aimed at 127.0.0.1:6380): its
// request line or Host header closes the connection unanswered, before the request's body can
// run as commands (Redis's securityWarningCommand does the same).
// The warning is logged at most once a second (a page can open connections in a loop).
bool HttpOnRespCommand(RespCall& c) {
  static std::atomic<std::int64_t> last_logged_s{0};
  const std::int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count();
  if (std::int64_t last = last_logged_s.load();
      now_s != last && last_logged_s.compare_exchange_strong(last, now_s)) {
    Log(LogLevel::kWarn, "closed a connection that sent HTTP to the Redis-protocol port",
        "hint=\"a web page may be trying to reach it\" limit=\"one such line a second\"");
  }
  c.close = true;
  return false;
}

bool QuitCommand(RespCall& c) {
  resp::AppendSimple(c.out, "OK");
  c.close = true;
  return true;
}

void AppendHelloReply(std::string& out) {
  resp::AppendArrayHeader(out, 14);
  for (const char* word : {"server", "sekka", "version"}) resp::AppendBulk(out, word);
  resp::AppendBulk(out, kVersion);
  resp::AppendBulk(out, "proto");
  resp::AppendInteger(out, 2);
  resp::AppendBulk(out, "id");
  resp::AppendInteger(out, 0);
  for (const char* word : {"mode", "standalone", "role", "master", "modules"}) {
    resp::AppendBulk(out, word);
  }
  resp::AppendArrayHeader(out, 0);
}

// HELLO [2 [AUTH user pass] [SETNAME name]]: RESP2 only.
bool HelloCommand(RespCall& c) {
  const std::vector<std::string_view>& a = c.args;
  if (c.argc() > 1 && a[1] != "2") {
    const bool number = !a[1].empty() && a[1].size() < 10 &&
                        a[1].find_first_not_of("0123456789") == std::string_view::npos;
    return c.Error(number ? "NOPROTO sorry, this protocol version is not supported"
                          : "ERR Protocol version is not an integer or out of range");
  }
  for (std::size_t i = 2; i < c.argc();) {
    if (Is(a[i], "AUTH") && i + 2 < c.argc()) {
      if (!CredentialsMatch(c.service, a[i + 1], a[i + 2])) return c.WrongPass();
      c.session.Authenticate();
      i += 3;
    } else if (Is(a[i], "SETNAME") && i + 1 < c.argc()) {
      if (!ValidClientName(a[i + 1])) return c.Error(kBadClientName);
      c.session.name = std::string(a[i + 1].substr(0, 128));
      i += 2;
    } else {
      return c.Error("ERR Syntax error in HELLO option");
    }
  }
  if (!c.service.config().auth_token.empty() && !c.session.authenticated) {
    return c.Error(
        "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
        "HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and "
        "select the RESP protocol version at the same time");
  }
  AppendHelloReply(c.out);
  return true;
}

// INCR and INCRBY forms the command table did not take (RespCommand maps the valid ones).
bool IncrCommand(RespCall& c) {
  if (Is(c.name(), "INCRBY") && c.argc() == 3) {
    // Redis clients send INCRBY <key> 1 for INCR; a larger step would promise contiguous ids.
    return c.Error(
        "ERR INCRBY on a segment tag takes an increment of 1 only (ids of a batch need not be "
        "contiguous): use SEG.NEXT <tag> <n>");
  }
  return c.WrongArgs();
}

bool PingCommand(RespCall& c) {
  if (c.argc() > 2) return c.WrongArgs();
  if (c.argc() == 1) {
    resp::AppendSimple(c.out, "PONG");
  } else {
    resp::AppendBulk(c.out, c.args[1]);
  }
  return true;
}

bool EchoCommand(RespCall& c) {
  if (c.argc() != 2) return c.WrongArgs();
  resp::AppendBulk(c.out, c.args[1]);
  return true;
}

bool InfoCommand(RespCall& c) {
  resp::AppendBulk(c.out, InfoText(c.service, c.argc() > 1 ? c.args[1] : std::string_view()));
  return true;
}

// redis-benchmark asks CONFIG GET save / appendonly: sekka keeps no Redis data.
bool ConfigCommand(RespCall& c) {
  const std::vector<std::string_view>& a = c.args;
  if (c.argc() == 3 && Is(a[1], "GET") && (Is(a[2], "save") || Is(a[2], "appendonly"))) {
    resp::AppendArrayHeader(c.out, 2);
    resp::AppendBulk(c.out, Lower(a[2]));
    resp::AppendBulk(c.out, Is(a[2], "save") ? "" : "no");
  } else {
    resp::AppendArrayHeader(c.out, 0);
  }
  return true;
}

// ID.REPLY STRING | INTEGER: how this connection gets ids (server.resp_ids by default).
bool IdReplyCommand(RespCall& c) {
  if (c.argc() != 2) return c.WrongArgs();
  if (!Is(c.args[1], "STRING") && !Is(c.args[1], "INTEGER")) {
    std::string shown(c.args[1].substr(0, 40));
    for (char& ch : shown) {
      if (ch < 0x20 || ch > 0x7e) ch = '?';  // one line, whatever the client sent
    }
    return c.Error(fmt::format("ERR ID.REPLY {}: allowed STRING or INTEGER", shown));
  }
  c.session.id_reply = Is(c.args[1], "STRING") ? IdReply::kString : IdReply::kInteger;
  resp::AppendSimple(c.out, "OK");
  return true;
}

bool ClientCommand(RespCall& c) {
  const std::vector<std::string_view>& a = c.args;
  if (c.argc() == 3 && Is(a[1], "SETNAME")) {
    if (!ValidClientName(a[2])) return c.Error(kBadClientName);
    c.session.name = std::string(a[2].substr(0, 128));
  } else if (c.argc() == 2 && Is(a[1], "GETNAME")) {
    if (c.session.name.empty()) {
      resp::AppendNull(c.out);
    } else {
      resp::AppendBulk(c.out, c.session.name);
    }
    return true;
  } else if (c.argc() < 2 ||
             !(Is(a[1], "SETINFO") || Is(a[1], "NO-EVICT") || Is(a[1], "NO-TOUCH"))) {
    return c.Error("ERR unknown subcommand or wrong number of arguments for 'client'");
  }
  resp::AppendSimple(c.out, "OK");
  return true;
}

bool SelectCommand(RespCall& c) {
  if (c.argc() != 2 || c.args[1] != "0") return c.Error("ERR DB index is out of range");
  resp::AppendSimple(c.out, "OK");
  return true;
}

// What COMMAND tells of one command: Redis 7's shapes, from the table.
struct CommandEntry {
  std::string_view name;
  int arity;  // Redis's: the words with the name, negative for "at least"
  bool needs_auth;
  std::string_view usage;
};

std::vector<CommandEntry> CommandEntries() {
  std::vector<CommandEntry> out;
  for (const CommandSpec& spec : Commands()) {
    const int words = static_cast<int>(spec.min_args) + 1;
    out.push_back(
        {spec.name, spec.min_args == spec.max_args ? words : -words, spec.needs_auth, spec.usage});
  }
  return out;
}

// COMMAND INFO's entry: name, arity, flags, first/last key and step (no keys), ACL categories,
// tips, key specs, subcommands.
void AppendCommandInfo(std::string& out, const CommandEntry& e) {
  resp::AppendArrayHeader(out, 10);
  resp::AppendBulk(out, Lower(e.name));
  resp::AppendInteger(out, e.arity);
  resp::AppendArrayHeader(out, e.needs_auth ? 0 : 1);
  if (!e.needs_auth) resp::AppendSimple(out, "no_auth");
  for (int i = 0; i < 3; ++i) resp::AppendInteger(out, 0);
  for (int i = 0; i < 4; ++i) resp::AppendArrayHeader(out, 0);
}

// COMMAND DOCS's entry: the name, then its doc as a flat map (RESP2).
void AppendCommandDoc(std::string& out, const CommandEntry& e) {
  resp::AppendBulk(out, Lower(e.name));
  resp::AppendArrayHeader(out, 6);
  resp::AppendBulk(out, "summary");
  resp::AppendBulk(out,
                   e.usage.empty() ? std::string(e.name) : fmt::format("{} {}", e.name, e.usage));
  resp::AppendBulk(out, "since");
  resp::AppendBulk(out, "0.1.0");
  resp::AppendBulk(out, "group");
  resp::AppendBulk(out, "generic");
}

// COMMAND [COUNT | LIST | INFO name... | DOCS [name...]], as Redis 7 answers them, so that
// redis-cli and client libraries learn the commands (docs/protocol.md lists the same).
bool CommandCommand(RespCall& c) {
  const std::vector<CommandEntry> entries = CommandEntries();
  const std::string_view sub = c.argc() > 1 ? c.args[1] : std::string_view();
  auto find = [&](std::string_view name) -> const CommandEntry* {
    for (const CommandEntry& e : entries) {
      if (Is(name, e.name)) return &e;
    }
    return nullptr;
  };
  if (Is(sub, "COUNT") && c.argc() == 2) {
    resp::AppendInteger(c.out, static_cast<std::int64_t>(entries.size()));
  } else if (Is(sub, "LIST") && c.argc() == 2) {
    resp::AppendArrayHeader(c.out, entries.size());
    for (const CommandEntry& e : entries) resp::AppendBulk(c.out, Lower(e.name));
  } else if (c.argc() <= 2 && (c.argc() == 1 || Is(sub, "INFO"))) {  // every command
    resp::AppendArrayHeader(c.out, entries.size());
    for (const CommandEntry& e : entries) AppendCommandInfo(c.out, e);
  } else if (Is(sub, "INFO")) {
    resp::AppendArrayHeader(c.out, c.argc() - 2);
    for (std::size_t i = 2; i < c.argc(); ++i) {
      if (const CommandEntry* e = find(c.args[i])) {
        AppendCommandInfo(c.out, *e);
      } else {
        resp::AppendNull(c.out);
      }
    }
  } else if (Is(sub, "DOCS")) {
    std::vector<const CommandEntry*> asked;
    for (std::size_t i = 2; i < c.argc(); ++i) {
      if (const CommandEntry* e = find(c.args[i])) asked.push_back(e);
    }
    if (c.argc() == 2) {
      for (const CommandEntry& e : entries) asked.push_back(&e);
    }
    resp::AppendArrayHeader(c.out, 2 * asked.size());
    for (const CommandEntry* e : asked) AppendCommandDoc(c.out, *e);
  } else {
    return c.Error(fmt::format(
        "ERR unknown subcommand or wrong number of arguments for 'command': allowed COUNT, "
        "LIST, INFO <name>..., DOCS [<name>...]"));
  }
  return true;
}

bool UnknownCommand(RespCall& c) {
  std::string with;
  for (std::size_t i = 1; i < c.argc() && i < 4; ++i) {
    with += fmt::format("'{}' ", c.args[i].substr(0, 40));
  }
  return c.Error(fmt::format("ERR unknown command '{}', with args beginning with: {}",
                             c.name().substr(0, 100), with));
}

// The connection command with that id (the rows of server/commands.cc without a handler).
bool RunConnectionCommand(CommandId id, RespCall& c) {
  switch (id) {
    case CommandId::kAuth:
      return AuthCommand(c);
    case CommandId::kHello:
      return HelloCommand(c);
    case CommandId::kQuit:
      return QuitCommand(c);
    case CommandId::kIncr:
    case CommandId::kIncrBy:
      return IncrCommand(c);
    case CommandId::kPing:
      return PingCommand(c);
    case CommandId::kEcho:
      return EchoCommand(c);
    case CommandId::kInfo:
      return InfoCommand(c);
    case CommandId::kCommand:
      return CommandCommand(c);
    case CommandId::kConfig:
      return ConfigCommand(c);
    case CommandId::kIdReply:
      return IdReplyCommand(c);
    case CommandId::kClient:
      return ClientCommand(c);
    case CommandId::kSelect:
      return SelectCommand(c);
    default:
      return UnknownCommand(c);
  }
}

bool StringIds(Service& service, const Session& session) {
  return session.id_reply == IdReply::kServerDefault ? service.config().resp_string_ids
                                                     : session.id_reply == IdReply::kString;
}

}  // namespace

void HandleResp(Service& service, Session& session, const std::vector<std::string_view>& args,
                std::string& out, bool& close) {
  if (args.empty()) return;
  const bool needs_auth = !service.config().auth_token.empty() && !session.authenticated;
  // The hot command first, so that it skips the look-ups below.
  if (!needs_auth && args.size() == 1 && Is(args[0], "ID.NEXT")) {
    const Result<Reply> reply = Execute(service, Spec(CommandId::kIdNext), {});
    if (reply.ok()) {
      AppendId(out, std::get<std::int64_t>(*reply), StringIds(service, session));
    } else {
      RespError(out, reply.error());
    }
    service.CountRequest(Protocol::kResp, Command::kId, reply.ok());
    return;
  }
  RespCall call{service, session, args, out, close};
  Command label = Command::kOther;
  bool ok = false;
  Args command_args;
  if (Is(args[0], "POST") || Is(args[0], "HOST:")) {  // a browser's request: never a command
    ok = HttpOnRespCommand(call);
  } else if (const CommandSpec* spec = RespCommand(args, command_args)) {
    label = spec->command;
    if (needs_auth && spec->needs_auth) {
      call.Error("NOAUTH Authentication required.");
    } else if (spec->run == nullptr) {
      ok = RunConnectionCommand(spec->id, call);
    } else if (const Result<Reply> reply = Execute(service, *spec, command_args); reply.ok()) {
      AppendReply(out, *reply, StringIds(service, session));
      ok = true;
    } else {
      RespError(out, reply.error());
    }
  } else {
    ok = needs_auth ? call.Error("NOAUTH Authentication required.") : UnknownCommand(call);
  }
  service.CountRequest(Protocol::kResp, label, ok);
}

bool JoinStrictRun(Service& service, const Session& session,
                   const std::vector<std::string_view>& args, StrictRun& run) {
  if (args.empty()) return false;
  Args command_args;
  const CommandSpec* spec = RespCommand(args, command_args);
  if (spec == nullptr ||
      (spec->id != CommandId::kStrictNext && spec->id != CommandId::kStrictBatch) ||
      command_args.size() < spec->min_args || command_args.size() > spec->max_args) {
    return false;
  }
  if (!service.config().auth_token.empty() && !session.authenticated) return false;
  if (!run.counts.empty() && command_args[0] != run.tag) return false;
  std::int64_t count = 0;  // the one-id form
  if (command_args.size() == 2) {
    Result<std::int64_t> n = ParseCount("count", command_args[1], StrictBatchMax(service));
    if (!n.ok()) return false;
    count = *n;
  }
  const std::int64_t ids = std::max<std::int64_t>(count, 1);
  if (run.total + ids > service.config().strict_window) return false;
  if (run.counts.empty()) run.tag = std::string(command_args[0]);
  run.counts.push_back(count);
  run.total += ids;
  return true;
}

void AnswerStrictRun(Service& service, const Session& session, const StrictRun& run,
                     const Result<std::int64_t>& first, std::string& out) {
  const bool string_ids = StringIds(service, session);
  std::int64_t next = first.ok() ? *first : 0;
  for (const std::int64_t count : run.counts) {
    if (!first.ok()) {
      RespError(out, first.error());
    } else if (count == 0) {
      AppendId(out, next++, string_ids);
    } else {
      std::vector<std::int64_t> ids(static_cast<std::size_t>(count));
      for (std::int64_t& id : ids) id = next++;
      AppendReply(out, Reply(std::move(ids)), string_ids);
    }
    service.CountRequest(Protocol::kResp, Command::kStrict, first.ok());
  }
}

Lane LaneOf(Service& service, const std::vector<std::string_view>& args) {
  if (args.empty()) return Lane::kLoop;
  Args command_args;
  const CommandSpec* spec = RespCommand(args, command_args);
  return spec == nullptr ? Lane::kLoop : LaneOf(service, *spec, command_args);
}

}  // namespace sekka::server
