#include "backends/redis_segment_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <set>

#include "backends/redis_client.h"
#include "backends/store_uri.h"
#include "sekka/secrets.h"

namespace sekka {
namespace {

// A range: nil for an unknown tag; "EXHAUSTED ..." when the counter would pass 2^63 - 2 (so
// that the range's end, v + 1, stays an int64: INCRBY by step + 1 fails exactly then, and the 1
// is given back); else the counter's new value as a string (Lua's numbers are doubles, strings
// are exact).
constexpr const char* kAllocate = R"(
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local r = redis.pcall('INCRBY', KEYS[1], ARGV[1])
if type(r) == 'table' and r.err then
  if string.find(r.err, 'overflow') then return redis.error_reply('EXHAUSTED ' .. r.err) end
  return r
end
redis.call('DECRBY', KEYS[1], 1)
return {redis.call('GET', KEYS[1]), redis.call('HGET', KEYS[2], 'step')}
)";

// Counters as decimal strings compared exactly (Lua's numbers are doubles): a < b.
#define SEKKA_LESS                          \
  "local function less(a, b)\n"             \
  "  if #a ~= #b then return #a < #b end\n" \
  "  return a < b\n"                        \
  "end\n"

// A new tag: 0 when its counter exists; {tombstone, delta, remainder} when the tag was deleted
// and CheckRevival refuses the new one (a tombstone is the metadata's 'deleted' field: the
// counter when it was deleted); VANISHED when the metadata of a live tag stays and its counter
// is gone (evicted, or deleted by hand): starting it again would repeat its ids; else the
// counter (first id - 1) and the metadata, and 1.
constexpr const char* kCreate = SEKKA_LESS R"(
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local dead = redis.call('HGET', KEYS[2], 'deleted')
if not dead and redis.call('HEXISTS', KEYS[2], 'step') == 1 then
  return redis.error_reply('VANISHED the counter is gone')
end
if dead then
  local m = redis.call('HMGET', KEYS[2], 'delta', 'remainder')
  local delta, remainder = m[1] or '1', m[2] or '0'
  if less(ARGV[1], dead) or delta ~= ARGV[3] or remainder ~= ARGV[4] then
    return {dead, delta, remainder}
  end
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], 'step', ARGV[2], 'delta', ARGV[3], 'remainder', ARGV[4])
redis.call('HDEL', KEYS[2], 'deleted')
return 1
)";

// A tag's step, where its counter exists: 1, else 0.
constexpr const char* kSetStep = R"(
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], 'step', ARGV[1])
return 1
)";

// Deletes a tag: its counter goes into the metadata as the tombstone (never below one kept
// there), and the counter key is removed. Returns the tag as kGet does, or nil.
constexpr const char* kDelete = SEKKA_LESS R"(
local c = redis.call('GET', KEYS[1])
if not c then return false end
local dead = redis.call('HGET', KEYS[2], 'deleted')
if not dead or less(dead, c) then redis.call('HSET', KEYS[2], 'deleted', c) end
redis.call('DEL', KEYS[1])
local m = redis.call('HMGET', KEYS[2], 'step', 'delta', 'remainder')
return {c, m[1], m[2], m[3]}
)";
#undef SEKKA_LESS

// A tag's counter and metadata: {counter or nil, step, delta, remainder} (nil fields when the
// tag was made by CosId, which keeps no metadata).
constexpr const char* kGet = R"(
local c = redis.call('GET', KEYS[1])
if not c then return false end
local m = redis.call('HMGET', KEYS[2], 'step', 'delta', 'remainder')
return {c, m[1], m[2], m[3]}
)";

// CosId's DEFAULT_STEP, the step of a tag CosId made.
constexpr std::int64_t kCosIdStep = 100;

class RedisSegmentStore final : public SegmentStore {
 public:
  RedisSegmentStore(std::unique_ptr<RedisClient> redis, std::string prefix)
      : redis_(std::move(redis)), prefix_(std::move(prefix)) {}

