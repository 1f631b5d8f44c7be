// include/sekka/ff1.h
//
// FF1 format-preserving encryption (NIST SP 800-38G, section 6.1) with AES from OpenSSL's
// libcrypto: a keyed permutation of the numeral strings of one length in one radix. sekka's
// opaque ids use it in radix 2 over a layout's payload bits, so that an encrypted id is again a
// valid non-negative id of the same width; the generic form exists for NIST's sample vectors
// (radix 10 and 36), which the tests check.
//
// Numeral strings here have a value below 2^64 in each half (radix^ceil(n/2) < 2^64): 63-bit
// ids in radix 2 and NIST's samples both fit, and the arithmetic stays in machine integers.
//
//   Result<std::unique_ptr<Ff1>> f = Ff1::Create(key_bytes);
//   std::uint64_t opaque = (*f)->EncryptBits(id, 63);     // another 63-bit value
//   std::uint64_t back = (*f)->DecryptBits(opaque, 63);   // == id
//
// Thread-safety: an Ff1 is immutable after Create; every method may be called from any thread
// (each thread keeps its own AES context).

#ifndef SEKKA_FF1_H_
#define SEKKA_FF1_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sekka/status.h"

namespace sekka {

class Ff1 {
 public:
  // `key`: 16, 24 or 32 bytes (AES-128, -192, -256). Errors: kInvalidArgument.
  static Result<std::unique_ptr<Ff1>> Create(std::span<const std::uint8_t> key);
  ~Ff1();

  // Encrypts (decrypts) the numeral string `x` (each numeral below `radix`, most significant
  // first) under `tweak`. Errors: kInvalidArgument for a radix outside 2 to 65536, a length
  // below 2, a numeral out of range, or halves too large for 64 bits.
  Result<std::vector<std::uint32_t>> Encrypt(std::span<const std::uint32_t> x, std::uint32_t radix,
                                             std::span<const std::uint8_t> tweak = {}) const {
    return Crypt(x, radix, tweak, true);
  }
  Result<std::vector<std::uint32_t>> Decrypt(std::span<const std::uint32_t> x, std::uint32_t radix,
                                             std::span<const std::uint8_t> tweak = {}) const {
    return Crypt(x, radix, tweak, false);
  }

  // Radix 2 over `bits` bits (2 to 64), the value's bits being the numeral string (most
  // significant first): a permutation of [0, 2^bits). REQUIRES: value < 2^bits.
  std::uint64_t EncryptBits(std::uint64_t value, int bits,
                            std::span<const std::uint8_t> tweak = {}) const {
    return CryptBits(value, bits, tweak, true);
  }
  std::uint64_t DecryptBits(std::uint64_t value, int bits,
                            std::span<const std::uint8_t> tweak = {}) const {
    return CryptBits(value, bits, tweak, false);
  }

 private:
  explicit Ff1(std::vector<std::uint8_t> key);
  Result<std::vector<std::uint32_t>> Crypt(std::span<const std::uint32_t> x, std::uint32_t radix,
                                           std::span<const std::uint8_t> tweak, bool encrypt) const;
  std::uint64_t CryptBits(std::uint64_t value, int bits, std::span<const std::uint8_t> tweak,
                          bool encrypt) const;
  // The ten Feistel rounds over the halves' values a (u numerals) and b (v numerals).
  void Rounds(std::uint64_t& a, std::uint64_t& b, std::uint32_t radix, int u, int v,
              std::span<const std::uint8_t> tweak, bool encrypt) const;
  // The CBC-MAC state after P and the first `prefix_len` bytes of Q (the tweak, then zeros),
  // which no round changes; cached per thread for the last (key, P, tweak).
  void PrefixState(const std::uint8_t p[16], std::span<const std::uint8_t> tweak,
                   std::size_t prefix_len, std::uint8_t out[16]) const;
  // One AES block, in place, with this thread's context for this key.
  void Block(std::uint8_t block[16]) const;

  const std::vector<std::uint8_t> key_;
  const std::uint64_t instance_;  // tells this key's per-thread contexts from others'
};

}  // namespace sekka

#endif  // SEKKA_FF1_H_
