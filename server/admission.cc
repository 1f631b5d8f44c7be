#include "server/admission.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace sekka::server {
namespace {

std::string V4Host(const unsigned char (&b)[4]) {
  if (b[0] == 127) return "loopback";
  char text[INET_ADDRSTRLEN];
  return inet_ntop(AF_INET, b, text, sizeof text) != nullptr ? text : "";
}

}  // namespace

std::string AuthHost(std::string_view address) {
  // A link-local address's text ends in its zone ("fe80::1%eth0"), which inet_pton refuses:
  // the host is the address without it (its /64 below, as every other IPv6 address).
  const std::string a(address.substr(0, address.find('%')));
  unsigned char v4[4];
  if (inet_pton(AF_INET, a.c_str(), v4) == 1) return V4Host(v4);
  unsigned char v6[16];
  if (inet_pton(AF_INET6, a.c_str(), v6) != 1) return a;
  constexpr unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(v6, kMapped, sizeof kMapped) == 0) {
    std::memcpy(v4, v6 + 12, 4);
    return V4Host(v4);
  }
  constexpr unsigned char kLoopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  if (std::memcmp(v6, kLoopback, sizeof kLoopback) == 0) return "loopback";
  std::fill(v6 + 8, v6 + 16, 0);  // its /64
  char text[INET6_ADDRSTRLEN];
  return inet_ntop(AF_INET6, v6, text, sizeof text) != nullptr ? text : a;
}

std::optional<std::int64_t> AuthTurns::Turn(const std::string& host, bool failed) {
  std::lock_guard lock(mu_);
  const std::int64_t now = clock_.MonotonicMillis();
  if (next_.size() > 4096) {
    std::erase_if(next_, [now](const auto& e) { return e.second < now; });
  }
  std::int64_t& next = next_[host];
  const std::int64_t turn = std::max(next, now);
  if (turn - now > kMaxAuthWaitMs) return std::nullopt;
  if (failed) next = turn + kAuthFailureSpacingMs;
  return turn - now;
}

bool DrainWatch::Stalled(std::uint64_t acked, std::int64_t queued, std::int64_t write_since_ms,
                         std::int64_t now_ms) {
  if (queued < 0) return false;
  const std::int64_t then = mark_ms_.load();
  if (then != 0 && then >= write_since_ms && now_ms - then < kStallAgeMs) return false;
  const std::uint64_t before = acked_mark_.exchange(acked);
  mark_ms_.store(now_ms);
  if (then == 0 || then < write_since_ms) return false;  // a mark for this write
  const double rate = static_cast<double>(acked - std::min(acked, before)) /
                      (static_cast<double>(now_ms - then) / 1e3);
  return queued > 0 && rate < kMinDrainRate;
}

std::int64_t SlowSenderWeight(std::int64_t partial_since_ms, std::int64_t now_ms) {
  const std::int64_t limit = now_ms - kSlowSenderAgeMs;
  return partial_since_ms != 0 && partial_since_ms <= limit ? limit - partial_since_ms + 1 : 0;
}

bool RequestOverdue(std::int64_t partial_since_ms, std::int64_t now_ms, std::int64_t timeout_ms) {
  return partial_since_ms != 0 && now_ms - partial_since_ms >= timeout_ms;
}

}  // namespace sekka::server
