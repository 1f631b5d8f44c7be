#include "server/admission.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <iterator>

namespace sekka::server {
namespace {

std::string V4Host(const unsigned char (&b)[4]) {
  char text[INET_ADDRSTRLEN];
  return inet_ntop(AF_INET, b, text, sizeof text) != nullptr ? text : "";
}

}  // namespace

std::string ClientHost(std::string_view address) {
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
  std::fill(v6 + 8, v6 + 16, 0);  // its /64
  char text[INET6_ADDRSTRLEN];
  return inet_ntop(AF_INET6, v6, text, sizeof text) != nullptr ? text : a;
}

std::optional<std::int64_t> Turns::Take(const std::string& host) {
  std::lock_guard lock(mu_);
  const std::int64_t now = clock_.MonotonicMillis();
  // A host whose next turn is this far back has its whole burst: as if it had never come.
  const std::int64_t full = now - (burst_ - 1) * spacing_ms_;
  if (next_.size() > 4096) {
    std::erase_if(next_, [full](const auto& e) { return e.second < full; });
  }
  const auto [it, fresh] = next_.try_emplace(host, full);
  const std::int64_t turn = std::max(it->second, full);
  if (turn - now > max_wait_ms_) {
    if (fresh) next_.erase(it);
    return std::nullopt;
  }
  it->second = turn + spacing_ms_;
  return std::max<std::int64_t>(turn - now, 0);
}

void UnauthenticatedConnections::Add(Id id, const std::string& host) {
  if (index_.contains(id)) return;
  std::list<Id>& mine = by_host_[host];
  all_.push_back(id);
  mine.push_back(id);
  index_.emplace(id, Place{std::prev(all_.end()), std::prev(mine.end()), host});
}

bool UnauthenticatedConnections::Remove(Id id) {
  const auto it = index_.find(id);
  if (it == index_.end()) return false;
  all_.erase(it->second.in_all);
  const auto host = by_host_.find(it->second.host);
  host->second.erase(it->second.in_host);
  if (host->second.empty()) by_host_.erase(host);
  index_.erase(it);
  return true;
}

std::size_t UnauthenticatedConnections::Count(const std::string& host) const {
  return ByHost(host).size();
}

const std::list<UnauthenticatedConnections::Id>& UnauthenticatedConnections::ByHost(
    const std::string& host) const {
  static const std::list<Id> kNone;
  const auto it = by_host_.find(host);
  return it == by_host_.end() ? kNone : it->second;
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

std::int64_t RoomWeight(const ConnectionLoad& c, std::int64_t now_ms, bool crowded) {
  if (c.presented_token) return 0;
  // Each base is more than anything below it: the crowded address first, then slow senders.
  constexpr std::int64_t kCrowdedBase = std::int64_t{1} << 52;
  constexpr std::int64_t kSlowBase = std::int64_t{1} << 50;
  const std::int64_t base = crowded ? kCrowdedBase : 0;
  const std::int64_t arriving = c.partial_since_ms == 0 ? 0 : now_ms - c.partial_since_ms;
  if (arriving >= kSlowSenderAgeMs) return base + kSlowBase + arriving;
  const bool at_rest = c.partial_since_ms == 0 && c.write_since_ms == 0 && !c.held && !c.pending;
  const std::int64_t idle = std::max<std::int64_t>(now_ms - c.active_ms, 0);
  const std::int64_t rest = !crowded ? kIdleSpareMs : c.requested ? kCrowdedRestMs : 0;
  if (!at_rest || idle < rest) return 0;
  return base + idle + 1;
}

bool RequestOverdue(std::int64_t partial_since_ms, std::int64_t now_ms, std::int64_t timeout_ms) {
  return partial_since_ms != 0 && now_ms - partial_since_ms >= timeout_ms;
}

}  // namespace sekka::server
