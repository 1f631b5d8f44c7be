// How `sekka serve` reaches its cluster for strict ids (server/strict_tags.h): each tag's lease and
// its leader's identity in the namespace "<cluster>.strict.<tag>" at the worker-id coordinator,
// and calls to a leader over its RESP port with the cluster's token, over TLS when the
// listeners have it (strict.tls_ca_file; this server's certificate as the client's when the
// leaders require one).

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#include "backends/local_worker_lease.h"
#include "backends/worker_lease_uri.h"
#include "cli/commands.h"
#include "resp/resp_connection.h"

namespace sekka::cli {
namespace {

// The coordinator namespace of a strict tag. Errors: kInvalidArgument when it is too long.
Result<std::string> Namespace(const server::ServerConfig& config, const std::string& tag) {
  return server::StrictNamespace(config.cluster, tag);
}

WorkerLeaseOptions LeaseOptions(const server::ServerConfig& config, Clock* clock,
                                std::string identity) {
  WorkerLeaseOptions o;
  o.identity = std::move(identity);
  o.worker_count = 1;  // one holder: the leader
  o.ttl = std::chrono::milliseconds(config.lease_ttl_ms);
  o.call_timeout = std::chrono::milliseconds(server::CoordinatorCallTimeoutMs(config));
  o.layout = "strict counter";  // the namespace serves strict ids only
  o.keep_id = true;             // the one slot, whatever its bound
  o.clock = clock;
  return o;
}

// Calls to leaders, up to kStrictCallsInFlight connections per leader kept between calls.
class Forwarder {
 public:
  Forwarder(std::string token, std::shared_ptr<SSL_CTX> tls)
      : token_(std::move(token)), tls_(std::move(tls)) {}

  // The first of `n` ids of `tag` from the leader at `address` ("ip:port" or "[ip]:port"),
  // connection and authentication included, within `timeout`.
  Result<std::int64_t> Call(const std::string& address, const std::string& tag, std::int64_t n,
                            std::chrono::milliseconds timeout) {
    const Deadline deadline = std::chrono::steady_clock::now() + timeout;
    std::unique_ptr<RespConnection> conn = Take(address);
    if (conn == nullptr) {
      SEKKA_ASSIGN_OR_RETURN(auto opened, Open(address, deadline));
      conn = std::move(opened);
    }
    RespReply reply;
    if (auto e = conn->Query({"STRICT.FORWARDED", tag, std::to_string(n)}, Left(deadline), reply)) {
      return Unavailable(fmt::format("leader {}: {}", address, e->message));
    }
    Give(address, std::move(conn));
    if (reply.kind == ':') return reply.integer;
    if (reply.kind == '-' && reply.text.rfind("LEASELOST", 0) == 0) return LeaseLost(reply.text);
    return Unavailable(fmt::format("leader {}: {}", address, reply.text.substr(0, 300)));
  }

 private:
  using Deadline = std::chrono::steady_clock::time_point;

  // What is left until `deadline`, at least 50 ms (a call is never sent with none).
  static std::chrono::milliseconds Left(Deadline deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    return std::max(left, std::chrono::milliseconds(50));
  }

  // A new connection to `address`, authenticated with the cluster's token.
  Result<std::unique_ptr<RespConnection>> Open(const std::string& address, Deadline deadline) {
    const std::size_t colon = address.rfind(':');
    if (colon == std::string::npos)
      return Unavailable("leader address " + address + " has no port");
    std::string host = address.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);  // an IPv6 address
    }
    const int port = std::atoi(address.c_str() + colon + 1);
    std::unique_ptr<RespConnection> conn;
    if (auto e = RespConnection::Open(host, port, Left(deadline), -1, tls_.get(), conn)) {
      return Unavailable(fmt::format("leader {} is unreachable: {}", address, e->message));
    }
    if (token_.empty()) return conn;
    RespReply ok;
    if (auto e = conn->Query({"AUTH", token_}, Left(deadline), ok)) {
      return Unavailable(fmt::format("leader {} is unreachable: {}", address, e->message));
    }
    if (ok.kind != '+') {
      return Unavailable(fmt::format("leader {} refused this server's token: {}", address,
                                     ok.text.substr(0, 200)));
    }
    return conn;
  }

  std::unique_ptr<RespConnection> Take(const std::string& address) {
    std::lock_guard lock(mu_);
    auto it = idle_.find(address);
    if (it == idle_.end()) return nullptr;
    std::unique_ptr<RespConnection> conn = std::move(it->second.back());
    it->second.pop_back();
    if (it->second.empty()) idle_.erase(it);
    return conn;
  }
  void Give(const std::string& address, std::unique_ptr<RespConnection> conn) {
    std::lock_guard lock(mu_);
    // As many kept per leader as one tag's calls in flight (several tags share them).
    std::vector<std::unique_ptr<RespConnection>>& kept = idle_[address];
    if (kept.size() < static_cast<std::size_t>(server::kStrictCallsInFlight)) {
      kept.push_back(std::move(conn));
    }
  }

