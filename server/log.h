// server/log.h
//
// One-line structured logs on stderr: `time=... level=info msg="..." key=value ...`.
//
// Thread-safety: Log() may be called from any thread; each line is one write().

#ifndef SEKKA_SERVER_LOG_H_
#define SEKKA_SERVER_LOG_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace sekka::server {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

// Sets the lowest level written ("debug", "info", "warn", "error"; "off" for none).
void SetLogLevel(std::string_view level);
// Writes one line: `msg` quoted, then `fields` (already "key=value ..." text) as they are.
void Log(LogLevel level, std::string_view msg, std::string_view fields = {});

// Lets a repeating error through at most once per `every_ms`, counting the lines it held back
// (a disk that stays full must not write a line per try).
//
// Thread-safety: one thread at a time.
class LogLimiter {
 public:
  explicit LogLimiter(std::int64_t every_ms = 10'000) : every_ms_(every_ms) {}
  // True when a line may be written at monotonic time `now_ms`; then *suppressed is how many
  // were held back since the last one.
  bool Allow(std::int64_t now_ms, std::uint64_t* suppressed) {
    if (written_ && now_ms - last_ms_ < every_ms_) {
      ++held_;
      return false;
    }
    written_ = true;
    last_ms_ = now_ms;
    *suppressed = held_;
    held_ = 0;
    return true;
  }

 private:
  const std::int64_t every_ms_;
  bool written_ = false;
  std::int64_t last_ms_ = 0;
  std::uint64_t held_ = 0;
};

}  // namespace sekka::server

#endif  // SEKKA_SERVER_LOG_H_
