#include "server/config.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <set>

#include "sekka/codec.h"
#include "sekka/secrets.h"
#include "sekka/strict.h"
#include "server/strict_tags.h"

namespace sekka::server {
namespace {

enum class Type { kString, kInt, kBool, kDuration };

struct Key {
  const char* name;  // "server.http_listen"
  Type type;
  const char* default_value;
  const char* help;
  const char* flag = nullptr;  // sekka serve's flag, if it has one
  // A protection (a token, TLS) that an empty value turns off: one may not be given empty over
  // a value an earlier source set (`--auth-token "$(cat missing)"` over the file's token).
  bool protection = false;
};

// The one table of keys (docs/contract.md section 7 names, and more in the same style).
const std::vector<Key>& Keys() {
  static const std::string sources = [] {  // "static | local | ...": sekka/worker_sources.h
    std::string names;
    for (const WorkerSource& w : WorkerSources())
      names += (names.empty() ? "" : " | ") + std::string(w.name);
    return names;
  }();
  static const std::vector<Key> keys = {
      {"server.http_listen", Type::kString, "127.0.0.1:8080", "HTTP address; \"\" = off", "--http"},
      {"server.resp_listen", Type::kString, "127.0.0.1:6380", "Redis-protocol address; \"\" = off",
       "--resp"},
      {"server.thrift_listen", Type::kString, "",
       "Twitter Snowflake Thrift address (framed, binary; Twitter used port 7609); \"\" = off",
       "--thrift"},
      {"server.auth_token", Type::kString, "",
       "bearer token / AUTH password, at least 16 printable characters; \"\" = none",
       "--auth-token", true},
      {"server.auth_token_file", Type::kString, "",
       "a file holding the token (a trailing newline is ignored; not readable by other users), "
       "instead of auth_token",
       "--auth-token-file", true},
      {"server.tls_cert_file", Type::kString, "",
       "TLS on every listener: the server's certificate chain (PEM), with tls_key_file; \"\" = "
       "plain TCP",
       "--tls-cert-file", true},
      {"server.tls_key_file", Type::kString, "",
       "the certificate's private key (PEM; not readable by other users)", "--tls-key-file", true},
      {"server.tls_client_ca_file", Type::kString, "",
       "require client certificates signed by these CAs (PEM); \"\" = none asked for",
       "--tls-client-ca-file", true},
      {"server.allowed_hosts", Type::kString, "",
       "host names HTTP requests may send in Host, comma-separated, besides IP addresses and "
       "localhost (a name not listed is refused: DNS rebinding); \"*\" = any",
       "--allowed-hosts"},
      {"server.threads", Type::kInt, "0", "event loops; 0 = one per core", "--threads"},
      {"server.max_connections", Type::kInt, "10000", "open connections, all listeners",
       "--max-connections"},
      {"server.idle_timeout", Type::kDuration, "300s",
       "close connections idle this long (1s to 24h)", "--idle-timeout"},
      {"server.max_batch", Type::kInt, "100000", "ids per batch request (1 to 1000000)",
       "--max-batch"},
      {"server.request_timeout", Type::kDuration, "10s",
       "a request or command must arrive whole this soon after its first byte, else 408 or "
       "-ERR and the connection closes (100ms to 1h)",
       "--request-timeout"},
      {"server.max_buffer_mib", Type::kInt, "512",
       "MiB of request and reply buffers across all connections; past it the connection "
       "buffering the most is closed (16 to 1048576)",
       "--max-buffer-mib"},
      {"server.busy_poll_us", Type::kInt, "0",
       "event loops poll this long (us) before sleeping; 0 = never", "--busy-poll-us"},
      {"server.log_level", Type::kString, "info", "debug | info | warn | error", "--log-level"},
      {"server.resp_ids", Type::kString, "integer",
       "RESP ids as integer, or string (decimal bulk strings, for JavaScript clients)"},
      {"data.dir", Type::kString, "./sekka-data", "data directory", "--data-dir"},
      {"layout.preset", Type::kString, "sekka",
       "sekka | twitter | leaf | discord | instagram | sonyflake | sonyflake-v1 | baidu | js53, "
       "or PRESET,key=value,... "
       "(docs/operations.md)",
       "--layout"},
      {"layout.time_bits", Type::kInt, "", "custom layout: overrides the preset"},
      {"layout.datacenter_bits", Type::kInt, "", "custom layout"},
      {"layout.worker_bits", Type::kInt, "", "custom layout"},
      {"layout.sequence_bits", Type::kInt, "", "custom layout"},
      {"layout.tick", Type::kDuration, "", "custom layout: 1ms to 1s"},
      {"layout.epoch", Type::kString, "", "custom layout: ISO 8601 or ms since 1970"},
      {"layout.order", Type::kString, "",
       "custom layout: time,worker,sequence | time,sequence,worker"},
      {"layout.shard_bits", Type::kInt, "", "custom layout: 0 to 15 bits on top against hotspots"},
      {"layout.reverse_time", Type::kString, "",
       "custom layout: true = the time field bit-reversed (no hotspot, no order)"},
      {"generator.on_clock_backwards", Type::kString, "wait", "wait | fail | continue",
       "--on-clock-backwards"},
      {"generator.max_backwards_wait", Type::kDuration, "1s", ""},
      {"generator.on_sequence_exhausted", Type::kString, "wait", "wait | borrow"},
      {"generator.max_drift", Type::kDuration, "1s", ""},
      {"generator.sequence_start", Type::kString, "zero", "zero | random"},
      {"generator.descending", Type::kBool, "false", ""},
      {"generator.max_startup_wait", Type::kDuration, "10s", "wait out a stored hwm this close",
       "--max-startup-wait"},
      {"generator.force", Type::kBool, "false", "start despite stored state of another layout"},
      {"generator.after_id", Type::kInt, "",
       "issue only ids above this one (the largest id of the system sekka takes over from)",
       "--after-id"},
      {"worker.source", Type::kString, "local", sources.c_str(), "--worker-source"},
      {"worker.id", Type::kInt, "",
       "source static: this process's worker id (required there, "
       "refused with any other source)",
       "--worker-id"},
      {"worker.lock_dir", Type::kString, "/var/lib/sekka/workers",
       "the host's lock dir, shared by every sekka process of this host and bound to one id "
       "space (layout, and where worker ids come from); static, local, hostname lock their "
       "worker id and keep its hwm there",
       "--worker-lock-dir"},
      {"worker.datacenter_id", Type::kInt, "0", "where the layout has datacenter bits",
       "--datacenter-id"},
      {"worker.coordinator", Type::kString, "",
       "etcd://h:p[,h:p], zookeeper://h:p[,h:p] or redis://[user:password@]h:p[/db]",
       "--coordinator"},
      {"worker.cluster", Type::kString, "default", "key prefix at the coordinator", "--cluster"},
      {"worker.lease_ttl", Type::kDuration, "10s", "", "--lease-ttl"},
      {"worker.name", Type::kString, "", "identity for source local; \"\" = the listen addresses",
       "--worker-name"},
      {"worker.keep_id", Type::kBool, "false",
       "local, etcd, zookeeper, redis: a restart takes back its own worker id and waits past its "
       "hwm "
       "(up to ~4 s); false = it takes a free id whose hwm is past and does not wait"},
      {"worker.leaf_name", Type::kString, "",
       "zookeeper: run beside Leaf's snowflake servers of this leaf.name (layout leaf): the "
       "worker id is the sequence of this server's node in /snowflake/NAME/forever, as Leaf's; "
       "\"\" = none",
       "--leaf-name"},
      {"worker.leaf_address", Type::kString, "",
       "with leaf_name: the IPv4:PORT this server registers as there, as Leaf's ip:port "
       "(never a Leaf server's)",
       "--leaf-address"},
      {"worker.tls_ca_file", Type::kString, "",
       "etcd over HTTPS, verified with this CA file (PEM), or \"system\" (the system's CAs); "
       "\"\" = plain HTTP"},
      {"worker.tls_cert_file", Type::kString, "",
       "etcd: client certificate (PEM), with tls_key_file"},
      {"worker.tls_key_file", Type::kString, "", "etcd: the client certificate's key (PEM)"},
      {"worker.username", Type::kString, "",
       "etcd user, or ZooKeeper digest user; \"\" = no authentication"},
      {"worker.password", Type::kString, "", "the user's password (or password_file)"},
      {"worker.password_file", Type::kString, "",
       "a file holding the user's password (a trailing newline is ignored)"},
      {"segment.store", Type::kString, "",
       "\"\" = sqlite in the data dir; sqlite:PATH; postgres://...; mysql://...; redis://...",
       "--segment-store"},
      {"segment.auto_create", Type::kBool, "false", "create unknown tags on first use",
       "--segment-auto-create"},
      {"segment.step", Type::kInt, "1000", "step of auto-created tags"},
      {"segment.max_step", Type::kInt, "10000000", "the dynamic step never goes above this",
       "--segment-max-step"},
      {"segment.wait_deadline", Type::kDuration, "500ms",
       "both buffers empty: wait this long (below the clients' 1 s timeout)"},
      {"segment.max_tags", Type::kInt, "10000", "tags served at most, auto-created ones included"},
      {"strict.tags", Type::kString, "",
       "the strict tags this server serves, comma-separated (at most 1,000); \"\" = none",
       "--strict-tags"},
      {"strict.window", Type::kInt, "100000",
       "how far a strict tag's stored bound runs ahead: the ids a failover skips at most"},
      {"strict.advertise", Type::kString, "",
       "where other servers reach this one's RESP listener for forwarded strict calls (a numeric "
       "IP and a port); \"\" = server.resp_listen, unless that is a wildcard address",
       "--strict-advertise"},
      {"strict.tls_ca_file", Type::kString, "",
       "with TLS on the listeners: the CA file (PEM) that signed the other servers' "
       "certificates, for forwarded strict calls; \"\" = the system's CAs"},
      {"machines.single_server", Type::kBool, "false",
       "without a coordinator: this server alone answers CosId's /machines from its data dir's "
       "file (refused otherwise when worker.source is static or hostname, or another server of "
       "this host keeps machine ids); with one, the cluster keeps them at the coordinator",
       "--machines-single-server"},
      {"machines.store", Type::kString, "",
       "CosId's own machine distributor, read and written in place: "
       "redis://HOST:PORT/DB?schema=cosid or mysql://USER@HOST:PORT/DATABASE?schema=cosid&pad=4 "
       "(or pad=8, as CosId's instances pad machine ids in row names); \"\" "
       "= sekka's own (the coordinator's, or the data dir's)",
       "--machines-store"},
      {"opaque.key_file", Type::kString, "",
       "opaque ids' key file (sekka opaque keygen); \"\" = no opaque ids", "--opaque-key-file"},
      {"random.layout", Type::kString, "random",
       "random ids' layout (/v1/random, RANDOM.NEXT): random, or kind=random,..."},
  };
  return keys;
}

const Key* FindKey(std::string_view name) {
  for (const Key& k : Keys()) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

std::string AllowedKeys() {
  std::string out;
  for (const Key& k : Keys()) {
    if (!out.empty()) out += ", ";
    out += k.name;
  }
  return out;
}

std::string EnvName(std::string_view key) {
  std::string out = "SEKKA_";
  for (char c : key)
    out += c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::map<std::string, std::string> Merge(const std::vector<ConfigValues>& sources) {
  std::map<std::string, std::string> values;
  for (const Key& k : Keys()) values[k.name] = k.default_value;
  for (const ConfigValues& source : sources) {
    for (const auto& [key, value] : source) values[key] = value;
  }
  return values;
}

// The token from server.auth_token or server.auth_token_file (not both): at least 16 printable
// characters, so that it cannot be guessed at the rate failed attempts are answered.
Result<std::string> AuthToken(const std::string& token, const std::string& file) {
  std::string value = token;
  if (!file.empty()) {
    if (!token.empty()) {
      return InvalidArgument(
          "config server.auth_token and server.auth_token_file are both set: give one");
    }
    SEKKA_ASSIGN_OR_RETURN(auto line, ReadSecretLine(file, "config server.auth_token_file"));
    value = std::move(line);
  }
  const bool printable =
      std::all_of(value.begin(), value.end(), [](char ch) { return ch > ' ' && ch < 0x7f; });
  const std::size_t distinct = std::set<char>(value.begin(), value.end()).size();
  if (!value.empty() && (value.size() < 16 || !printable || distinct < 8)) {
    return InvalidArgument(fmt::format(
        "config server.auth_token{} is not valid: allowed at least 16 printable ASCII characters "
        "without spaces, 8 of them different, such as the output of \"openssl rand -hex 16\" "
        "(the token is not shown)",
        file.empty() ? "" : "_file's token"));
  }
  return value;
}

Error BadValue(std::string_view key, std::string_view value, std::string_view allowed) {
  return InvalidArgument(fmt::format("config {} = \"{}\" is not valid: allowed {}", key,
                                     RedactSecrets(value), allowed));
}

// A comma-separated list: each entry without the spaces around it; an empty entry (",,", a
// comma at either end) is refused, naming where it is.
Result<std::vector<std::string>> CommaList(std::string_view key, std::string_view value,
                                           std::string_view allowed) {
  std::vector<std::string> out;
  if (value.find_first_not_of(" \t") == std::string_view::npos) return out;
  for (std::size_t start = 0;;) {
    const std::size_t comma = std::min(value.find(',', start), value.size());
    std::string_view entry = value.substr(start, comma - start);
    const std::size_t first = entry.find_first_not_of(" \t");
    if (first == std::string_view::npos) {
      return InvalidArgument(
          fmt::format("config {}: entry {} is empty: allowed {}", key, out.size() + 1, allowed));
    }
    entry = entry.substr(first, entry.find_last_not_of(" \t") - first + 1);
    out.emplace_back(entry);
    if (comma == value.size()) return out;
    start = comma + 1;
  }
}

Result<std::int64_t> IntValue(std::string_view key, std::string_view value, std::int64_t lo,
                              std::int64_t hi) {
  std::int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || ptr != value.data() + value.size() || v < lo || v > hi) {
    return BadValue(key, value, fmt::format("a whole number from {} to {}", lo, hi));
  }
  return v;
}

// A duration within [min_ms, max_ms]: a value that makes no sense (an idle timeout of 0 closes
// every connection at once) is refused like a malformed one.
Result<std::int64_t> DurationValue(std::string_view key, std::string_view value,
                                   std::int64_t min_ms, std::int64_t max_ms) {
  Result<std::int64_t> ms = ParseDurationMillis(value);
  if (!ms.ok() || *ms < min_ms || *ms > max_ms) {
    return BadValue(
        key, value,
        fmt::format("a duration such as \"250ms\" or \"5s\", from {} ms to {} ms", min_ms, max_ms));
  }
  return ms;
}

// strict.tags (after the worker section): tag names, each once, at most kStrictMaxTags (a
// server's table holds no more), each fitting the cluster's namespace; only with a coordinator.
Result<std::vector<std::string>> StrictTagsValue(std::string_view value, const ServerConfig& c) {
  Result<std::vector<std::string>> tags =
      CommaList("strict.tags", value, "strict tag names separated by commas");
  if (!tags.ok()) return tags;
  if (!tags->empty() && !c.coordinated()) {
    return InvalidArgument(fmt::format(
        "config strict.tags applies to worker.source etcd, zookeeper or redis only (the source "
        "is \"{}\"): strict ids need a coordinator; set worker.source, or drop strict.tags",
        c.worker_source));
  }
  if (tags->size() > kStrictMaxTags) {
    return InvalidArgument(fmt::format("config strict.tags lists {} tags: allowed at most {}",
                                       tags->size(), kStrictMaxTags));
  }
  std::set<std::string, std::less<>> seen;
  for (const std::string& tag : *tags) {
    if (Status s = ValidateStrictTag(tag); !s.ok()) {
      return InvalidArgument("config strict.tags: " + s.error().message);
    }
    if (Result<std::string> name = StrictNamespace(c.cluster, tag); !name.ok()) {
      return InvalidArgument("config strict.tags: " + name.error().message);
    }
    if (!seen.insert(tag).second) {
      return InvalidArgument(
          fmt::format("config strict.tags lists \"{}\" twice: allowed each tag once", tag));
    }
  }
  return tags;
}

}  // namespace

std::vector<ServeFlag> ServeFlags() {
  std::vector<ServeFlag> out;
  for (const Key& k : Keys()) {
    if (k.flag == nullptr) continue;
    std::string help = k.help[0] != '\0' ? k.help : k.name;
    help += k.default_value[0] != '\0' ? fmt::format(" [default: {}]", k.default_value)
                                       : std::string(" [default: not set]");
    help += fmt::format(" (config {})", k.name);
    static constexpr const char* kTypeNames[] = {"TEXT", "INT", "BOOL", "DURATION"};
    out.push_back({k.flag, k.name, help, kTypeNames[static_cast<int>(k.type)]});
  }
  return out;
}

std::vector<std::string> ConfigKeys() {
  std::vector<std::string> out;
  for (const Key& k : Keys()) out.emplace_back(k.name);
  return out;
}

namespace {

// The file at `path` can be read as a config file; otherwise one line saying why (toml++ reads
// a directory as an empty file, which would start the server on its defaults, with no token).
Status CheckConfigPath(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(st)) {
    return InvalidArgument(fmt::format("config file {} does not exist", path));
  }
  if (std::filesystem::is_directory(st)) {
    return InvalidArgument(fmt::format("config file {} is a directory: give a TOML file", path));
  }
  if (!std::filesystem::is_regular_file(st)) {
    return InvalidArgument(fmt::format("config file {} is not a regular file", path));
  }
  if (std::FILE* f = std::fopen(path.c_str(), "r")) {
    std::fclose(f);
    return Status::Ok();
  }
  return InvalidArgument(
      fmt::format("config file {} cannot be read: {}", path, std::strerror(errno)));
}

}  // namespace

Result<ConfigValues> ReadConfigFile(const std::string& path) {
  SEKKA_RETURN_IF_ERROR(CheckConfigPath(path));
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return InvalidArgument(
        fmt::format("config file {} line {}: {}", path, e.source().begin.line, e.description()));
  }
  ConfigValues values;
  for (const auto& [section, node] : table) {
    const toml::table* inner = node.as_table();
    if (inner == nullptr) {
      return InvalidArgument(
          fmt::format("config file {}: \"{}\" is not a [section]: allowed keys {}", path,
                      section.str(), AllowedKeys()));
    }
    for (const auto& [name, value] : *inner) {
      const std::string full = fmt::format("{}.{}", section.str(), name.str());
      const Key* key = FindKey(full);
      const int line = static_cast<int>(value.source().begin.line);
      if (key == nullptr) {
        return InvalidArgument(fmt::format("config file {} line {}: unknown key {}: allowed {}",
                                           path, line, full, AllowedKeys()));
      }
      auto wrong = [&](std::string_view want) {
        return InvalidArgument(
            fmt::format("config file {} line {}: {} must be {}", path, line, full, want));
      };
      switch (key->type) {
        case Type::kString:
        case Type::kDuration:
          // [layout] keys take what --layout takes, so a TOML number or boolean is its text
          // (reverse_time = true, tick = 2, epoch = 1288834974657).
          if (section.str() == "layout" && (value.is_integer() || value.is_boolean())) {
            values.emplace_back(full, value.is_boolean()
                                          ? std::string(*value.value<bool>() ? "true" : "false")
                                          : std::to_string(*value.value<std::int64_t>()));
            break;
          }
          if (!value.is_string()) return wrong("a string");
          values.emplace_back(full, std::string(*value.value<std::string>()));
          break;
        case Type::kInt:
          if (!value.is_integer()) return wrong("an integer");
          values.emplace_back(full, std::to_string(*value.value<std::int64_t>()));
          break;
        case Type::kBool:
          if (!value.is_boolean()) return wrong("true or false");
          values.emplace_back(full, *value.value<bool>() ? "true" : "false");
          break;
      }
    }
  }
  return values;
}

