// libFuzzer target for the coordinator address lists (backends/host_ports.cc): never a crash,
// every accepted entry has a host and a port in 1..65535, and each entry's text parses back to
// the same entry.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backends/host_ports.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  sekka::Result<std::vector<sekka::HostPort>> hosts = sekka::ParseHostPorts(in, "fuzz");
  if (!hosts.ok()) return 0;
  for (const sekka::HostPort& h : *hosts) {
    if (h.port < 1 || h.port > 65535 || h.host.empty()) std::abort();
    sekka::Result<std::vector<sekka::HostPort>> again = sekka::ParseHostPorts(h.Text(), "fuzz");
    if (!again.ok() || again->size() != 1 || (*again)[0].host != h.host ||
        (*again)[0].port != h.port) {
      std::abort();
    }
  }
  return 0;
}
