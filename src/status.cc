#include "sekka/status.h"

#include <cctype>

namespace sekka {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kClockMovedBackwards:
      return "clock_moved_backwards";
    case ErrorCode::kExhausted:
      return "exhausted";
    case ErrorCode::kLeaseLost:
      return "lease_lost";
    case ErrorCode::kInternal:
      return "internal";
    case ErrorCode::kAlreadyExists:
      return "already_exists";
    case ErrorCode::kUnauthenticated:
      return "unauthenticated";
    case ErrorCode::kCancelled:
      return "cancelled";
  }
  return "internal";
}

namespace {

bool EndsWithPassword(std::string_view key) {
  constexpr std::string_view kWord = "password";
  if (key.size() < kWord.size()) return false;
  const std::string_view tail = key.substr(key.size() - kWord.size());
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
    // The user part ends at the last '@' before the query (a '/' may be in an unencoded
    // password; a path with an '@' in it is redacted too much, never too little).
    const std::size_t end = std::min(text.find_first_of("?# \t", start), text.size());
    const std::size_t at = text.rfind('@', end == 0 ? 0 : end - 1);
    if (at == std::string::npos || at < start) continue;
    const std::size_t colon = text.find(':', start);
    if (colon == std::string::npos || colon > at) continue;
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
  std::string out(text);
  RedactUserInfo(out);
  RedactPasswordParameters(out);
  return out;
}

}  // namespace sekka
