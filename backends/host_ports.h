// backends/host_ports.h
//
// The coordinator address lists of worker.coordinator: "host:port,host:port,...". A pure
// parser (it resolves nothing), with a fuzz target (fuzz/host_ports_fuzz.cc).

#ifndef SEKKA_BACKENDS_HOST_PORTS_H_
#define SEKKA_BACKENDS_HOST_PORTS_H_

#include <string>
#include <string_view>
#include <vector>

#include "sekka/status.h"

namespace sekka {

struct HostPort {
  std::string host;  // a host name, an IPv4 address, or an IPv6 address (without brackets)
  int port = 0;
  // "host:port", with brackets around an IPv6 address.
  std::string Text() const;
};

// "h:p,h:p,...": each host a DNS name (letters, digits, '-' and '.', at most 253 characters),
// an IPv4 address or a bracketed IPv6 address ("[::1]:2379"); each port 1 to 65535. `what`
// names the setting in errors. Errors: kInvalidArgument naming the bad entry and the allowed
// form.
Result<std::vector<HostPort>> ParseHostPorts(std::string_view list, std::string_view what);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_HOST_PORTS_H_
