// include/sekka/secrets.h
//
// Secrets kept out of sight: addresses shown with their passwords replaced, and files of secrets
// (tokens, passwords, keys) read only when no other user can read them.
//
// Thread-safety: pure functions.

#ifndef SEKKA_SECRETS_H_
#define SEKKA_SECRETS_H_

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>

#include "sekka/status.h"

namespace sekka {

// `text` with every secret a store or coordinator address can hold replaced by "***": the
// password of a URI's user ("postgres://u:***@h/db", one or many hosts), and the value of any
// parameter whose name ends in "password" ("?password=***", "&sslpassword=***", and libpq's
// "host=h password=***"). Every place that shows such an address (errors, logs, --print-config,
// /readyz, /v1/info) shows it through this.
std::string RedactSecrets(std::string_view text);

// A configured address that may hold a secret: a store's or a coordinator's URI, whose user
// part or parameters can carry a password. Its text reaches a client library only through
// secret(); everything shown (JSON pages, logs, errors, --print-config) takes shown(), and
// fmt's "{}" prints shown() too, so that no output can print the password by forgetting.
class SecretUri {
 public:
  SecretUri() = default;
  explicit SecretUri(std::string text) : text_(std::move(text)) {}
  // The text with its password, for the client library that connects with it.
  const std::string& secret() const { return text_; }
  // The text as every output shows it: RedactSecrets's.
  std::string shown() const { return RedactSecrets(text_); }
  bool empty() const { return text_.empty(); }
  bool operator==(const SecretUri&) const = default;

 private:
  std::string text_;
};

// OK when `path` is a regular file that other users cannot read (0600, 0640: a group may).
// Errors: kInvalidArgument naming `key` (the config key that named the file) and the fix.
Status CheckSecretFile(const std::string& path, std::string_view key);

// The one line of a secret file (a token, a password): CheckSecretFile, then 1 to 4096 bytes
// with a trailing newline ignored. Errors: kInvalidArgument naming `key`.
Result<std::string> ReadSecretLine(const std::string& path, std::string_view key);

}  // namespace sekka

template <>
struct fmt::formatter<sekka::SecretUri> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const sekka::SecretUri& uri, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(uri.shown(), ctx);
  }
};

#endif  // SEKKA_SECRETS_H_
