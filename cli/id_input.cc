#include "cli/id_input.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>

#include "backends/id_query.h"

namespace sekka::cli {
namespace {

Status ScanFile(const std::string& path, IdTextScanner& scanner,
                const std::function<void(Id)>& sink) {
  const bool is_stdin = path == "-";
  const int fd = is_stdin ? 0 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Unavailable(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  std::vector<char> buf(1 << 20);
  scanner.Begin(is_stdin ? "stdin" : path, sink);
  Status status = Status::Ok();
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      status = Unavailable(
          fmt::format("cannot read {}: {}", is_stdin ? "stdin" : path, std::strerror(errno)));
      break;
    }
    scanner.Feed(std::string_view(buf.data(), static_cast<std::size_t>(n)), sink);
  }
  scanner.Finish(sink);  // a file's last token ends with the file
  if (!is_stdin) ::close(fd);
  return status;
}

}  // namespace

std::size_t EstimateIds(const IdInput& input) {
  if (!input.db.empty()) return 0;
  std::uintmax_t bytes = 0;
  for (const std::string& f : input.files) {
    std::error_code ec;
    if (f != "-") bytes += std::filesystem::file_size(f, ec) * (ec ? 0 : 1);
  }
  return static_cast<std::size_t>(bytes / 19);
}

Status CheckIdInput(const IdInput& input) {
  if (input.db.empty() != input.query.empty()) {
    return InvalidArgument("--db and --query go together: --db URI --query \"SELECT id FROM ...\"");
  }
  if (!input.db.empty() && !input.files.empty()) {
    return InvalidArgument("give files or --db, not both");
  }
  return Status::Ok();
}

namespace {

Status ReadEachId(const IdInput& input, IdTextScanner& scanner,
                  const std::function<void(Id)>& sink) {
  if (!input.db.empty()) {
    scanner.Begin("query", sink);
    IdQuerySink rows;
    rows.id = sink;
    rows.text = [&](std::string_view text) {  // one row: a line of its own
      if (text.empty()) scanner.CountBad("NULL or empty");
      scanner.Feed(text, sink);
      scanner.Feed("\n", sink);
    };
    return QueryIds(input.db, input.query, rows);
  }
  const std::vector<std::string> files =
      input.files.empty() ? std::vector<std::string>{"-"} : input.files;
  for (const std::string& f : files) {
    if (Status s = ScanFile(f, scanner, sink); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace

Status ReadIds(const IdInput& input, IdTextScanner& scanner,
               const std::function<void(std::span<const Id>)>& sink) {
  constexpr std::size_t kBlock = std::size_t{1} << 16;
  constexpr std::size_t kAhead = 4;  // blocks read but not yet taken: bounds the memory
  std::mutex mu;
  std::condition_variable changed;
  std::deque<std::vector<Id>> full;
  std::vector<std::vector<Id>> spare;
  bool done = false;
  Status status = Status::Ok();
  std::thread reader([&] {
    std::vector<Id> block;
    block.reserve(kBlock);
    auto hand_over = [&] {
      std::unique_lock lock(mu);
      changed.wait(lock, [&] { return full.size() < kAhead; });
      full.push_back(std::move(block));
      block = std::vector<Id>();
      if (!spare.empty()) {
        block = std::move(spare.back());
        spare.pop_back();
      }
      changed.notify_all();
      lock.unlock();
      block.clear();
      block.reserve(kBlock);
    };
    Status s = ReadEachId(input, scanner, [&](Id id) {
      block.push_back(id);
      if (block.size() == kBlock) hand_over();
    });
    if (!block.empty()) hand_over();
    std::lock_guard lock(mu);
    status = std::move(s);
    done = true;
    changed.notify_all();
  });
  for (;;) {
    std::unique_lock lock(mu);
    changed.wait(lock, [&] { return !full.empty() || done; });
    if (full.empty()) break;
    std::vector<Id> block = std::move(full.front());
    full.pop_front();
    changed.notify_all();
    lock.unlock();
    sink(block);
    lock.lock();
    spare.push_back(std::move(block));
  }
  reader.join();
  return status;
}

}  // namespace sekka::cli
