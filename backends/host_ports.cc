#include "backends/host_ports.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>

#include <charconv>

namespace sekka {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A DNS name by RFC 1123: labels of letters, digits and '-', not starting or ending with '-',
// 1 to 63 characters each, 253 in all.
bool IsHostName(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  std::size_t label = 0;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '.') {
      if (label == 0 || name[i - 1] == '-') return false;
      label = 0;
      continue;
    }
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && !(c == '-' && label > 0)) return false;
    if (++label > 63) return false;
  }
  return label > 0 && name.back() != '-';
}

// An entry as an error may show it: a user and password before '@' (etcd://user:pw@host:port,
// whose scheme is gone by now) are not shown.
std::string RedactedItem(std::string_view item) {
  const std::size_t at = item.rfind('@');
  return at == std::string_view::npos ? std::string(item)
                                      : "***@" + std::string(item.substr(at + 1));
}

}  // namespace

std::string HostPort::Text() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

Result<std::vector<HostPort>> ParseHostPorts(std::string_view list, std::string_view what) {
  std::vector<HostPort> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    const std::string_view item = Trim(list.substr(start, comma - start));
    auto bad = [&] {
      return InvalidArgument(fmt::format(
          "{}: \"{}\" is not valid: allowed host:port with a host name, an IPv4 address or a "
          "[bracketed] IPv6 address, several separated by commas, such as "
          "\"127.0.0.1:2379,etcd-1.example:2379\"",
          what, RedactedItem(item).substr(0, 100)));
    };
    const std::size_t colon = item.rfind(':');
    if (item.empty() || colon == std::string_view::npos || colon == 0) return bad();
    std::string_view host = item.substr(0, colon);
    if (host.front() == '[') {
      in6_addr a6{};
      if (host.size() < 3 || host.back() != ']') return bad();
      host = host.substr(1, host.size() - 2);
      if (inet_pton(AF_INET6, std::string(host).c_str(), &a6) != 1) return bad();
    } else if (!IsHostName(host)) {  // dotted IPv4 addresses are names by these rules too
      return bad();
    }
    const std::string_view port_text = item.substr(colon + 1);
    int port = 0;
    const auto [ptr, ec] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (port_text.empty() || ec != std::errc() || ptr != port_text.data() + port_text.size() ||
        port < 1 || port > 65535) {
      return bad();
    }
    out.push_back({std::string(host), port});
    start = comma + 1;
  }
  return out;
}

}  // namespace sekka
