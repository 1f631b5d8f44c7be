// include/sekka/segment.h
//
// Segments: strictly increasing ids per *tag* (Leaf's biz_tag), served from ranges that a store
// hands out. A SegmentStore is all a database backend implements: it keeps, per tag, the next
// unallocated id and a default step, and moves the next id forward atomically. Buffering and
// prefetch live in the core, not in backends.
//
// Thread-safety: SegmentStore implementations must allow concurrent calls from any number of
// threads, and (for shared stores) from any number of processes.

#ifndef SEKKA_SEGMENT_H_
#define SEKKA_SEGMENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sekka/status.h"

namespace sekka {

// A half-open block [begin, end) of ids.
struct IdRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t size() const { return end - begin; }
  bool operator==(const IdRange&) const = default;
};

// One tag as a store keeps it.
struct TagInfo {
  std::string tag;
  std::int64_t next_id = 1;  // the next id no range has covered yet
  std::int64_t step = 1000;  // the default range size
};

// Tag names are 1 to 128 characters of A-Z a-z 0-9 _ . : - (they appear in URLs and metrics).
// Errors: kInvalidArgument naming what is allowed.
Status ValidateTag(std::string_view tag);

class SegmentStore {
 public:
  virtual ~SegmentStore() = default;

  // Atomically moves the tag's next id up by `step` and returns the range [old, old + step).
  // Ranges of one tag never overlap, across threads and processes.
  // Errors: kNotFound (unknown tag), kInvalidArgument (step < 1), kExhausted (the range would
  // pass 2^63 - 1), kUnavailable (the store cannot be reached).
  virtual Result<IdRange> Allocate(std::string_view tag, std::int64_t step) = 0;

  // Tag management, for `sekka segment create|list|show` and the server's auto-create.
  // Errors: kInvalidArgument (bad name, start < 1, step < 1, the tag exists), kUnavailable.
  virtual Status CreateTag(const TagInfo& tag) = 0;
  // Errors: kNotFound, kUnavailable.
  virtual Result<TagInfo> GetTag(std::string_view tag) = 0;
  // All tags in name order. Errors: kUnavailable.
  virtual Result<std::vector<TagInfo>> ListTags() = 0;
};

// An in-memory store, for tests and for trying things out: nothing survives the process.
std::unique_ptr<SegmentStore> NewMemorySegmentStore();

}  // namespace sekka

#endif  // SEKKA_SEGMENT_H_