namespace {

// Kubernetes puts service links into every pod of a namespace: for a Service "sekka" (or
// "sekka-resp"), SEKKA[_RESP]_SERVICE_HOST, _SERVICE_PORT[_<name>], _PORT and
// _PORT_<n>_<TCP|UDP|SCTP>[_PROTO|_PORT|_ADDR]. They are not configuration, and no key's name
// takes these shapes; any other unknown SEKKA_ name is still an error.
bool IsServiceLink(std::string_view name) {
  static const std::regex kLink(
      "SEKKA_([A-Z0-9_]+_)?(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT|"
      "PORT_[0-9]+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)");
  return std::regex_match(name.begin(), name.end(), kLink);
}

}  // namespace

Result<ConfigValues> ReadConfigEnvironment(const std::vector<std::string>& environment) {
  ConfigValues values;
  for (const std::string& entry : environment) {
    const std::size_t eq = entry.find('=');
    const std::string name = entry.substr(0, eq);
    if (name.rfind("SEKKA_", 0) != 0 || eq == std::string::npos) continue;
    if (name == "SEKKA_CLOCK" || name == "SEKKA_BIN") continue;  // not configuration
    if (IsServiceLink(name)) continue;
    bool known = false;
    for (const Key& k : Keys()) {
      if (EnvName(k.name) == name) {
        values.emplace_back(k.name, entry.substr(eq + 1));
        known = true;
      }
    }
    if (!known) {
      std::string allowed;
      for (const Key& k : Keys()) allowed += (allowed.empty() ? "" : ", ") + EnvName(k.name);
      return InvalidArgument(
          fmt::format("environment variable {} is not known: allowed {}", name, allowed));
    }
  }
  return values;
}

