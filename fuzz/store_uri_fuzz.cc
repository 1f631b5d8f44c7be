// libFuzzer target for the network stores' URIs (backends/store_uri.cc): never a crash; an
// accepted URI has a scheme, a host and a port of 0 (none) or 1..65535, and only allowed
// parameters.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "backends/store_uri.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static constexpr std::array<std::string_view, 2> kAllowed = {"schema", "socket"};
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  sekka::Result<sekka::StoreUri> uri = sekka::ParseStoreUri(in, "fuzz", kAllowed);
  if (!uri.ok()) return 0;
  if (uri->scheme.empty() || uri->host.empty() || uri->port < 0 || uri->port > 65535) {
    std::abort();
  }
  for (const auto& [key, value] : uri->params) {
    if (key != "schema" && key != "socket") std::abort();
  }
  return 0;
}
