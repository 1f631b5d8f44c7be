#include "sekka/secrets.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "sekka/codec.h"

namespace sekka {
namespace {

// True when `key`, percent-decoded as libpq decodes a URI's parameter names
// ("pass%77ord" is "password"), ends in "password", in any case.
bool EndsWithPassword(std::string_view key) {
  std::string decoded;
  for (std::size_t i = 0; i < key.size(); ++i) {
    const int hi = key[i] == '%' && i + 2 < key.size() ? HexValue(key[i + 1]) : -1;
    const int lo = hi >= 0 ? HexValue(key[i + 2]) : -1;
    if (lo >= 0) {
      decoded += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      decoded += key[i];
    }
  }
  constexpr std::string_view kWord = "password";
  if (decoded.size() < kWord.size()) return false;
  const std::string_view tail = std::string_view(decoded).substr(decoded.size() - kWord.size());
  for (std::size_t i = 0; i < kWord.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(tail[i])) != kWord[i]) return false;
  }
  return true;
}

// Replaces the password in each "scheme://user:password@host" of `text`.
void RedactUserInfo(std::string& text) {
  for (std::size_t scheme = text.find("://"); scheme != std::string::npos;
       scheme = text.find("://", scheme + 3)) {
    const std::size_t start = scheme + 3;
    // The password runs from the user's ':' to the last '@' before the line or the next
    // address ends (libpq takes '/', '?', '#' and spaces in an unencoded password): a later
    // '@' gets it redacted too much, never too little. A user name holds no '@', so an address
    // whose first ':' comes after an '@' (u@h:5432) has no password.
    const std::size_t end =
        std::min({text.find('\n', start), text.find("://", start), text.size()});
    const std::size_t at = text.rfind('@', end == 0 ? 0 : end - 1);
    if (at == std::string::npos || at < start) continue;
    const std::size_t colon = text.find(':', start);
    if (colon == std::string::npos || colon > at || text.find('@', start) < colon) continue;
    // An address shown already (SecretUri::shown, "user:***@host"), whose host runs to a space
    // without another '@': what follows is no password, though it may hold an '@' (MySQL's
    // "Access denied for user 'u'@'host'"). "u:***@rest@host" is a password that begins so.
    if (text.compare(colon + 1, 4, "***@") == 0) {
      const std::size_t host = colon + 5;
      const std::size_t host_end = std::min(text.find_first_of(" \t\n", host), text.size());
      if (text.find('@', host) >= host_end) continue;
    }
    text.replace(colon + 1, at - colon - 1, "***");
  }
}

// Replaces the value of each "...password=value" parameter (URI query or libpq key=value).
void RedactPasswordParameters(std::string& text) {
  for (std::size_t eq = text.find('='); eq != std::string::npos; eq = text.find('=', eq + 1)) {
    std::size_t key_start = eq;
    while (key_start > 0 &&
           std::string_view("?&; \t").find(text[key_start - 1]) == std::string_view::npos) {
      --key_start;
    }
    if (!EndsWithPassword(std::string_view(text).substr(key_start, eq - key_start))) continue;
    const std::size_t value_end = std::min(text.find_first_of("&; \t#", eq + 1), text.size());
    text.replace(eq + 1, value_end - eq - 1, "***");
  }
}

}  // namespace

std::string RedactSecrets(std::string_view text) {
  // Redacting one form can expose another (a password value that held the newline ending a
  // URI's user part), so passes repeat until one changes nothing. Each pass that changes the
  // text turns a span into "***" for good; eight passes are far more than any real text needs,
  // and secrets_fuzz checks that the result is a fixed point.
  std::string out(text);
  for (int pass = 0; pass < 8; ++pass) {
    const std::string before = out;
    RedactUserInfo(out);
    RedactPasswordParameters(out);
    if (out == before) break;
  }
  return out;
}

Status CheckSecretFile(const std::string& path, std::string_view key) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return InvalidArgument(
        fmt::format("{} \"{}\" cannot be read: {}", key, path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgument(fmt::format("{} \"{}\" is not a readable file", key, path));
  }
  if ((st.st_mode & S_IROTH) != 0) {
    return InvalidArgument(fmt::format(
        "{} \"{}\" is readable by every user: allowed modes without read for others, such as "
        "0600 or 0640 (chmod o-r {})",
        key, path, path));
  }
  return Status::Ok();
}

Result<std::string> ReadSecretLine(const std::string& path, std::string_view key) {
  SEKKA_RETURN_IF_ERROR(CheckSecretFile(path, key));
  std::ifstream in(path, std::ios::binary);
  if (!in) {  // a file this user may not read: say so, not that its content is wrong
    return InvalidArgument(
        fmt::format("{} \"{}\" cannot be read: {}", key, path, std::strerror(errno)));
  }
  std::string text(4098, '\0');  // enough to see a line over 4096 bytes, or a second line
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.ends_with('\n')) text.pop_back();
  if (text.ends_with('\r')) text.pop_back();
  if (text.empty() || text.size() > 4096 || text.find_first_of("\n\r") != std::string::npos) {
    return InvalidArgument(fmt::format(
        "{} \"{}\" is not valid: allowed one line of 1 to 4096 bytes (the secret)", key, path));
  }
  return text;
}

}  // namespace sekka
