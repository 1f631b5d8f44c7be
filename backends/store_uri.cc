#include "backends/store_uri.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>

namespace sekka {
namespace {

std::optional<std::string> Decode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size() || !std::isxdigit(static_cast<unsigned char>(text[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      return std::nullopt;
    }
    out += static_cast<char>(std::stoi(std::string(text.substr(i + 1, 2)), nullptr, 16));
    i += 2;
  }
  return out;
}

// The URI is not quoted back: one that does not parse may hold a password where the redaction
// of messages would not look for it.
Error Bad(std::string_view uri, std::string_view what, std::string_view why) {
  const std::size_t scheme = uri.find("://");
  const std::string_view name =
      scheme == std::string_view::npos ? "?" : uri.substr(0, std::min<std::size_t>(scheme, 20));
  return InvalidArgument(fmt::format("{} ({}://...) {}", what, name, why));
}

// "host", "host:port", "[v6]" or "[v6]:port" into the uri.
Status ParseHostPort(std::string_view text, std::string_view uri, std::string_view what,
                     StoreUri& out) {
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) return Bad(uri, what, "has an unclosed '[' in its host");
    out.host = std::string(text.substr(1, close - 1));
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return Bad(uri, what, "has text after its ']'");
    if (!rest.empty()) port = rest.substr(1);
  } else {
    const std::size_t colon = text.find(':');
    out.host = std::string(text.substr(0, colon));
    if (colon != std::string_view::npos) port = text.substr(colon + 1);
  }
  if (out.host.empty()) return Bad(uri, what, "has no host: allowed scheme://USER@HOST:PORT/...");
  for (const char c : out.host) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != ':' &&
        c != '_') {
      return Bad(uri, what,
                 "has a character in its host that is not allowed (letters, digits, "
                 "'.', '-', '_', or an IPv6 address in brackets)");
    }
  }
  if (port.empty()) return Status::Ok();
  if (port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535) {
    return Bad(uri, what, "has a bad port: allowed 1 to 65535");
  }
  out.port = std::stoi(std::string(port));
  return Status::Ok();
}

Status ParseQuery(std::string_view query, std::string_view uri, std::string_view what,
                  std::span<const std::string_view> allowed, StoreUri& out) {
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    const std::string key(pair.substr(0, eq));
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string names;
      for (const std::string_view a : allowed)
        names += (names.empty() ? "" : ", ") + std::string(a);
      return Bad(uri, what,
                 fmt::format("has an unknown parameter \"{}\": allowed {}", key.substr(0, 40),
                             names.empty() ? "none" : names));
    }
    const std::optional<std::string> value =
        Decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1));
    if (!value) return Bad(uri, what, fmt::format("has a bad %-escape in \"{}\"", key));
    if (out.params.contains(key)) return Bad(uri, what, fmt::format("sets \"{}\" twice", key));
    out.params[key] = *value;
  }
  return Status::Ok();
}

}  // namespace

Result<StoreUri> ParseStoreUri(std::string_view uri, std::string_view what,
                               std::span<const std::string_view> allowed_params) {
  StoreUri out;
  const std::size_t sep = uri.find("://");
  if (sep == std::string_view::npos || sep == 0) {
    return Bad(uri, what, "is not a URI: allowed scheme://USER@HOST:PORT/...");
  }
  out.scheme = std::string(uri.substr(0, sep));
  for (char& c : out.scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char c : uri) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return Bad(uri, what, "has a control character: percent-encode it (%0A for a newline)");
    }
  }
  std::string_view rest = uri.substr(sep + 3);
  if (rest.find('#') != std::string_view::npos) {
    return Bad(uri, what, "has a '#': percent-encode it (%23)");
  }
  // The user part ends at the last '@' before the path or the query: an '@' in a password works
  // unencoded, one in a parameter's value (a file name) is the value's; '/', '?' and '#' in a
  // password are percent-encoded.
  const std::size_t at = rest.substr(0, rest.find_first_of("/?")).rfind('@');
  if (at != std::string_view::npos) {
    const std::string_view info = rest.substr(0, at);
    const std::size_t colon = info.find(':');
    const std::optional<std::string> user = Decode(info.substr(0, colon));
    std::optional<std::string> password = std::string();
    if (colon != std::string_view::npos) password = Decode(info.substr(colon + 1));
    if (!user || !password) return Bad(uri, what, "has a bad %-escape in its user or password");
    out.user = *user;
    out.password = *password;
    out.has_password = colon != std::string_view::npos;
    rest = rest.substr(at + 1);
  }
  const std::size_t query = rest.find('?');
  const std::string_view before = rest.substr(0, query);
  const std::size_t slash = before.find('/');
  if (Status s = ParseHostPort(before.substr(0, slash), uri, what, out); !s.ok()) return s.error();
  if (slash != std::string_view::npos) {
    const std::optional<std::string> path = Decode(before.substr(slash + 1));
    if (!path) return Bad(uri, what, "has a bad %-escape in its path");
    out.path = *path;
  }
  if (query != std::string_view::npos) {
    if (Status s = ParseQuery(rest.substr(query + 1), uri, what, allowed_params, out); !s.ok()) {
      return s.error();
    }
  }
  return out;
}

}  // namespace sekka
