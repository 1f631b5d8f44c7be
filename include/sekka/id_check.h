// include/sekka/id_check.h
//
// Checks a stream of ids as a receiver of ids should (the articles sekka comes from: "whoever
// receives the ids must check for duplicates"): repeated ids, with the positions of the first
// examples; ids from the future (decoded time past now plus a tolerance) or before the epoch
// (negative); ids that do not fit the layout (above its largest id, or shard bits its fields do
// not give); and per-worker order breaks (an id of a worker whose (time, sequence) is below
// that worker's previous id in the stream: a sign of a clock step).
//
//   IdChecker c(options);
//   for (Id id : ids) c.Add(id);
//   CheckReport r = c.Finish();      // r.repeats > 0: some id repeats
//
// Memory: 16 bytes per id (the ids in stream order, and a sorted copy made by Finish with an
// in-place radix sort). Thread-safety: none (one checker, one thread).

#ifndef SEKKA_ID_CHECK_H_
#define SEKKA_ID_CHECK_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sekka/layout.h"

namespace sekka {

struct CheckOptions {
  Layout layout = Layout::Default();
  std::int64_t now_ms = 0;                    // "now", for ids from the future
  std::int64_t future_tolerance_ms = 60'000;  // clocks differ: this much ahead is not future
  std::size_t examples = 10;                  // examples kept of each finding
};

struct CheckReport {
  std::uint64_t ids = 0;       // ids read
  std::uint64_t distinct = 0;  // distinct values
  // Repeats: values that occur more than once, and the extra occurrences in all.
  std::uint64_t repeated_values = 0;
  std::uint64_t repeats = 0;
  struct Repeat {
    Id id = 0;
    std::uint64_t occurrences = 0;
    std::vector<std::uint64_t> positions;  // 0-based positions in the stream (the first ones)
  };
  std::vector<Repeat> repeat_examples;  // the smallest repeated values

  struct Example {
    std::uint64_t position = 0;
    Id id = 0;
    Id previous = 0;  // order breaks: the worker's previous id
    std::int64_t worker = 0;
  };
  std::uint64_t future = 0;  // decoded time past now + tolerance
  std::vector<Example> future_examples;
  std::uint64_t before_epoch = 0;  // negative: a time before the epoch
  std::vector<Example> before_epoch_examples;
  std::uint64_t outside = 0;  // above the layout's largest id, or shard bits that do not match
  std::vector<Example> outside_examples;
  std::uint64_t order_breaks = 0;  // per worker, (time, sequence) below the previous id's
  std::vector<Example> order_break_examples;
  std::int64_t workers = 0;                // worker ids seen
  std::int64_t first_ms = 0, last_ms = 0;  // the decoded time range of the valid ids
};

class IdChecker {
 public:
  explicit IdChecker(const CheckOptions& options);
  // Room for `n` ids (a guess from the input's size), to spare the vector's regrowth.
  void Reserve(std::size_t n) { ids_.reserve(n); }

  // Adds the next id of the stream (its position is the number added before it).
  void Add(Id id);
  void Add(std::span<const Id> ids) {
    for (Id id : ids) Add(id);
  }
  // Sorts a copy of the ids and reports. Call once.
  CheckReport Finish();

 private:
  CheckOptions options_;
  std::vector<Id> ids_;  // stream order
  CheckReport report_;
  std::vector<std::int64_t> last_key_;  // per worker id: the previous (tick, sequence), or -1
  std::int64_t max_ms_ = 0;             // now + tolerance
};

// Reads ids from text in chunks of any size (a token may span two chunks): tokens are
// separated by whitespace or commas and may be wrapped in double quotes (CSV); a token is an
// id when it is an optional '-' and 1 to 19 digits within int64. Everything else is counted as
// not an id, with the line of the first examples.
class IdTextScanner {
 public:
  struct Bad {
    std::string source;      // the file (or "stdin", "query") it came from
    std::uint64_t line = 0;  // 1-based, within the source
    std::string text;        // at most 40 bytes, non-printable bytes as '?'
  };
  // Starts a new source (a file): lines count from 1 again. Ends a token left open.
  template <typename Sink>
  void Begin(std::string source, Sink&& sink) {
    Finish(sink);
    source_ = std::move(source);
    line_ = 0;
  }
  // `sink` is called with each id, in order.
  template <typename Sink>
  void Feed(std::string_view chunk, Sink&& sink) {
    const char* p = chunk.data();
    const std::size_t n = chunk.size();
    std::size_t i = 0;
    while (i < n) {
      const char c = p[i];
      if (IsSeparator(c)) {
        if (in_token_) End(sink);
        if (c == '\n') ++line_;
        ++i;
        continue;
      }
      if (!in_token_) {
        // The fast path: a whole decimal token inside this chunk, parsed in place.
        std::size_t j = i + (c == '-' ? 1 : 0);
        const std::size_t first = j;
        std::uint64_t v = 0;
        while (j < n && j - first < 19 && p[j] >= '0' && p[j] <= '9') {
          v = v * 10 + static_cast<std::uint64_t>(p[j] - '0');
          ++j;
        }
        if (j > first && j < n && IsSeparator(p[j]) && v <= kMaxMagnitude) {
          sink(c == '-' ? static_cast<std::int64_t>(0 - v) : static_cast<std::int64_t>(v));
          i = j;
          continue;
        }
      }
      in_token_ = true;
      if (token_.size() < 64) token_.push_back(c);
      ++length_;
      ++i;
    }
  }
  template <typename Sink>
  void Finish(Sink&& sink) {
    if (in_token_) End(sink);
  }
  // Counts a value that is not an id without scanning it (a NULL from a database), on the
  // current line.
  void CountBad(std::string_view shown) {
    ++bad_count_;
    if (bad_.size() < 10) bad_.push_back({source_, line_ + 1, std::string(shown.substr(0, 40))});
  }
  std::uint64_t bad_count() const { return bad_count_; }
  const std::vector<Bad>& bad_examples() const { return bad_; }

 private:
  template <typename Sink>
  void End(Sink& sink) {
    std::int64_t value = 0;
    if (Parse(value)) {
      sink(value);
    } else {
      ++bad_count_;
      if (bad_.size() < 10) {
        std::string shown = token_.substr(0, 40);
        for (char& ch : shown) {
          if (ch < 0x20 || ch > 0x7e) ch = '?';
        }
        bad_.push_back({source_, line_ + 1, std::move(shown)});
      }
    }
    token_.clear();
    length_ = 0;
    in_token_ = false;
  }
  bool Parse(std::int64_t& value) const;
  static bool IsSeparator(char c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == ',' || c == '"';
  }
  // The fast path takes magnitudes up to INT64_MAX (so "-9223372036854775808" goes the slow
  // way, which takes it).
  static constexpr std::uint64_t kMaxMagnitude = 0x7fffffffffffffffULL;

  std::string token_;
  std::size_t length_ = 0;  // the token's length (token_ keeps its first 64 bytes)
  bool in_token_ = false;
  std::string source_;
  std::uint64_t line_ = 0;
  std::uint64_t bad_count_ = 0;
  std::vector<Bad> bad_;
};

// Writes `in` sorted into `out` (the same size): one counting pass and one scatter on the (9 to
// 16) highest bits in which the keys differ, each by `threads` threads over their share of
// `in`, then the buckets (small enough for the cache when the keys spread) sorted in place by
// the threads in turn. Faster than copying and sorting in place, in the same memory.
void RadixSortCopy(std::span<const std::uint64_t> in, std::span<std::uint64_t> out,
                   int threads = 1);

}  // namespace sekka

#endif  // SEKKA_ID_CHECK_H_
