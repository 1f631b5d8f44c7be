#include "sekka/codec.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <array>
#include <chrono>
#include <cstring>

namespace sekka {
namespace {

constexpr std::string_view kBase32Alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
constexpr std::string_view kBase62Alphabet =
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
constexpr std::size_t kHexWidth = 16;
constexpr std::size_t kBase32Width = 13;
constexpr std::size_t kBase62Width = 11;
constexpr std::uint64_t kIdLimit = std::uint64_t{1} << 63;  // ids are below this

constexpr std::array<IdFormat, 5> kFormats = {IdFormat::kDec, IdFormat::kHex, IdFormat::kBase32,
                                              IdFormat::kBase62, IdFormat::kFriendly};

// Value of each byte in an alphabet, or -1.
constexpr std::array<int, 256> ReverseTable(std::string_view alphabet, bool crockford) {
  std::array<int, 256> t{};
  for (int& v : t) v = -1;
  for (std::size_t i = 0; i < alphabet.size(); ++i) {
    t[static_cast<unsigned char>(alphabet[i])] = static_cast<int>(i);
    if (crockford) {
      const char c = alphabet[i];
      if (c >= 'A' && c <= 'Z') t[static_cast<unsigned char>(c - 'A' + 'a')] = static_cast<int>(i);
    }
  }
  if (crockford) {
    for (char c : {'I', 'i', 'L', 'l'}) t[static_cast<unsigned char>(c)] = 1;
    for (char c : {'O', 'o'}) t[static_cast<unsigned char>(c)] = 0;
  }
  return t;
}

constexpr auto kBase32Values = ReverseTable(kBase32Alphabet, /*crockford=*/true);
constexpr auto kBase62Values = ReverseTable(kBase62Alphabet, /*crockford=*/false);

std::string Printable(std::string_view text) {
  constexpr std::size_t kShown = 40;
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < kShown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (text.size() > kShown) out += "...";
  return out;
}

std::string FixedWidth(std::uint64_t value, std::string_view alphabet, std::size_t width) {
  std::string out(width, alphabet[0]);
  const std::uint64_t base = alphabet.size();
  for (std::size_t i = width; i-- > 0 && value != 0;) {
    out[i] = alphabet[value % base];
    value /= base;
  }
  return out;
}

Result<Id> ParseFixedWidth(std::string_view text, std::string_view format_name,
                           const std::array<int, 256>& values, std::uint64_t base,
                           std::size_t width, std::string_view allowed) {
  if (text.size() != width) {
    return InvalidArgument(fmt::format("{} id \"{}\" has {} characters: allowed exactly {} of {}",
                                       format_name, Printable(text), text.size(), width, allowed));
  }
  unsigned __int128 value = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const int digit = values[static_cast<unsigned char>(text[i])];
    if (digit < 0) {
      return InvalidArgument(fmt::format("{} id \"{}\" has \"{}\" at position {}: allowed {}",
                                         format_name, Printable(text), Printable(text.substr(i, 1)),
                                         i + 1, allowed));
    }
    value = value * base + static_cast<unsigned>(digit);
  }
  if (value >= kIdLimit) {
    return InvalidArgument(fmt::format("{} id \"{}\" is 2^63 or more: allowed 0 to 2^63-1",
                                       format_name, Printable(text)));
  }
  return static_cast<Id>(value);
}

Result<Id> ParseDec(std::string_view text) {
  if (text.empty()) return InvalidArgument("id is empty: allowed a decimal number 0 to 2^63-1");
  if (text[0] == '-') {
    return InvalidArgument(
        fmt::format("id \"{}\" is negative: allowed 0 to 9223372036854775807", Printable(text)));
  }
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c < '0' || c > '9') {
      return InvalidArgument(
          fmt::format("id \"{}\" has \"{}\" at position {}: allowed decimal digits 0-9",
                      Printable(text), Printable(text.substr(i, 1)), i + 1));
    }
    if (value > (kIdLimit - 1 - static_cast<unsigned>(c - '0')) / 10) {
      return InvalidArgument(
          fmt::format("id \"{}\" is too large: allowed 0 to 9223372036854775807", Printable(text)));
    }
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  return static_cast<Id>(value);
}

