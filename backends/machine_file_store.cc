#include "backends/machine_file_store.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/state_file.h"

namespace sekka {
namespace {

constexpr std::uintmax_t kMaxFileBytes = 16 * 1024 * 1024;

class FileMachineStore final : public MachineStore {
 public:
  explicit FileMachineStore(std::string path) : path_(std::move(path)) {}

  Result<std::vector<MachineRecord>> Load() override {
    std::error_code ec;
    const std::uintmax_t size = std::filesystem::file_size(path_, ec);
    if (ec == std::errc::no_such_file_or_directory) return std::vector<MachineRecord>();
    if (ec) return Internal(fmt::format("cannot read {}: {}", path_, ec.message()));
    if (size > kMaxFileBytes) {
      return InvalidArgument(
          fmt::format("{} is {} bytes: allowed {} at most", path_, size, kMaxFileBytes));
    }
    std::ifstream in(path_, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in.good() && !in.eof()) {
      return Internal(fmt::format("cannot read {}: {}", path_, std::strerror(errno)));
    }
    Result<std::vector<MachineRecord>> records = ParseMachineRecords(text.str());
    if (!records.ok())
      return InvalidArgument(fmt::format("{}: {}", path_, records.error().message));
    return records;
  }

  Status Save(const std::vector<MachineRecord>& records) override {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
    return WriteFileDurably(path_, FormatMachineRecords(records));
  }

 private:
  const std::string path_;
};

}  // namespace

std::unique_ptr<MachineStore> NewFileMachineStore(std::string path) {
  return std::make_unique<FileMachineStore>(std::move(path));
}

}  // namespace sekka