  Result<Allocation> Allocate(std::string_view tag, std::int64_t step) override {
    if (step < 1 || step == std::numeric_limits<std::int64_t>::max()) return BadStep(step);
    if (!ValidateTag(tag).ok()) return TagNotFound(tag);
    SEKKA_ASSIGN_OR_RETURN(auto r, redis_->Call({"EVAL", kAllocate, "2", Counter(tag), Meta(tag),
                                                 std::to_string(step + 1)}));
    if (r.nil) return TagNotFound(tag);
    std::int64_t v = 0;
    if (r.kind == '-' && r.text.rfind("EXHAUSTED", 0) == 0) {
      Result<TagInfo> info = GetTag(tag);
      return TagExhausted(tag, info.ok() ? info->next_id : 0, step);
    }
    if (r.kind != '*' || r.elements.size() != 2 || !DecimalInt64(r.elements[0].text, v)) {
      return Broken(tag, r);
    }
    // CosId's counters have no metadata: no step to follow (0).
    std::int64_t tag_step = 0;
    if (!r.elements[1].nil && !DecimalInt64(r.elements[1].text, tag_step)) {
      return Broken(tag, r);
    }
    return Allocation{{v - step + 1, v + 1}, tag_step};
  }

  Status CreateTag(const TagInfo& tag) override {
    if (Status s = ValidateNewTag(tag); !s.ok()) return s;
    Result<RespReply> r = redis_->Call(
        {"EVAL", kCreate, "2", Counter(tag.tag), Meta(tag.tag), std::to_string(tag.next_id - 1),
         std::to_string(tag.step), std::to_string(tag.delta), std::to_string(tag.remainder)},
        /*may_repeat=*/false);  // again after a lost reply: "exists"
    SEKKA_RETURN_IF_ERROR(r);
    if (r->kind == '-' && r->text.rfind("VANISHED", 0) == 0) {
      return Internal(fmt::format(
          "segment store {}: tag {} has its metadata {} but no counter {} (evicted, or deleted "
          "by hand): sekka will not start it again, as its ids would repeat; restore the "
          "counter to at least the last id served, or delete the metadata after checking",
          redis_->text(), tag.tag, Meta(tag.tag), Counter(tag.tag)));
    }
    TagInfo dead{tag.tag};
    if (r->kind == '*' && r->elements.size() == 3 &&
        DecimalInt64(r->elements[0].text, dead.next_id) &&
        DecimalInt64(r->elements[1].text, dead.delta) &&
        DecimalInt64(r->elements[2].text, dead.remainder)) {
      dead.next_id += 1;  // the counter is the last id covered
      if (Status s = CheckRevival(dead, tag); !s.ok()) return s;
      return Broken(tag.tag, *r);  // the script refused what CheckRevival allows
    }
    if (r->kind != ':') return Broken(tag.tag, *r);
    if (r->integer == 0) return TagExists(tag.tag);
    return Status::Ok();
  }

  Status SetStep(std::string_view tag, std::int64_t step) override {
    if (Status s = ValidateTagStep(step); !s.ok()) return s;
    if (prefix_ == "cosid") {
      return InvalidArgument(fmt::format(
          "tag {}: a CosId counter's step is set in each CosId client's configuration, not in "
          "Redis; sekka's servers adapt theirs up to segment.max_step",
          tag));
    }
    if (!ValidateTag(tag).ok()) return TagNotFound(tag);
    SEKKA_ASSIGN_OR_RETURN(auto r, redis_->Call({"EVAL", kSetStep, "2", Counter(tag), Meta(tag),
                                                 std::to_string(step)}));
    if (r.kind != ':') return Broken(tag, r);
    if (r.integer == 0) return TagNotFound(tag);
    return Status::Ok();
  }

  Result<TagInfo> DeleteTag(std::string_view tag) override {
    if (prefix_ == "cosid") return NoDeleteOnPeerTable(tag, "CosId");
    if (!ValidateTag(tag).ok()) return TagNotFound(tag);
    Result<RespReply> r = redis_->Call({"EVAL", kDelete, "2", Counter(tag), Meta(tag)},
                                       /*may_repeat=*/false);  // again: "not found"
    SEKKA_RETURN_IF_ERROR(r);
    return Info(tag, *r);
  }

  Result<TagInfo> GetTag(std::string_view tag) override {
    if (!ValidateTag(tag).ok()) return TagNotFound(tag);
    SEKKA_ASSIGN_OR_RETURN(auto r, redis_->Call({"EVAL", kGet, "2", Counter(tag), Meta(tag)}));
    return Info(tag, r);
  }

