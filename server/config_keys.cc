// The table of configuration keys (server/config_keys.h), and what is read from it alone:
// `sekka serve`'s flags, the key names, and --print-config.

#include "server/config_keys.h"

#include <fmt/format.h>

#include "sekka/secrets.h"
#include "sekka/segment_stores.h"
#include "sekka/worker_sources.h"

namespace sekka::server {
namespace settings {

// The one table of keys (docs/contract.md's config section lists them): name, type, default,
// bounds (min, max), field, help, flag, protection.
const std::vector<Key>& Keys() {
  // Lists from the backends' tables (sekka/worker_sources.h, sekka/segment_stores.h).
  static const std::string sources = [] {  // "static | local | ..."
    std::string names;
    for (const WorkerSource& w : WorkerSources())
      names += (names.empty() ? "" : " | ") + std::string(w.name);
    return names;
  }();
  static const std::string coordinators = CoordinatorUriForms();
  static const std::string stores = SegmentStoreForms();
  static const std::vector<Key> keys = {
      {"server.http_listen", Type::kString, "127.0.0.1:8080", 0, 0, &ServerConfig::http_listen,
       "HTTP address; \"\" = off", "--http"},
      {"server.resp_listen", Type::kString, "127.0.0.1:6380", 0, 0, &ServerConfig::resp_listen,
       "Redis-protocol address; \"\" = off", "--resp"},
      {"server.thrift_listen", Type::kString, "", 0, 0, &ServerConfig::thrift_listen,
       "Twitter Snowflake Thrift address (framed, binary; Twitter used port 7609); \"\" = off",
       "--thrift"},
      {"server.auth_token",
       Type::kString,
       "",
       0,
       0,
       {},
       "bearer token / AUTH password, at least 16 printable characters; \"\" = none",
       "--auth-token",
       true},
      {"server.auth_token_file",
       Type::kString,
       "",
       0,
       0,
       {},
       "a file holding the token (a trailing newline is ignored; not readable by other users), "
       "instead of auth_token",
       "--auth-token-file",
       true},
      {"server.tls_cert_file", Type::kString, "", 0, 0, &ServerConfig::server_tls_cert_file,
       "TLS on every listener: the server's certificate chain (PEM), with tls_key_file; \"\" = "
       "plain TCP",
       "--tls-cert-file", true},
      {"server.tls_key_file", Type::kString, "", 0, 0, &ServerConfig::server_tls_key_file,
       "the certificate's private key (PEM; not readable by other users)", "--tls-key-file", true},
      {"server.tls_client_ca_file", Type::kString, "", 0, 0,
       &ServerConfig::server_tls_client_ca_file,
       "require client certificates signed by these CAs (PEM); \"\" = none asked for",
       "--tls-client-ca-file", true},
      {"server.allowed_hosts",
       Type::kString,
       "",
       0,
       0,
       {},
       "host names HTTP requests may send in Host, comma-separated, besides IP addresses and "
       "localhost (a name not listed is refused: DNS rebinding); \"*\" = any",
       "--allowed-hosts"},
      {"server.threads", Type::kInt, "0", 0, 256, &ServerConfig::threads,
       "event loops; 0 = one per core", "--threads"},
      {"server.max_connections", Type::kInt, "10000", 1, 1'000'000, &ServerConfig::max_connections,
       "open connections, all listeners", "--max-connections"},
      {"server.idle_timeout", Type::kDuration, "300s", 1'000, 86'400'000,
       &ServerConfig::idle_timeout_ms, "close connections idle this long (1s to 24h)",
       "--idle-timeout"},
      {"server.auth_timeout", Type::kDuration, "5s", 1'000, 3'600'000,
       &ServerConfig::auth_timeout_ms,
       "a connection that has not presented auth_token (none set: finished its TLS handshake) "
       "this long after it opened is closed (1s to 1h)",
       "--auth-timeout"},
      {"server.max_unauthenticated_per_address", Type::kInt, "100", 1, 1'000'000,
       &ServerConfig::max_unauthenticated_per_address,
       "connections one client address (IPv6: its /64) may hold before presenting auth_token "
       "(none set: before their TLS handshake is done); past it the address's oldest is closed "
       "(1 to 1000000)",
       "--max-unauthenticated-per-address"},
      {"server.tls_handshake_rate", Type::kInt, "100", 1, 1'000, &ServerConfig::tls_handshake_rate,
       "TLS handshakes a second one client address (IPv6: its /64) may start, in bursts of as "
       "many; more wait their turn (1 to 1000)",
       "--tls-handshake-rate"},
      {"server.open_metrics", Type::kBool, "false", 0, 0, &ServerConfig::open_metrics,
       "serve /metrics without auth_token, for a scraper that cannot send one (it shows every "
       "busy tag's name to anyone who reaches the port)",
       "--open-metrics"},
      {"server.metrics_tags", Type::kInt, "100", 0, 100'000, &ServerConfig::metrics_tags,
       "segment tags with series of their own in /metrics, the busiest; the rest are summed in "
       "one series without the tag label (0 to 100000)",
       "--metrics-tags"},
      {"server.max_batch", Type::kInt, "100000", 1, 1'000'000, &ServerConfig::max_batch,
       "ids per batch request (1 to 1000000)", "--max-batch"},
      {"server.request_timeout", Type::kDuration, "10s", 100, 3'600'000,
       &ServerConfig::request_timeout_ms,
       "a request or command must arrive whole this soon after its first byte, else 408 or "
       "-ERR and the connection closes (100ms to 1h)",
       "--request-timeout"},
      {"server.max_buffer_mib", Type::kInt, "512", 16, 1'048'576, &ServerConfig::max_buffer_mib,
       "MiB of request and reply buffers across all connections; past it the connection "
       "buffering the most is closed (16 to 1048576)",
       "--max-buffer-mib"},
      {"server.io", Type::kString, "auto", 0, 0, &ServerConfig::io,
       "how the event loops do their I/O: io_uring, epoll, or auto (io_uring where the kernel "
       "allows it, else epoll)",
       "--io"},
      {"server.busy_poll_us", Type::kInt, "0", 0, 100'000, &ServerConfig::busy_poll_us,
       "event loops poll this long (us) before sleeping; 0 = never", "--busy-poll-us"},
      {"server.log_level", Type::kString, "info", 0, 0, &ServerConfig::log_level,
       "debug | info | warn | error", "--log-level"},
      {"server.resp_ids",
       Type::kString,
       "integer",
       0,
       0,
       {},
       "RESP ids as integer, or string (decimal bulk strings, for JavaScript clients)"},
      {"data.dir", Type::kString, "./sekka-data", 0, 0, &ServerConfig::data_dir, "data directory",
       "--data-dir"},
      {"layout.preset",
       Type::kString,
       "sekka",
       0,
       0,
       {},
       "sekka | twitter | leaf | discord | instagram | sonyflake | sonyflake-v1 | baidu | js53, "
       "or PRESET,key=value,... "
       "(docs/operations.md)",
       "--layout"},
      {"layout.time_bits", Type::kInt, "", 0, 0, {}, "custom layout: overrides the preset"},
      {"layout.datacenter_bits", Type::kInt, "", 0, 0, {}, "custom layout"},
      {"layout.worker_bits", Type::kInt, "", 0, 0, {}, "custom layout"},
      {"layout.sequence_bits", Type::kInt, "", 0, 0, {}, "custom layout"},
      {"layout.tick", Type::kDuration, "", 0, 0, {}, "custom layout: 1ms to 1s"},
      {"layout.epoch", Type::kString, "", 0, 0, {}, "custom layout: ISO 8601 or ms since 1970"},
      {"layout.order",
       Type::kString,
       "",
       0,
       0,
       {},
       "custom layout: time,worker,sequence | time,sequence,worker"},
      {"layout.shard_bits",
       Type::kInt,
       "",
       0,
       0,
       {},
       "custom layout: 0 to 15 bits on top against hotspots"},
      {"layout.reverse_time",
       Type::kString,
       "",
       0,
       0,
       {},
       "custom layout: true = the time field bit-reversed (no hotspot, no order)"},
      {"layout.descending",
       Type::kString,
       "",
       0,
       0,
       {},
       "true = ids count down from the layout's end (as generator.descending)"},
      {"generator.on_clock_backwards",
       Type::kString,
       "wait",
       0,
       0,
       {},
       "wait | fail | continue",
       "--on-clock-backwards"},
      {"generator.max_backwards_wait", Type::kDuration, "1s", 0, 3'600'000, {}, ""},
      {"generator.on_sequence_exhausted", Type::kString, "wait", 0, 0, {}, "wait | borrow"},
      {"generator.max_drift", Type::kDuration, "1s", 0, 3'600'000, {}, ""},
      {"generator.sequence_start", Type::kString, "zero", 0, 0, {}, "zero | random"},
      {"generator.descending", Type::kBool, "false", 0, 0, {}, ""},
      {"generator.max_startup_wait", Type::kDuration, "10s", 0, 3'600'000,
       &ServerConfig::max_startup_wait_ms, "wait out a stored hwm this close",
       "--max-startup-wait"},
      {"generator.force", Type::kBool, "false", 0, 0, &ServerConfig::force,
       "start despite stored state of another layout"},
      {"generator.after_id",
       Type::kInt,
       "",
       0,
       kMaxInt64,
       {},
       "issue only ids above this one (the largest id of the system sekka takes over from)",
       "--after-id"},
      {"worker.source", Type::kString, "local", 0, 0, &ServerConfig::worker_source, sources.c_str(),
       "--worker-source"},
      {"worker.id",
       Type::kInt,
       "",
       0,
       kMaxInt31,
       {},
       "source static: this process's worker id (required there, "
       "refused with any other source)",
       "--worker-id"},
      {"worker.lock_dir", Type::kString, "/var/lib/sekka/workers", 0, 0,
       &ServerConfig::worker_lock_dir,
       "the host's lock dir, shared by every sekka process of this host and bound to one id "
       "space (layout, and where worker ids come from); static, local, hostname lock their "
       "worker id and keep its hwm there",
       "--lock-dir"},
      {"worker.datacenter_id", Type::kInt, "0", 0, kMaxInt31, &ServerConfig::datacenter_id,
       "where the layout has datacenter bits", "--datacenter-id"},
      {"worker.coordinator", Type::kString, "", 0, 0, &ServerConfig::coordinator,
       coordinators.c_str(), "--coordinator"},
      {"worker.cluster", Type::kString, "default", 0, 0, &ServerConfig::cluster,
       "key prefix at the coordinator", "--cluster"},
      {"worker.lease_ttl", Type::kDuration, "10s", 1, 3'600'000, &ServerConfig::lease_ttl_ms, "",
       "--lease-ttl"},
      {"worker.name", Type::kString, "", 0, 0, &ServerConfig::worker_name,
       "identity for source local; \"\" = the listen addresses", "--worker-name"},
      {"worker.keep_id", Type::kBool, "false", 0, 0, &ServerConfig::keep_worker_id,
       "local, etcd, zookeeper, redis: a restart takes back its own worker id and waits past its "
       "hwm "
       "(up to ~4 s); false = it takes a free id whose hwm is past and does not wait"},
      {"worker.leaf_name", Type::kString, "", 0, 0, &ServerConfig::leaf_name,
       "zookeeper: run beside Leaf's snowflake servers of this leaf.name (layout leaf): the "
       "worker id is the sequence of this server's node in /snowflake/NAME/forever, as Leaf's; "
       "\"\" = none",
       "--leaf-name"},
      {"worker.leaf_address", Type::kString, "", 0, 0, &ServerConfig::leaf_address,
       "with leaf_name: the IPv4:PORT this server registers as there, as Leaf's ip:port "
       "(never a Leaf server's)",
       "--leaf-address"},
      {"worker.tls_ca_file", Type::kString, "", 0, 0, &ServerConfig::tls_ca_file,
       "etcd over HTTPS, verified with this CA file (PEM), or \"system\" (the system's CAs); "
       "\"\" = plain HTTP"},
      {"worker.tls_cert_file", Type::kString, "", 0, 0, &ServerConfig::tls_cert_file,
       "etcd: client certificate (PEM), with tls_key_file"},
      {"worker.tls_key_file", Type::kString, "", 0, 0, &ServerConfig::tls_key_file,
       "etcd: the client certificate's key (PEM)"},
      {"worker.username", Type::kString, "", 0, 0, &ServerConfig::username,
       "etcd user, or ZooKeeper digest user; \"\" = no authentication"},
      {"worker.password", Type::kString, "", 0, 0, &ServerConfig::password,
       "the user's password (or password_file)"},
      {"worker.password_file", Type::kString, "", 0, 0, &ServerConfig::password_file,
       "a file holding the user's password (a trailing newline is ignored)"},
      {"segment.store", Type::kString, "", 0, 0, &ServerConfig::segment_store, stores.c_str(),
       "--segment-store"},
      {"segment.auto_create", Type::kBool, "false", 0, 0, &ServerConfig::segment_auto_create,
       "create unknown tags on first use", "--segment-auto-create"},
      {"segment.step", Type::kInt, "1000", 1, 1'000'000'000, &ServerConfig::segment_step,
       "step of auto-created tags"},
      {"segment.max_step", Type::kInt, "10000000", 1, 1'000'000'000,
       &ServerConfig::segment_max_step, "the dynamic step never goes above this",
       "--segment-max-step"},
      {"segment.wait_deadline", Type::kDuration, "500ms", 10, 60'000,
       &ServerConfig::segment_wait_deadline_ms,
       "both buffers empty: wait this long (below the clients' 1 s timeout)"},
      {"segment.max_tags", Type::kInt, "10000", 1, 1'000'000, &ServerConfig::segment_max_tags,
       "tags served at most, auto-created ones included"},
      {"strict.tags",
       Type::kString,
       "",
       0,
       0,
       {},
       "the strict tags this server serves, comma-separated (at most 1,000); \"\" = none",
       "--strict-tags"},
      {"strict.window", Type::kInt, "100000", 1, 1'000'000'000, &ServerConfig::strict_window,
       "how far a strict tag's stored bound runs ahead: the ids a failover skips at most"},
      {"strict.advertise", Type::kString, "", 0, 0, &ServerConfig::strict_advertise,
       "where other servers reach this one's RESP listener for forwarded strict calls (a numeric "
       "IP and a port); \"\" = server.resp_listen, unless that is a wildcard address",
       "--strict-advertise"},
      {"strict.tls_ca_file", Type::kString, "", 0, 0, &ServerConfig::strict_tls_ca_file,
       "with TLS on the listeners: the CA file (PEM) that signed the other servers' "
       "certificates, for forwarded strict calls; \"\" = the system's CAs"},
      {"machines.single_server", Type::kBool, "false", 0, 0, &ServerConfig::machines_single_server,
       "without a coordinator: this server alone answers CosId's /machines from its data dir's "
       "file (refused otherwise when worker.source is static or hostname, or another server of "
       "this host keeps machine ids); with one, the cluster keeps them at the coordinator",
       "--machines-single-server"},
      {"machines.store", Type::kString, "", 0, 0, &ServerConfig::machines_store,
       "CosId's own machine distributor, read and written in place: "
       "redis://HOST:PORT/DB?schema=cosid or mysql://USER@HOST:PORT/DATABASE?schema=cosid&pad=4 "
       "(or pad=8, as CosId's instances pad machine ids in row names); \"\" "
       "= sekka's own (the coordinator's, or the data dir's)",
       "--machines-store"},
      {"opaque.key_file", Type::kString, "", 0, 0, &ServerConfig::opaque_key_file,
       "opaque ids' key file (sekka opaque keygen); \"\" = no opaque ids", "--opaque-key-file"},
      {"random.layout",
       Type::kString,
       "random",
       0,
       0,
       {},
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

Values Merge(const std::vector<ConfigValues>& sources) {
  Values values;
  for (const Key& k : Keys()) values[k.name] = k.default_value;
  for (const ConfigValues& source : sources) {
    for (const auto& [key, value] : source) values[key] = value;
  }
  return values;
}

}  // namespace settings

using settings::Key;
using settings::Keys;
using settings::Type;

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

std::string FlagOf(std::string_view key) {
  const Key* k = settings::FindKey(key);
  return k != nullptr && k->flag != nullptr ? k->flag : "";
}

std::vector<std::string> ConfigKeys() {
  std::vector<std::string> out;
  for (const Key& k : Keys()) out.emplace_back(k.name);
  return out;
}

std::string PrintConfig(const std::vector<ConfigValues>& sources) {
  const settings::Values v = settings::Merge(sources);
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
