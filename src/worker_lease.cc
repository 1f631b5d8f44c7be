// The memory Coordinator: one registry per "coordinator", for tests and the simulation; and the
// rules every lease shares.

#include "sekka/worker_lease.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>

#include "sekka/clock.h"
#include "sekka/codec.h"
#include "sekka/coordinator.h"

namespace sekka {
namespace {

struct Slot {
  std::uint64_t owner = 0;  // the holding session's serial; 0 = free
  std::string identity;
  std::int64_t version = 0;  // raised at every claim
  std::int64_t hwm_millis = 0;
};

class MemoryRegistry;

// One session at the registry: a serial, alive until `ttl` after its last keep-alive.
class MemoryCoordinator final : public Coordinator {
 public:
  MemoryCoordinator(MemoryRegistry& registry, WorkerLeaseOptions options)
      : registry_(registry), options_(std::move(options)) {}
  ~MemoryCoordinator() override = default;  // a dropped session is left to expire, like a dead
                                            // process
  Result<std::string> BindLayout(const std::string& layout) override;
  Result<std::map<std::int64_t, Holding>> ListHolders() override;
  std::int64_t session() const override { return static_cast<std::int64_t>(serial_); }
  Result<std::int64_t> PeekHwm(std::int64_t id) override;
  Result<std::optional<std::int64_t>> Claim(std::int64_t id,
                                            const std::optional<Holding>& seen) override;
  Status KeepAlive(std::int64_t id) override;
  Status StoreHwm(std::int64_t id, std::int64_t hwm_millis) override;
  Status Close() override;
  std::string Describe() const override { return fmt::format("memory lease {}", serial_); }
  std::string Where() const override { return "the memory registry"; }
  std::string_view source() const override { return "memory"; }
  Result<SharedDocument> ReadShared(std::string_view name) override;
  Result<bool> WriteShared(std::string_view name, std::string_view data,
                           std::int64_t version) override;

 private:
  // The slot of `id` if this session holds it, live; null otherwise. With mu_ held.
  Slot* HeldSlot(std::int64_t id);
  // Frees every id of session `serial` and forgets it. With mu_ held.
  void EndSession(std::uint64_t serial);

  MemoryRegistry& registry_;
  const WorkerLeaseOptions options_;
  std::uint64_t serial_ = 0;  // 0: no session open
};

class MemoryRegistry final : public WorkerLeaseRegistry {
 public:
  explicit MemoryRegistry(Clock& clock) : clock_(clock) {}
  std::int64_t Now() { return clock_.MonotonicMillis(); }
  // True while session `serial` is open and has not expired; a slot is held while its owner
  // is. With mu_ held.
  bool Alive(std::uint64_t serial, std::int64_t now) const {
    auto it = sessions_.find(serial);
    return it != sessions_.end() && it->second > now;
  }
  std::unique_ptr<Coordinator> NewCoordinator(const WorkerLeaseOptions& options) override {
    return std::make_unique<MemoryCoordinator>(*this, options);
  }
  std::unique_ptr<WorkerLease> NewLease(const WorkerLeaseOptions& options) override {
    return NewCoordinatedLease(NewCoordinator(options), options);
  }

