#include "backends/local_worker_lease.h"

#include <fmt/format.h>

#include "backends/state_file.h"
#include "backends/worker_id.h"

namespace sekka {
namespace {

class LocalLease final : public WorkerLease {
 public:
  LocalLease(LocalLeaseOptions local, WorkerLeaseOptions options)
      : local_(std::move(local)),
        options_(std::move(options)),
        fingerprint_(options_.layout.empty() ? LayoutFingerprint(local_.layout) : options_.layout) {
  }

  Result<LeaseGrant> Acquire() override {
    if (options_.identity.empty()) return InvalidArgument("the lease identity must not be empty");
    if (claim_ == nullptr) {
      WorkerIdRequest request;
      request.source = local_.source;
      request.lock_dir = local_.lock_dir;
      request.identity = options_.identity;
      request.worker_id = local_.worker_id;
      request.datacenter_id = options_.datacenter_id;
      request.hostname = local_.hostname;
      request.preferred = options_.preferred;
      request.worker_count = options_.worker_count;
      // A restart need not wait for its own id's hwm (WorkerLeaseOptions::keep_id): a first
      // search passes over ids whose hwm lies ahead of the clock; only if every free id does is
      // one of them taken.
      const bool choose = !options_.keep_id && local_.source == "local";
      const std::int64_t now = options_.clock_or_system().NowMillis();
      for (const bool past_only : {true, false}) {
        if (past_only && !choose) continue;
        request.accept = [this, past_only, now](std::int64_t worker, bool own) -> Result<bool> {
          Result<bool> keep = Accept(worker, own);
          if (keep.ok() && *keep && past_only && hwm_known_ >= now) return false;
          return keep;
        };
        Result<std::unique_ptr<WorkerIdClaim>> claim = ClaimWorkerId(request, local_.layout);
        if (claim.ok()) {
          claim_ = std::move(claim).value();
          break;
        }
        if (!past_only || claim.error().code != ErrorCode::kExhausted) {
          return std::move(claim).error();
        }
      }
    }
    return LeaseGrant{claim_->datacenter_id(), claim_->worker_id(), hwm_known_};
  }

  // The lock cannot be lost while the process lives, unless its file is removed or replaced.
  Status Renew() override { return CheckHeld(); }

  Status StoreHwm(std::int64_t hwm_millis) override {
    if (Status held = CheckHeld(); !held.ok()) return held;
    // The lock dir's id space is bound by the first hwm stored, before any id is issued (a
    // start that fails before it binds nothing), and checked at every store: a binding removed
    // while this process runs is made again, or, if another process bound another id space
    // meanwhile, this one stops issuing.
    if (Status bound = BindLockDir(local_.lock_dir, fingerprint_, kHostWorkers); !bound.ok()) {
      return bound;
    }
    if (hwm_millis <= hwm_known_ && stored_layout_ == fingerprint_) return Status::Ok();
    const std::int64_t hwm = std::max(hwm_millis, hwm_known_);
    Status written = WriteStateFile(StatePath(claim_->worker_id()), {fingerprint_, hwm});
    if (!written.ok()) {
      return Unavailable("cannot store the high-water mark: " + written.error().message);
    }
    hwm_known_ = hwm;
    stored_layout_ = fingerprint_;
    return Status::Ok();
  }

  Status Release() override {
    claim_.reset();  // closes the lock file: the id is free at once
    return Status::Ok();
  }

  // OK while the claim's lock file is still at its path. A claim whose file was removed is
  // dropped, so that the next Acquire locks anew (a new file, or another id).
  Status CheckHeld() {
    if (claim_ == nullptr) return LeaseLost("no worker id is held");
    Status held = claim_->CheckHeld();
    if (!held.ok()) claim_.reset();
    return held;
  }

  std::string Describe() const override {
    if (claim_ == nullptr) return fmt::format("no lock in {}", local_.lock_dir);
    return fmt::format("lock file {}/{}.lock", local_.lock_dir, claim_->Stem());
  }
  std::string_view source() const override { return local_.source; }

 private:
  std::string StatePath(std::int64_t worker) const {
    return fmt::format("{}/{}-{}.state", local_.lock_dir, options_.datacenter_id, worker);
  }

  // Reads the worker id's state with its lock held. A state of another layout means the id's
  // earlier ids belong to another id space: a free id that the search came upon is passed over;
  // one this process was told to take (or held before) is refused unless forced, and then its
  // hwm, a time, still bounds the start.
  Result<bool> Accept(std::int64_t worker, bool own) {
    const std::string path = StatePath(worker);
    SEKKA_ASSIGN_OR_RETURN(auto stored, ReadStateFile(path));
    hwm_known_ = stored.has_value() ? (*stored).hwm_millis : 0;
    stored_layout_ = stored.has_value() ? (*stored).layout : fingerprint_;
    if (stored_layout_ == fingerprint_) return true;
    // --force covers only an id this process was told to take: a free id of another layout is
    // passed over, forced or not (taking it would rewrite that id space's history).
    if (!own) return false;
    if (local_.force) return true;
    return InvalidArgument(fmt::format(
        "the state in {} was made with layout \"{}\", this configuration has \"{}\": refusing "
        "to start, since ids of the two could collide (choose another worker id, or set "
        "generator.force = true or --force to start anyway)",
        path, stored_layout_, fingerprint_));
  }

  const LocalLeaseOptions local_;
  const WorkerLeaseOptions options_;
  const std::string fingerprint_;
  std::unique_ptr<WorkerIdClaim> claim_;
  std::int64_t hwm_known_ = 0;  // the state file's hwm, as this lease last read or wrote it
  std::string stored_layout_;   // the state file's layout, likewise
};

class HostBoundLease final : public WorkerLease {
 public:
  HostBoundLease(std::unique_ptr<WorkerLease> inner, std::string lock_dir, std::string layout,
                 std::string workers)
      : inner_(std::move(inner)),
        lock_dir_(std::move(lock_dir)),
        layout_(std::move(layout)),
        workers_(std::move(workers)) {}

  Result<LeaseGrant> Acquire() override { return inner_->Acquire(); }
  Status Renew() override { return inner_->Renew(); }
  // Bound, or checked, at every store, as the local lease does.
  Status StoreHwm(std::int64_t hwm_millis) override {
    if (Status bound = BindLockDir(lock_dir_, layout_, workers_); !bound.ok()) return bound;
    return inner_->StoreHwm(hwm_millis);
  }
  Status Release() override { return inner_->Release(); }
  std::string Describe() const override { return inner_->Describe(); }
  std::string_view source() const override { return inner_->source(); }

 private:
  std::unique_ptr<WorkerLease> inner_;
  const std::string lock_dir_;
  const std::string layout_;
  const std::string workers_;
};

}  // namespace

std::unique_ptr<WorkerLease> NewHostBoundLease(std::unique_ptr<WorkerLease> inner,
                                               std::string lock_dir, std::string layout,
                                               std::string workers) {
  return std::make_unique<HostBoundLease>(std::move(inner), std::move(lock_dir), std::move(layout),
                                          std::move(workers));
}

std::unique_ptr<WorkerLease> NewLocalWorkerLease(const LocalLeaseOptions& local,
                                                 const WorkerLeaseOptions& options) {
  return std::make_unique<LocalLease>(local, options);
}

}  // namespace sekka