// Reads exactly `n` decimal digits from the front of `text`; -1 if they are not there.
std::int64_t Digits(std::string_view& text, std::size_t n) {
  if (text.size() < n) return -1;
  std::int64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (text[i] < '0' || text[i] > '9') return -1;
    v = v * 10 + (text[i] - '0');
  }
  text.remove_prefix(n);
  return v;
}

std::int64_t DaysFromCivil(std::int64_t y, unsigned m, unsigned d) {
  using namespace std::chrono;
  return sys_days{year{static_cast<int>(y)} / month{m} / day{d}}.time_since_epoch().count();
}

}  // namespace

Result<IdFormat> ParseIdFormat(std::string_view name) {
  for (IdFormat f : kFormats) {
    if (IdFormatName(f) == name) return f;
  }
  return InvalidArgument(fmt::format("format \"{}\" is not known: allowed {}", Printable(name),
                                     fmt::join(IdFormatNames(), ", ")));
}

std::string_view IdFormatName(IdFormat format) {
  switch (format) {
    case IdFormat::kDec:
      return "dec";
    case IdFormat::kHex:
      return "hex";
    case IdFormat::kBase32:
      return "base32";
    case IdFormat::kBase62:
      return "base62";
    case IdFormat::kFriendly:
      return "friendly";
  }
  return "dec";
}

const std::vector<std::string_view>& IdFormatNames() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (IdFormat f : kFormats) v.push_back(IdFormatName(f));
    return v;
  }();
  return names;
}

std::size_t FormatDec(Id id, char* out) {
  static constexpr char kPairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  char buf[20];
  char* p = buf + sizeof(buf);
  auto v = static_cast<std::uint64_t>(id);
  while (v >= 100) {
    const std::uint64_t r = v % 100;
    v /= 100;
    p -= 2;
    std::memcpy(p, kPairs + 2 * r, 2);
  }
  if (v >= 10) {
    p -= 2;
    std::memcpy(p, kPairs + 2 * v, 2);
  } else {
    *--p = static_cast<char>('0' + v);
  }
  const auto n = static_cast<std::size_t>(buf + sizeof(buf) - p);
  std::memcpy(out, p, n);
  return n;
}

std::string FormatId(Id id, IdFormat format, const Layout& layout) {
  const auto value = static_cast<std::uint64_t>(id);
  switch (format) {
    case IdFormat::kDec: {
      char buf[20];
      return std::string(buf, FormatDec(id, buf));
    }
    case IdFormat::kHex:
      return fmt::format("{:016x}", value);
    case IdFormat::kBase32:
      return FixedWidth(value, kBase32Alphabet, kBase32Width);
    case IdFormat::kBase62:
      return FixedWidth(value, kBase62Alphabet, kBase62Width);
    case IdFormat::kFriendly: {
      Result<DecodedId> d = DecodeId(id, layout);
      if (!d.ok()) return FormatId(id, IdFormat::kDec, layout);
      std::string time = FormatUtcMillis(d->timestamp_ms);  // 2026-01-02T03:04:05.678Z
      std::string compact;
      for (char c : time) {
        if (c >= '0' && c <= '9') compact += c;
      }
      if (layout.is_random()) return fmt::format("{}-{}", compact, d->random);
      if (layout.datacenter_bits() > 0) {
        return fmt::format("{}-{}-{}-{}", compact, d->datacenter, d->worker, d->sequence);
      }
      return fmt::format("{}-{}-{}", compact, d->worker, d->sequence);
    }
  }
  return {};
}

