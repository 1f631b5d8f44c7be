#include "sekka/ff1.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>

namespace sekka {
namespace {

std::vector<std::uint8_t> Hex(const std::string& hex) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<std::uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::vector<std::uint32_t> Numerals(const std::string& text) {
  std::vector<std::uint32_t> out;
  for (char c : text) out.push_back(c <= '9' ? c - '0' : c - 'a' + 10);
  return out;
}

std::string Text(const std::vector<std::uint32_t>& numerals) {
  std::string out;
  for (std::uint32_t d : numerals) out += static_cast<char>(d < 10 ? '0' + d : 'a' + d - 10);
  return out;
}

// NIST's FF1 samples (csrc.nist.gov, "FF1samples.pdf"): every one.
TEST(Ff1Test, NistSampleVectors) {
  const std::string k128 = "2B7E151628AED2A6ABF7158809CF4F3C";
  const std::string k192 = k128 + "EF4359D8D580AA4F";
  const std::string k256 = k192 + "7F036D6F04FC6A94";
  const std::string t10 = "39383736353433323130", t11 = "3737373770717273373737";
  struct Sample {
    std::string key, tweak;
    std::uint32_t radix;
    std::string plain, cipher;
  };
  const Sample samples[] = {
      {k128, "", 10, "0123456789", "2433477484"},
      {k128, t10, 10, "0123456789", "6124200773"},
      {k128, t11, 36, "0123456789abcdefghi", "a9tv40mll9kdu509eum"},
      {k192, "", 10, "0123456789", "2830668132"},
      {k192, t10, 10, "0123456789", "2496655549"},
      {k192, t11, 36, "0123456789abcdefghi", "xbj3kv35jrawxv32ysr"},
      {k256, "", 10, "0123456789", "6657667009"},
      {k256, t10, 10, "0123456789", "1001623463"},
      {k256, t11, 36, "0123456789abcdefghi", "xs8a0azh2avyalyzuwd"},
  };
  for (const Sample& s : samples) {
    auto f = std::move(Ff1::Create(Hex(s.key))).value();
    const std::vector<std::uint8_t> tweak = Hex(s.tweak);
    Result<std::vector<std::uint32_t>> c = f->Encrypt(Numerals(s.plain), s.radix, tweak);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(Text(*c), s.cipher) << s.key.size() * 4 << "-bit key, tweak " << s.tweak;
    Result<std::vector<std::uint32_t>> p = f->Decrypt(*c, s.radix, tweak);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(Text(*p), s.plain);
  }
}

TEST(Ff1Test, BitsAgreeWithTheGenericFormInRadixTwo) {
  auto f = std::move(Ff1::Create(Hex("000102030405060708090a0b0c0d0e0f"))).value();
  std::mt19937_64 rng(7);
  for (int bits : {2, 3, 17, 53, 63, 64}) {
    for (int i = 0; i < 50; ++i) {
      const std::uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
      const std::uint64_t x = rng() & mask;
      std::vector<std::uint32_t> numerals(static_cast<std::size_t>(bits));
      for (int k = 0; k < bits; ++k)
        numerals[static_cast<std::size_t>(k)] = (x >> (bits - 1 - k)) & 1;
      const std::uint64_t e = f->EncryptBits(x, bits);
      std::vector<std::uint32_t> generic = *f->Encrypt(numerals, 2);
      std::uint64_t g = 0;
      for (std::uint32_t d : generic) g = (g << 1) | d;
      ASSERT_EQ(e, g) << bits;
      ASSERT_LE(e, mask);
      ASSERT_EQ(f->DecryptBits(e, bits), x);
    }
  }
}

TEST(Ff1Test, IsAPermutationAndTheTweakAndKeyMatter) {
  auto f = std::move(Ff1::Create(Hex("2B7E151628AED2A6ABF7158809CF4F3C"))).value();
  auto g = std::move(Ff1::Create(Hex("2B7E151628AED2A6ABF7158809CF4F3D"))).value();
  std::set<std::uint64_t> seen;
  int same_under_other_key = 0, same_under_tweak = 0;
  const std::vector<std::uint8_t> tweak = {1, 2, 3};
  for (std::uint64_t x = 0; x < 1024; ++x) {
    const std::uint64_t e = f->EncryptBits(x, 10);
    ASSERT_LT(e, 1024u);
    ASSERT_TRUE(seen.insert(e).second) << x;
    ASSERT_EQ(f->DecryptBits(e, 10), x);
    same_under_other_key += g->EncryptBits(x, 10) == e;
    same_under_tweak += f->EncryptBits(x, 10, tweak) == e;
  }
  EXPECT_LT(same_under_other_key, 10);  // about 1 expected by chance
  EXPECT_LT(same_under_tweak, 10);
}

TEST(Ff1Test, BadInputIsNamed) {
  EXPECT_NE(Ff1::Create(std::vector<std::uint8_t>(15)).error().message.find("allowed 16, 24 or 32"),
            std::string::npos);
  auto f = std::move(Ff1::Create(std::vector<std::uint8_t>(16))).value();
  EXPECT_NE(f->Encrypt(Numerals("0123"), 1).error().message.find("radix 1"), std::string::npos);
  EXPECT_NE(f->Encrypt(Numerals("0"), 10).error().message.find("allowed 2 or more"),
            std::string::npos);
  EXPECT_NE(f->Encrypt(Numerals("01a"), 10).error().message.find("numeral 10"), std::string::npos);
  EXPECT_FALSE(f->Encrypt(std::vector<std::uint32_t>(60, 1), 10).ok());  // 10^30 halves
}

}  // namespace
}  // namespace sekka