namespace {

using Values = std::map<std::string, std::string>;

// Every key known, no integer key given empty, and no protection turned off by an empty value
// over one an earlier source set.
Status CheckSources(const std::vector<ConfigValues>& sources) {
  std::map<std::string, bool> set;  // protections given non-empty so far
  for (const ConfigValues& source : sources) {
    for (const auto& [key, value] : source) {
      const Key* k = FindKey(key);
      if (k == nullptr) {
        return InvalidArgument(
            fmt::format("unknown config key {}: allowed {}", key, AllowedKeys()));
      }
      // An integer key given empty (`--after-id "$(cat file)"` of an empty file) is an error,
      // never the same as not giving it: a floor dropped that way lets ids repeat.
      if (k->type == Type::kInt && value.empty()) {
        return InvalidArgument(
            fmt::format("config {} is empty: give an integer, or leave the key out", key));
      }
      if (k->protection && value.empty() && set[key]) {
        return InvalidArgument(fmt::format(
            "config {} is given empty over a value set before it (config file or environment), "
            "which would turn that protection off: to run without it, remove it where it is set",
            key));
      }
      if (k->protection && !value.empty()) set[key] = true;
    }
  }
  return Status::Ok();
}

// server.tls_*: which files go together, and that the key is not readable by other users. The
// server loads them when it starts (Server::Start), naming the key and OpenSSL's reason.
Status TlsKeys(const Values& v, ServerConfig& c) {
  c.server_tls_cert_file = v.at("server.tls_cert_file");
  c.server_tls_key_file = v.at("server.tls_key_file");
  c.server_tls_client_ca_file = v.at("server.tls_client_ca_file");
  if (c.server_tls_cert_file.empty() != c.server_tls_key_file.empty()) {
    return InvalidArgument(
        "config server.tls_cert_file and server.tls_key_file go together: give both (TLS on "
        "every listener) or neither (plain TCP)");
  }
  if (!c.server_tls_client_ca_file.empty() && c.server_tls_cert_file.empty()) {
    return InvalidArgument(
        "config server.tls_client_ca_file needs server.tls_cert_file and server.tls_key_file: "
        "client certificates are asked for only over TLS");
  }
  if (c.server_tls_key_file.empty()) return Status::Ok();
  return CheckSecretFile(c.server_tls_key_file, "config server.tls_key_file");
}

// [server] and [data].
Status ServerSection(const Values& v, ServerConfig& c) {
  auto get = [&](const char* key) -> const std::string& { return v.at(key); };
  c.http_listen = get("server.http_listen");
  c.resp_listen = get("server.resp_listen");
  c.thrift_listen = get("server.thrift_listen");
  SEKKA_ASSIGN_OR_RETURN(c.auth_token,
                         AuthToken(get("server.auth_token"), get("server.auth_token_file")));
  if (!c.thrift_listen.empty() && !c.auth_token.empty()) {
    return InvalidArgument(
        "config server.thrift_listen cannot be used with server.auth_token: Twitter's Snowflake "
        "IDL has no way to send a token, so the Thrift port would serve ids to anyone; turn one "
        "of them off");
  }
  constexpr std::string_view kHostsAllowed =
      "host names (letters, digits, '.', '-') separated by commas, or \"*\" for any";
  SEKKA_ASSIGN_OR_RETURN(
      auto hosts, CommaList("server.allowed_hosts", get("server.allowed_hosts"), kHostsAllowed));
  for (std::string& name : hosts) {
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    constexpr std::string_view kNameChars = "abcdefghijklmnopqrstuvwxyz0123456789.-";
    if (name != "*" && name.find_first_not_of(kNameChars) != name.npos) {
      return InvalidArgument(
          fmt::format("config server.allowed_hosts: \"{}\" is not valid: allowed {}",
                      name.substr(0, 80), kHostsAllowed));
    }
    c.allowed_hosts.push_back(std::move(name));
  }
  SEKKA_ASSIGN_OR_RETURN(c.threads, IntValue("server.threads", get("server.threads"), 0, 256));
  SEKKA_ASSIGN_OR_RETURN(c.max_connections, IntValue("server.max_connections",
                                                     get("server.max_connections"), 1, 1'000'000));
  SEKKA_ASSIGN_OR_RETURN(
      c.idle_timeout_ms,
      DurationValue("server.idle_timeout", get("server.idle_timeout"), 1000, 86'400'000));
  // A batch's reply is built whole: a million ids is ~25 MB of JSON (~45 MB of UUIDs).
  SEKKA_ASSIGN_OR_RETURN(c.max_batch,
                         IntValue("server.max_batch", get("server.max_batch"), 1, 1'000'000));
  SEKKA_ASSIGN_OR_RETURN(
      c.request_timeout_ms,
      DurationValue("server.request_timeout", get("server.request_timeout"), 100, 3'600'000));
  SEKKA_ASSIGN_OR_RETURN(c.max_buffer_mib, IntValue("server.max_buffer_mib",
                                                    get("server.max_buffer_mib"), 16, 1'048'576));
  // One reply of max_batch ids (a UUID batch as JSON: at most 48 bytes an id) must fit the
  // budget, or the budget would close clients for asking what the server allows.
  const std::int64_t reply_mib = (c.max_batch * 48 + (1 << 20) - 1) >> 20;
  if (c.max_buffer_mib < reply_mib) {
    return InvalidArgument(fmt::format(
        "config server.max_buffer_mib = {} is below one reply of server.max_batch = {} ids ({} "
        "MiB): allowed {} or more, or a smaller max_batch",
        c.max_buffer_mib, c.max_batch, reply_mib, reply_mib));
  }
  SEKKA_ASSIGN_OR_RETURN(c.busy_poll_us,
                         IntValue("server.busy_poll_us", get("server.busy_poll_us"), 0, 100'000));
  c.log_level = get("server.log_level");
  if (c.log_level != "debug" && c.log_level != "info" && c.log_level != "warn" &&
      c.log_level != "error") {
    return BadValue("server.log_level", c.log_level, "debug, info, warn or error");
  }
  if (get("server.resp_ids") != "integer" && get("server.resp_ids") != "string") {
    return BadValue("server.resp_ids", get("server.resp_ids"), "integer or string");
  }
  c.resp_string_ids = get("server.resp_ids") == "string";
  if (Status s = TlsKeys(v, c); !s.ok()) return s;
  c.data_dir = get("data.dir");
  if (c.data_dir.empty()) return BadValue("data.dir", "", "a directory path");
  return Status::Ok();
}

// [layout] and random.layout.
Status LayoutSection(const Values& v, ServerConfig& c) {
  auto get = [&](const char* key) -> const std::string& { return v.at(key); };
  // The layout: layout.preset (a preset, or PRESET,key=value,...) and the other [layout] keys
  // appended to it, through the one parser `--layout` and `sekka gen` use.
  std::string spec = get("layout.preset");
  for (const char* key : {"time_bits", "datacenter_bits", "worker_bits", "sequence_bits",
                          "shard_bits", "tick", "epoch", "order", "reverse_time"}) {
    if (const std::string& value = get(fmt::format("layout.{}", key).c_str()); !value.empty()) {
      if (value.find(',') != std::string::npos) {
        return BadValue(fmt::format("layout.{}", key), value, "a value without commas");
      }
      spec += fmt::format(",{}={}", key, value);
    }
  }
  if (spec != get("layout.preset")) spec += ",name=custom";  // a preset the keys changed
  Result<Layout> layout = ParseLayout(spec);
  if (!layout.ok()) {
    return InvalidArgument(
        fmt::format("config layout (layout.preset \"{}\" with the [layout] "
                    "keys): {}",
                    get("layout.preset"), layout.error().message));
  }
  if (layout->is_random()) {
    return InvalidArgument(
        "config layout.preset: a random layout has no worker id, so it cannot be the snowflake "
        "layout of /v1/id and ID.NEXT: set random.layout instead (ids from /v1/random, "
        "RANDOM.NEXT)");
  }
  Result<Layout> random_layout = ParseLayout(get("random.layout"));
  if (!random_layout.ok()) {
    return InvalidArgument("config random.layout: " + random_layout.error().message);
  }
  if (!random_layout->is_random()) {
    return BadValue("random.layout", get("random.layout"),
                    "a random layout: random, or kind=random,time_bits=..,random_bits=..");
  }
  c.random_layout = *random_layout;
  c.generator.layout = *layout;
  return Status::Ok();
}

// [generator], on the layout LayoutSection set.
Status GeneratorSection(const Values& v, ServerConfig& c) {
  auto get = [&](const char* key) -> const std::string& { return v.at(key); };
  auto boolean = [&](const char* key) -> Result<bool> {
    if (get(key) == "true") return true;
    if (get(key) == "false") return false;
    return BadValue(key, get(key), "true or false");
  };
  SnowflakeOptions& g = c.generator;
  SEKKA_ASSIGN_OR_RETURN(g.on_clock_backwards,
                         ParseClockBackwardsPolicy(get("generator.on_clock_backwards")));
  std::int64_t ms = 0;
  SEKKA_ASSIGN_OR_RETURN(ms, DurationValue("generator.max_backwards_wait",
                                           get("generator.max_backwards_wait"), 0, 3'600'000));
  g.max_backwards_wait = std::chrono::milliseconds(ms);
  SEKKA_ASSIGN_OR_RETURN(g.on_sequence_exhausted,
                         ParseSequenceExhaustedPolicy(get("generator.on_sequence_exhausted")));
  SEKKA_ASSIGN_OR_RETURN(
      ms, DurationValue("generator.max_drift", get("generator.max_drift"), 0, 3'600'000));
  g.max_drift = std::chrono::milliseconds(ms);
  SEKKA_ASSIGN_OR_RETURN(g.sequence_start, ParseSequenceStart(get("generator.sequence_start")));
  // Direction is part of the layout: it changes what a slot maps to, so it is in the layout's
  // fingerprint and in every decode.
  bool descending = false;
  SEKKA_ASSIGN_OR_RETURN(descending, boolean("generator.descending"));
  // Either says so: the layout's own key (`--layout sekka,descending=true`) or the option.
  Result<Layout> directed = g.layout.WithDescending(descending || g.layout.descending());
  if (!directed.ok())
    return InvalidArgument("config generator.descending: " + directed.error().message);
  g.layout = *directed;
  SEKKA_ASSIGN_OR_RETURN(
      c.max_startup_wait_ms,
      DurationValue("generator.max_startup_wait", get("generator.max_startup_wait"), 0, 3'600'000));
  SEKKA_ASSIGN_OR_RETURN(c.force, boolean("generator.force"));
  if (!get("generator.after_id").empty()) {
    SEKKA_ASSIGN_OR_RETURN(c.after_id, IntValue("generator.after_id", get("generator.after_id"), 0,
                                                std::numeric_limits<std::int64_t>::max()));
    Result<std::int64_t> floor = AfterIdFloorMillis(g.layout, c.after_id);
    if (!floor.ok()) return InvalidArgument("config generator.after_id: " + floor.error().message);
    c.after_floor_ms = *floor;
  }
  return Status::Ok();
}

// [worker] leaf_name and leaf_address: both or neither, on ZooKeeper, with Leaf's layout (ids
// beside Leaf's are Leaf's ids). Their values are checked as the coordinator opens
// (ValidateLeafRegistry), before --print-config too.
Status LeafRegistryKeys(const Values& v, ServerConfig& c) {
  c.leaf_name = v.at("worker.leaf_name");
  c.leaf_address = v.at("worker.leaf_address");
  if (c.leaf_name.empty() && c.leaf_address.empty()) return Status::Ok();
  if (!FindWorkerSource(c.worker_source)->leaf) {
    return BadValue("worker.source", c.worker_source,
                    WorkerSourceNames(&WorkerSource::leaf) +
                        " when worker.leaf_name or worker.leaf_address is set (where Leaf's "
                        "registry lives)");
  }
  if (c.leaf_name.empty() || c.leaf_address.empty()) {
    return BadValue(c.leaf_name.empty() ? "worker.leaf_name" : "worker.leaf_address", "",
                    "a value: worker.leaf_name and worker.leaf_address go together");
  }
  Result<Layout> leaf = Layout::Preset("leaf");
  if (!leaf.ok() || LayoutFingerprint(*leaf) != LayoutFingerprint(c.generator.layout)) {
    return BadValue("layout.preset", v.at("layout.preset"),
                    "leaf (Leaf's epoch and bits, no layout.* override) when worker.leaf_name is "
                    "set: ids beside Leaf's servers are Leaf's ids");
  }
  return Status::Ok();
}

// [worker]: where worker ids come from.
Status WorkerSection(const Values& v, ServerConfig& c) {
  auto get = [&](const char* key) -> const std::string& { return v.at(key); };
  auto boolean = [&](const char* key) -> Result<bool> {
    if (get(key) == "true") return true;
    if (get(key) == "false") return false;
    return BadValue(key, get(key), "true or false");
  };
  c.worker_source = get("worker.source");
  const WorkerSource* source = FindWorkerSource(c.worker_source);
  if (source == nullptr) return BadValue("worker.source", c.worker_source, WorkerSourceNames());
  // A key that does not apply to the chosen source is refused, never ignored: a worker.id that
  // `local` ignored ran two hosts told ids 1 and 2 both as worker 0.
  if (!get("worker.id").empty() && c.worker_source != "static") {
    return InvalidArgument(fmt::format(
        "config worker.id applies to worker.source static only (the source is \"{}\"): set "
        "worker.source = static (--worker-source static) to run as worker {}, or drop worker.id",
        c.worker_source, get("worker.id")));
  }
  if (c.worker_source == "static") {
    if (get("worker.id").empty()) {
      return BadValue("worker.id", "", "this process's worker id with worker.source = static");
    }
    SEKKA_ASSIGN_OR_RETURN(c.worker_id,
                           IntValue("worker.id", get("worker.id"), 0, (std::int64_t{1} << 31) - 1));
  }
  c.worker_lock_dir = get("worker.lock_dir");
  if (c.worker_lock_dir.empty()) {
    return BadValue("worker.lock_dir", "",
                    "a directory that every sekka process of this host shares");
  }
  SEKKA_ASSIGN_OR_RETURN(c.datacenter_id,
                         IntValue("worker.datacenter_id", get("worker.datacenter_id"), 0,
                                  (std::int64_t{1} << 31) - 1));
  c.coordinator = get("worker.coordinator");
  c.cluster = get("worker.cluster");
  SEKKA_ASSIGN_OR_RETURN(c.lease_ttl_ms,
                         DurationValue("worker.lease_ttl", get("worker.lease_ttl"), 1, 3'600'000));
  // A coordinator named under a local source would be ignored: each host would pick its worker
  // ids alone, and hosts would repeat each other's ids.
  if (!c.coordinated() && (!c.coordinator.empty() || c.cluster != "default")) {
    return InvalidArgument(fmt::format(
        "config {} applies to worker.source {} only (the source is \"{}\"): set worker.source "
        "(--worker-source) to the coordinator's kind, or drop it",
        c.coordinator.empty() ? "worker.cluster" : "worker.coordinator",
        WorkerSourceNames(&WorkerSource::coordinated), c.worker_source));
  }
  if (c.coordinated()) {
    if (c.coordinator.empty()) {
      return BadValue("worker.coordinator", "",
                      fmt::format("{}://host:port[,host:port...] with worker.source = \"{}\"",
                                  c.worker_source, c.worker_source));
    }
    if (c.lease_ttl_ms < 2000) {
      return BadValue("worker.lease_ttl", get("worker.lease_ttl"),
                      "2s to 1h (etcd's smallest lease is 2 s)");
    }
  }
  c.worker_name = get("worker.name");
  if (Status leaf = LeafRegistryKeys(v, c); !leaf.ok()) return leaf;
  SEKKA_ASSIGN_OR_RETURN(c.keep_worker_id, boolean("worker.keep_id"));
  if (c.keep_worker_id && !source->keeps_id) {
    return BadValue("worker.source", c.worker_source,
                    WorkerSourceNames(&WorkerSource::keeps_id) +
                        " when worker.keep_id is set (the others always keep their one id)");
  }
  return Status::Ok();
}

// [worker]: TLS and the user for the coordinator.
Status CoordinatorAccessSection(const Values& v, ServerConfig& c) {
  auto get = [&](const char* key) -> const std::string& { return v.at(key); };
  c.tls_ca_file = get("worker.tls_ca_file");
  c.tls_cert_file = get("worker.tls_cert_file");
  c.tls_key_file = get("worker.tls_key_file");
  c.username = get("worker.username");
  c.password = get("worker.password");
  c.password_file = get("worker.password_file");
  const bool tls = !c.tls_ca_file.empty() || !c.tls_cert_file.empty() || !c.tls_key_file.empty();
  const bool user = !c.username.empty() || !c.password.empty() || !c.password_file.empty();
  const WorkerSource* source = FindWorkerSource(c.worker_source);
  if (tls && !source->tls) {
    return BadValue("worker.source", c.worker_source,
                    WorkerSourceNames(&WorkerSource::tls) +
                        " when worker.tls_* are set (the other sources' clients have no TLS)");
  }
  if (user && !source->users) {
    return BadValue("worker.source", c.worker_source,
                    WorkerSourceNames(&WorkerSource::users) +
                        " when worker.username or worker.password* are set");
  }
  if (c.tls_cert_file.empty() != c.tls_key_file.empty()) {
    return BadValue(c.tls_cert_file.empty() ? "worker.tls_cert_file" : "worker.tls_key_file", "",
                    "a file: worker.tls_cert_file and worker.tls_key_file go together");
  }
  if (!c.tls_cert_file.empty() && c.tls_ca_file.empty()) {
    return BadValue("worker.tls_ca_file", "",
                    "a CA file or \"system\" when worker.tls_cert_file is set (a client "
                    "certificate is sent over TLS only)");
  }
  if (!c.password.empty() && !c.password_file.empty()) {
    return BadValue("worker.password_file", c.password_file,
                    "\"\" when worker.password is set: one or the other");
  }
  if (c.username.empty() && (!c.password.empty() || !c.password_file.empty())) {
    return BadValue("worker.username", "", "the user whose password is given");
  }
  if (!c.username.empty() && c.password.empty() && c.password_file.empty()) {
    return BadValue("worker.password", "", "the user's password, here or in worker.password_file");
  }
  return Status::Ok();
}

// [segment] and [opaque].
Status SegmentSection(const Values& v, ServerConfig& c) {
  auto get = [&](const char* key) -> const std::string& { return v.at(key); };
  auto boolean = [&](const char* key) -> Result<bool> {
    if (get(key) == "true") return true;
    if (get(key) == "false") return false;
    return BadValue(key, get(key), "true or false");
  };
  c.segment_store = get("segment.store");
  SEKKA_ASSIGN_OR_RETURN(c.segment_auto_create, boolean("segment.auto_create"));
  SEKKA_ASSIGN_OR_RETURN(c.machines_single_server, boolean("machines.single_server"));
  c.machines_store = get("machines.store");
  SEKKA_ASSIGN_OR_RETURN(c.segment_step,
                         IntValue("segment.step", get("segment.step"), 1, 1'000'000'000));
  SEKKA_ASSIGN_OR_RETURN(c.segment_max_step,
                         IntValue("segment.max_step", get("segment.max_step"), 1, 1'000'000'000));
  SEKKA_ASSIGN_OR_RETURN(
      c.segment_wait_deadline_ms,
      DurationValue("segment.wait_deadline", get("segment.wait_deadline"), 10, 60'000));
  SEKKA_ASSIGN_OR_RETURN(c.segment_max_tags,
                         IntValue("segment.max_tags", get("segment.max_tags"), 1, 1'000'000));
  SEKKA_ASSIGN_OR_RETURN(c.strict_tags, StrictTagsValue(get("strict.tags"), c));
  SEKKA_ASSIGN_OR_RETURN(c.strict_window,
                         IntValue("strict.window", get("strict.window"), 1, 1'000'000'000));
  c.strict_advertise = get("strict.advertise");
  c.strict_tls_ca_file = get("strict.tls_ca_file");
  c.opaque_key_file = get("opaque.key_file");
  return Status::Ok();
}

}  // namespace

Result<ServerConfig> BuildConfig(const std::vector<ConfigValues>& sources) {
  SEKKA_RETURN_IF_ERROR(CheckSources(sources));
  const Values v = Merge(sources);
  ServerConfig c;
  for (Status (*section)(const Values&, ServerConfig&) :
       {ServerSection, LayoutSection, GeneratorSection, WorkerSection, CoordinatorAccessSection,
        SegmentSection}) {
    SEKKA_RETURN_IF_ERROR(section(v, c));
  }
  return c;
}

ServerConfig DefaultConfig() {
  Result<ServerConfig> c = BuildConfig({});
  if (!c.ok()) {  // the table's own defaults are refused: a defect config_test shows
    std::fprintf(stderr, "sekka: the default configuration is not valid: %s\n",
                 c.error().message.c_str());
    std::abort();
  }
  return *std::move(c);
}

std::string PrintConfig(const std::vector<ConfigValues>& sources) {
  const std::map<std::string, std::string> v = Merge(sources);
  std::string out;
  std::string section;
  for (const Key& k : Keys()) {
    const std::string_view name = k.name;
    const std::string_view sec = name.substr(0, name.find('.'));
    const std::string_view key = name.substr(name.find('.') + 1);
    if (sec != section) {
      out += fmt::format("{}[{}]\n", out.empty() ? "" : "\n", sec);
      section = std::string(sec);
    }
    std::string value = RedactSecrets(v.at(k.name));  // never print secrets
    if ((name == "server.auth_token" || name == "worker.password") && !value.empty()) {
      value = "(hidden)";
    }
    if (value.empty() && (k.type != Type::kString || name.starts_with("layout."))) {
      out += fmt::format("# {} = <not set>  # {}\n", key, k.help);
      continue;
    }
    std::string shown;
    if (k.type == Type::kString || k.type == Type::kDuration) {
      shown = "\"";
      for (char c : value) {
        if (c == '"' || c == '\\') shown += '\\';
        shown += c;
      }
      shown += "\"";
    } else {
      shown = value;
    }
    if (k.help[0] == '\0') {
      out += fmt::format("{} = {}\n", key, shown);
    } else {
      out += fmt::format("{} = {}  # {}\n", key, shown, k.help);
    }
  }
  return out;
}

}  // namespace sekka::server
