// server/resp.h
//
// The Redis protocol (RESP2): a pure parser of one command from the front of a byte buffer, and
// writers of replies. The parser never looks past the limits, so a connection's buffer stays
// bounded whatever a client sends.
//
// Thread-safety: pure functions.

#ifndef SEKKA_SERVER_RESP_H_
#define SEKKA_SERVER_RESP_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sekka::resp {

struct Limits {
  std::size_t max_args = 64;           // arguments in one command
  std::size_t max_bulk = 64 * 1024;    // bytes in one argument
  std::size_t max_inline = 64 * 1024;  // bytes in one inline command line
  // The word before "bulk length" in errors: Redis says "unauthenticated" for its limits
  // before AUTH.
  std::string_view error_prefix = "invalid ";
};
// Redis's limits for a client that has not authenticated: 10 arguments, 16 KiB each.
inline constexpr Limits kUnauthenticatedLimits{10, 16 * 1024, 16 * 1024, "unauthenticated "};

enum class ParseStatus { kComplete, kNeedMore, kMalformed };

struct ParseResult {
  ParseStatus status = ParseStatus::kNeedMore;
  std::vector<std::string_view> args;  // views into the input; empty for an empty command
  std::size_t consumed = 0;            // bytes of input the command used (kComplete)
  std::string error;                   // "Protocol error: ..." (kMalformed)
};

// Parses one command from the front of `input`: a multibulk array of bulk strings
// ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"), or an inline command ("PING\r\n"). An empty array or a
// blank inline line is complete with no arguments (the caller skips it).
ParseResult ParseCommand(std::string_view input, const Limits& limits);
// The same, into `out`, whose argument vector keeps its capacity from call to call (the server
// parses millions of commands a second without allocating for each).
void ParseCommand(std::string_view input, const Limits& limits, ParseResult& out);

// Reply writers: each appends one RESP2 value to `out`.
void AppendSimple(std::string& out, std::string_view text);   // +OK
void AppendError(std::string& out, std::string_view text);    // -ERR ... (text holds the prefix)
void AppendInteger(std::string& out, std::int64_t value);     // :42
void AppendBulk(std::string& out, std::string_view text);     // $5\r\nhello
void AppendNull(std::string& out);                            // $-1
void AppendArrayHeader(std::string& out, std::size_t count);  // *3

}  // namespace sekka::resp

#endif  // SEKKA_SERVER_RESP_H_
