#include "backends/redis_client.h"

#include <fmt/format.h>

#include <algorithm>

namespace sekka {
namespace {

std::string Param(const StoreUri& uri, const std::string& key) {
  const auto it = uri.params.find(key);
  return it == uri.params.end() ? std::string() : it->second;
}

}  // namespace

Result<std::unique_ptr<RedisClient>> RedisClient::Open(StoreUri uri, std::string text,
                                                       std::string_view what,
                                                       std::chrono::milliseconds timeout) {
  if (!uri.path.empty() &&
      (uri.path.size() > 5 || !std::all_of(uri.path.begin(), uri.path.end(),
                                           [](char c) { return c >= '0' && c <= '9'; }))) {
    return InvalidArgument(
        fmt::format("{} \"{}\": the database after '/' is a number (0-99999)", what, text));
  }
  const TlsFiles files{Param(uri, "tls_ca_file"), Param(uri, "tls_cert_file"),
                       Param(uri, "tls_key_file")};
  const bool tls = uri.scheme == "rediss";
  if (!tls && (!files.ca_file.empty() || !files.cert_file.empty())) {
    return InvalidArgument(
        fmt::format("{} \"{}\" has TLS files but is redis://: use rediss:// for TLS", what, text));
  }
  if (tls && files.ca_file.empty()) {
    return InvalidArgument(fmt::format(
        "{} \"{}\" is rediss:// without tls_ca_file: give the CA file of the server, or "
        "tls_ca_file=system",
        what, text));
  }
  Result<std::shared_ptr<SSL_CTX>> ctx = TlsClientContext(files);
  if (!ctx.ok()) {
    return InvalidArgument(fmt::format("{} \"{}\": {}", what, text, ctx.error().message));
  }
  const std::string durability = Param(uri, "durability");
  if (!durability.empty() && durability != "any" && durability != "fsync") {
    return InvalidArgument(
        fmt::format("{} \"{}\": durability=\"{}\" is not known: allowed fsync (the default) or any",
                    what, text, durability.substr(0, 20)));
  }
  const std::string eviction = Param(uri, "eviction");
  if (!eviction.empty() && eviction != "any" && eviction != "none") {
    return InvalidArgument(
        fmt::format("{} \"{}\": eviction=\"{}\" is not known: allowed none (the default) or any",
                    what, text, eviction.substr(0, 20)));
  }
  if (uri.port == 0) uri.port = 6379;
  return std::unique_ptr<RedisClient>(
      new RedisClient(std::move(uri), std::move(text), std::move(ctx).value(), timeout));
}

Status RedisClient::Connect() {
  if (conn_ != nullptr) return Status::Ok();
  std::unique_ptr<RespConnection> conn;
  if (std::optional<TransportError> e =
          RespConnection::Open(uri_.host, uri_.port, timeout_, -1, tls_.get(), conn)) {
    return Unavailable(fmt::format("{} is unreachable: {}", text_, e->message));
  }
  std::vector<std::vector<std::string>> setup;
  if (uri_.has_password || !uri_.user.empty()) {
    setup.push_back(uri_.user.empty() ? std::vector<std::string>{"AUTH", uri_.password}
                                      : std::vector<std::string>{"AUTH", uri_.user, uri_.password});
  }
  if (!uri_.path.empty()) setup.push_back({"SELECT", uri_.path});
  for (const std::vector<std::string>& command : setup) {
    RespReply reply;
    if (std::optional<TransportError> e = conn->Query(command, timeout_, reply)) {
      return Unavailable(fmt::format("{}: {}", text_, e->message));
    }
    if (reply.kind == '-') {
      return Unavailable(fmt::format("{}: {} refused: {}", text_, command[0], reply.text));
    }
  }
  if (Param(uri_, "durability") != "any") {
    if (Status s = CheckDurable(*conn); !s.ok()) return s;
  }
  if (Param(uri_, "eviction") != "any") {
    if (Status s = CheckNoEviction(*conn); !s.ok()) return s;
  }
  conn_ = std::move(conn);
  return Status::Ok();
}

Result<std::string> RedisClient::ConfigGet(RespConnection& conn, const char* name) {
  RespReply reply;
  if (std::optional<TransportError> e = conn.Query({"CONFIG", "GET", name}, timeout_, reply)) {
    return Unavailable(fmt::format("{}: {}", text_, e->message));
  }
  if (reply.kind == '-') return "unknown (CONFIG GET refused: " + reply.text + ")";
  return reply.kind == '*' && reply.elements.size() == 2 ? reply.elements[1].text : "";
}

Status RedisClient::CheckDurable(RespConnection& conn) {
  // no-appendfsync-on-rewrite yes skips the fsync while the AOF is rewritten.
  for (const auto& [name, want] : {std::pair{"appendonly", "yes"},
                                   {"appendfsync", "always"},
                                   {"no-appendfsync-on-rewrite", "no"}}) {
    SEKKA_ASSIGN_OR_RETURN(auto got, ConfigGet(conn, name));
    if (got == want) continue;
    return Unavailable(fmt::format(
        "{}: Redis runs with {} \"{}\": an acknowledged write can be lost in a crash, and ids "
        "handed out again; set appendonly yes, appendfsync always and no-appendfsync-on-rewrite "
        "no, or add durability=any to "
        "the URI to accept that (docs/operations.md, \"Redis: what is promised\")",
        text_, name, got));
  }
  return Status::Ok();
}

Status RedisClient::CheckNoEviction(RespConnection& conn) {
  // volatile-* policies evict only keys with a TTL: sekka's session keys, whose early end the
  // hwm fence and a new strict leader's settle cover (LeaseGrant::settle). An allkeys-* policy
  // may evict a counter, an owner record or an hwm: ids again.
  SEKKA_ASSIGN_OR_RETURN(auto policy, ConfigGet(conn, "maxmemory-policy"));
  if (policy == "noeviction" || policy.starts_with("volatile-")) return Status::Ok();
  return Unavailable(fmt::format(
      "{}: Redis runs with maxmemory-policy \"{}\": once maxmemory is reached it may evict "
      "sekka's counters, owner records and high-water marks, and ids are handed out again; set "
      "maxmemory-policy noeviction (or a volatile-* policy), or add eviction=any to the URI to "
      "accept that (docs/operations.md, \"Redis: what is promised\")",
      text_, policy));
}

Result<RespReply> RedisClient::Call(const std::vector<std::string>& args, bool may_repeat) {
  std::lock_guard lock(mu_);
  for (int attempt = 0;; ++attempt) {
    SEKKA_RETURN_IF_ERROR(Connect());
    RespReply reply;
    std::optional<TransportError> e = conn_->Query(args, timeout_, reply);
    if (!e) return reply;
    conn_.reset();
    // A connection the server closed before this command: the command never ran.
    if (!e->stale || attempt > 0 || !may_repeat) {
      return Unavailable(fmt::format(
          "{}: {}", text_,
          e->timed_out ? fmt::format("no answer within {} ms", timeout_.count()) : e->message));
    }
  }
}

Result<std::vector<RespReply>> RedisClient::CallInOrder(
    const std::vector<std::vector<std::string>>& commands) {
  std::lock_guard lock(mu_);
  SEKKA_RETURN_IF_ERROR(Connect());
  std::vector<RespReply> replies;
  for (const std::vector<std::string>& args : commands) {
    RespReply& reply = replies.emplace_back();
    if (std::optional<TransportError> e = conn_->Query(args, timeout_, reply)) {
      conn_.reset();
      return Unavailable(fmt::format(
          "{}: {}", text_,
          e->timed_out ? fmt::format("no answer within {} ms", timeout_.count()) : e->message));
    }
  }
  return replies;
}

}  // namespace sekka
