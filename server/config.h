// server/config.h
//
// The server's configuration (docs/contract.md section 7): a TOML file, then SEKKA_<SECTION>_<KEY>
// environment variables, then flags; the later wins. One table of keys drives all three sources,
// the validation and --print-config, so a key cannot exist in one place and not another.
//
// Thread-safety: plain values and pure functions.

#ifndef SEKKA_SERVER_CONFIG_H_
#define SEKKA_SERVER_CONFIG_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sekka/layout.h"
#include "sekka/secrets.h"
#include "sekka/snowflake.h"
#include "sekka/status.h"
#include "sekka/worker_sources.h"

namespace sekka::server {

// The server's settings. Their defaults live in one place, the table of keys in config_keys.cc:
// a ServerConfig from BuildConfig or DefaultConfig has them; the fields here are only zeroed.
struct ServerConfig {
  // [server]
  std::string http_listen;    // "" = off
  std::string resp_listen;    // "" = off
  std::string thrift_listen;  // Twitter Snowflake's Thrift service; "" = off
  std::string auth_token;     // "" = no authentication
  // Host names HTTP requests may name besides IP literals and localhost (DNS rebinding).
  std::vector<std::string> allowed_hosts;
  int threads{};                          // event loops; 0 = one per core
  int max_connections{};                  // open connections, both protocols together
  std::int64_t idle_timeout_ms{};         // a connection idle this long is closed
  std::int64_t auth_timeout_ms{};         // a connection not authenticated this long is closed
  int max_unauthenticated_per_address{};  // not-yet-authenticated connections per ClientHost
  int tls_handshake_rate{};               // TLS handshakes a second per ClientHost
  bool open_metrics{};                    // /metrics without the token
  int metrics_tags{};                     // tags with series of their own in /metrics
  std::int64_t max_batch{};               // ids per batch request
  std::int64_t request_timeout_ms{};      // a request must arrive whole this soon
  std::int64_t max_buffer_mib{};          // all connections' buffers together
  std::string io;                         // server.io: auto | io_uring | epoll
  std::int64_t busy_poll_us{};            // loops poll this long before sleeping; 0 = never
  std::string log_level;                  // debug | info | warn | error
  bool resp_string_ids{};  // server.resp_ids = "string": RESP ids as decimal bulk strings
  // server.tls_*: TLS on every listener when the certificate is set (with its key); client
  // certificates signed by the client CA file are then required when that is set too. "" = off.
  std::string server_tls_cert_file;
  std::string server_tls_key_file;
  std::string server_tls_client_ca_file;
  // [data]
  std::string data_dir;
  // [generator] and [layout], ready for Snowflake::Create (worker ids are set at start-up)
  SnowflakeOptions generator;
  std::int64_t max_startup_wait_ms{};  // wait out a stored hwm this close, else refuse
  bool force{};                        // start despite a stored state of another layout
  // generator.after_id: no id at or below it is issued (taking over from another system); -1:
  // none. after_floor_ms: the time the clock must pass for that (AfterIdFloorMillis).
  std::int64_t after_id = -1;
  std::int64_t after_floor_ms = 0;
  // [worker]
  std::string worker_source;  // a row of sekka/worker_sources.h
  // True when worker ids come from a coordinator, not from this host (sekka/worker_sources.h).
  bool coordinated() const {
    const WorkerSource* source = FindWorkerSource(worker_source);
    return source != nullptr && source->coordinated;
  }
  std::int64_t worker_id{};
  // static, local, hostname: the host-wide directory of worker-id locks and hwm states.
  std::string worker_lock_dir;
  std::int64_t datacenter_id{};
  SecretUri coordinator;
  std::string cluster;
  std::int64_t lease_ttl_ms{};
  std::string worker_name;  // identity for `local`; "" = the listen addresses
  // A restart takes back its own worker id and waits past its hwm, instead of taking a free id
  // whose hwm is past (WorkerLeaseOptions::keep_id).
  bool keep_worker_id{};
  // Leaf's snowflake registry beside (backends/zookeeper_worker_lease.h LeafRegistry): "" = none
  std::string leaf_name;
  std::string leaf_address;
  // etcd's transport and user (backends/etcd_worker_lease.h): "" = plain HTTP, no user
  std::string tls_ca_file;  // a PEM file, or "system"
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string username;
  std::string password;
  std::string password_file;
  // [segment]
  SecretUri segment_store;     // "" = sqlite in the data dir
  bool segment_auto_create{};  // create unknown tags on first use
  // [machines] this server alone answers CosId's /machines (refused with a coordinated
  // worker.source otherwise: each server keeps its own file)
  bool machines_single_server{};
  // "": the coordinator's or the data dir's (backends/cosid_machines.h)
  SecretUri machines_store;
  std::int64_t segment_step{};              // step of auto-created tags
  std::int64_t segment_max_step{};          // the dynamic step never goes above this
  std::int64_t segment_wait_deadline_ms{};  // both buffers empty: wait this long
  std::int64_t segment_max_tags{};          // tags served at most (auto-created included)
  std::vector<std::string> strict_tags;     // the strict tags served here (strict.tags)
  std::int64_t strict_window{};             // a strict tag's bound runs this far ahead
  std::string strict_advertise;             // "" = the RESP listener's address, unless a wildcard
  std::string strict_tls_ca_file;           // "" = the system's CAs (with TLS on the listeners)
  // [opaque]
  std::string opaque_key_file;  // "" = no opaque ids
  // [random]: the layout of /v1/random, RANDOM.NEXT (a random layout: time and random bits)
  Layout random_layout = *Layout::Preset("random");
};

// Raw "section.key" -> text values, as given by one source.
using ConfigValues = std::vector<std::pair<std::string, std::string>>;

// Reads a TOML file. Errors: kInvalidArgument naming the file, line and what is wrong (an
// unknown key, a value of the wrong type).
Result<ConfigValues> ReadConfigFile(const std::string& path);
// Reads SEKKA_<SECTION>_<KEY> variables from `environ`-style "NAME=value" strings. An unknown
// SEKKA_ variable is an error naming it.
Result<ConfigValues> ReadConfigEnvironment(const std::vector<std::string>& environment);
// Builds the configuration from the sources, in order (later wins).
// Errors: kInvalidArgument naming the key and what is allowed.
Result<ServerConfig> BuildConfig(const std::vector<ConfigValues>& sources);
// The configuration of no source: every key at the table's default. Tests and the simulation
// start from it, so that they run with what a server runs with.
ServerConfig DefaultConfig();
// How long one call to a coordinator may take: a quarter of the lease TTL, at most 2 s, so that
// a member that does not answer leaves time for the others within a TTL.
inline std::int64_t CoordinatorCallTimeoutMs(const ServerConfig& config) {
  return std::min<std::int64_t>(2000, config.lease_ttl_ms / 4);
}
// The effective configuration as TOML.
std::string PrintConfig(const std::vector<ConfigValues>& sources);
// Every key, as "section.key".
std::vector<std::string> ConfigKeys();
// `sekka serve`'s flags, from the same table: "--http" sets server.http_listen.
struct ServeFlag {
  std::string flag;
  std::string key;
  std::string help;       // the key's help and its default
  std::string type_name;  // for --help: TEXT, INT, BOOL or DURATION
};
std::vector<ServeFlag> ServeFlags();
// The flag of `key` as sekka serve spells it ("worker.lock_dir" -> "--lock-dir"); every command
// that takes the setting spells it so (one name per setting). Empty when the key has none.
std::string FlagOf(std::string_view key);

}  // namespace sekka::server

#endif  // SEKKA_SERVER_CONFIG_H_
