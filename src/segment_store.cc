// Tag validation and the in-memory SegmentStore.

#include <fmt/format.h>

#include <limits>
#include <map>
#include <mutex>

#include "sekka/segment.h"

namespace sekka {
namespace {

constexpr std::int64_t kMaxDelta = 1'000'000;

class MemorySegmentStore final : public SegmentStore {
 public:
  Result<Allocation> Allocate(std::string_view tag, std::int64_t step) override {
    if (step < 1) return BadStep(step);
    std::lock_guard lock(mu_);
    auto it = tags_.find(std::string(tag));
    if (it == tags_.end()) return TagNotFound(tag);
    TagInfo& t = it->second;
    if (t.next_id > std::numeric_limits<std::int64_t>::max() - step) {
      return TagExhausted(tag, t.next_id, step);
    }
    const Allocation range{{t.next_id, t.next_id + step}, t.step};
    t.next_id = range.end;
    return range;
  }

  Status CreateTag(const TagInfo& tag) override {
    if (Status s = ValidateNewTag(tag); !s.ok()) return s;
    std::lock_guard lock(mu_);
    if (auto dead = deleted_.find(tag.tag); dead != deleted_.end()) {
      if (Status s = CheckRevival(dead->second, tag); !s.ok()) return s;
    }
    if (!tags_.emplace(tag.tag, tag).second) return TagExists(tag.tag);
    deleted_.erase(tag.tag);
    return Status::Ok();
  }

  Status SetStep(std::string_view tag, std::int64_t step) override {
    if (Status s = ValidateTagStep(step); !s.ok()) return s;
    std::lock_guard lock(mu_);
    auto it = tags_.find(std::string(tag));
    if (it == tags_.end()) return TagNotFound(tag);
    it->second.step = step;
    return Status::Ok();
  }

  Result<TagInfo> DeleteTag(std::string_view tag) override {
    std::lock_guard lock(mu_);
    auto it = tags_.find(std::string(tag));
    if (it == tags_.end()) return TagNotFound(tag);
    TagInfo was = it->second;
    deleted_[was.tag] = was;
    tags_.erase(it);
    return was;
  }

  Result<TagInfo> GetTag(std::string_view tag) override {
    std::lock_guard lock(mu_);
    auto it = tags_.find(std::string(tag));
    if (it == tags_.end()) return TagNotFound(tag);
    return it->second;
  }

  Result<std::vector<TagInfo>> ListTagsAfter(std::string_view after, std::size_t limit) override {
    std::lock_guard lock(mu_);
    std::vector<TagInfo> out;
    for (auto it = tags_.upper_bound(std::string(after));
         it != tags_.end() && (limit == 0 || out.size() < limit); ++it) {
      out.push_back(it->second);
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::map<std::string, TagInfo> tags_;  // guarded by mu_
  // Tombstones: a deleted tag's row as it was; guarded by mu_.
  std::map<std::string, TagInfo> deleted_;
};

}  // namespace

Result<TagInfo> SegmentStore::ImportTag(std::string_view tag, std::string_view from) {
  return InvalidArgument(fmt::format(
      "segment import of tag {} from {}: this segment store cannot: it moves a tag from Leaf's or "
      "tinyid's table into sekka's on the same MySQL database, given as "
      "--segment-store mysql://USER@HOST:PORT/DATABASE (sekka's table, no schema parameter)",
      tag.substr(0, 128), from.substr(0, 20)));
}

Result<std::vector<PeerToken>> SegmentStore::PeerTokens() {
  return InvalidArgument("this segment store keeps no tinyid tokens: only ?schema=tinyid does");
}

namespace {

// The character at text[at] of valid UTF-8 (RFC 3629: the shortest form, no surrogates, at most
// U+10FFFF), with `at` moved past it; -1 (and `at` unmoved) at a byte that starts none.
std::int32_t NextCharacter(std::string_view text, std::size_t& at) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned lead = byte(at);
  const std::size_t length = lead < 0x80   ? 1
                             : lead < 0xc2 ? 0
                             : lead < 0xe0 ? 2
                             : lead < 0xf0 ? 3
                             : lead < 0xf5 ? 4
                                           : 0;
  if (length == 0 || at + length > text.size()) return -1;
  std::int32_t c = static_cast<std::int32_t>(length == 1 ? lead : lead & (0x7f >> length));
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xc0) != 0x80) return -1;
    c = (c << 6) | (byte(at + i) & 0x3f);
  }
  constexpr std::int32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < kSmallest[length] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return -1;
  at += length;
  return c;
}

bool IsControl(std::int32_t c) { return c < 0x20 || (c >= 0x7f && c <= 0x9f); }

}  // namespace

Status ValidateTag(std::string_view tag) {
  // Steps: 1. every byte belongs to a character of valid UTF-8; 2. no character is a control
  // (C0, DEL, C1); 3. there are 1 to kMaxTagCharacters of them.
  std::size_t characters = 0;
  bool ok = !tag.empty();
  for (std::size_t at = 0; ok && at < tag.size(); ++characters) {
    const std::int32_t c = NextCharacter(tag, at);
    ok = c >= 0 && !IsControl(c);
  }
  if (ok && characters <= kMaxTagCharacters) return Status::Ok();
  return InvalidArgument(fmt::format(
      "tag \"{}\" is not valid: allowed 1 to {} characters of UTF-8 without control characters",
      ShownTag(tag), kMaxTagCharacters));
}

