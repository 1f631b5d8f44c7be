// server/log.h
//
// One-line structured logs on stderr: `time=... level=info msg="..." key=value ...`.
//
// Thread-safety: Log() may be called from any thread; each line is one write().

#ifndef SEKKA_SERVER_LOG_H_
#define SEKKA_SERVER_LOG_H_

#include <string>
#include <string_view>

namespace sekka::server {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

// Sets the lowest level written ("debug", "info", "warn", "error"; "off" for none).
void SetLogLevel(std::string_view level);
// Writes one line: `msg` quoted, then `fields` (already "key=value ..." text) as they are.
void Log(LogLevel level, std::string_view msg, std::string_view fields = {});

}  // namespace sekka::server

#endif  // SEKKA_SERVER_LOG_H_
