// include/sekka/opaque.h
//
// Opaque ids: an id encrypted with FF1 (include/sekka/ff1.h) over its layout's payload bits
// (63, or 53 for js53), so that an opaque id is again a valid non-negative id of the same width
// that outsiders cannot count or walk, and that the key's owner maps back. Two forms:
//   numeric  the encrypted value, in any of the id formats (always with the newest key, or a
//            version given to Decode: the number carries no key version)
//   text     a key-version character, then the value in base62 (11 characters): "A0IRzk99Z5u4"
// Keys come from a key file, one per line: "<version> <32, 48 or 64 hex digits>", the version
// one character of 0-9A-Za-z; '#' starts a comment. The last line is the newest key: encoding
// uses it, decoding text uses the key its first character names, so keys rotate without
// breaking old links.
//
//   Result<std::unique_ptr<OpaqueCodec>> c = OpaqueCodec::Create(keys, layout);
//   std::string link = (*c)->EncodeText(id);         // for URLs
//   Result<Id> back = (*c)->DecodeText(link);
//
// Thread-safety: an OpaqueCodec is immutable; every method may be called from any thread.

#ifndef SEKKA_OPAQUE_H_
#define SEKKA_OPAQUE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sekka/ff1.h"
#include "sekka/layout.h"
#include "sekka/status.h"

namespace sekka {

struct OpaqueKey {
  char version = '0';             // one of 0-9A-Za-z
  std::vector<std::uint8_t> key;  // 16, 24 or 32 bytes
};

// Parses a key file's text. Errors: kInvalidArgument naming the line and what is allowed (a
// bad version character or one used twice, a key that is not 32, 48 or 64 hex digits, no key).
Result<std::vector<OpaqueKey>> ParseOpaqueKeys(std::string_view text);
// Reads and parses a key file. Errors: as ParseOpaqueKeys, naming the file; kNotFound.
Result<std::vector<OpaqueKey>> ReadOpaqueKeyFile(const std::string& path);
// A key file line with a new random AES-128 key (OpenSSL's RAND_bytes) and `version`.
Result<std::string> NewOpaqueKeyLine(char version);

class OpaqueCodec {
 public:
  // Errors: kInvalidArgument (no keys, a bad key).
  static Result<std::unique_ptr<OpaqueCodec>> Create(const std::vector<OpaqueKey>& keys,
                                                     const Layout& layout);

  // The opaque value of `id` under the newest key. Errors: kInvalidArgument for an id outside
  // the layout (negative or above its max id).
  Result<Id> Encode(Id id) const;
  // The id behind `opaque`, under key `version` (0: the newest). Errors: kInvalidArgument (a
  // value outside the layout), kNotFound (no such key version).
  Result<Id> Decode(Id opaque, char version = 0) const;
  // The text form: the newest key's version character and 11 base62 characters.
  Result<std::string> EncodeText(Id id) const;
  // Errors: kInvalidArgument (not 12 characters of 0-9A-Za-z, a value outside the layout),
  // kNotFound (a key version this codec does not have), each naming what is allowed.
  Result<Id> DecodeText(std::string_view text) const;

  int payload_bits() const { return bits_; }
  char newest_version() const { return keys_.back().version; }

 private:
  struct Key {
    char version;
    std::unique_ptr<Ff1> ff1;
  };
  OpaqueCodec(std::vector<Key> keys, int bits, std::string tweak)
      : keys_(std::move(keys)), bits_(bits), tweak_(std::move(tweak)) {}
  const Key* Find(char version) const;

  std::vector<Key> keys_;  // file order: the newest last
  const int bits_;
  const std::string tweak_;  // the layout's fingerprint: one key, unrelated ids per layout
};

}  // namespace sekka

#endif  // SEKKA_OPAQUE_H_