  const std::string token_;
  const std::shared_ptr<SSL_CTX> tls_;  // null: plain TCP
  std::mutex mu_;
  std::map<std::string, std::vector<std::unique_ptr<RespConnection>>> idle_;  // guarded by mu_
};

// Leader lookups: a coordinator per tag, kept, in the strict tags' shared session.
class Directory {
 public:
  Directory(server::ServerConfig config, CoordinatorAccess access, Clock* clock,
            std::shared_ptr<CoordinatorSessions> sessions)
      : config_(std::move(config)),
        access_(std::move(access)),
        clock_(clock),
        sessions_(std::move(sessions)) {}

  Result<std::string> Leader(const std::string& tag) {
    std::lock_guard lock(mu_);  // a coordinator is used by one thread at a time
    auto it = lookups_.find(tag);
    if (it == lookups_.end()) {
      SEKKA_ASSIGN_OR_RETURN(auto name, Namespace(config_, tag));
      SEKKA_ASSIGN_OR_RETURN(
          auto c, OpenCoordinator(
                      config_.worker_source, config_.coordinator.secret(), name,
                      LeaseOptions(config_, clock_, fmt::format("strict-lookup@{}", ::getpid())),
                      access_, {}, sessions_.get()));
      it = lookups_.emplace(tag, std::move(c)).first;
    }
    SEKKA_ASSIGN_OR_RETURN(auto holders, it->second->ListHolders());
    auto holder = holders.find(0);
    return holder == holders.end() ? std::string() : holder->second.identity;
  }

  // Drops `tag`'s coordinator (the server let the tag go).
  void Forget(const std::string& tag) {
    std::unique_ptr<Coordinator> closed;
    std::lock_guard lock(mu_);
    if (auto it = lookups_.find(tag); it != lookups_.end()) {
      closed = std::move(it->second);
      lookups_.erase(it);
    }
  }

 private:
  const server::ServerConfig config_;
  const CoordinatorAccess access_;
  Clock* clock_;
  const std::shared_ptr<CoordinatorSessions> sessions_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Coordinator>> lookups_;  // guarded by mu_
};

// The strict tags declared for the cluster (STRICT.CREATE, `sekka strict create`): one shared
// document of the cluster's namespace, a tag per line, written only at the version read (so
// two declarations at once both land), read without a session.
class Declarations {
 public:
  static constexpr std::string_view kDocument = "strict.tags";

  // `sessions`: the strict tags' shared sessions; null: a session of its own.
  Declarations(server::ServerConfig config, CoordinatorAccess access, Clock* clock,
               std::shared_ptr<CoordinatorSessions> sessions = nullptr)
      : config_(std::move(config)),
        access_(std::move(access)),
        clock_(clock),
        sessions_(std::move(sessions)) {}

  Result<std::vector<std::string>> Read() {
    std::lock_guard lock(mu_);
    SEKKA_ASSIGN_OR_RETURN(auto doc, ReadLocked());
    return Split(doc.data);
  }

  // False: declared already.
  // The lock is held one round at a time: a server's read of the declarations waits for one
  // round at most.
  Result<bool> Add(const std::string& tag) {
    if (Result<std::string> name = Namespace(config_, tag); !name.ok()) return name.error();
    for (int attempt = 0; attempt < 10; ++attempt) {
      std::lock_guard lock(mu_);
      SEKKA_ASSIGN_OR_RETURN(auto doc, ReadLocked());
      std::vector<std::string> tags = Split(doc.data);
      if (std::find(tags.begin(), tags.end(), tag) != tags.end()) return false;
      if (tags.size() >= server::kStrictMaxTags) {
        return Exhausted(fmt::format(
            "strict tag {} is not declared: the cluster declares {} already", tag, tags.size()));
      }
      doc.data += tag + "\n";
      SEKKA_ASSIGN_OR_RETURN(auto written,
                             coordinator_->WriteShared(kDocument, doc.data, doc.version));
      if (written) return true;  // else another declaration landed first: read again
    }
    return Unavailable(fmt::format(
        "strict tag {} is not declared yet: other declarations kept landing first", tag));
  }

 private:
  Result<SharedDocument> ReadLocked() {
    if (coordinator_ == nullptr) {
      SEKKA_ASSIGN_OR_RETURN(
          coordinator_,
          OpenCoordinator(
              config_.worker_source, config_.coordinator.secret(), config_.cluster,
              LeaseOptions(config_, clock_, fmt::format("strict-declarations@{}", ::getpid())),
              access_, {}, sessions_.get()));
    }
    return coordinator_->ReadShared(kDocument);
  }

  static std::vector<std::string> Split(std::string_view data) {
    std::vector<std::string> tags;
    for (std::size_t at = 0; at < data.size();) {
      std::size_t end = data.find('\n', at);
      if (end == std::string_view::npos) end = data.size();
      if (end > at) tags.emplace_back(data.substr(at, end - at));
      at = end + 1;
    }
    return tags;
  }

