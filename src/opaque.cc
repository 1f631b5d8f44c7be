// Opaque ids: FF1 over a layout's payload bits, with versioned keys. See include/sekka/opaque.h.

#include "sekka/opaque.h"

#include <fmt/format.h>
#include <openssl/rand.h>

#include <fstream>
#include <sstream>

#include "sekka/codec.h"
#include "sekka/secrets.h"

namespace sekka {
namespace {

bool IsVersionChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

Result<std::vector<OpaqueKey>> ParseOpaqueKeys(std::string_view text) {
  std::vector<OpaqueKey> keys;
  std::size_t line_no = 0;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (const std::size_t hash = line.find('#'); hash != std::string_view::npos) {
      line = line.substr(0, hash);
    }
    line = Trim(line);
    if (line.empty()) continue;
    auto bad = [&](std::string_view what) {
      return InvalidArgument(fmt::format(
          "key line {}: {}: allowed \"<version> <hex key>\", the version one character of "
          "0-9A-Za-z used once, the key 32, 48 or 64 hex digits",
          line_no, what));
    };
    const std::size_t space = line.find_first_of(" \t");
    if (space != 1 || !IsVersionChar(line[0])) return bad("a bad version");
    const std::string_view hex = Trim(line.substr(space));
    if (hex.size() != 32 && hex.size() != 48 && hex.size() != 64) return bad("a bad key length");
    OpaqueKey key;
    key.version = line[0];
    for (std::size_t i = 0; i < hex.size(); i += 2) {
      const int hi = HexValue(hex[i]), lo = HexValue(hex[i + 1]);
      if (hi < 0 || lo < 0) return bad("a key that is not hex");
      key.key.push_back(static_cast<std::uint8_t>(hi * 16 + lo));
    }
    for (const OpaqueKey& k : keys) {
      if (k.version == key.version) return bad("a version used twice");
    }
    keys.push_back(std::move(key));
  }
  if (keys.empty()) {
    return InvalidArgument(
        "the key file has no key: allowed lines \"<version> <hex key>\" (sekka opaque keygen)");
  }
  return keys;
}

Result<std::vector<OpaqueKey>> ReadOpaqueKeyFile(const std::string& path) {
  SEKKA_RETURN_IF_ERROR(CheckSecretFile(path, "the opaque key file"));
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("cannot read the opaque key file {}", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > 64 * 1024) {
    return InvalidArgument(fmt::format("the opaque key file {} is over 64 KiB", path));
  }
  Result<std::vector<OpaqueKey>> keys = ParseOpaqueKeys(text.str());
  if (!keys.ok()) return InvalidArgument(fmt::format("{}: {}", path, keys.error().message));
  return keys;
}

Result<std::string> NewOpaqueKeyLine(char version) {
  if (!IsVersionChar(version)) {
    return InvalidArgument(
        fmt::format("key version '{}': allowed one character of 0-9A-Za-z", version));
  }
  std::uint8_t key[16];
  if (RAND_bytes(key, sizeof key) != 1) return Internal("OpenSSL's RAND_bytes failed");
  std::string line(1, version);
  line += ' ';
  for (std::uint8_t b : key) line += fmt::format("{:02x}", b);
  return line;
}

Result<std::unique_ptr<OpaqueCodec>> OpaqueCodec::Create(const std::vector<OpaqueKey>& keys,
                                                         const Layout& layout) {
  if (keys.empty()) return InvalidArgument("opaque ids need at least one key");
  std::vector<Key> made;
  for (const OpaqueKey& k : keys) {
    Result<std::unique_ptr<Ff1>> f = Ff1::Create(k.key);
    if (!f.ok()) return InvalidArgument(fmt::format("key {}: {}", k.version, f.error().message));
    made.push_back({k.version, std::move(f).value()});
  }
  int bits = 0;
  while (bits < 63 && (layout.max_id() >> bits) != 0) ++bits;
  // The tweak names what gives an id its meaning, so one key maps each layout's ids to
  // unrelated opaque ids.
  // Classic layouts keep the tweak they had before the kinds and spreads existed.
  std::string tweak = fmt::format("sekka-opaque/{}/{}/{}/{}/{}/{}/{}{}", layout.time_bits(),
                                  layout.datacenter_bits(), layout.worker_bits(),
                                  layout.sequence_bits(), layout.tick_millis(),
                                  layout.epoch_millis(), layout.OrderName(), layout.ExtraOptions());
  return std::unique_ptr<OpaqueCodec>(new OpaqueCodec(std::move(made), bits, std::move(tweak)));
}

const OpaqueCodec::Key* OpaqueCodec::Find(char version) const {
  if (version == 0) return &keys_.back();
  for (const Key& k : keys_) {
    if (k.version == version) return &k;
  }
  return nullptr;
}

Result<Id> OpaqueCodec::Encode(Id id) const {
  if (id < 0 || (static_cast<std::uint64_t>(id) >> bits_) != 0) {
    return InvalidArgument(
        fmt::format("id {} is not valid for opaque ids: allowed 0 to 2^{}-1", id, bits_));
  }
  const auto* tweak = reinterpret_cast<const std::uint8_t*>(tweak_.data());
  return static_cast<Id>(keys_.back().ff1->EncryptBits(static_cast<std::uint64_t>(id), bits_,
                                                       std::span(tweak, tweak_.size())));
}

Result<Id> OpaqueCodec::Decode(Id opaque, char version) const {
  if (opaque < 0 || (static_cast<std::uint64_t>(opaque) >> bits_) != 0) {
    return InvalidArgument(
        fmt::format("opaque id {} is not valid: allowed 0 to 2^{}-1", opaque, bits_));
  }
  const Key* key = Find(version);
  if (key == nullptr) {
    std::string versions;
    for (const Key& k : keys_)
      versions += fmt::format("{}'{}'", versions.empty() ? "" : ", ", k.version);
    return NotFound(
        fmt::format("opaque key version '{}' is not known: allowed {}", version, versions));
  }
  const auto* tweak = reinterpret_cast<const std::uint8_t*>(tweak_.data());
  return static_cast<Id>(key->ff1->DecryptBits(static_cast<std::uint64_t>(opaque), bits_,
                                               std::span(tweak, tweak_.size())));
}

Result<std::string> OpaqueCodec::EncodeText(Id id) const {
  SEKKA_ASSIGN_OR_RETURN(auto opaque, Encode(id));
  std::string text(1, keys_.back().version);
  text += FormatId(opaque, IdFormat::kBase62, Layout::Default());
  return text;
}

Result<Id> OpaqueCodec::DecodeText(std::string_view text) const {
  auto bad = [&] {
    std::string shown;
    for (char c : text.substr(0, 40)) shown += IsVersionChar(c) ? c : '?';
    return InvalidArgument(fmt::format(
        "opaque text \"{}\" is not valid: allowed a key version character and 11 base62 "
        "characters (12 of 0-9A-Za-z)",
        shown));
  };
  if (text.size() != 12 || !IsVersionChar(text[0])) return bad();
  Result<Id> value = ParseId(text.substr(1), IdFormat::kBase62, Layout::Default());
  if (!value.ok()) return bad();
  return Decode(*value, text[0]);
}

}  // namespace sekka
