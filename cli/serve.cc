#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "server/config.h"
#include "server/log.h"
#include "server/server.h"
#include "server/service.h"

extern char** environ;

namespace sekka::cli {

int RunServe(const ServeFlags& flags) {
  using namespace sekka::server;
  std::vector<ConfigValues> sources;
  if (!flags.config_file.empty()) {
    Result<ConfigValues> file = ReadConfigFile(flags.config_file);
    if (!file.ok()) return Fail(kExitUsage, file.error().message);
    sources.push_back(std::move(file).value());
  }
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) environment.emplace_back(*e);
  Result<ConfigValues> env = ReadConfigEnvironment(environment);
  if (!env.ok()) return Fail(kExitUsage, env.error().message);
  sources.push_back(std::move(env).value());
  sources.push_back(flags.values);

  Result<ServerConfig> config = BuildConfig(sources);
  if (!config.ok()) return Fail(kExitUsage, config.error().message);
  if (flags.print_config) {
    std::fputs(PrintConfig(sources).c_str(), stdout);
    return kExitOk;
  }
  SetLogLevel(config->log_level);
  std::signal(SIGPIPE, SIG_IGN);
  // Room for max_connections sockets: raise the soft descriptor limit to the hard one.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

  // Who this process is to the worker-id source: worker.name, else for a coordinator this host
  // and data dir (unique among live processes: the data dir is locked), else the listeners.
  std::string identity = config->worker_name;
  if (identity.empty() && (config->worker_source == "etcd" || config->worker_source == "zookeeper")) {
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    std::error_code ec;
    const std::filesystem::path dir = std::filesystem::absolute(config->data_dir, ec);
    identity = fmt::format("{}:{}", host, ec ? config->data_dir : dir.lexically_normal().string());
  } else if (identity.empty()) {
    identity = fmt::format("http={},resp={}", config->http_listen, config->resp_listen);
  }
  Result<std::unique_ptr<Service>> service = Service::Start(*config, SystemClock(), identity);
  if (!service.ok()) {
    const ErrorCode code = service.error().code;
    return Fail(code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure,
                "cannot start: " + service.error().message);
  }
  Result<std::unique_ptr<Server>> server = Server::Start(**service, *config);
  if (!server.ok()) {
    const ErrorCode code = server.error().code;
    return Fail(code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure,
                "cannot start: " + server.error().message);
  }
  const Service& s = **service;
  const std::string where = fmt::format(
      "sekka serve: HTTP on {}, Redis protocol on {} (worker id {}{}, layout {}, data {})",
      (*server)->http_address().empty() ? "off" : "http://" + (*server)->http_address(),
      (*server)->resp_address().empty() ? "off" : (*server)->resp_address(),
      s.worker().worker_id,
      s.layout().datacenter_bits() > 0 ? fmt::format(", datacenter {}", s.worker().datacenter_id)
                                       : "",
      s.layout().name(), config->data_dir);
  std::puts(where.c_str());
  std::fflush(stdout);
  Log(LogLevel::kInfo, "listening",
      fmt::format("http={} resp={} worker_id={} datacenter_id={} source={} pid={}",
                  (*server)->http_address(), (*server)->resp_address(), s.worker().worker_id,
                  s.worker().datacenter_id, s.worker().source, ::getpid()));
  (*server)->Run();
  (*service)->Stop();
  Log(LogLevel::kInfo, "stopped", fmt::format("hwm_ms={}", s.hwm_millis()));
  return kExitOk;
}

}  // namespace sekka::cli