  Result<std::vector<TagInfo>> ListTagsAfter(std::string_view after, std::size_t limit) override {
    // The `limit` smallest names after `after`, kept while SCAN walks the keys (memory bounded
    // by the page, not the key space).
    std::set<std::string> names;
    std::string cursor = "0";
    const std::string pattern = prefix_ + ":{*}.adder";
    do {  // SCAN's cursor: every key that exists throughout is returned at least once
      SEKKA_ASSIGN_OR_RETURN(auto r,
                             redis_->Call({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}));
      if (r.kind != '*' || r.elements.size() != 2) return Broken("*", r);
      cursor = r.elements[0].text;
      for (const RespReply& key : r.elements[1].elements) {
        // The name is what Counter() put between "<prefix>:{" and "}.adder" (it may hold braces).
        const std::string_view k = key.text;
        const std::size_t head = prefix_.size() + 2, tail = std::string_view("}.adder").size();
        if (k.size() <= head + tail || !k.starts_with(prefix_ + ":{") || !k.ends_with("}.adder"))
          continue;
        std::string name(k.substr(head, k.size() - head - tail));
        if (name <= after) continue;
        names.insert(std::move(name));
        if (limit != 0 && names.size() > limit) names.erase(std::prev(names.end()));
      }
    } while (cursor != "0");
    std::vector<TagInfo> out;
    for (const std::string& name : names) {
      Result<TagInfo> info = GetTag(name);
      if (!info.ok() && info.error().code == ErrorCode::kNotFound) continue;  // deleted meanwhile
      SEKKA_ASSIGN_OR_RETURN(TagInfo tag, std::move(info));
      out.push_back(std::move(tag));
    }
    return out;
  }

 private:
  // A tag from kGet's answer (kDelete's too).
  Result<TagInfo> Info(std::string_view tag, const RespReply& reply) const {
    if (reply.nil) return TagNotFound(tag);
    std::int64_t counter = 0;
    if (reply.kind != '*' || reply.elements.size() != 4 ||
        !DecimalInt64(reply.elements[0].text, counter)) {
      return Broken(tag, reply);
    }
    TagInfo info{std::string(tag), counter + 1, kCosIdStep, 1, 0};
    const std::array<std::int64_t*, 3> fields = {&info.step, &info.delta, &info.remainder};
    for (std::size_t i = 0; i < fields.size(); ++i) {
      const RespReply& field = reply.elements[i + 1];
      if (!field.nil && !DecimalInt64(field.text, *fields[i])) return Broken(tag, reply);
    }
    return info;
  }

  std::string Counter(std::string_view tag) const {
    return fmt::format("{}:{{{}}}.adder", prefix_, tag);
  }
  std::string Meta(std::string_view tag) const {
    return fmt::format("{}:{{{}}}.meta", prefix_, tag);
  }

  Error Broken(std::string_view tag, const RespReply& r) const {
    return Unavailable(fmt::format("segment store {}: tag {}: {}", redis_->text(), tag,
                                   r.kind == '-' ? r.text : "an answer that is not the script's"));
  }

  const std::unique_ptr<RedisClient> redis_;
  const std::string prefix_;
};

}  // namespace

Result<std::unique_ptr<SegmentStore>> OpenRedisSegmentStore(const std::string& uri) {
  std::vector<std::string_view> params(std::begin(RedisClient::kParams),
                                       std::end(RedisClient::kParams));
  params.push_back("schema");
  SEKKA_ASSIGN_OR_RETURN(auto parsed, ParseStoreUri(uri, "segment.store", params));
  if (parsed.scheme != "redis" && parsed.scheme != "rediss") {
    return InvalidArgument("segment.store for Redis begins redis:// or rediss://");
  }
  const auto schema = parsed.params.find("schema");
  const std::string prefix = schema == parsed.params.end() ? "sekka" : schema->second;
  if (prefix != "sekka" && prefix != "cosid") {
    return InvalidArgument(fmt::format(
        "segment.store parameter schema=\"{}\" is not known for Redis: allowed sekka, cosid",
        prefix.substr(0, 40)));
  }
  SEKKA_ASSIGN_OR_RETURN(auto redis,
                         RedisClient::Open(std::move(parsed), RedactSecrets(uri), "segment.store"));
  return std::unique_ptr<SegmentStore>(new RedisSegmentStore(std::move(redis), prefix));
}

}  // namespace sekka
