// include/sekka/secrets.h
//
// Secrets kept out of sight: addresses shown with their passwords replaced, and files of secrets
// (tokens, passwords, keys) read only when no other user can read them.
//
// Thread-safety: pure functions.

#ifndef SEKKA_SECRETS_H_
#define SEKKA_SECRETS_H_

#include <string>
#include <string_view>

#include "sekka/status.h"

namespace sekka {

// `text` with every secret a store or coordinator address can hold replaced by "***": the
// password of a URI's user ("postgres://u:***@h/db", one or many hosts), and the value of any
// parameter whose name ends in "password" ("?password=***", "&sslpassword=***", and libpq's
// "host=h password=***"). Every place that shows such an address (errors, logs, --print-config,
// /readyz, /v1/info) shows it through this.
std::string RedactSecrets(std::string_view text);

// OK when `path` is a regular file that other users cannot read (0600, 0640: a group may).
// Errors: kInvalidArgument naming `key` (the config key that named the file) and the fix.
Status CheckSecretFile(const std::string& path, std::string_view key);

// The one line of a secret file (a token, a password): CheckSecretFile, then 1 to 4096 bytes
// with a trailing newline ignored. Errors: kInvalidArgument naming `key`.
Result<std::string> ReadSecretLine(const std::string& path, std::string_view key);

}  // namespace sekka

#endif  // SEKKA_SECRETS_H_