  const server::ServerConfig config_;
  const CoordinatorAccess access_;
  Clock* clock_;
  const std::shared_ptr<CoordinatorSessions> sessions_;
  std::mutex mu_;                             // a coordinator is used by one thread at a time
  std::unique_ptr<Coordinator> coordinator_;  // guarded by mu_; opened on first use
};

// The TLS context of calls to leaders, when the listeners have TLS; null: plain TCP.
Result<std::shared_ptr<SSL_CTX>> LeaderTls(const server::ServerConfig& config) {
  if (config.server_tls_cert_file.empty()) return std::shared_ptr<SSL_CTX>();
  TlsFiles files{config.strict_tls_ca_file.empty() ? "system" : config.strict_tls_ca_file, "", ""};
  if (!config.server_tls_client_ca_file.empty()) {  // the leaders ask for a client certificate
    files.cert_file = config.server_tls_cert_file;
    files.key_file = config.server_tls_key_file;
  }
  Result<std::shared_ptr<SSL_CTX>> tls = TlsClientContext(files);
  if (!tls.ok()) {
    return InvalidArgument(
        "strict calls to other servers over TLS (strict.tls_ca_file, "
        "server.tls_cert_file): " +
        tls.error().message);
  }
  return tls;
}

}  // namespace

server::StrictCoordination LocalStrictCoordination(const server::ServerConfig& config,
                                                   Clock* clock) {
  server::StrictCoordination c;
  c.open_lease = [config, clock](
                     const std::string& tag,
                     const std::string& identity) -> Result<std::unique_ptr<WorkerLease>> {
    SEKKA_RETURN_IF_ERROR(ValidateStrictTag(tag));
    // The data dir is this process's alone (its lock): so is each tag's lock dir in it. The
    // lease's lock and fenced, fsync'd state file keep the bound as a coordinator's would.
    LocalLeaseOptions local;
    local.source = "static";
    local.worker_id = 0;
    local.lock_dir = config.data_dir + "/strict/" + tag;
    std::error_code ec;
    std::filesystem::create_directories(local.lock_dir, ec);
    if (ec) return Internal(fmt::format("cannot create {}: {}", local.lock_dir, ec.message()));
    return NewLocalWorkerLease(local, LeaseOptions(config, clock, identity));
  };
  // Nobody else leads: this server takes the lead of every tag asked for.
  c.find_leader = [](const std::string&) { return Result<std::string>(std::string()); };
  c.forward = [](const std::string& address, const std::string& tag, std::int64_t,
                 std::chrono::milliseconds) -> Result<std::int64_t> {
    return Unavailable(
        fmt::format("strict tag {}: a server alone forwards to no one ({})", tag, address));
  };
  return c;
}

Result<bool> DeclareStrictTag(const server::ServerConfig& config, const CoordinatorAccess& access,
                              Clock* clock, const std::string& tag) {
  return Declarations(config, access, clock).Add(tag);
}

Status CheckStrictForwarding(const server::ServerConfig& config) {
  if (!config.coordinated()) return Status::Ok();  // no strict ids: nothing is forwarded
  Result<std::shared_ptr<SSL_CTX>> tls = LeaderTls(config);
  return tls.ok() ? Status::Ok() : Status(std::move(tls).error());
}

Result<server::StrictCoordination> StrictCoordinationOf(const server::ServerConfig& config,
                                                        const CoordinatorAccess& access,
                                                        Clock* clock) {
  SEKKA_ASSIGN_OR_RETURN(auto tls, LeaderTls(config));
  auto forwarder = std::make_shared<Forwarder>(config.auth_token, std::move(tls));
  // One coordinator session for every strict tag: its leases, its lookups, the declarations.
  auto sessions = std::make_shared<CoordinatorSessions>();
  auto directory = std::make_shared<Directory>(config, access, clock, sessions);
  server::StrictCoordination c;
  c.open_lease = [config, access, clock, sessions](
                     const std::string& tag,
                     const std::string& identity) -> Result<std::unique_ptr<WorkerLease>> {
    SEKKA_ASSIGN_OR_RETURN(auto name, Namespace(config, tag));
    return OpenWorkerLease(config.worker_source, config.coordinator.secret(), name,
                           LeaseOptions(config, clock, identity), access, {}, sessions.get());
  };
  c.find_leader = [directory](const std::string& tag) { return directory->Leader(tag); };
  auto declarations = std::make_shared<Declarations>(config, access, clock, sessions);
  c.declared = [declarations] { return declarations->Read(); };
  c.declare = [declarations](const std::string& tag) { return declarations->Add(tag); };
  c.forget = [directory](const std::string& tag) { directory->Forget(tag); };
  c.forward = [forwarder](const std::string& address, const std::string& tag, std::int64_t n,
                          std::chrono::milliseconds timeout) {
    return forwarder->Call(address, tag, n, timeout);
  };
  return c;
}

}  // namespace sekka::cli
