#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "backends/cosid_machines.h"
#include "backends/local_worker_lease.h"
#include "backends/machine_stores.h"
#include "backends/segment_store_uri.h"
#include "backends/state_file.h"
#include "backends/worker_id.h"
#include "backends/worker_lease_uri.h"
#include "cli/commands.h"
#include "sekka/secrets.h"
#include "sekka/worker_sources.h"
#include "server/config.h"
#include "server/log.h"
#include "server/server.h"
#include "server/service.h"

extern char** environ;

namespace sekka::cli {

namespace {

// etcd's TLS files and user from [worker]; the password from worker.password_file if given.
// Errors: kInvalidArgument naming the file and what is wrong.
Result<CoordinatorAccess> CoordinatorAccessOf(const server::ServerConfig& config) {
  CoordinatorAccess access;
  access.tls = {config.tls_ca_file, config.tls_cert_file, config.tls_key_file};
  access.username = config.username;
  access.password = config.password;
  if (config.password_file.empty()) return access;
  Result<std::string> password = ReadSecretLine(config.password_file, "worker.password_file");
  SEKKA_RETURN_IF_ERROR(password);
  access.password = std::move(*password);
  return access;
}

// The data dir the host's CosId machine ids are kept in, bound by the first server that answered
// them (<lock_dir>/machines.data-dir, read as the lock dir's other files are: no link, no FIFO,
// bounded). Returns "" when it is this server's, else why this server must not answer.
// Errors: kInternal (the file cannot be read or written), kInvalidArgument (not one line).
Result<std::string> BindMachinesDataDir(const server::ServerConfig& config) {
  std::error_code ec;
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(config.data_dir, ec);
  if (ec || canonical.empty()) {
    return Internal(fmt::format("cannot resolve data dir {}: {}", config.data_dir, ec.message()));
  }
  const std::string mine = canonical.string();
  const std::string path = config.worker_lock_dir + "/machines.data-dir";
  SEKKA_ASSIGN_OR_RETURN(auto read, ReadRegularFile(path, 4096));
  if (!read.has_value()) {
    SEKKA_RETURN_IF_ERROR(WriteFileDurably(path, mine + "\n"));
    return std::string();
  }
  const std::string& text = *read;
  if (text.empty() || text.back() != '\n' || text.find('\n') != text.size() - 1) {
    return InvalidArgument(fmt::format("{} is not one line naming a data dir: remove it", path));
  }
  const std::string bound = text.substr(0, text.size() - 1);
  if (bound == mine) return std::string();
  return fmt::format("this host's are kept in data dir {} ({}), not {}", bound, path, mine);
}

// Why a server without a coordinator refuses CosId's /machines: `how` it knows it may be one of
// several that answer.
std::string MachinesRefusal(std::string_view how) {
  return fmt::format(
      "CosId's machine ids are kept in this server's data dir, and {}: behind a load balancer two "
      "servers would give one machine id to two instances; take worker ids from a coordinator "
      "(worker.source {}: the cluster keeps machine ids there), or send /machines to one server "
      "only and set machines.single_server = true there",
      how, WorkerSourceNames(&WorkerSource::coordinated));
}

// CosId's machine ids on a server without a coordinator: the data dir's file, answered from only
// when this server can tell it is the one CosId's instances ask. A static or hostname worker id
// is one of several hosts' (two servers behind a load balancer would each give machine id 1 to
// an instance); a local one is this host's, and another server of this host that keeps machine
// ids holds the lock <lock_dir>/machines.lock. machines.single_server says so instead.
Status OpenFileMachines(const server::ServerConfig& config, const std::string& identity,
                        server::ServiceParts& parts) {
  const std::string path = config.data_dir + "/machines";
  parts.machine_store = NewFileMachineStore(path);
  if (Result<MachineSnapshot> check = parts.machine_store->Load(""); !check.ok()) {
    server::Log(server::LogLevel::kError, "machine ids cannot be read",
                fmt::format("error=\"{}\"", check.error().message));
  }
  if (config.machines_single_server) return Status::Ok();
  if (config.worker_source != "local") {
    parts.machines_refusal = MachinesRefusal(
        fmt::format("worker.source = {} gives each of several hosts a worker id of its own",
                    config.worker_source));
    return Status::Ok();
  }
  if (Status usable = UsableLockDir(config.worker_lock_dir); !usable.ok()) return usable;
  const std::string lock_path = config.worker_lock_dir + "/machines.lock";
  Result<int> lock = TryLockFile(lock_path, identity);  // held until the process exits
  SEKKA_RETURN_IF_ERROR(lock);
  if (*lock < 0) {
    parts.machines_refusal =
        MachinesRefusal(fmt::format("another server of this host keeps its own (lock {}, {})",
                                    lock_path, DescribeLockHolder(lock_path)));
    return Status::Ok();
  }
  // The lock says one server answers at a time, not that it is the one with the records: the
  // host's machine ids stay with the data dir that answered first. A server refused here lets
  // the lock go, so that the bound one can take it.
  SEKKA_ASSIGN_OR_RETURN(auto bound, BindMachinesDataDir(config));
  if (!bound.empty()) {
    ::close(*lock);
    parts.machines_refusal = MachinesRefusal(bound);
  }
  return Status::Ok();
}

// CosId's machine ids on a server with a coordinator: at the coordinator, in a session of its
// own, so that every server of the cluster answers the same.
Status OpenCoordinatorMachines(const server::ServerConfig& config, const WorkerLeaseOptions& lo,
                               const CoordinatorAccess& access, server::ServiceParts& parts) {
  SEKKA_ASSIGN_OR_RETURN(auto coordinator,
                         OpenCoordinator(config.worker_source, config.coordinator.secret(),
                                         config.cluster, lo, access));
  parts.machine_store = NewCoordinatorMachineStore(std::move(coordinator));
  return Status::Ok();
}

// CosId's machine ids: CosId's own distributor in place when machines.store names one (every
// server pointed at it answers the same), else sekka's: the coordinator's on a server with one
// (`coordinated`), the data dir's on others. A shared store adopts the data dir's machines file
// (kept there before, when this server answered alone) at start, or, when it cannot answer
// then, at its first use that can.
struct CoordinatedAccess {
  const WorkerLeaseOptions& lo;
  const CoordinatorAccess& access;
};
Status OpenMachines(const server::ServerConfig& config, const std::string& identity,
                    const CoordinatedAccess* coordinated, server::ServiceParts& parts) {
  if (config.machines_store.empty() && coordinated == nullptr) {
    return OpenFileMachines(config, identity, parts);
  }
  if (!config.machines_store.empty()) {
    SEKKA_ASSIGN_OR_RETURN(auto store, OpenCosIdMachineStore(config.machines_store.secret()));
    parts.machine_store = std::move(store);
  } else if (Status s =
                 OpenCoordinatorMachines(config, coordinated->lo, coordinated->access, parts);
             !s.ok()) {
    return s;
  }
  // At start when the store answers (the file's holders are known to every server at once);
  // else at the store's first use that can.
  const std::string file = config.data_dir + "/machines";
  if (Status adopted = AdoptMachineFile(file, *parts.machine_store); !adopted.ok()) {
    server::Log(server::LogLevel::kWarn, "machine ids of the data dir are not added yet",
                fmt::format("file={} error=\"{}\"", file, adopted.error().message));
    parts.machine_store = WithAdoptedFile(std::move(parts.machine_store), file);
  }
  return Status::Ok();
}

// The real parts of a service: the system clock and the worker-id lease: the host's worker lock
// dir for static, local and hostname; a coordinator's for etcd and zookeeper. Every source takes
// an exclusive lock on the data dir: its files are one process's.
Result<server::ServiceParts> OpenServiceParts(const server::ServerConfig& config,
                                              const std::string& identity) {
  server::ServiceParts parts;
  parts.clock = &SystemClock();
  // The data dir is this process's alone: 0700 when made here (its files are 0640 at most:
  // main's umask). One that exists keeps its mode.
  std::error_code made;
  if (std::filesystem::create_directories(config.data_dir, made)) {
    ::chmod(config.data_dir.c_str(), 0700);
  }
  parts.data_dir = NewFileDataDir(config.data_dir);
  // Segments: PostgreSQL connects lazily, so a database that is down does not stop the
  // snowflake engine from serving.
  SEKKA_ASSIGN_OR_RETURN(auto store,
                         OpenSegmentStore(config.segment_store.secret(), config.data_dir));
  parts.segment_store = std::move(store);
  // One process per data dir, whatever the source: its state files and its CosId machines file
  // are each read once and rewritten whole.
  const std::string dir = config.data_dir + "/workers";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Internal(fmt::format("cannot create {}: {}", dir, ec.message()));
  const std::string lock_path = dir + "/coordinator.lock";
  Result<int> lock = TryLockFile(lock_path, identity);  // held until the process exits
  SEKKA_RETURN_IF_ERROR(lock);
  if (*lock < 0) {
    return Unavailable(fmt::format(
        "data dir {} is used by another process (lock {}, {}): give each sekka process its "
        "own data.dir",
        config.data_dir, lock_path, DescribeLockHolder(lock_path)));
  }
  WorkerLeaseOptions lo;
  lo.identity = identity;
  lo.datacenter_id = config.datacenter_id;
  lo.worker_count = config.generator.layout.worker_ids_per_datacenter();
  lo.ttl = std::chrono::milliseconds(config.lease_ttl_ms);
  lo.layout = LayoutFingerprint(config.generator.layout);  // one layout per lock dir or cluster
  lo.keep_id = config.keep_worker_id;
  lo.clock = parts.clock;
  if (!config.coordinated()) {
    LocalLeaseOptions local;
    local.source = config.worker_source;
    local.lock_dir = config.worker_lock_dir;
    local.worker_id = config.worker_id;
    local.layout = config.generator.layout;
    local.force = config.force;
    parts.lease = NewLocalWorkerLease(local, lo);
    SEKKA_RETURN_IF_ERROR(OpenMachines(config, identity, nullptr, parts));
    parts.strict = LocalStrictCoordination(config, parts.clock);
    return parts;
  }
  SEKKA_RETURN_IF_ERROR(CheckDatacenterId(config.generator.layout, config.datacenter_id));
  lo.preferred = parts.data_dir->ReadPreferred();
  lo.call_timeout = std::chrono::milliseconds(server::CoordinatorCallTimeoutMs(config));
  SEKKA_ASSIGN_OR_RETURN(auto access, CoordinatorAccessOf(config));
  const LeafRegistry leaf{config.leaf_name, config.leaf_address};
  Result<std::unique_ptr<WorkerLease>> lease = OpenWorkerLease(
      config.worker_source, config.coordinator.secret(), config.cluster, lo, access, leaf);
  SEKKA_RETURN_IF_ERROR(lease);
  const CoordinatedAccess coordinated{lo, access};
  SEKKA_RETURN_IF_ERROR(OpenMachines(config, identity, &coordinated, parts));
  Result<server::StrictCoordination> strict = StrictCoordinationOf(config, access, parts.clock);
  SEKKA_RETURN_IF_ERROR(strict);
  parts.strict = std::move(strict).value();
  // The host's lock dir serves this cluster's id space once the lease holds an id.
  parts.lease =
      NewHostBoundLease(std::move(lease).value(), config.worker_lock_dir, lo.layout,
                        fmt::format("{} cluster {}{}", config.worker_source, config.cluster,
                                    leaf.name.empty() ? "" : " beside Leaf " + leaf.name));
  return parts;
}

bool Loopback(const std::string& listen) {
  return listen.empty() || listen.rfind("127.", 0) == 0 || listen.rfind("[::1]:", 0) == 0 ||
         listen.rfind("localhost:", 0) == 0;
}

// Listening beyond loopback: warns of what that exposes. Without a token, everything; with
// worker.source local, ids unique on this host only (served to other hosts, the ids of two
// hosts repeat each other unless a coordinator hands out the worker ids).
void WarnOfExposure(const server::ServerConfig& config) {
  const auto& hosts = config.allowed_hosts;
  if (config.auth_token.empty() && std::find(hosts.begin(), hosts.end(), "*") != hosts.end()) {
    server::Log(server::LogLevel::kWarn,
                "server.allowed_hosts = \"*\" without server.auth_token: a web page can reach "
                "this server through DNS rebinding, even on loopback; list the names clients use "
                "instead, or set a token");
  }
  if (Loopback(config.http_listen) && Loopback(config.resp_listen) &&
      Loopback(config.thrift_listen)) {
    return;
  }
  if (config.auth_token.empty()) {
    server::Log(server::LogLevel::kWarn,
                "listening beyond loopback without server.auth_token: anyone who can reach this "
                "host can take ids, create segment tags and CosId machine ids; set "
                "server.auth_token_file",
                fmt::format("http={} resp={} thrift={}", config.http_listen, config.resp_listen,
                            config.thrift_listen));
  }
  if (config.worker_source != "local") return;
  server::Log(server::LogLevel::kWarn,
              fmt::format("worker.source local picks worker ids unique on this host only; with "
                          "more than one host serving ids use worker.source {} (or static ids "
                          "you assign)",
                          WorkerSourceNames(&WorkerSource::coordinated)),
              fmt::format("http={} resp={} thrift={}", config.http_listen, config.resp_listen,
                          config.thrift_listen));
}

// Room for max_connections sockets: the soft descriptor limit is raised to the hard one, and
// max_connections lowered to fit under it (with room for the server's own files), so that the
// limits that make room at max_connections (slow senders shed) act before accept() fails.
void FitConnectionsToDescriptors(server::ServerConfig& config) {
  constexpr rlim_t kOwnFiles = 128;  // stores, logs, the lock dir, the blocking pool
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0) return;
  if (files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
    getrlimit(RLIMIT_NOFILE, &files);
  }
  const rlim_t room =
      files.rlim_cur > 2 * kOwnFiles ? files.rlim_cur - kOwnFiles : files.rlim_cur / 2;
  if (files.rlim_cur == RLIM_INFINITY || static_cast<rlim_t>(config.max_connections) <= room)
    return;
  server::Log(server::LogLevel::kWarn, "server.max_connections lowered to fit the open-file limit",
              fmt::format("max_connections={} open_file_limit={} using={} hint=\"raise the limit "
                          "(systemd LimitNOFILE=, ulimit -n) to allow more\"",
                          config.max_connections, files.rlim_cur, room));
  config.max_connections = static_cast<int>(room);
}

// The configuration's sources, lowest precedence first: the config file (if given), the
// environment, the flags. Errors: kInvalidArgument, from the file or the environment.
Result<std::vector<server::ConfigValues>> ReadConfigSources(const ServeFlags& flags) {
  std::vector<server::ConfigValues> sources;
  if (!flags.config_file.empty()) {
    SEKKA_ASSIGN_OR_RETURN(auto file, server::ReadConfigFile(flags.config_file));
    sources.push_back(std::move(file));
  }
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) environment.emplace_back(*e);
  SEKKA_ASSIGN_OR_RETURN(auto env, server::ReadConfigEnvironment(environment));
  sources.push_back(std::move(env));
  sources.push_back(flags.values);
  return sources;
}