  Clock& clock_;
  std::mutex mu_;
  std::uint64_t serials_ = 0;
  std::map<std::pair<std::int64_t, std::int64_t>, Slot> slots_;  // (dc, worker) -> slot
  std::map<std::uint64_t, std::int64_t> sessions_;  // serial -> expiry (MonotonicMillis)
  std::string layout_;  // the layout bound by the first lease that named one
  std::map<std::string, SharedDocument, std::less<>> documents_;
};

Result<std::string> MemoryCoordinator::BindLayout(const std::string& layout) {
  std::lock_guard lock(registry_.mu_);
  if (registry_.layout_.empty()) registry_.layout_ = layout;
  return registry_.layout_;
}

Result<std::map<std::int64_t, Holding>> MemoryCoordinator::ListHolders() {
  std::lock_guard lock(registry_.mu_);
  const std::int64_t now = registry_.Now();
  if (!registry_.Alive(serial_, now)) {
    serial_ = ++registry_.serials_;
    registry_.sessions_[serial_] = now + options_.ttl.count();
  }
  std::map<std::int64_t, Holding> holders;
  for (const auto& [key, s] : registry_.slots_) {
    if (key.first != options_.datacenter_id || !registry_.Alive(s.owner, now)) continue;
    holders[key.second] = Holding{s.identity, static_cast<std::int64_t>(s.owner), s.version};
  }
  return holders;
}

Result<std::int64_t> MemoryCoordinator::PeekHwm(std::int64_t id) {
  std::lock_guard lock(registry_.mu_);
  auto it = registry_.slots_.find({options_.datacenter_id, id});
  return it == registry_.slots_.end() ? 0 : it->second.hwm_millis;
}

Result<std::optional<std::int64_t>> MemoryCoordinator::Claim(std::int64_t id,
                                                             const std::optional<Holding>& seen) {
  std::lock_guard lock(registry_.mu_);
  const std::int64_t now = registry_.Now();
  if (!registry_.Alive(serial_, now)) {
    serial_ = 0;  // the next ListHolders opens a new one
    return Unavailable("the memory session expired before its claim");
  }
  Slot& s = registry_.slots_[{options_.datacenter_id, id}];
  const bool live = registry_.Alive(s.owner, now);
  if (seen.has_value() ? !live || s.version != seen->version : live) {
    return std::optional<std::int64_t>();
  }
  if (live && s.owner != serial_) EndSession(s.owner);  // this identity's earlier run
  s.owner = serial_;
  s.identity = options_.identity;
  s.version++;
  return std::optional<std::int64_t>(s.hwm_millis);
}

Slot* MemoryCoordinator::HeldSlot(std::int64_t id) {
  auto it = registry_.slots_.find({options_.datacenter_id, id});
  if (it == registry_.slots_.end() || serial_ == 0) return nullptr;
  Slot& s = it->second;
  return s.owner == serial_ && registry_.Alive(serial_, registry_.Now()) ? &s : nullptr;
}

Status MemoryCoordinator::KeepAlive(std::int64_t id) {
  std::lock_guard lock(registry_.mu_);
  Slot* s = HeldSlot(id);
  if (s == nullptr) return LeaseLost("the lease expired or was taken over");
  registry_.sessions_[serial_] = registry_.Now() + options_.ttl.count();
  return Status::Ok();
}

Status MemoryCoordinator::StoreHwm(std::int64_t id, std::int64_t hwm_millis) {
  std::lock_guard lock(registry_.mu_);
  Slot* s = HeldSlot(id);
  if (s == nullptr) return LeaseLost("the lease expired or was taken over");
  s->hwm_millis = std::max(s->hwm_millis, hwm_millis);
  return Status::Ok();
}

void MemoryCoordinator::EndSession(std::uint64_t serial) {
  for (auto& [key, s] : registry_.slots_) {
    if (s.owner == serial) {
      s.owner = 0;
      s.identity.clear();
    }
  }
  registry_.sessions_.erase(serial);
}

Status MemoryCoordinator::Close() {
  std::lock_guard lock(registry_.mu_);
  if (serial_ != 0) EndSession(serial_);
  serial_ = 0;
  return Status::Ok();
}

Result<SharedDocument> MemoryCoordinator::ReadShared(std::string_view name) {
  std::lock_guard lock(registry_.mu_);
  auto it = registry_.documents_.find(name);
  return it == registry_.documents_.end() ? SharedDocument{} : it->second;
}

Result<bool> MemoryCoordinator::WriteShared(std::string_view name, std::string_view data,
                                            std::int64_t version) {
  SEKKA_RETURN_IF_ERROR(CheckSharedSize(name, data.size()));
  std::lock_guard lock(registry_.mu_);
  SharedDocument& d = registry_.documents_[std::string(name)];
  if (d.version != version) return false;
  d = {std::string(data), version + 1};
  return true;
}

}  // namespace

Status CheckSharedSize(std::string_view name, std::size_t bytes) {
  if (bytes <= Coordinator::kMaxSharedBytes) return Status::Ok();
  return Exhausted(fmt::format(
      "the cluster's document {} would take {} bytes: a coordinator keeps {} at most in one", name,
      bytes, Coordinator::kMaxSharedBytes));
}

Status CheckClusterLayout(std::string_view where, std::string_view bound, std::string_view mine) {
  if (bound == mine) return Status::Ok();
  return InvalidArgument(fmt::format(
      "{} issues ids of layout \"{}\", this process's layout is \"{}\": ids of the two "
      "could be equal, so one cluster serves one layout (direction included); give this "
      "process another worker.cluster, or use the cluster's layout",
      where, bound, mine));
}

std::vector<std::int64_t> WorkerIdCandidates(const std::map<std::int64_t, bool>& holders,
                                             std::int64_t preferred, std::int64_t worker_count,
                                             int max_free, std::int64_t spread) {
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
  // Free ids from `spread` on, wrapping; a free preferred id met counts as one of them.
  const std::int64_t from =
      worker_count > 0 ? ((spread % worker_count) + worker_count) % worker_count : 0;
  for (std::int64_t k = 0, free = 0; k < worker_count && free < max_free; ++k) {
    const std::int64_t id = (from + k) % worker_count;
    if (!holders.contains(id)) {
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
