#include "server/log.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>

#include "sekka/clock.h"
#include "sekka/codec.h"
#include "sekka/secrets.h"

namespace sekka::server {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

}  // namespace

void SetLogLevel(std::string_view level) {
  LogLevel l = LogLevel::kInfo;
  if (level == "debug") l = LogLevel::kDebug;
  if (level == "warn") l = LogLevel::kWarn;
  if (level == "error") l = LogLevel::kError;
  if (level == "off") l = LogLevel::kOff;
  g_level.store(static_cast<int>(l));
}

void Log(LogLevel level, std::string_view msg, std::string_view fields) {
  if (static_cast<int>(level) < g_level.load(std::memory_order_relaxed)) return;
  static constexpr const char* kNames[] = {"debug", "info", "warn", "error"};
  std::string line =
      fmt::format("time={} level={} msg=\"", FormatUtcMillis(PlainSystemClock().NowMillis()),
                  kNames[static_cast<int>(level)]);
  for (char c : RedactSecrets(msg)) {
    if (c == '"' || c == '\\') line += '\\';
    line += (c == '\n') ? ' ' : c;
  }
  line += '"';
  if (!fields.empty()) {
    line += ' ';
    line += RedactSecrets(fields);
  }
  line += '\n';
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace sekka::server
