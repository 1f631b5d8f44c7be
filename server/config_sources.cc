// Reading configuration sources: a TOML file and the environment, checked against the table of
// keys (server/config_keys.h).

#include <fmt/format.h>
#include <toml++/toml.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>

#include "server/config.h"
#include "server/config_keys.h"
#include "server/log.h"

namespace sekka::server {
namespace settings {

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

}  // namespace settings

using settings::AllowedKeys;
using settings::EnvName;
using settings::FindKey;
using settings::Key;
using settings::Keys;
using settings::Type;

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

// A service link whose Service name starts with a section's ("SEKKA_SERVER_HTTP_PORT": a
// Service "sekka-server-http", or a setting guessed wrong) is ignored with a warning, never in
// silence.
void WarnIfSettingLike(std::string_view name) {
  for (const Key& k : Keys()) {
    const std::string_view key = k.name;
    const std::string section = EnvName(key.substr(0, key.find('.')));  // "SEKKA_SERVER"
    if (name.starts_with(section + "_")) {
      Log(LogLevel::kWarn,
          fmt::format("environment variable {} is ignored: it has the shape of a Kubernetes "
                      "service link, not of a setting (settings are SEKKA_<SECTION>_<KEY>, such "
                      "as {})",
                      name, EnvName(key)));
      return;
    }
  }
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

Result<ConfigValues> ReadConfigEnvironment(const std::vector<std::string>& environment) {
  ConfigValues values;
  for (const std::string& entry : environment) {
    const std::size_t eq = entry.find('=');
    const std::string name = entry.substr(0, eq);
    if (name.rfind("SEKKA_", 0) != 0 || eq == std::string::npos) continue;
    if (name == "SEKKA_CLOCK" || name == "SEKKA_BIN") continue;  // not configuration
    if (IsServiceLink(name)) {
      WarnIfSettingLike(name);
      continue;
    }
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

}  // namespace sekka::server
