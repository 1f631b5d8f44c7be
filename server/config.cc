// BuildConfig: every key's field from the table (server/config_keys.h), then the rules that
// span keys or need a parser of their own, section by section.

#include "server/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "sekka/codec.h"
#include "sekka/secrets.h"
#include "sekka/strict.h"
#include "server/config_keys.h"
#include "server/strict_tags.h"

namespace sekka::server {
namespace {

using settings::FindKey;
using settings::Key;
using settings::Keys;
using settings::Type;
using settings::Values;

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

// A number key's value within its row's bounds: an integer, or a duration in milliseconds (a
// value that makes no sense, such as an idle timeout of 0, is refused like a malformed one).
Result<std::int64_t> Number(const Values& v, const char* name) {
  const Key& k = *FindKey(name);
  const std::string& value = v.at(name);
  if (k.type == Type::kDuration) {
    Result<std::int64_t> ms = ParseDurationMillis(value);
    if (!ms.ok() || *ms < k.min || *ms > k.max) {
      return BadValue(
          name, value,
          fmt::format("a duration such as \"250ms\" or \"5s\", from {} ms to {} ms", k.min, k.max));
    }
    return ms;
  }
  std::int64_t n = 0;
  const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || ptr != value.data() + value.size() || n < k.min || n > k.max) {
    return BadValue(name, value, fmt::format("a whole number from {} to {}", k.min, k.max));
  }
  return n;
}

Result<bool> Bool(const Values& v, const char* name) {
  const std::string& value = v.at(name);
  if (value == "true" || value == "false") return value == "true";
  return BadValue(name, value, "true or false");
}

// Sets every key's field (the row's) from its value; the sections below then apply the rules
// that span keys, and read the keys that have no field.
Status SetFields(const Values& v, ServerConfig& c) {
  for (const Key& k : Keys()) {
    if (const auto* text = std::get_if<std::string ServerConfig::*>(&k.field)) {
      c.*(*text) = v.at(k.name);
    } else if (const auto* uri = std::get_if<SecretUri ServerConfig::*>(&k.field)) {
      c.*(*uri) = SecretUri(v.at(k.name));
    } else if (const auto* flag = std::get_if<bool ServerConfig::*>(&k.field)) {
      SEKKA_ASSIGN_OR_RETURN(c.*(*flag), Bool(v, k.name));
    } else if (const auto* wide = std::get_if<std::int64_t ServerConfig::*>(&k.field)) {
      SEKKA_ASSIGN_OR_RETURN(c.*(*wide), Number(v, k.name));
    } else if (const auto* narrow = std::get_if<int ServerConfig::*>(&k.field)) {
      SEKKA_ASSIGN_OR_RETURN(auto n, Number(v, k.name));
      c.*(*narrow) = static_cast<int>(n);
    }
  }
  return Status::Ok();
}

// strict.tags (after the worker section): tag names, each once, at most kStrictMaxTags (a
// server's table holds no more), each fitting the cluster's namespace. With worker.source local
// the server alone leads them, each bound in its data dir; never with static or hostname.
Result<std::vector<std::string>> StrictTagsValue(std::string_view value, const ServerConfig& c) {
  Result<std::vector<std::string>> tags =
      CommaList("strict.tags", value, "strict tag names separated by commas");
  if (!tags.ok()) return tags;
  // A server alone counts each tag by itself: right for `local` (one server, this data dir),
  // wrong for `static` and `hostname`, which name many servers (a StatefulSet's pods).
  if (!tags->empty() && !c.coordinated() && c.worker_source != "local") {
    return InvalidArgument(fmt::format(
        "config strict.tags with worker.source {}: every server would count each tag by itself "
        "and repeat the others' ids; strict ids need worker.source etcd, zookeeper or redis for "
        "a cluster, or local for one server alone",
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

// server.tls_*: which files go together, and that the key is not readable by other users. The
// server loads them when it starts (Server::Start), naming the key and OpenSSL's reason.
// A file of certificates or keys that exists but is no regular file (a FIFO, a device, a
// directory) is refused: OpenSSL would wait on a FIFO's open or read forever, and start-up would
// hang (issue 42). One that does not exist is refused where it is loaded, with OpenSSL's reason.
Status NotASpecialFile(std::string_view key, const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (path.empty() || (key == "worker.tls_ca_file" && path == "system") ||
      !std::filesystem::exists(st) || std::filesystem::is_regular_file(st)) {
    return Status::Ok();
  }
  return BadValue(key, path, "a regular PEM file (not a FIFO, a device or a directory)");
}

// Every certificate, key and CA file of the configuration (NotASpecialFile).
Status PemFiles(const ServerConfig& c) {
  for (const auto& [key, path] : {std::pair<std::string_view, const std::string&>{
                                      "server.tls_cert_file", c.server_tls_cert_file},
                                  {"server.tls_key_file", c.server_tls_key_file},
                                  {"server.tls_client_ca_file", c.server_tls_client_ca_file},
                                  {"worker.tls_ca_file", c.tls_ca_file},
                                  {"worker.tls_cert_file", c.tls_cert_file},
                                  {"worker.tls_key_file", c.tls_key_file},
                                  {"strict.tls_ca_file", c.strict_tls_ca_file}}) {
    SEKKA_RETURN_IF_ERROR(NotASpecialFile(key, path));
  }
  return Status::Ok();
}

Status TlsKeys(const ServerConfig& c) {
  SEKKA_RETURN_IF_ERROR(PemFiles(c));
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
  // One reply of max_batch ids (a UUID batch as JSON: at most 48 bytes an id) must fit the
  // budget, or the budget would close clients for asking what the server allows.
  const std::int64_t reply_mib = (c.max_batch * 48 + (1 << 20) - 1) >> 20;
  if (c.max_buffer_mib < reply_mib) {
    return InvalidArgument(fmt::format(
        "config server.max_buffer_mib = {} is below one reply of server.max_batch = {} ids ({} "
        "MiB): allowed {} or more, or a smaller max_batch",
        c.max_buffer_mib, c.max_batch, reply_mib, reply_mib));
  }
  if (c.log_level != "debug" && c.log_level != "info" && c.log_level != "warn" &&
      c.log_level != "error") {
    return BadValue("server.log_level", c.log_level, "debug, info, warn or error");
  }
  if (c.io != "auto" && c.io != "io_uring" && c.io != "epoll") {
    return BadValue("server.io", c.io, "auto, io_uring or epoll");
  }
  if (get("server.resp_ids") != "integer" && get("server.resp_ids") != "string") {
    return BadValue("server.resp_ids", get("server.resp_ids"), "integer or string");
  }
  c.resp_string_ids = get("server.resp_ids") == "string";
  SEKKA_RETURN_IF_ERROR(TlsKeys(c));
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
                          "shard_bits", "tick", "epoch", "order", "reverse_time", "descending"}) {
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
  SnowflakeOptions& g = c.generator;
  SEKKA_ASSIGN_OR_RETURN(g.on_clock_backwards,
                         ParseClockBackwardsPolicy(get("generator.on_clock_backwards")));
  std::int64_t ms = 0;
  SEKKA_ASSIGN_OR_RETURN(ms, Number(v, "generator.max_backwards_wait"));
  g.max_backwards_wait = std::chrono::milliseconds(ms);
  SEKKA_ASSIGN_OR_RETURN(g.on_sequence_exhausted,
                         ParseSequenceExhaustedPolicy(get("generator.on_sequence_exhausted")));
  SEKKA_ASSIGN_OR_RETURN(ms, Number(v, "generator.max_drift"));
  g.max_drift = std::chrono::milliseconds(ms);
  SEKKA_ASSIGN_OR_RETURN(g.sequence_start, ParseSequenceStart(get("generator.sequence_start")));
  // Direction is part of the layout: it changes what a slot maps to, so it is in the layout's
  // fingerprint and in every decode.
  bool descending = false;
  SEKKA_ASSIGN_OR_RETURN(descending, Bool(v, "generator.descending"));
  // Either says so: the layout's own key (`--layout sekka,descending=true`) or the option.
  Result<Layout> directed = g.layout.WithDescending(descending || g.layout.descending());
  if (!directed.ok())
    return InvalidArgument("config generator.descending: " + directed.error().message);
  g.layout = *directed;
  if (!get("generator.after_id").empty()) {
    SEKKA_ASSIGN_OR_RETURN(c.after_id, Number(v, "generator.after_id"));
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
    SEKKA_ASSIGN_OR_RETURN(c.worker_id, Number(v, "worker.id"));
  }
  if (c.worker_lock_dir.empty()) {
    return BadValue("worker.lock_dir", "",
                    "a directory that every sekka process of this host shares");
  }
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
  if (Status leaf = LeafRegistryKeys(v, c); !leaf.ok()) return leaf;
  if (c.keep_worker_id && !source->keeps_id) {
    return BadValue("worker.source", c.worker_source,
                    WorkerSourceNames(&WorkerSource::keeps_id) +
                        " when worker.keep_id is set (the others always keep their one id)");
  }
  return Status::Ok();
}

// [worker]: TLS and the user for the coordinator.
Status CoordinatorAccessSection(const Values&, ServerConfig& c) {
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

// [strict]: the tags (after the worker section, on its cluster).
Status StrictSection(const Values& v, ServerConfig& c) {
  SEKKA_ASSIGN_OR_RETURN(c.strict_tags, StrictTagsValue(v.at("strict.tags"), c));
  return Status::Ok();
}

}  // namespace

Result<ServerConfig> BuildConfig(const std::vector<ConfigValues>& sources) {
  SEKKA_RETURN_IF_ERROR(settings::CheckSources(sources));
  const Values v = settings::Merge(sources);
  ServerConfig c;
  for (Status (*section)(const Values&, ServerConfig&) :
       {SetFields, ServerSection, LayoutSection, GeneratorSection, WorkerSection,
        CoordinatorAccessSection, StrictSection}) {
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

}  // namespace sekka::server
