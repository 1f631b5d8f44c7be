// The one WorkerLease of every coordinator (include/sekka/coordinator.h).

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <set>
#include <string>

#include "sekka/coordinator.h"

namespace sekka {
namespace {

// How many free ids a restart looks at for one whose hwm is past (one coordinator call each).
constexpr std::size_t kMaxPeeks = 8;
// How many times Acquire lists again when every candidate was taken meanwhile.
constexpr int kMaxPasses = 8;

class CoordinatedLease final : public WorkerLease {
 public:
  CoordinatedLease(std::unique_ptr<Coordinator> coordinator, WorkerLeaseOptions options)
      : c_(std::move(coordinator)),
        options_(std::move(options)),
        clock_(options_.clock_or_system()) {}

  Result<LeaseGrant> Acquire() override;
  Status Renew() override;
  Status StoreHwm(std::int64_t hwm_millis) override;
  Status Release() override;
  std::string Describe() const override { return c_->Describe(); }
  std::string_view source() const override { return c_->source(); }

 private:
  Status BindLayout();
  // The ids to try: one this session holds already, alone; else the core's order
  // (WorkerIdCandidates), where, unless keep_id, a first candidate whose hwm lies ahead yields
  // to the first free id whose hwm is past of up to kMaxPeeks peeks (half at the lowest free
  // ids, half at this process's own place, Spread).
  // This process's own place among the ids (its identity and session), where it looks for free
  // ids once the lowest were taken by others (a fleet starting or restarting at once).
  std::int64_t Spread() const;
  // `spread`: where free ids are looked for (WorkerIdCandidates).
  std::vector<std::int64_t> Order(const std::map<std::int64_t, Holding>& listed,
                                  std::int64_t spread);
  // A lost claim: whatever is left of the session ends, so that the next Acquire opens a new one.
  Status Lost(Status why);

