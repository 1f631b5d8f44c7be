// The memory WorkerLease backend: one registry per "coordinator", for tests.

#include "sekka/worker_lease.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>

#include "sekka/clock.h"
#include "sekka/codec.h"

namespace sekka {
namespace {

struct Slot {
  std::uint64_t owner = 0;  // lease serial; 0 = free
  std::string identity;
  std::int64_t expires = 0;  // on the registry clock's MonotonicMillis()
  std::int64_t hwm_millis = 0;
};

class MemoryRegistry;

class MemoryLease final : public WorkerLease {
 public:
  MemoryLease(MemoryRegistry& registry, WorkerLeaseOptions options, std::uint64_t serial)
      : registry_(registry), options_(std::move(options)), serial_(serial) {}
  ~MemoryLease() override;
  Result<LeaseGrant> Acquire() override;
  Status Renew() override;
  Status StoreHwm(std::int64_t hwm_millis) override;
  Status Release() override;
  std::string Describe() const override { return fmt::format("memory lease {}", serial_); }
  std::string_view source() const override { return "memory"; }

 private:
  MemoryRegistry& registry_;
  const WorkerLeaseOptions options_;
  const std::uint64_t serial_;
  std::int64_t held_ = -1;
};

class MemoryRegistry final : public WorkerLeaseRegistry {
 public:
  explicit MemoryRegistry(Clock& clock) : clock_(clock) {}
  std::int64_t Now() { return clock_.MonotonicMillis(); }
  std::unique_ptr<WorkerLease> NewLease(const WorkerLeaseOptions& options) override {
    std::lock_guard lock(mu_);
    return std::make_unique<MemoryLease>(*this, options, ++serials_);
  }

