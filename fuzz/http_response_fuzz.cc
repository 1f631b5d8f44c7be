// libFuzzer target for the HTTP response parser the etcd backend uses
// (backends/http_client.cc): never a crash, never a body longer than the input, and the host
// list parser never accepts an entry without a port.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backends/http_client.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  sekka::Result<sekka::HttpResponse> r = sekka::ParseHttpResponse(in);
  if (r.ok()) {
    if (r->body.size() > in.size()) std::abort();
    if (r->status < 100 || r->status > 599) std::abort();
  }
  sekka::Result<std::vector<sekka::HostPort>> hosts = sekka::ParseHostPorts(in, "fuzz");
  if (hosts.ok()) {
    for (const sekka::HostPort& h : *hosts) {
      if (h.port < 1 || h.port > 65535 || h.host.empty()) std::abort();
    }
  }
  return 0;
}