  std::unique_ptr<Coordinator> c_;
  const WorkerLeaseOptions options_;
  Clock& clock_;
  bool layout_bound_ = false;
  std::int64_t held_ = -1;               // the worker id held; -1: none
  std::int64_t hwm_known_ = 0;           // its hwm: as claimed, then as stored
  std::chrono::milliseconds settle_{0};  // as claimed
};

Status CoordinatedLease::BindLayout() {
  if (layout_bound_ || options_.layout.empty()) return Status::Ok();
  SEKKA_ASSIGN_OR_RETURN(auto bound, c_->BindLayout(options_.layout));
  if (Status s = CheckClusterLayout(c_->Where(), bound, options_.layout); !s.ok()) return s;
  layout_bound_ = true;
  return Status::Ok();
}

std::vector<std::int64_t> CoordinatedLease::Order(const std::map<std::int64_t, Holding>& listed,
                                                  std::int64_t spread) {
  std::map<std::int64_t, bool> holders;  // true: this identity's, or this session's
  for (const auto& [id, h] : listed) {
    // A claim of this coordinator's that landed though its call failed: it is held already, so
    // it is taken first, never left held beside another.
    if (c_->Mine(id, h)) return {id};
    holders[id] = h.identity == options_.identity;
  }
  std::vector<std::int64_t> order =
      WorkerIdCandidates(holders, options_.preferred, options_.worker_count, 16, spread);
  if (options_.keep_id || order.size() < 2) return order;
  // The fast restart: the first candidate, unless its hwm lies ahead, else the first free one
  // whose hwm is past. A peek that fails counts as ahead: it is a hint, never a reason to stop.
  const std::int64_t now = clock_.NowMillis();
  auto past = [&](std::int64_t id) {
    Result<std::int64_t> hwm = c_->PeekHwm(id);
    return hwm.ok() && *hwm < now;
  };
  if (past(order.front())) return order;
  // Up to half of kMaxPeeks of the lowest free ids, then of free ids from this process's own
  // place: the lowest may all be a fleet's that restarts at once, those likely never used.
  std::set<std::int64_t> peeked = {order.front()};
  auto first_past = [&](const std::vector<std::int64_t>& ids) -> std::int64_t {
    for (std::size_t i = 0, peeks = 0; i < ids.size() && peeks < kMaxPeeks / 2; ++i) {
      // An earlier run's, live: its hwm is ahead too.
      if (holders.contains(ids[i]) || !peeked.insert(ids[i]).second) continue;
      ++peeks;
      if (past(ids[i])) return ids[i];
    }
    return -1;
  };
  std::int64_t id = first_past(order);
  if (id < 0) {
    id = first_past(WorkerIdCandidates(holders, -1, options_.worker_count,
                                       static_cast<int>(kMaxPeeks), Spread()));
  }
  if (id >= 0) {
    order.erase(std::remove(order.begin(), order.end(), id), order.end());
    order.insert(order.begin(), id);
  }
  return order;
}

std::int64_t CoordinatedLease::Spread() const {
  return static_cast<std::int64_t>(
      std::hash<std::string>{}(fmt::format("{}/{}", options_.identity, c_->session())) >> 1);
}

Result<LeaseGrant> CoordinatedLease::Acquire() {
  if (options_.identity.empty()) return InvalidArgument("the lease identity must not be empty");
  if (held_ >= 0) return LeaseGrant{options_.datacenter_id, held_, hwm_known_, settle_};
  SEKKA_RETURN_IF_ERROR(BindLayout());
  // The lowest free ids first; once a claim was lost (a fleet starting at once, all after the
  // same lowest ids), free ids from a place of this process's own (its identity and session),
  // so that the losers go on at different ids instead of racing for the next lowest in turn.
  std::int64_t spread = 0;
  for (int pass = 0; pass < kMaxPasses; ++pass) {
    SEKKA_ASSIGN_OR_RETURN(auto listed, c_->ListHolders());
    std::vector<std::int64_t> order = Order(listed, spread);
    if (order.empty()) break;
    std::size_t k = 0;
    while (k < order.size()) {
      const std::int64_t id = order[k++];
      auto it = listed.find(id);
      const std::optional<Holding> seen =
          it == listed.end() ? std::nullopt : std::optional<Holding>(it->second);
      SEKKA_ASSIGN_OR_RETURN(auto hwm, c_->Claim(id, seen));
      if (!hwm.has_value() && spread == 0) {  // taken meanwhile: spread out from here on
        spread = std::max<std::int64_t>(Spread(), 1);
        listed.insert_or_assign(id, Holding{"taken meanwhile", -1, -1});
        order = Order(listed, spread);
        k = 0;
        continue;
      }
      if (!hwm.has_value()) continue;  // taken meanwhile: the next candidate
      held_ = id;
      hwm_known_ = *hwm;
      settle_ = c_->settle();
      return LeaseGrant{options_.datacenter_id, id, hwm_known_, settle_};
    }
  }
  (void)c_->Close();  // nothing is held: the session is not kept open for nothing
  return Exhausted(fmt::format(
      "no free worker id: all {} worker ids of datacenter {} in {} at {} are held by live "
      "sessions; raise the layout's worker bits or stop a holder",
      options_.worker_count, options_.datacenter_id, c_->Where(), c_->source()));
}

Status CoordinatedLease::Lost(Status why) {
  held_ = -1;
  (void)c_->Close();
  return why;
}

Status CoordinatedLease::Renew() {
  if (held_ < 0) return LeaseLost("no worker id is held");
  Status s = c_->KeepAlive(held_);
  if (!s.ok() && s.error().code == ErrorCode::kLeaseLost) return Lost(std::move(s));
  return s;
}

Status CoordinatedLease::StoreHwm(std::int64_t hwm_millis) {
  if (held_ < 0) return LeaseLost("no worker id is held");
  Status s = c_->StoreHwm(held_, hwm_millis);
  if (s.ok()) hwm_known_ = std::max(hwm_known_, hwm_millis);
  if (!s.ok() && s.error().code == ErrorCode::kLeaseLost) return Lost(std::move(s));
  return s;
}

Status CoordinatedLease::Release() {
  if (Status s = c_->Close(); !s.ok()) return s;
  held_ = -1;
  return Status::Ok();
}

}  // namespace

std::unique_ptr<WorkerLease> NewCoordinatedLease(std::unique_ptr<Coordinator> coordinator,
                                                 const WorkerLeaseOptions& options) {
  return std::make_unique<CoordinatedLease>(std::move(coordinator), options);
}

}  // namespace sekka