  Clock& clock_;
  std::mutex mu_;
  std::uint64_t serials_ = 0;
  std::map<std::pair<std::int64_t, std::int64_t>, Slot> slots_;  // (dc, worker) -> slot
  std::string layout_;  // the layout bound by the first lease that named one
};

MemoryLease::~MemoryLease() = default;  // a dropped lease is left to expire, like a dead process

Result<LeaseGrant> MemoryLease::Acquire() {
  if (options_.identity.empty()) return InvalidArgument("the lease identity must not be empty");
  std::lock_guard lock(registry_.mu_);
  if (!options_.layout.empty()) {
    if (registry_.layout_.empty()) registry_.layout_ = options_.layout;
    if (Status s = CheckClusterLayout("memory", registry_.layout_, options_.layout); !s.ok()) {
      return std::move(s).error();
    }
  }
  const auto now = registry_.Now();
  auto take = [&](std::int64_t id) {
    Slot& s = registry_.slots_[{options_.datacenter_id, id}];
    s.owner = serial_;
    s.identity = options_.identity;
    s.expires = now + options_.ttl.count();
    held_ = id;
    return LeaseGrant{options_.datacenter_id, id, s.hwm_millis};
  };
  if (held_ >= 0) {
    const Slot& s = registry_.slots_[{options_.datacenter_id, held_}];
    if (s.owner == serial_ && s.expires > now)
      return LeaseGrant{options_.datacenter_id, held_, s.hwm_millis};
    held_ = -1;
  }
  std::map<std::int64_t, bool> holders;  // held now; true: by this identity or lease
  for (const auto& [key, s] : registry_.slots_) {
    if (key.first != options_.datacenter_id || s.owner == 0 || s.expires <= now) continue;
    holders[key.second] = s.owner == serial_ || s.identity == options_.identity;
  }
  const std::vector<std::int64_t> order =
      WorkerIdCandidates(holders, options_.preferred, options_.worker_count);
  if (!order.empty()) return take(order.front());
  return Exhausted(fmt::format("no free worker id: all {} worker ids of datacenter {} are held",
                               options_.worker_count, options_.datacenter_id));
}

Status MemoryLease::Renew() {
  std::lock_guard lock(registry_.mu_);
  if (held_ < 0) return LeaseLost("no worker id is held");
  Slot& s = registry_.slots_[{options_.datacenter_id, held_}];
  const auto now = registry_.Now();
  if (s.owner != serial_ || s.expires <= now) {
    held_ = -1;
    return LeaseLost("the lease expired or was taken over");
  }
  s.expires = now + options_.ttl.count();
  return Status::Ok();
}

Status MemoryLease::StoreHwm(std::int64_t hwm_millis) {
  std::lock_guard lock(registry_.mu_);
  if (held_ < 0) return LeaseLost("no worker id is held");
  Slot& s = registry_.slots_[{options_.datacenter_id, held_}];
  if (s.owner != serial_ || s.expires <= registry_.Now()) {
    held_ = -1;
    return LeaseLost("the lease expired or was taken over");
  }
  s.hwm_millis = std::max(s.hwm_millis, hwm_millis);
  return Status::Ok();
}

Status MemoryLease::Release() {
  std::lock_guard lock(registry_.mu_);
  if (held_ < 0) return Status::Ok();
  Slot& s = registry_.slots_[{options_.datacenter_id, held_}];
  if (s.owner == serial_) {
    s.owner = 0;
    s.identity.clear();
  }
  held_ = -1;
  return Status::Ok();
}

}  // namespace

Status CheckClusterLayout(std::string_view cluster, std::string_view bound, std::string_view mine) {
  if (bound == mine) return Status::Ok();
  return InvalidArgument(fmt::format(
      "cluster {} issues ids of layout \"{}\", this process's layout is \"{}\": ids of the two "
      "could be equal, so one cluster serves one layout (direction included); give this "
      "process another worker.cluster, or use the cluster's layout",
      cluster, bound, mine));
}

std::vector<std::int64_t> WorkerIdCandidates(const std::map<std::int64_t, bool>& holders,
                                             std::int64_t preferred, std::int64_t worker_count,
                                             int max_free) {
  std::vector<std::int64_t> order;
  auto add = [&](std::int64_t id) {
    if (id >= 0 && id < worker_count && std::find(order.begin(), order.end(), id) == order.end()) {
      order.push_back(id);
    }
  };
  auto it = holders.find(preferred);
  if (it == holders.end() || it->second) add(preferred);
  for (const auto& [id, mine] : holders) {
    if (mine) add(id);
  }
  for (std::int64_t id = 0, free = 0; id < worker_count && free < max_free; ++id) {
    if (holders.find(id) == holders.end()) {
      add(id);
      ++free;
    }
  }
  return order;
}

Status CheckStartupWait(std::int64_t now_ms, std::int64_t hwm_ms, std::int64_t max_wait_ms,
                        std::string_view where) {
  const std::int64_t gap = hwm_ms - now_ms + 1;
  if (gap <= max_wait_ms) return Status::Ok();
  return Unavailable(fmt::format(
      "the clock ({}) is {} ms behind {} ({}), more than generator.max_startup_wait ({} ms): "
      "refusing, as ids could repeat; fix the clock or raise max_startup_wait",
      FormatUtcMillis(now_ms), gap, where, FormatUtcMillis(hwm_ms), max_wait_ms));
}

Status ValidateClusterName(std::string_view cluster) {
  bool ok = !cluster.empty() && cluster.size() <= 64;
  for (char c : cluster) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == '-');
  }
  if (ok) return Status::Ok();
  return InvalidArgument(fmt::format(
      "cluster name \"{}\" is not valid: allowed 1 to 64 characters of A-Z a-z 0-9 . _ -",
      cluster.substr(0, 80)));
}

std::unique_ptr<WorkerLeaseRegistry> NewMemoryWorkerLeaseRegistry(Clock* clock) {
  return std::make_unique<MemoryRegistry>(clock != nullptr ? *clock : SystemClock());
}

}  // namespace sekka
