// FF1 (NIST SP 800-38G, Algorithm 7 and 8), with halves that fit 64-bit integers. The step
// numbers in the comments are the standard's.

#include "sekka/ff1.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>

namespace sekka {
namespace {

using u128 = unsigned __int128;

std::atomic<std::uint64_t> next_instance{1};

// radix^e, or 0 when it does not fit 64 bits.
std::uint64_t Power(std::uint64_t radix, int e) {
  if (radix == 2) return e < 64 ? std::uint64_t{1} << e : 0;  // opaque ids: no loop
  u128 p = 1;
  for (int i = 0; i < e; ++i) {
    p *= radix;
    if (p >> 64) return 0;
  }
  return static_cast<std::uint64_t>(p);
}

int BitLength(std::uint64_t x) { return x == 0 ? 0 : 64 - __builtin_clzll(x); }

static_assert(std::endian::native == std::endian::little, "the byte swaps assume little-endian");

u128 LoadBigEndian128(const std::uint8_t in[16]) {
  std::uint64_t hi = 0, lo = 0;
  std::memcpy(&hi, in, 8);
  std::memcpy(&lo, in + 8, 8);
  return (static_cast<u128>(__builtin_bswap64(hi)) << 64) | __builtin_bswap64(lo);
}

void StoreBigEndian128(u128 v, std::uint8_t out[16]) {
  const std::uint64_t hi = __builtin_bswap64(static_cast<std::uint64_t>(v >> 64));
  const std::uint64_t lo = __builtin_bswap64(static_cast<std::uint64_t>(v));
  std::memcpy(out, &hi, 8);
  std::memcpy(out + 8, &lo, 8);
}

// This thread's AES context, set to the key of the Ff1 that used it last.
struct ThreadCipher {
  EVP_CIPHER_CTX* ctx = nullptr;
  std::uint64_t instance = 0;
  ~ThreadCipher() {
    if (ctx != nullptr) EVP_CIPHER_CTX_free(ctx);
  }
};

const EVP_CIPHER* CipherFor(std::size_t key_bytes) {
  return key_bytes == 16   ? EVP_aes_128_ecb()
         : key_bytes == 24 ? EVP_aes_192_ecb()
                           : EVP_aes_256_ecb();
}

}  // namespace

Result<std::unique_ptr<Ff1>> Ff1::Create(std::span<const std::uint8_t> key) {
  if (key.size() != 16 && key.size() != 24 && key.size() != 32) {
    return InvalidArgument(fmt::format(
        "an FF1 key of {} bytes: allowed 16, 24 or 32 (AES-128, -192, -256)", key.size()));
  }
  return std::unique_ptr<Ff1>(new Ff1(std::vector<std::uint8_t>(key.begin(), key.end())));
}

Ff1::Ff1(std::vector<std::uint8_t> key) : key_(std::move(key)), instance_(next_instance++) {}

Ff1::~Ff1() = default;

void Ff1::Block(std::uint8_t block[16]) const {
  thread_local ThreadCipher cipher;
  if (cipher.ctx == nullptr) cipher.ctx = EVP_CIPHER_CTX_new();
  if (cipher.instance != instance_) {
    EVP_EncryptInit_ex(cipher.ctx, CipherFor(key_.size()), nullptr, key_.data(), nullptr);
    EVP_CIPHER_CTX_set_padding(cipher.ctx, 0);
    cipher.instance = instance_;
  }
  int len = 0;
  EVP_EncryptUpdate(cipher.ctx, block, &len, block, 16);
}

void Ff1::PrefixState(const std::uint8_t p[16], std::span<const std::uint8_t> tweak,
                      std::size_t prefix_len, std::uint8_t out[16]) const {
  // One entry per thread: this key, P and the tweak of the last call, and the state.
  struct Cached {
    std::uint64_t instance = 0;
    std::uint8_t p[16] = {};
    std::vector<std::uint8_t> tweak;
    std::size_t prefix_len = 0;
    std::uint8_t state[16] = {};
  };
  thread_local Cached cached;
  if (cached.instance == instance_ && cached.prefix_len == prefix_len &&
      std::memcmp(cached.p, p, 16) == 0 && cached.tweak.size() == tweak.size() &&
      std::equal(tweak.begin(), tweak.end(), cached.tweak.begin())) {
    std::memcpy(out, cached.state, 16);
    return;
  }
  std::uint8_t state[16];
  std::memcpy(state, p, 16);
  Block(state);  // CBC-MAC of P
  for (std::size_t off = 0; off < prefix_len; off += 16) {
    for (std::size_t k = 0; k < 16; ++k) {
      const std::size_t at = off + k;  // Q's bytes here are the tweak, then zeros
      state[k] ^= at < tweak.size() ? tweak[at] : 0;
    }
    Block(state);
  }
  cached.instance = instance_;
  std::memcpy(cached.p, p, 16);
  cached.tweak.assign(tweak.begin(), tweak.end());
  cached.prefix_len = prefix_len;
  std::memcpy(cached.state, state, 16);
  std::memcpy(out, state, 16);
}

void Ff1::Rounds(std::uint64_t& a, std::uint64_t& b, std::uint32_t radix, int u, int v,
                 std::span<const std::uint8_t> tweak, bool encrypt) const {
  const int n = u + v;
  const std::size_t t = tweak.size();
  const std::uint64_t mod_u = Power(radix, u), mod_v = Power(radix, v);
  // 3. b = ceil(ceil(v * log2(radix)) / 8); ceil(v * log2(radix)) is the bit length of
  // radix^v - 1. 4. d = 4 * ceil(b / 4) + 4 (at most 12 here, so S is the first d bytes of R).
  const int b_bytes = (BitLength(mod_v - 1) + 7) / 8;
  const int d = 4 * ((b_bytes + 3) / 4) + 4;
  // 5. P = [1]^1 || [2]^1 || [1]^1 || [radix]^3 || [10]^1 || [u mod 256]^1 || [n]^4 || [t]^4.
  std::uint8_t p[16] = {1,
                        2,
                        1,
                        static_cast<std::uint8_t>(radix >> 16),
                        static_cast<std::uint8_t>(radix >> 8),
                        static_cast<std::uint8_t>(radix),
                        10,
                        static_cast<std::uint8_t>(u % 256)};
  for (int i = 0; i < 4; ++i) {
    p[8 + i] = static_cast<std::uint8_t>(static_cast<std::uint32_t>(n) >> (24 - 8 * i));
    p[12 + i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(t) >> (24 - 8 * i));
  }
  // Q = T || [0]^((-t - b - 1) mod 16) || [i]^1 || [NUM(B)]^b: a whole number of blocks. Only
  // the last block holds [i] and NUM(B) (1 + b <= 9 bytes); the blocks before it are the tweak
  // and padding, the same in every round, so the CBC-MAC state after P and them is computed
  // once (and kept per thread for the last tweak used: an OpaqueCodec always uses one).
  const std::size_t pad = (16 - (t + static_cast<std::size_t>(b_bytes) + 1) % 16) % 16;
  const std::size_t q_len = t + pad + 1 + static_cast<std::size_t>(b_bytes);
  std::uint8_t prefix[16];
  PrefixState(p, tweak, q_len - 16, prefix);
  // The last block of Q as a 128-bit big-endian number: its tweak and padding bytes, with
  // [i] || NUM(B) (the low 1 + b bytes) added in each round. Whole words, not bytes: the
  // prefix XOR then needs no byte stores that a 16-byte load would wait on.
  u128 q_const = 0;
  const std::size_t head = 16 - 1 - static_cast<std::size_t>(b_bytes);  // tweak/pad bytes in it
  for (std::size_t k = 0; k < head; ++k) {
    const std::size_t at = q_len - 16 + k;  // position in Q
    q_const |= static_cast<u128>(at < t ? tweak[at] : 0) << (8 * (15 - k));
  }
  const u128 prefix_value = LoadBigEndian128(prefix);
  for (int step = 0; step < 10; ++step) {
    const int i = encrypt ? step : 9 - step;
    // 6.v. m = u in even rounds, v in odd ones: the modulus is radix^m.
    const std::uint64_t modulus = i % 2 == 0 ? mod_u : mod_v;
    const std::uint64_t num = encrypt ? b : a;  // NUM(B) encrypting, NUM(A) decrypting
    const u128 q_last = q_const | (static_cast<u128>(i) << (8 * b_bytes)) | num;
    // 6.ii. R = PRF(P || Q): CBC-MAC, from the state after P and Q's constant blocks.
    std::uint8_t r[16];
    StoreBigEndian128(prefix_value ^ q_last, r);
    Block(r);
    // 6.iii-iv. y = NUM(S), S the first d bytes of R; only y mod radix^m is needed. With a
    // power-of-two modulus (radix 2) that is the low bits of S's last 8 bytes (d >= 8).
    u128 y = 0;
    const bool pow2 = (modulus & (modulus - 1)) == 0;
    if (pow2) {
      std::uint64_t low = 0;  // bytes d-8 .. d-1 of R, big-endian
      std::memcpy(&low, r + d - 8, 8);
      y = __builtin_bswap64(low) & (modulus - 1);
    } else {
      for (int k = 0; k < d; ++k) y = (y * 256 + r[k]) % modulus;
    }
    if (encrypt) {
      // 6.vi-ix. c = (NUM(A) + y) mod radix^m; A = B; B = C.
      const auto c = pow2 ? (a + static_cast<std::uint64_t>(y)) & (modulus - 1)
                          : static_cast<std::uint64_t>((static_cast<u128>(a) + y) % modulus);
      a = b;
      b = c;
    } else {
      // Algorithm 8: c = (NUM(B) - y) mod radix^m; B = A; A = C.
      const auto c =
          pow2 ? (b - static_cast<std::uint64_t>(y)) & (modulus - 1)
               : static_cast<std::uint64_t>((static_cast<u128>(b) + modulus - y) % modulus);
      b = a;
      a = c;
    }
  }
}

namespace {

Status CheckNumerals(std::span<const std::uint32_t> x, std::uint32_t radix) {
  if (radix < 2 || radix > 65536) {
    return InvalidArgument(fmt::format("FF1 radix {}: allowed 2 to 65536", radix));
  }
  const int n = static_cast<int>(x.size());
  if (n < 2 || Power(radix, n - n / 2) == 0) {
    return InvalidArgument(fmt::format(
        "an FF1 numeral string of {} numerals in radix {}: allowed 2 or more, with each half "
        "below 2^64",
        n, radix));
  }
  for (std::uint32_t digit : x) {
    if (digit >= radix) {
      return InvalidArgument(
          fmt::format("numeral {} in radix {}: allowed 0 to {}", digit, radix, radix - 1));
    }
  }
  return Status::Ok();
}

std::uint64_t Num(std::span<const std::uint32_t> x, std::uint32_t radix) {
  std::uint64_t v = 0;
  for (std::uint32_t digit : x) v = v * radix + digit;
  return v;
}

void Str(std::uint64_t v, std::uint32_t radix, std::span<std::uint32_t> out) {
  for (std::size_t i = out.size(); i-- > 0;) {
    out[i] = static_cast<std::uint32_t>(v % radix);
    v /= radix;
  }
}

}  // namespace

Result<std::vector<std::uint32_t>> Ff1::Crypt(std::span<const std::uint32_t> x, std::uint32_t radix,
                                              std::span<const std::uint8_t> tweak,
                                              bool encrypt) const {
  SEKKA_RETURN_IF_ERROR(CheckNumerals(x, radix));
  const int n = static_cast<int>(x.size()), u = n / 2, v = n - u;
  std::uint64_t a = Num(x.subspan(0, static_cast<std::size_t>(u)), radix);
  std::uint64_t b = Num(x.subspan(static_cast<std::size_t>(u)), radix);
  Rounds(a, b, radix, u, v, tweak, encrypt);
  std::vector<std::uint32_t> out(x.size());
  Str(a, radix, std::span(out).subspan(0, static_cast<std::size_t>(u)));
  Str(b, radix, std::span(out).subspan(static_cast<std::size_t>(u)));
  return out;
}

std::uint64_t Ff1::CryptBits(std::uint64_t value, int bits, std::span<const std::uint8_t> tweak,
                             bool encrypt) const {
  const int u = bits / 2, v = bits - u;
  std::uint64_t a = value >> v, b = value & ((std::uint64_t{1} << v) - 1);
  Rounds(a, b, 2, u, v, tweak, encrypt);
  return (a << v) | b;
}

}  // namespace sekka
