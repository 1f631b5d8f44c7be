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
        fingerprint_(LayoutFingerprint(local_.layout)),
        data_dir_(NewFileDataDir(local_.data_dir)) {}

  Result<LeaseGrant> Acquire() override {
    if (options_.identity.empty()) return InvalidArgument("the lease identity must not be empty");
    if (claim_ == nullptr) {
      WorkerIdRequest request;
      request.source = local_.source;
      request.data_dir = local_.data_dir;
      request.identity = options_.identity;
      request.worker_id = local_.worker_id;
      request.datacenter_id = options_.datacenter_id;
      request.hostname = local_.hostname;
      request.preferred = options_.preferred;
      request.worker_count = options_.worker_count;
      Result<std::unique_ptr<WorkerIdClaim>> claim = ClaimWorkerId(request, local_.layout);
      if (!claim.ok()) return std::move(claim).error();
      Result<std::optional<StoredState>> stored =
          data_dir_->ReadState((*claim)->datacenter_id(), (*claim)->worker_id());
      if (!stored.ok()) return std::move(stored).error();
      claim_ = std::move(claim).value();
      hwm_known_ = stored->has_value() ? (**stored).hwm_millis : 0;
    }
    return LeaseGrant{claim_->datacenter_id(), claim_->worker_id(), hwm_known_};
  }

  // The lock cannot be lost while the process lives.
  Status Renew() override {
    return claim_ != nullptr ? Status::Ok() : Status(LeaseLost("no worker id is held"));
  }

  Status StoreHwm(std::int64_t hwm_millis) override {
    if (claim_ == nullptr) return LeaseLost("no worker id is held");
    if (hwm_millis <= hwm_known_) return Status::Ok();
    Status written = data_dir_->WriteState(claim_->datacenter_id(), claim_->worker_id(),
                                           {fingerprint_, hwm_millis});
    if (!written.ok()) {
      return Unavailable("cannot store the high-water mark: " + written.error().message);
    }
    hwm_known_ = hwm_millis;
    return Status::Ok();
  }

  Status Release() override {
    claim_.reset();  // closes the lock file: the id is free at once
    return Status::Ok();
  }

  std::string Describe() const override {
    if (claim_ == nullptr) return fmt::format("no lock under {}", local_.data_dir);
    return fmt::format("lock file {}/workers/{}.lock", local_.data_dir, claim_->Stem());
  }
  std::string_view source() const override { return local_.source; }

 private:
  const LocalLeaseOptions local_;
  const WorkerLeaseOptions options_;
  const std::string fingerprint_;
  const std::unique_ptr<DataDir> data_dir_;
  std::unique_ptr<WorkerIdClaim> claim_;
  std::int64_t hwm_known_ = 0;  // the state file's hwm, as this lease last read or wrote it
};

}  // namespace

std::unique_ptr<WorkerLease> NewLocalWorkerLease(const LocalLeaseOptions& local,
                                                 const WorkerLeaseOptions& options) {
  return std::make_unique<LocalLease>(local, options);
}

}  // namespace sekka