std::string ShownTag(std::string_view tag) {
  // Characters of UTF-8 as they are (a space, a slash, 订), the quote and the backslash escaped,
  // a control or a byte of no character as \xNN: a name is shown as it was given, never garbled.
  constexpr std::size_t kShown = 60;
  std::string shown;
  std::size_t at = 0;
  for (std::size_t n = 0; at < tag.size() && n < kShown; ++n) {
    const std::size_t from = at;
    const std::int32_t c = NextCharacter(tag, at);
    if (c == '"' || c == '\\') {
      shown += '\\';
      shown += static_cast<char>(c);
    } else if (c >= 0 && !IsControl(c)) {
      shown.append(tag.substr(from, at - from));
    } else {
      if (c < 0) at = from + 1;
      for (std::size_t i = from; i < at; ++i)
        shown += fmt::format("\\x{:02x}", static_cast<unsigned char>(tag[i]));
    }
  }
  return at < tag.size() ? shown + "..." : shown;
}

Status ValidateNewTag(const TagInfo& tag) {
  if (Status s = ValidateTag(tag.tag); !s.ok()) return s;
  if (tag.next_id < 1) {
    return InvalidArgument(
        fmt::format("tag \"{}\": start {} is not valid: allowed 1 or more", tag.tag, tag.next_id));
  }
  if (Status s = ValidateTagStep(tag.step); !s.ok()) return s;
  return ValidateDelta(tag);
}

Status ValidateTagStep(std::int64_t step) {
  if (step >= 1 && step <= kMaxTagStep) return Status::Ok();
  return InvalidArgument(
      fmt::format("step {} is not valid for a tag: allowed 1 to {}", step, kMaxTagStep));
}

Status ValidateDelta(const TagInfo& tag) {
  if (tag.delta < 1 || tag.delta > kMaxDelta || tag.remainder < 0 || tag.remainder >= tag.delta) {
    return InvalidArgument(fmt::format(
        "tag \"{}\": delta {} and remainder {} are not valid: allowed delta 1 to {} and "
        "remainder 0 to delta - 1",
        tag.tag, tag.delta, tag.remainder, kMaxDelta));
  }
  return Status::Ok();
}

Status CheckServedRow(const TagInfo& row) {
  Status s = ValidateDelta(row);
  if (s.ok()) return s;
  return Unavailable(s.error().message + " in the segment store: fix the tag's row");
}

Status CheckServedRange(std::string_view tag, const IdRange& range) {
  if (range.begin >= 1 && range.end > range.begin) return Status::Ok();
  return Unavailable(fmt::format(
      "the segment store handed out [{}, {}) for tag {}: ids start at 1; fix the tag's row",
      range.begin, range.end, tag));
}

namespace {
std::int64_t CeilDiv(std::int64_t x, std::int64_t d) { return x / d + (x % d > 0 ? 1 : 0); }
}  // namespace

IdRange IdPositions(const IdRange& range, std::int64_t delta, std::int64_t remainder) {
  return {CeilDiv(range.begin - remainder, delta), CeilDiv(range.end - remainder, delta)};
}

Error TagNotFound(std::string_view tag) {
  return NotFound(fmt::format("tag \"{}\" is not found", tag));
}

Error TagExhausted(std::string_view tag, std::int64_t next_id, std::int64_t step) {
  return Exhausted(fmt::format("tag \"{}\" is exhausted: next id {} + step {} passes 2^63-1", tag,
                               next_id, step));
}

Error TagExists(std::string_view tag) {
  return AlreadyExists(fmt::format("tag \"{}\" already exists", tag));
}

Error BadStep(std::int64_t step) {
  return InvalidArgument(fmt::format("step {} is not valid: allowed 1 or more", step));
}

Error TagDeletedAt(std::string_view tag, std::int64_t next_id) {
  return InvalidArgument(fmt::format(
      "tag \"{}\" was deleted at next id {}: create it again with a start of {} or more, so "
      "that no id it issued is issued again",
      tag, next_id, next_id));
}

Status CheckRevival(const TagInfo& dead, const TagInfo& tag) {
  if (tag.next_id < dead.next_id) return TagDeletedAt(tag.tag, dead.next_id);
  if (tag.delta != dead.delta || tag.remainder != dead.remainder) {
    return InvalidArgument(fmt::format(
        "tag \"{}\" was deleted with delta {} and remainder {}: create it again with the same "
        "(servers that served it keep them until they restart), or use a new name",
        tag.tag, dead.delta, dead.remainder));
  }
  return Status::Ok();
}

Error NoDeleteOnPeerTable(std::string_view tag, std::string_view peer) {
  return InvalidArgument(fmt::format(
      "tag \"{}\" is not deleted: it lives in {}'s table, whose own servers keep no tombstone; "
      "retire it with {}'s own tools",
      tag, peer, peer));
}

std::unique_ptr<SegmentStore> NewMemorySegmentStore() {
  return std::make_unique<MemorySegmentStore>();
}

}  // namespace sekka