// What serve refuses in a configuration beyond its values: listeners, the segment store URI,
// strict forwarding's TLS files, the Leaf registry.
Status CheckStartable(const server::ServerConfig& config) {
  SEKKA_RETURN_IF_ERROR(server::CheckListeners(config));
  SEKKA_RETURN_IF_ERROR(CheckSegmentStoreUri(config.segment_store.secret()));
  SEKKA_RETURN_IF_ERROR(CheckStrictForwarding(config));
  if (!config.leaf_name.empty()) {
    SEKKA_RETURN_IF_ERROR(ValidateLeafRegistry({config.leaf_name, config.leaf_address}));
  }
  return Status::Ok();
}

// Who this process is to the worker-id source: worker.name, else this host and data dir (a
// restart of one slot finds the worker id it held before).
std::string ProcessIdentity(const server::ServerConfig& config) {
  if (!config.worker_name.empty()) return config.worker_name;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::absolute(config.data_dir, ec);
  return fmt::format("{}:{}", host, ec ? config.data_dir : dir.lexically_normal().string());
}

// Prints "cannot start: ..." for a failure to start; returns the exit code: usage for
// kInvalidArgument, else failure.
int FailToStart(const Error& error) {
  return Fail(error.code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure,
              "cannot start: " + error.message);
}