Result<Id> ParseId(std::string_view text, IdFormat format, const Layout& layout) {
  switch (format) {
    case IdFormat::kDec:
      return ParseDec(text);
    case IdFormat::kHex: {
      static constexpr auto kHexValues = [] {
        std::array<int, 256> t{};
        for (int& v : t) v = -1;
        for (int i = 0; i < 10; ++i) t['0' + i] = i;
        for (int i = 0; i < 6; ++i) t['a' + i] = t['A' + i] = 10 + i;
        return t;
      }();
      return ParseFixedWidth(text, "hex", kHexValues, 16, kHexWidth, "hex digits 0-9a-f");
    }
    case IdFormat::kBase32:
      return ParseFixedWidth(text, "base32", kBase32Values, 32, kBase32Width,
                             "Crockford base32 0-9A-Z without I L O U (any case; I L read as 1, "
                             "O as 0)");
    case IdFormat::kBase62:
      return ParseFixedWidth(text, "base62", kBase62Values, 62, kBase62Width, "0-9A-Za-z");
    case IdFormat::kFriendly: {
      const bool with_dc = layout.datacenter_bits() > 0;
      const bool random = layout.is_random();
      const std::string form = random    ? "yyyyMMddHHmmssSSS-<random>"
                               : with_dc ? "yyyyMMddHHmmssSSS-<datacenter>-<worker>-<sequence>"
                                         : "yyyyMMddHHmmssSSS-<worker>-<sequence>";
      auto bad = [&](std::string_view why) {
        return InvalidArgument(fmt::format("friendly id \"{}\" {}: allowed {} for layout {}",
                                           Printable(text), why, form, layout.name()));
      };
      std::string_view rest = text;
      const std::int64_t y = Digits(rest, 4), mo = Digits(rest, 2), d = Digits(rest, 2),
                         h = Digits(rest, 2), mi = Digits(rest, 2), s = Digits(rest, 2),
                         ms = Digits(rest, 3);
      if (y < 0 || mo < 0 || d < 0 || h < 0 || mi < 0 || s < 0 || ms < 0) {
        return bad("does not start with 17 digits of time");
      }
      using namespace std::chrono;
      const year_month_day ymd{year{static_cast<int>(y)}, month{static_cast<unsigned>(mo)},
                               day{static_cast<unsigned>(d)}};
      if (!ymd.ok() || h > 23 || mi > 59 || s > 59) return bad("has an impossible date or time");
      const std::int64_t unix_ms =
          ((DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 24 + h) * 60 +
           mi) *
              60'000 +
          s * 1000 + ms;
      std::int64_t parts[3] = {0, 0, 0};
      const int want = random ? 1 : with_dc ? 3 : 2;
      for (int i = 0; i < want; ++i) {
        if (rest.empty() || rest[0] != '-') return bad("has too few parts");
        rest.remove_prefix(1);
        std::size_t n = 0;
        while (n < rest.size() && rest[n] >= '0' && rest[n] <= '9' && n < 15) ++n;
        if (n == 0) return bad("has a part that is not a number");
        std::string_view digits = rest.substr(0, n);
        parts[i] = Digits(digits, n);
        rest.remove_prefix(n);
      }
      if (!rest.empty()) return bad("has extra text at the end");
      const std::int64_t tick = layout.MillisToTick(unix_ms);
      if (layout.TickToMillis(tick) != unix_ms) {
        return bad(fmt::format("has a time that is not on a {} ms tick", layout.tick_millis()));
      }
      IdFields f;
      f.tick = tick;
      if (random) {
        f.random = parts[0];
      } else {
        f.datacenter = with_dc ? parts[0] : 0;
        f.worker = with_dc ? parts[1] : parts[0];
        f.sequence = with_dc ? parts[2] : parts[1];
      }
      Result<Id> id = layout.Compose(f);
      if (!id.ok()) return bad(id.error().message);
      return id;
    }
  }
  return InvalidArgument("unknown format");
}

Result<DecodedId> DecodeId(Id id, const Layout& layout) {
  SEKKA_ASSIGN_OR_RETURN(auto f, layout.Decompose(id));
  DecodedId d;
  d.id = id;
  d.timestamp_ms = layout.TickToMillis(f.tick);
  d.datacenter = f.datacenter;
  d.worker = f.worker;
  d.sequence = f.sequence;
  d.random = f.random;
  d.sharded = layout.shard_bits() > 0;
  d.shard = d.sharded
                ? static_cast<std::int64_t>(static_cast<std::uint64_t>(id) >> layout.shard_shift())
                : 0;
  return d;
}

