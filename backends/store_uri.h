// backends/store_uri.h
//
// The URIs of the network stores that sekka reaches without a client library's own parser
// (mysql://, and redis:// for the Redis backends): scheme://[USER[:PASSWORD]@]HOST[:PORT]
// [/PATH][?KEY=VALUE&...]. User, password and values are percent-decoded; the user part ends at
// the last '@' before the path or query, so an unencoded '@' in a password still works, and one
// in a parameter's value is the value's ('/', '?', '#' in a password are percent-encoded).
// Control characters are refused, and errors never quote the URI back (one that does not parse
// may hold a password where message redaction would not find it). A pure parser (it resolves
// nothing), with a fuzz target (fuzz/store_uri_fuzz.cc).

#ifndef SEKKA_BACKENDS_STORE_URI_H_
#define SEKKA_BACKENDS_STORE_URI_H_

#include <map>
#include <span>
#include <string>
#include <string_view>

#include "sekka/status.h"

namespace sekka {

struct StoreUri {
  std::string scheme;  // lower case, without "://"
  std::string user;
  std::string password;
  bool has_password = false;
  std::string host;  // a name, an IPv4 address, or an IPv6 address without its brackets
  int port = 0;      // 0: none given
  std::string path;  // after the first '/', decoded ("" when none)
  std::map<std::string, std::string> params;
};

// `what` names the setting in errors ("segment.store"); `allowed_params` are the only keys a
// query may hold. Errors: kInvalidArgument naming what was wrong and what is allowed.
Result<StoreUri> ParseStoreUri(std::string_view uri, std::string_view what,
                               std::span<const std::string_view> allowed_params);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_STORE_URI_H_
