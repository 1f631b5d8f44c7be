#include "server/resp.h"

#include <charconv>

#include "sekka/codec.h"

namespace sekka::resp {
namespace {

// The longest "*<n>\r\n" or "$<n>\r\n" header line worth reading (Redis allows 32 bytes too).
constexpr std::size_t kMaxHeaderLine = 32;

std::string PrintableChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string(1, c);
  static constexpr char kHex[] = "0123456789abcdef";
  return std::string("\\x") + kHex[u >> 4] + kHex[u & 15];
}

void Malformed(ParseResult& r, std::string message) {
  r.status = ParseStatus::kMalformed;
  r.args.clear();
  r.error = "Protocol error: " + std::move(message);
}

void NeedMore(ParseResult& r) {
  r.status = ParseStatus::kNeedMore;
  r.args.clear();
}

// Reads "<digits>\r\n" after a type byte at `pos`. Returns false with `need_more` when the line
// is not complete yet, false without it when the line is malformed or too long.
bool ReadLength(std::string_view in, std::size_t pos, std::int64_t& value, std::size_t& next,
                bool& need_more) {
  need_more = false;
  const std::size_t end = in.find("\r\n", pos);
  if (end == std::string_view::npos) {
    need_more = in.size() - pos <= kMaxHeaderLine;
    return false;
  }
  if (end - pos > kMaxHeaderLine || end == pos) return false;
  const char* first = in.data() + pos;
  const char* last = in.data() + end;
  const auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || ptr != last) return false;
  next = end + 2;
  return true;
}

void ParseInline(std::string_view in, const Limits& limits, ParseResult& r) {
  const std::size_t nl = in.find('\n');
  if (nl == std::string_view::npos) {
    if (in.size() > limits.max_inline) return Malformed(r, "too big inline request");
    return NeedMore(r);
  }
  if (nl > limits.max_inline) return Malformed(r, "too big inline request");
  std::string_view line = in.substr(0, nl);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  r.status = ParseStatus::kComplete;
  r.consumed = nl + 1;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size()) break;
    if (line[i] == '"' || line[i] == '\'') {
      return Malformed(r, "quoted inline arguments are not supported");
    }
    std::size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    if (r.args.size() >= limits.max_args) return Malformed(r, "too many inline arguments");
    r.args.push_back(line.substr(i, j - i));
    i = j;
  }
}

}  // namespace

ParseResult ParseCommand(std::string_view in, const Limits& limits) {
  ParseResult r;
  ParseCommand(in, limits, r);
  return r;
}

void ParseCommand(std::string_view in, const Limits& limits, ParseResult& r) {
  r.args.clear();
  r.consumed = 0;
  if (in.empty()) return NeedMore(r);
  if (in[0] != '*') return ParseInline(in, limits, r);

  std::int64_t count = 0;
  std::size_t pos = 0;
  bool need_more = false;
  if (!ReadLength(in, 1, count, pos, need_more)) {
    if (need_more) return NeedMore(r);
    return Malformed(r, std::string(limits.error_prefix) + "multibulk length");
  }
  if (count <= 0) {  // "*0" and "*-1": nothing to do
    r.status = ParseStatus::kComplete;
    r.consumed = pos;
    return;
  }
  if (static_cast<std::uint64_t>(count) > limits.max_args) {
    return Malformed(r, std::string(limits.error_prefix) + "multibulk length");
  }
  for (std::int64_t i = 0; i < count; ++i) {
    if (pos >= in.size()) return NeedMore(r);
    if (in[pos] != '$') {
      return Malformed(r, std::string("expected '$', got '") + PrintableChar(in[pos]) + "'");
    }
    std::int64_t len = 0;
    std::size_t data = 0;
    if (!ReadLength(in, pos + 1, len, data, need_more)) {
      if (need_more) return NeedMore(r);
      return Malformed(r, std::string(limits.error_prefix) + "bulk length");
    }
    if (len < 0 || static_cast<std::uint64_t>(len) > limits.max_bulk) {
      return Malformed(r, std::string(limits.error_prefix) + "bulk length");
    }
    const auto n = static_cast<std::size_t>(len);
    if (in.size() < data + n + 2) return NeedMore(r);
    if (in[data + n] != '\r' || in[data + n + 1] != '\n') {
      return Malformed(r, "bulk string not terminated by CRLF");
    }
    r.args.push_back(in.substr(data, n));
    pos = data + n + 2;
  }
  r.status = ParseStatus::kComplete;
  r.consumed = pos;
}

void AppendSimple(std::string& out, std::string_view text) {
  out += '+';
  out += text;
  out += "\r\n";
}

void AppendError(std::string& out, std::string_view text) {
  out += '-';
  for (char c : text) out += (c == '\r' || c == '\n') ? ' ' : c;
  out += "\r\n";
}

void AppendInteger(std::string& out, std::int64_t value) {
  char buf[24];
  buf[0] = ':';
  std::size_t n = 1;
  if (value < 0) {
    buf[n++] = '-';
    // Ids and counts are never this negative; clamp rather than overflow.
    value = value == INT64_MIN ? INT64_MAX : -value;
  }
  n += FormatDec(value, buf + n);
  buf[n++] = '\r';
  buf[n++] = '\n';
  out.append(buf, n);
}

void AppendBulk(std::string& out, std::string_view text) {
  out += '$';
  char buf[20];
  out.append(buf, FormatDec(static_cast<std::int64_t>(text.size()), buf));
  out += "\r\n";
  out += text;
  out += "\r\n";
}

void AppendNull(std::string& out) { out += "$-1\r\n"; }

void AppendArrayHeader(std::string& out, std::size_t count) {
  out += '*';
  char buf[20];
  out.append(buf, FormatDec(static_cast<std::int64_t>(count), buf));
  out += "\r\n";
}

}  // namespace sekka::resp
