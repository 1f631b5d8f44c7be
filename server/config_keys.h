// server/config_keys.h
//
// The table of configuration keys: one row per setting, with its name, type, default, bounds,
// the ServerConfig field it sets, help, `sekka serve` flag, and whether an empty value turns a
// protection off. A key's environment variable is EnvName's rule (SEKKA_ and the name in upper
// case, '.' as '_'). The sources (config_sources.cc) are read and checked against the table;
// BuildConfig (config.cc) sets every row's field from it, and its section rules do only what
// spans keys or needs a parser of its own. Internal to server/.
//
// Thread-safety: the table is immutable.

#ifndef SEKKA_SERVER_CONFIG_KEYS_H_
#define SEKKA_SERVER_CONFIG_KEYS_H_

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "sekka/status.h"
#include "server/config.h"

namespace sekka::server::settings {

enum class Type { kString, kInt, kBool, kDuration };

// The field a key sets with its value as it is (a text, a number within the bounds, true or
// false, a duration in ms); none for a key whose value a section rule reads.
using Field = std::variant<std::monostate, std::string ServerConfig::*, SecretUri ServerConfig::*,
                           std::int64_t ServerConfig::*, int ServerConfig::*, bool ServerConfig::*>;

inline constexpr std::int64_t kMaxInt64 = std::numeric_limits<std::int64_t>::max();
inline constexpr std::int64_t kMaxInt31 = (std::int64_t{1} << 31) - 1;

struct Key {
  const char* name;  // "server.http_listen"
  Type type;
  const char* default_value;
  // kInt: the values allowed; kDuration: the milliseconds allowed (0, 0 for other types).
  std::int64_t min;
  std::int64_t max;
  Field field;
  const char* help;
  const char* flag = nullptr;  // sekka serve's flag, if it has one
  // A protection (a token, TLS) that an empty value turns off: one may not be given empty over
  // a value an earlier source set (`--auth-token "$(cat missing)"` over the file's token).
  bool protection = false;
};

// Every key, in the order --print-config shows them (docs/contract.md lists the same).
const std::vector<Key>& Keys();
// The key of that name, or null.
const Key* FindKey(std::string_view name);
// Every key's name, comma-separated (for errors).
std::string AllowedKeys();
// A key's environment variable: "server.http_listen" -> "SEKKA_SERVER_HTTP_LISTEN".
std::string EnvName(std::string_view key);

// Every key's value: its default, then each source's in order.
using Values = std::map<std::string, std::string>;
Values Merge(const std::vector<ConfigValues>& sources);
// Every key known, no integer key given empty, and no protection turned off by an empty value
// over one an earlier source set. Errors: kInvalidArgument naming the key.
Status CheckSources(const std::vector<ConfigValues>& sources);

}  // namespace sekka::server::settings

#endif  // SEKKA_SERVER_CONFIG_KEYS_H_
