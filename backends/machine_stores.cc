#include "backends/machine_stores.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "backends/state_file.h"

namespace sekka {
namespace {

constexpr std::uintmax_t kMaxFileBytes = 16 * 1024 * 1024;

class FileMachineStore final : public MachineStore {
 public:
  explicit FileMachineStore(std::string path) : path_(std::move(path)) {}

  Result<MachineSnapshot> Load(std::string_view ns) override {
    if (!loaded_) {
      SEKKA_ASSIGN_OR_RETURN(auto all, ReadMachineFile(path_));
      all_ = std::move(all);
      loaded_ = true;
    }
    return MachineSnapshot{RecordsOf(all_, ns), std::to_string(version_)};
  }

  Result<bool> Save(std::string_view ns, const std::vector<MachineRecord>& records,
                    const std::string& version) override {
    if (!loaded_ || version != std::to_string(version_)) return false;
    std::vector<MachineRecord> next = WithRecordsOf(all_, ns, records);
    const std::string text = FormatMachineRecords(next);
    if (text.size() > kMaxFileBytes) {  // it could not be read back
      return Exhausted(fmt::format("{} would take {} bytes: sekka keeps {} at most", path_,
                                   text.size(), kMaxFileBytes));
    }
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
    SEKKA_RETURN_IF_ERROR(WriteFileDurably(path_, text));
    all_ = std::move(next);
    ++version_;
    return true;
  }

 private:
  const std::string path_;
  bool loaded_ = false;
  std::vector<MachineRecord> all_;  // every namespace's, as the file holds them once loaded_
  std::int64_t version_ = 1;        // raised by every save
};

}  // namespace

Result<std::vector<MachineRecord>> ReadMachineFile(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec == std::errc::no_such_file_or_directory) return std::vector<MachineRecord>();
  if (ec) return Internal(fmt::format("cannot read {}: {}", path, ec.message()));
  if (size > kMaxFileBytes) {
    return InvalidArgument(
        fmt::format("{} is {} bytes: allowed {} at most", path, size, kMaxFileBytes));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) {
    return Internal(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  }
  Result<std::vector<MachineRecord>> records = ParseMachineRecords(text.str());
  if (!records.ok()) return InvalidArgument(fmt::format("{}: {}", path, records.error().message));
  return records;
}

Status AdoptMachineFile(const std::string& path, MachineStore& store) {
  SEKKA_ASSIGN_OR_RETURN(auto file, ReadMachineFile(path));
  if (!std::filesystem::exists(path)) return Status::Ok();
  std::set<std::string> namespaces;
  for (const MachineRecord& r : file) {
    namespaces.insert(r.ns);
    for (const std::string& instance : {r.instance, r.lost_by}) {
      if (instance.empty()) continue;
      if (Status s = store.CheckNames(r.ns, instance); !s.ok()) {
        return InvalidArgument(fmt::format("{}: machine id {} of {}: {}", path, r.machine_id, r.ns,
                                           s.error().message));
      }
    }
  }
  for (const std::string& ns : namespaces) {
    Status merged = ChangeMachines(store, ns, [&](std::vector<MachineRecord>& records) {
      for (const MachineRecord& f : RecordsOf(file, ns)) {
        auto it = std::find_if(records.begin(), records.end(), [&](const MachineRecord& r) {
          return r.machine_id == f.machine_id;
        });
        if (it == records.end()) {
          records.push_back(f);
          continue;
        }
        it->last_ms = std::max(it->last_ms, f.last_ms);
        if (it->instance.empty() && !f.instance.empty()) {  // given back there, held here
          it->instance = f.instance;
          it->stable = f.stable;
          it->guard_ms = f.guard_ms;
        } else if (!f.instance.empty() && f.instance != it->instance) {
          it->lost_by = f.instance;
        }
      }
      return Result<bool>(true);
    });
    if (!merged.ok()) return merged;
  }
  std::error_code ec;
  std::filesystem::rename(path, path + ".adopted", ec);
  if (ec) return Internal(fmt::format("cannot rename {}: {}", path, ec.message()));
  return Status::Ok();
}

namespace {

class AdoptingMachineStore final : public MachineStore {
 public:
  AdoptingMachineStore(std::unique_ptr<MachineStore> inner, std::string path)
      : inner_(std::move(inner)), path_(std::move(path)) {}

  Result<MachineSnapshot> Load(std::string_view ns) override {
    if (!adopted_) {
      if (Status s = AdoptMachineFile(path_, *inner_); !s.ok()) {
        return Unavailable(
            fmt::format("the machine ids of {} are not added yet: {}", path_, s.error().message));
      }
      adopted_ = true;
    }
    return inner_->Load(ns);
  }
  Result<bool> Save(std::string_view ns, const std::vector<MachineRecord>& records,
                    const std::string& version) override {
    return inner_->Save(ns, records, version);
  }
  Status CheckNames(std::string_view ns, std::string_view instance) override {
    return inner_->CheckNames(ns, instance);
  }

 private:
  const std::unique_ptr<MachineStore> inner_;
  const std::string path_;
  bool adopted_ = false;
};

}  // namespace

std::unique_ptr<MachineStore> WithAdoptedFile(std::unique_ptr<MachineStore> store,
                                              std::string path) {
  return std::make_unique<AdoptingMachineStore>(std::move(store), std::move(path));
}

std::unique_ptr<MachineStore> NewFileMachineStore(std::string path) {
  return std::make_unique<FileMachineStore>(std::move(path));
}

}  // namespace sekka