std::string FormatUtcMillis(std::int64_t unix_millis) {
  using namespace std::chrono;
  const sys_time<milliseconds> t{milliseconds{unix_millis}};
  const sys_days day = floor<days>(t);
  const year_month_day ymd{day};
  const hh_mm_ss<milliseconds> hms{t - day};
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", static_cast<int>(ymd.year()),
                     static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                     hms.hours().count(), hms.minutes().count(), hms.seconds().count(),
                     hms.subseconds().count());
}

Result<std::int64_t> ParseUtcMillis(std::string_view text) {
  auto bad = [&] {
    return InvalidArgument(
        fmt::format("time \"{}\" is not understood: allowed milliseconds since 1970 or "
                    "YYYY-MM-DD[THH:MM:SS[.fff]][Z|+HH:MM|-HH:MM]",
                    Printable(text)));
  };
  if (text.empty()) return bad();
  if (text.find_first_not_of("0123456789") == std::string_view::npos) {
    if (text.size() > 17) return bad();
    std::string_view digits = text;
    return Digits(digits, text.size());
  }
  std::string_view rest = text;
  const std::int64_t y = Digits(rest, 4);
  if (y < 0 || rest.empty() || rest[0] != '-') return bad();
  rest.remove_prefix(1);
  const std::int64_t mo = Digits(rest, 2);
  if (mo < 0 || rest.empty() || rest[0] != '-') return bad();
  rest.remove_prefix(1);
  const std::int64_t d = Digits(rest, 2);
  if (d < 0) return bad();
  using namespace std::chrono;
  const year_month_day ymd{year{static_cast<int>(y)}, month{static_cast<unsigned>(mo)},
                           day{static_cast<unsigned>(d)}};
  if (!ymd.ok()) return bad();
  std::int64_t h = 0, mi = 0, s = 0, ms = 0, offset_minutes = 0;
  if (!rest.empty() && (rest[0] == 'T' || rest[0] == 't' || rest[0] == ' ')) {
    rest.remove_prefix(1);
    h = Digits(rest, 2);
    if (h < 0 || rest.empty() || rest[0] != ':') return bad();
    rest.remove_prefix(1);
    mi = Digits(rest, 2);
    if (mi < 0 || rest.empty() || rest[0] != ':') return bad();
    rest.remove_prefix(1);
    s = Digits(rest, 2);
    if (s < 0 || h > 23 || mi > 59 || s > 59) return bad();
    if (!rest.empty() && rest[0] == '.') {
      rest.remove_prefix(1);
      std::size_t n = 0;
      while (n < rest.size() && n < 3 && rest[n] >= '0' && rest[n] <= '9') ++n;
      if (n == 0) return bad();
      std::string_view frac = rest.substr(0, n);
      ms = Digits(frac, n);
      for (std::size_t i = n; i < 3; ++i) ms *= 10;
      rest.remove_prefix(n);
    }
    if (!rest.empty() && (rest[0] == 'Z' || rest[0] == 'z')) {
      rest.remove_prefix(1);
    } else if (!rest.empty() && (rest[0] == '+' || rest[0] == '-')) {
      const int sign = rest[0] == '+' ? 1 : -1;
      rest.remove_prefix(1);
      const std::int64_t oh = Digits(rest, 2);
      if (oh < 0 || oh > 23 || rest.empty() || rest[0] != ':') return bad();
      rest.remove_prefix(1);
      const std::int64_t om = Digits(rest, 2);
      if (om < 0 || om > 59) return bad();
      offset_minutes = sign * (oh * 60 + om);
    }
  }
  if (!rest.empty()) return bad();
  const std::int64_t days = DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  return ((days * 24 + h) * 60 + mi - offset_minutes) * 60'000 + s * 1000 + ms;
}

Result<std::int64_t> ParseDurationMillis(std::string_view text) {
  auto bad = [&] {
    return InvalidArgument(fmt::format(
        "duration \"{}\" is not understood: allowed a whole number with ms, s, m or h, such as "
        "\"250ms\" or \"5s\"",
        Printable(text)));
  };
  std::size_t n = 0;
  while (n < text.size() && text[n] >= '0' && text[n] <= '9') ++n;
  if (n == 0 || n > 12) return bad();
  std::string_view digits = text.substr(0, n);
  const std::int64_t value = Digits(digits, n);
  const std::string_view unit = text.substr(n);
  if (unit == "ms") return value;
  if (unit == "s") return value * 1000;
  if (unit == "m") return value * 60'000;
  if (unit == "h") return value * 3'600'000;
  if (unit.empty() && value == 0) return std::int64_t{0};
  return bad();
}

