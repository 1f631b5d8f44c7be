// The memory DataDir, for tests.

#include "sekka/data_dir.h"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <utility>

namespace sekka {
namespace {

class MemoryDataDir final : public DataDir {
 public:
  Result<std::optional<StoredState>> ReadState(std::int64_t dc, std::int64_t worker) override {
    std::lock_guard lock(mu_);
    auto it = states_.find({dc, worker});
    if (it == states_.end()) return std::optional<StoredState>();
    return std::optional<StoredState>(it->second);
  }
  Status WriteState(std::int64_t dc, std::int64_t worker, const StoredState& state) override {
    std::lock_guard lock(mu_);
    StoredState& s = states_[{dc, worker}];
    if (s.layout == state.layout && s.hwm_millis >= state.hwm_millis) return Status::Ok();
    s = state;
    return Status::Ok();
  }
  std::string StateName(std::int64_t dc, std::int64_t worker) const override {
    return fmt::format("memory/{}-{}", dc, worker);
  }
  std::int64_t ReadPreferred() override {
    std::lock_guard lock(mu_);
    return preferred_;
  }
  void WritePreferred(std::int64_t worker_id) override {
    std::lock_guard lock(mu_);
    preferred_ = worker_id;
  }

 private:
  std::mutex mu_;
  std::map<std::pair<std::int64_t, std::int64_t>, StoredState> states_;  // guarded by mu_
  std::int64_t preferred_ = -1;                                          // guarded by mu_
};

}  // namespace

std::unique_ptr<DataDir> NewMemoryDataDir() { return std::make_unique<MemoryDataDir>(); }

}  // namespace sekka
