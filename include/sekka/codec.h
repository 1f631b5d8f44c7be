// include/sekka/codec.h
//
// Text forms of an id (docs/contract.md section 4) and of times:
//   dec       decimal
//   hex       16 lowercase hex digits, zero-padded
//   base32    13 Crockford base32 characters, zero-padded; text order = numeric order;
//             parsing ignores case and reads I/L as 1 and O as 0
//   base62    11 characters of 0-9A-Za-z, zero-padded; text order = numeric order
//   friendly  yyyyMMddHHmmssSSS-<worker>-<sequence> in UTC, or
//             yyyyMMddHHmmssSSS-<datacenter>-<worker>-<sequence> when the layout has
//             datacenter bits, or yyyyMMddHHmmssSSS-<random> for a random layout
// Parsing is strict: every error names what was wrong and what is allowed.
//
// Thread-safety: pure functions.

#ifndef SEKKA_CODEC_H_
#define SEKKA_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sekka/layout.h"
#include "sekka/status.h"

namespace sekka {

enum class IdFormat { kDec, kHex, kBase32, kBase62, kFriendly };

// Errors: kInvalidArgument listing the formats.
Result<IdFormat> ParseIdFormat(std::string_view name);
std::string_view IdFormatName(IdFormat format);
const std::vector<std::string_view>& IdFormatNames();

// The longest text any format produces for any layout.
inline constexpr std::size_t kMaxIdTextSize = 64;

// Writes `id` in decimal to `out` (room for 19 characters) and returns the length.
// REQUIRES: id >= 0.
std::size_t FormatDec(Id id, char* out);
// The value of hex digit `c` (0-9, a-f, A-F), or -1.
int HexValue(char c);

// The text of `id` in `format`. `layout` is used by kFriendly only.
// REQUIRES: 0 <= id.
std::string FormatId(Id id, IdFormat format, const Layout& layout);

// Parses `text` in `format` (for kFriendly, against `layout`).
// Errors: kInvalidArgument for an empty text, a character outside the alphabet, a wrong
// length, a negative number or a value of 2^63 or more, naming the allowed form.
Result<Id> ParseId(std::string_view text, IdFormat format, const Layout& layout);

// One id taken apart.
struct DecodedId {
  Id id = 0;
  std::int64_t timestamp_ms = 0;  // ms since the Unix epoch
  std::int64_t datacenter = 0;
  std::int64_t worker = 0;
  std::int64_t sequence = 0;
  std::int64_t random = 0;  // random layouts
  std::int64_t shard = 0;   // layouts with shard bits
  bool sharded = false;     // whether the layout has shard bits (and `shard` means something)
};
// Errors: kInvalidArgument if the id is outside the layout (negative, above max_id(), or with
// shard bits its other fields do not give).
Result<DecodedId> DecodeId(Id id, const Layout& layout);

// "2026-01-02T03:04:05.678Z" for a time in ms since the Unix epoch (UTC, ms precision).
std::string FormatUtcMillis(std::int64_t unix_millis);
// Parses "2026-01-02", "2026-01-02T03:04:05", with optional ".fff" (1 to 3 digits) and
// optional "Z" or "+HH:MM"/"-HH:MM", or a plain integer of milliseconds since the Unix epoch.
// Errors: kInvalidArgument naming the accepted forms.
Result<std::int64_t> ParseUtcMillis(std::string_view text);

// Parses a duration: a whole number with a unit, "250ms", "5s", "2m", "1h" (or "0").
// Returns milliseconds. Errors: kInvalidArgument naming the accepted units.
Result<std::int64_t> ParseDurationMillis(std::string_view text);
// Parses an ISO-8601 duration as Java's Duration.toString writes it (CosId sends
// safeGuardDuration so): "PT5M", "PT1H30M", "PT0.5S", "P2D", "PT48H" (letters in either case;
// no sign; fractions of a second below a millisecond are dropped). Returns milliseconds.
// Errors: kInvalidArgument naming the accepted form.
Result<std::int64_t> ParseIsoDurationMillis(std::string_view text);

// Standard base64 (RFC 4648 section 4, padded), by OpenSSL's EVP_EncodeBlock and
// EVP_DecodeBlock: for the protocols around ids (etcd's JSON gateway, HTTP Basic
// authentication).
std::string Base64Encode(std::string_view bytes);
// Errors: kInvalidArgument (a length that is not a multiple of 4, a character outside the
// alphabet, padding other than one or two '=' at the end).
Result<std::string> Base64Decode(std::string_view text);

}  // namespace sekka

#endif  // SEKKA_CODEC_H_