Result<std::int64_t> ParseIsoDurationMillis(std::string_view text) {
  auto bad = [&] {
    return InvalidArgument(fmt::format(
        "duration \"{}\" is not understood: allowed ISO-8601 P[nD][T[nH][nM][n[.n]S]], such as "
        "\"PT5M\" or \"PT0.5S\"",
        Printable(text)));
  };
  auto upper = [](char c) { return static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c); };
  std::size_t i = 0;
  if (text.empty() || upper(text[0]) != 'P') return bad();
  ++i;
  constexpr std::int64_t kMaxMillis = 1'000'000'000'000'000;  // about 31,700 years
  std::int64_t total = 0;
  bool in_time = false, any = false;
  char last_unit = 0;  // units must come in order: D, then H, M, S
  const std::string_view order = "DHMS";
  while (i < text.size()) {
    if (upper(text[i]) == 'T') {
      if (in_time) return bad();
      in_time = true;
      ++i;
      if (i == text.size()) return bad();  // "PT" with nothing after it
      continue;
    }
    std::size_t n = 0;
    while (i + n < text.size() && text[i + n] >= '0' && text[i + n] <= '9') ++n;
    if (n == 0 || n > 15) return bad();
    std::string_view digits = text.substr(i, n);
    const std::int64_t value = Digits(digits, n);
    i += n;
    std::int64_t fraction_ms = 0;
    bool fraction = false;
    if (i < text.size() && (text[i] == '.' || text[i] == ',')) {
      fraction = true;
      ++i;
      std::size_t f = 0;
      while (i + f < text.size() && text[i + f] >= '0' && text[i + f] <= '9') ++f;
      if (f == 0 || f > 9) return bad();
      for (std::size_t k = 0; k < 3; ++k) {
        fraction_ms = fraction_ms * 10 + (k < f ? text[i + k] - '0' : 0);
      }
      i += f;
    }
    if (i == text.size()) return bad();
    const char unit = upper(text[i++]);
    const std::size_t rank = order.find(unit);
    if (rank == std::string_view::npos || (unit == 'D') == in_time || (fraction && unit != 'S') ||
        (last_unit != 0 && rank <= order.find(last_unit))) {
      return bad();
    }
    last_unit = unit;
    const std::int64_t unit_ms = unit == 'D'   ? 86'400'000
                                 : unit == 'H' ? 3'600'000
                                 : unit == 'M' ? 60'000
                                               : 1000;
    if (value > (kMaxMillis - total) / unit_ms) return bad();
    total += value * unit_ms + fraction_ms;
    if (total > kMaxMillis) return bad();
    any = true;
  }
  if (!any) return bad();
  return total;
}

std::string Base64Encode(std::string_view bytes) {
  std::string out((bytes.size() + 2) / 3 * 4 + 1, '\0');  // EVP_EncodeBlock adds a NUL
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

Result<std::string> Base64Decode(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument(
        fmt::format("\"{}\" is not base64: {}; allowed A-Z a-z 0-9 + / in "
                    "groups of 4, the last padded with = or ==",
                    text.substr(0, 40), why));
  };
  if (text.size() % 4 != 0) return bad("its length is not a multiple of 4");
  // EVP_DecodeBlock skips blanks and decodes '=' anywhere: check the form first.
  std::size_t padding = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '=') {
      if (i + 2 < text.size()) return bad("'=' before the end");
      ++padding;
    } else if (padding > 0) {
      return bad("'=' before the end");
    } else if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '+' || c == '/')) {
      return bad("a character outside the alphabet");
    }
  }
  std::string out(text.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return bad("OpenSSL refused it");
  out.resize(static_cast<std::size_t>(n) - padding);  // EVP_DecodeBlock counts the padding
  return out;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace sekka
