#include "backends/state_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace sekka {
namespace {

constexpr std::string_view kMagic = "sekka-state 1";

}  // namespace

std::string FormatState(const StoredState& state) {
  return fmt::format("{}\nlayout {}\nhwm_ms {}\n", kMagic, state.layout, state.hwm_millis);
}

Result<StoredState> ParseState(std::string_view text) {
  auto bad = [](std::string_view why) {
    return InvalidArgument(fmt::format("state file is corrupt: {}", why));
  };
  StoredState s;
  bool have_layout = false, have_hwm = false;
  std::size_t line_no = 0;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (line_no == 1) {
      if (line != kMagic) return bad("the first line is not \"sekka-state 1\"");
      continue;
    }
    if (line.empty()) continue;
    if (line.rfind("layout ", 0) == 0) {
      s.layout = std::string(line.substr(7));
      have_layout = true;
    } else if (line.rfind("hwm_ms ", 0) == 0) {
      const std::string_view digits = line.substr(7);
      const auto [ptr, ec] =
          std::from_chars(digits.data(), digits.data() + digits.size(), s.hwm_millis);
      if (ec != std::errc() || ptr != digits.data() + digits.size() || s.hwm_millis < 0) {
        return bad("hwm_ms is not a non-negative number");
      }
      have_hwm = true;
    } else {
      return bad(fmt::format("unknown line {}", line_no));
    }
  }
  if (line_no == 0) return bad("it is empty");
  if (!have_layout || !have_hwm) return bad("a layout or hwm_ms line is missing");
  return s;
}

Result<std::optional<std::string>> ReadRegularFile(const std::string& path, std::size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0 && errno == ENOENT) return std::optional<std::string>();
  if (fd < 0 && errno == ELOOP) {
    return InvalidArgument(fmt::format(
        "{} is a symbolic link, which sekka never follows in its lock and data dirs: remove it",
        path));
  }
  if (fd < 0) {
    return Internal(fmt::format("cannot read {}: {}{}", path, std::strerror(errno),
                                errno == EACCES ? " (make it readable for this user: users who "
                                                  "share the dir share its group, mode 0640)"
                                                : ""));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(fmt::format("{} is not a regular file: remove it", path));
  }
  std::string text(max_bytes + 1, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int saved = errno;
      ::close(fd);
      return Internal(fmt::format("cannot read {}: {}", path, std::strerror(saved)));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (got > max_bytes) {
    return InvalidArgument(
        fmt::format("{} is larger than {} bytes, so not sekka's: remove it", path, max_bytes));
  }
  text.resize(got);
  return std::optional<std::string>(std::move(text));
}

Result<std::optional<StoredState>> ReadStateFile(const std::string& path) {
  SEKKA_ASSIGN_OR_RETURN(auto text, ReadRegularFile(path, 4096));
  if (!text.has_value()) return std::optional<StoredState>();
  Result<StoredState> s = ParseState(*text);
  if (!s.ok()) return InvalidArgument(fmt::format("{}: {}", path, s.error().message));
  return std::optional<StoredState>(*s);
}

Result<std::string> WriteTempFile(const std::string& path, std::string_view text) {
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);  // O_EXCL: never through a planted link
  if (fd < 0) return Internal(fmt::format("cannot create {}: {}", tmp, std::strerror(errno)));
  const bool ok = ::fchmod(fd, 0640) == 0 &&
                  ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    return Internal(fmt::format("cannot write {}: {}", tmp, std::strerror(saved)));
  }
  return tmp;
}

void SyncParentDir(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

Status WriteFileDurably(const std::string& path, std::string_view text) {
  SEKKA_ASSIGN_OR_RETURN(auto tmp, WriteTempFile(path, text));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    ::unlink(tmp.c_str());
    return Internal(fmt::format("cannot rename {}: {}", tmp, std::strerror(saved)));
  }
  SyncParentDir(path);
  return Status::Ok();
}

Status WriteStateFile(const std::string& path, const StoredState& state) {
  return WriteFileDurably(path, FormatState(state));
}

namespace {

class FileDataDir final : public DataDir {
 public:
  explicit FileDataDir(std::string dir) : dir_(std::move(dir)) {}

  Result<std::optional<StoredState>> ReadState(std::int64_t dc, std::int64_t worker) override {
    return ReadStateFile(StateName(dc, worker));
  }

  Status WriteState(std::int64_t dc, std::int64_t worker, const StoredState& state) override {
    const std::string path = StateName(dc, worker);
    // The hwm never decreases, whatever the caller computed: read, and keep the larger.
    Result<std::optional<StoredState>> stored = ReadStateFile(path);
    if (stored.ok() && stored->has_value() && (*stored)->layout == state.layout &&
        (*stored)->hwm_millis >= state.hwm_millis) {
      return Status::Ok();
    }
    std::error_code ec;
    std::filesystem::create_directories(dir_ + "/workers", ec);
    return WriteStateFile(path, state);
  }

  std::string StateName(std::int64_t dc, std::int64_t worker) const override {
    return fmt::format("{}/workers/{}-{}.state", dir_, dc, worker);
  }

  std::int64_t ReadPreferred() override {
    const int fd = ::open(PreferredPath().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[32] = {};
    const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
    ::close(fd);
    std::int64_t id = -1;
    if (n <= 0) return -1;
    const auto [ptr, ec] = std::from_chars(buf, buf + n, id);
    return ec == std::errc() && id >= 0 ? id : -1;
  }

  void WritePreferred(std::int64_t worker) override {
    // A hint only: a lost write makes the next start take the lowest free id instead.
    const std::string text = fmt::format("{}\n", worker);
    const int fd = ::open(PreferredPath().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (fd < 0) return;
    const ssize_t n = ::write(fd, text.data(), text.size());
    (void)n;
    ::close(fd);
  }

 private:
  std::string PreferredPath() const { return dir_ + "/workers/coordinator.last"; }
  const std::string dir_;
};

}  // namespace

std::unique_ptr<DataDir> NewFileDataDir(std::string dir) {
  return std::make_unique<FileDataDir>(std::move(dir));
}

}  // namespace sekka