// The line serve prints once it listens: where, and with which worker id, layout and data dir.
std::string ListeningLine(const server::ServerConfig& config, const server::Service& s,
                          const server::Server& server) {
  auto on = [](std::string_view what, const std::string& address) {
    return address.empty() ? fmt::format("{} off", what) : fmt::format("{} on {}", what, address);
  };
  const std::string http =
      server.http_address().empty()
          ? ""
          : (config.server_tls_cert_file.empty() ? "http://" : "https://") + server.http_address();
  return fmt::format(
      "sekka serve: {}, {}{} (worker id {}{}, layout {}, data {}{}, I/O {})", on("HTTP", http),
      on("Redis protocol", server.resp_address()),
      server.thrift_address().empty() ? "" : ", Thrift on " + server.thrift_address(),
      s.worker().worker_id,
      s.layout().datacenter_bits() > 0 ? fmt::format(", datacenter {}", s.worker().datacenter_id)
                                       : "",
      s.layout().name(), config.data_dir,
      config.server_tls_cert_file.empty() ? "" : ", TLS on every listener",
      server.io_refused().empty()
          ? server.io()
          : fmt::format("{} (io_uring refused: {})", server.io(), server.io_refused()));
}

}  // namespace

int RunServe(const ServeFlags& flags) {
  using namespace sekka::server;
  Result<std::vector<ConfigValues>> sources = ReadConfigSources(flags);
  if (!sources.ok()) return Fail(kExitUsage, sources.error().message);
  Result<ServerConfig> config = BuildConfig(*sources);
  if (!config.ok()) return Fail(kExitUsage, config.error().message);
  // What serve would refuse (a store URI, strict TLS files) is refused here too, before
  // --print-config shows it.
  if (Status s = CheckStartable(*config); !s.ok()) {
    return Fail(kExitUsage, "cannot start: " + s.error().message);
  }
  if (flags.print_config) {
    std::fputs(PrintConfig(*sources).c_str(), stdout);
    return kExitOk;
  }
  SetLogLevel(config->log_level);
  std::signal(SIGPIPE, SIG_IGN);
  FitConnectionsToDescriptors(*config);

  Result<ServiceParts> parts = OpenServiceParts(*config, ProcessIdentity(*config));
  if (!parts.ok()) return FailToStart(parts.error());
  Result<std::unique_ptr<Service>> service = Service::Start(*config, std::move(parts).value());
  if (!service.ok()) return FailToStart(service.error());
  Result<std::unique_ptr<Server>> server = Server::Start(**service, *config);
  if (!server.ok()) return FailToStart(server.error());
  // Other servers forward strict calls to this one's RESP port (none: it leads no strict tag).
  const std::string strict_address = config->coordinated()
                                         ? server::StrictAddress(*config, (*server)->resp_address())
                                         : kLocalStrictAddress;
  if (!strict_address.empty()) (*service)->SetStrictAddress(strict_address);
  (*service)->SetIo((*server)->io(), (*server)->io_refused());
  const Service& s = **service;
  std::puts(ListeningLine(*config, s, **server).c_str());
  std::fflush(stdout);
  WarnOfExposure(*config);
  Log(LogLevel::kInfo, "listening",
      fmt::format("http={} resp={} thrift={} worker_id={} datacenter_id={} source={} pid={}",
                  (*server)->http_address(), (*server)->resp_address(), (*server)->thrift_address(),
                  s.worker().worker_id, s.worker().datacenter_id, s.worker().source, ::getpid()));
  (*server)->Run();
  (*service)->Stop();
  Log(LogLevel::kInfo, "stopped", fmt::format("hwm_ms={}", s.hwm_millis()));
  return kExitOk;
}

int RunStrictCreate(const ServeFlags& flags, const std::string& tag) {
  using namespace sekka::server;
  Result<std::vector<ConfigValues>> sources = ReadConfigSources(flags);
  if (!sources.ok()) return Fail(kExitUsage, sources.error().message);
  Result<ServerConfig> config = BuildConfig(*sources);
  if (!config.ok()) return Fail(kExitUsage, config.error().message);
  if (!config->coordinated()) {
    return Fail(kExitUsage, fmt::format("strict tags are declared at a coordinator: worker.source "
                                        "is {}, allowed etcd, zookeeper or redis",
                                        config->worker_source));
  }
  if (Status valid = ValidateStrictTag(tag); !valid.ok()) {
    return Fail(kExitUsage, valid.error().message);
  }
  Result<CoordinatorAccess> access = CoordinatorAccessOf(*config);
  if (!access.ok()) return Fail(kExitUsage, access.error().message);
  Result<bool> created = DeclareStrictTag(*config, *access, &SystemClock(), tag);
  if (!created.ok()) {
    return Fail(created.error().code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure,
                created.error().message);
  }
  std::puts(*created ? "created" : "exists");
  return kExitOk;
}

}  // namespace sekka::cli
