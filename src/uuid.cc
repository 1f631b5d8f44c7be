// UUIDv7 and ULID generation and text forms. See include/sekka/uuid.h.

#include "sekka/uuid.h"

#include <fmt/format.h>

#include <cstring>

namespace sekka {
namespace {

using u128 = unsigned __int128;

constexpr std::int64_t kMaxMillis = (std::int64_t{1} << 48) - 1;
constexpr std::string_view kCrockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

u128 Join(const Uuid& u) { return (static_cast<u128>(u.hi) << 64) | u.lo; }
Uuid Split(u128 v) { return {static_cast<std::uint64_t>(v >> 64), static_cast<std::uint64_t>(v)}; }

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int CrockfordDigit(char c) {
  if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
  if (c == 'I' || c == 'L') return 1;
  if (c == 'O') return 0;
  const std::size_t i = kCrockford.find(c);
  return i == std::string_view::npos ? -1 : static_cast<int>(i);
}

std::string Shown(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 40)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return out;
}

}  // namespace

std::string FormatUuid(const Uuid& u) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(36, '-');
  std::size_t pos = 0;
  for (int nibble = 0; nibble < 32; ++nibble) {
    if (pos == 8 || pos == 13 || pos == 18 || pos == 23) ++pos;  // the dashes stay
    const std::uint64_t half = nibble < 16 ? u.hi : u.lo;
    out[pos++] = kHex[(half >> (60 - 4 * (nibble % 16))) & 0xf];
  }
  return out;
}

Result<Uuid> ParseUuid(std::string_view text) {
  auto bad = [&] {
    return InvalidArgument(fmt::format(
        "UUID \"{}\" is not valid: allowed 32 hex digits as 8-4-4-4-12 with dashes", Shown(text)));
  };
  if (text.size() != 36) return bad();
  u128 v = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (text[i] != '-') return bad();
      continue;
    }
    const int d = HexDigit(text[i]);
    if (d < 0) return bad();
    v = (v << 4) | static_cast<u128>(d);
  }
  return Split(v);
}

std::string FormatUlid(const Uuid& u) {
  const u128 v = Join(u);
  std::string out(26, '0');
  for (int i = 0; i < 26; ++i) {
    out[static_cast<std::size_t>(25 - i)] =
        kCrockford[static_cast<std::size_t>((v >> (5 * i)) & 31)];
  }
  return out;
}

Result<Uuid> ParseUlid(std::string_view text) {
  auto bad = [&] {
    return InvalidArgument(fmt::format(
        "ULID \"{}\" is not valid: allowed 26 Crockford base32 characters, the first 0 to 7",
        Shown(text)));
  };
  if (text.size() != 26) return bad();
  u128 v = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const int d = CrockfordDigit(text[i]);
    if (d < 0 || (i == 0 && d > 7)) return bad();
    v = (v << 5) | static_cast<u128>(d);
  }
  return Split(v);
}

Status TimeOrderedGenerator::NextLocked(Uuid& out) {
  const std::int64_t now = clock_.NowMillis();
  std::uint8_t r[10];
  bool fresh = false;  // a new millisecond: new random state
  if (now > last_ms_) {
    last_ms_ = now;
    fresh = true;
  } else if (kind_ == TimeOrderedKind::kUuidV7) {
    if (++counter_ > 0xfff) {  // the millisecond's counter ran out: borrow the next one
      ++last_ms_;
      fresh = true;
    }
  } else {
    if (++rand_lo_ == 0 && ++rand_hi_ > 0xffff) {  // 80 bits ran out
      ++last_ms_;
      fresh = true;
    }
  }
  if (last_ms_ > kMaxMillis) {
    return Exhausted("UUIDv7 and ULID time (48 bits of ms) ends in the year 10889");
  }
  if (kind_ == TimeOrderedKind::kUuidV7) {
    if (fresh) {
      if (Status s = pool_.Fill(r, 2); !s.ok()) return s;
      counter_ = ((std::uint64_t{r[0]} << 8) | r[1]) & 0x7ff;  // top bit clear: room to count
    }
    if (Status s = pool_.Fill(r, 8); !s.ok()) return s;
    std::uint64_t rand_b = 0;
    for (int i = 0; i < 8; ++i) rand_b = (rand_b << 8) | r[i];
    out.hi = (static_cast<std::uint64_t>(last_ms_) << 16) | (std::uint64_t{7} << 12) | counter_;
    out.lo = (std::uint64_t{2} << 62) | (rand_b >> 2);
    return Status::Ok();
  }
  if (fresh) {
    if (Status s = pool_.Fill(r, 10); !s.ok()) return s;
    rand_hi_ = (std::uint64_t{r[0]} << 8) | r[1];
    rand_lo_ = 0;
    for (int i = 2; i < 10; ++i) rand_lo_ = (rand_lo_ << 8) | r[i];
  }
  out.hi = (static_cast<std::uint64_t>(last_ms_) << 16) | rand_hi_;
  out.lo = rand_lo_;
  return Status::Ok();
}

Result<Uuid> TimeOrderedGenerator::Next() {
  std::lock_guard lock(mu_);
  Uuid u;
  SEKKA_RETURN_IF_ERROR(NextLocked(u));
  return u;
}

Status TimeOrderedGenerator::NextBatch(std::span<Uuid> out) {
  std::lock_guard lock(mu_);
  for (Uuid& u : out) {
    if (Status s = NextLocked(u); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace sekka
