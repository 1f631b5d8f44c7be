#include "sekka/id_check.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <limits>
#include <memory>
#include <thread>

namespace sekka {
namespace {

// Worker ids up to this many get a flat array of their previous key; more (custom layouts with
// 23 or more worker bits) are not tracked for order breaks.
constexpr std::int64_t kMaxTrackedWorkers = std::int64_t{1} << 22;

void SortRange(std::uint64_t* a, std::size_t n, int shift, int threads = 1) {
  while (true) {
    if (n < 128) {
      std::sort(a, a + n);
      return;
    }
    std::array<std::size_t, 256> count{};
    for (std::size_t i = 0; i < n; ++i) ++count[(a[i] >> shift) & 0xff];
    // All in one bucket: the next byte decides (time-ordered ids share their top bytes).
    if (std::find(count.begin(), count.end(), n) != count.end()) {
      if (shift == 0) return;
      shift -= 8;
      continue;
    }
    std::array<std::size_t, 256> start{}, next{};
    for (std::size_t b = 1; b < 256; ++b) start[b] = start[b - 1] + count[b - 1];
    next = start;
    // American flag sort: move each key into its bucket by swapping.
    for (std::size_t b = 0; b < 256; ++b) {
      const std::size_t end = start[b] + count[b];
      while (next[b] < end) {
        std::uint64_t v = a[next[b]];
        std::size_t d = (v >> shift) & 0xff;
        while (d != b) {
          std::swap(v, a[next[d]++]);
          d = (v >> shift) & 0xff;
        }
        a[next[b]++] = v;
      }
    }
    if (shift == 0) return;
    if (threads <= 1 || n < (1u << 20)) {
      for (std::size_t b = 0; b < 256; ++b) {
        if (count[b] > 1) SortRange(a + start[b], count[b], shift - 8);
      }
      return;
    }
    // The buckets are independent: each thread takes whole buckets, the next one that is
    // left, so that big and small buckets even out.
    std::atomic<std::size_t> next_bucket{0};
    auto work = [&] {
      for (std::size_t b; (b = next_bucket.fetch_add(1)) < 256;) {
        if (count[b] > 1) SortRange(a + start[b], count[b], shift - 8);
      }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (std::thread& t : pool) t.join();
    return;
  }
}

}  // namespace

bool IdTextScanner::Parse(std::int64_t& value) const {
  if (length_ != token_.size() || token_.empty()) return false;  // over 64 bytes: not an id
  std::size_t i = token_[0] == '-' ? 1 : 0;
  const std::size_t digits = token_.size() - i;
  if (digits == 0 || digits > 19) return false;
  std::uint64_t v = 0;
  for (; i < token_.size(); ++i) {
    const char c = token_[i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');  // 19 digits cannot overflow 64 bits
  }
  const bool negative = token_[0] == '-';
  if (v >
      static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) + (negative ? 1 : 0)) {
    return false;
  }
  value = negative ? static_cast<std::int64_t>(0 - v) : static_cast<std::int64_t>(v);
  return true;
}

void RadixSortCopy(std::span<const std::uint64_t> in, std::span<std::uint64_t> out, int threads) {
  const std::size_t n = in.size();
  if (n < (1u << 16)) {
    std::copy(in.begin(), in.end(), out.begin());
    SortRange(out.data(), n, 56);
    return;
  }
  const std::size_t workers = static_cast<std::size_t>(std::clamp(threads, 1, 16));
  // Runs f(t) for t in [0, workers) on that many threads (the caller's being one).
  auto parallel = [workers](const auto& f) {
    std::vector<std::thread> pool;
    for (std::size_t t = 1; t < workers; ++t) pool.emplace_back(f, t);
    f(std::size_t{0});
    for (std::thread& t : pool) t.join();
  };
  auto share = [n, workers](std::size_t t) {
    return std::pair<std::size_t, std::size_t>{n * t / workers, n * (t + 1) / workers};
  };
  // The highest bit in which any key differs from the first.
  std::vector<std::uint64_t> differ(workers, 0);
  parallel([&](std::size_t t) {
    std::uint64_t x = 0;
    for (auto [i, end] = share(t); i < end; ++i) x |= in[i] ^ in[0];
    differ[t] = x;
  });
  std::uint64_t x = 0;
  for (std::uint64_t d : differ) x |= d;
  if (x == 0) {  // all equal
    std::copy(in.begin(), in.end(), out.begin());
    return;
  }
  const int top = 64 - std::countl_zero(x);  // bits [0, top) differ somewhere
  // The digit is bits [shift, top): 9 to 16 bits, ending on a byte boundary so that the
  // buckets continue byte by byte.
  const int shift = top <= 9 ? 0 : (top - 9) / 8 * 8;
  const std::size_t buckets = std::size_t{1} << (top - shift);
  const std::uint64_t mask = buckets - 1;
  std::vector<std::vector<std::size_t>> count(workers, std::vector<std::size_t>(buckets, 0));
  parallel([&](std::size_t t) {
    std::vector<std::size_t>& c = count[t];
    for (auto [i, end] = share(t); i < end; ++i) ++c[(in[i] >> shift) & mask];
  });
  // Each thread's place in each bucket: the buckets in order, the threads in order within one.
  std::vector<std::size_t> start(buckets + 1, 0);
  std::size_t at = 0;
  for (std::size_t b = 0; b < buckets; ++b) {
    start[b] = at;
    for (std::size_t t = 0; t < workers; ++t) {
      const std::size_t c = count[t][b];
      count[t][b] = at;
      at += c;
    }
  }
  start[buckets] = n;
  parallel([&](std::size_t t) {
    std::vector<std::size_t>& next = count[t];
    for (auto [i, end] = share(t); i < end; ++i) out[next[(in[i] >> shift) & mask]++] = in[i];
  });
  if (shift == 0) return;  // a bucket holds equal keys
  // A bucket with a large share of the keys (one outlier key far from the rest puts all the
  // others in one bucket) is sorted afterwards with every thread, not by one thread alone.
  const std::size_t large = std::max<std::size_t>(n / 8, std::size_t{1} << 20);
  std::atomic<std::size_t> next_bucket{0};
  parallel([&](std::size_t) {
    constexpr std::size_t kGrab = 64;  // buckets taken at a time
    for (std::size_t b0; (b0 = next_bucket.fetch_add(kGrab)) < buckets;) {
      for (std::size_t b = b0; b < std::min(buckets, b0 + kGrab); ++b) {
        const std::size_t size = start[b + 1] - start[b];
        if (size > 1 && size < large) SortRange(out.data() + start[b], size, shift - 8);
      }
    }
  });
  for (std::size_t b = 0; b < buckets; ++b) {
    const std::size_t size = start[b + 1] - start[b];
    if (size >= large) {
      SortRange(out.data() + start[b], size, shift - 8, static_cast<int>(workers));
    }
  }
}

IdChecker::IdChecker(const CheckOptions& options) : options_(options) {
  const Layout& l = options_.layout;
  if (!l.is_random() && l.worker_ids() <= kMaxTrackedWorkers) {
    last_key_.assign(static_cast<std::size_t>(l.worker_ids()), -1);
  }
  max_ms_ =
      options_.now_ms > std::numeric_limits<std::int64_t>::max() - options_.future_tolerance_ms
          ? std::numeric_limits<std::int64_t>::max()
          : options_.now_ms + options_.future_tolerance_ms;
  report_.first_ms = std::numeric_limits<std::int64_t>::max();
  report_.last_ms = std::numeric_limits<std::int64_t>::min();
}

void IdChecker::Add(Id id) {
  const std::uint64_t position = report_.ids++;
  ids_.push_back(id);
  const std::size_t keep = options_.examples;
  auto note = [&](std::vector<CheckReport::Example>& v, Id previous, std::int64_t worker) {
    if (v.size() < keep) v.push_back({position, id, previous, worker});
  };
  const Layout& l = options_.layout;
  if (id < 0) {
    ++report_.before_epoch;
    note(report_.before_epoch_examples, 0, 0);
    return;
  }
  Result<IdFields> f = l.Decompose(id);
  if (!f.ok()) {  // above max_id(), or shard bits its fields do not give
    ++report_.outside;
    note(report_.outside_examples, 0, 0);
    return;
  }
  const std::int64_t ms = l.TickToMillis(f->tick);
  report_.first_ms = std::min(report_.first_ms, ms);
  report_.last_ms = std::max(report_.last_ms, ms);
  if (ms > max_ms_) {
    ++report_.future;
    note(report_.future_examples, 0, 0);
  }
  if (last_key_.empty()) return;
  const std::int64_t worker = (f->datacenter << l.worker_bits()) | f->worker;
  const std::int64_t key = (f->tick << l.sequence_bits()) | f->sequence;
  std::int64_t& last = last_key_[static_cast<std::size_t>(worker)];
  if (last < 0) {
    ++report_.workers;
  } else if (key < last) {
    ++report_.order_breaks;
    // The previous id of this worker, recomposed from its key (no per-worker id is stored).
    IdFields p = *f;
    p.tick = last >> l.sequence_bits();
    p.sequence = last & ((std::int64_t{1} << l.sequence_bits()) - 1);
    Result<Id> previous = l.Compose(p);
    note(report_.order_break_examples, previous.ok() ? *previous : -1, worker);
  }
  last = key;
}

CheckReport IdChecker::Finish() {
  CheckReport r = report_;
  if (r.ids == 0) r.first_ms = r.last_ms = 0;
  // Not zeroed: the sort writes every element.
  std::unique_ptr<std::uint64_t[]> buffer =
      std::make_unique_for_overwrite<std::uint64_t[]>(ids_.size());
  const std::span<std::uint64_t> sorted(buffer.get(), ids_.size());
  RadixSortCopy({reinterpret_cast<const std::uint64_t*>(ids_.data()), ids_.size()}, sorted,
                static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u)));
  std::vector<Id> examples;  // the first repeated values, in order
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i + 1;
    while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
    ++r.distinct;
    if (j - i > 1) {
      ++r.repeated_values;
      r.repeats += j - i - 1;
      if (examples.size() < options_.examples) {
        examples.push_back(static_cast<Id>(sorted[i]));
        r.repeat_examples.push_back({static_cast<Id>(sorted[i]), j - i, {}});
      }
    }
    i = j;
  }
  buffer.reset();
  // Positions of the examples: one more pass over the stream. (Sorted as unsigned, a negative
  // id came last; as Id it comes first.)
  auto by_id = [](const CheckReport::Repeat& x, const CheckReport::Repeat& y) {
    return x.id < y.id;
  };
  std::sort(r.repeat_examples.begin(), r.repeat_examples.end(), by_id);
  std::sort(examples.begin(), examples.end());
  if (!examples.empty()) {
    for (std::uint64_t pos = 0; pos < ids_.size(); ++pos) {
      const Id id = ids_[pos];
      if (id < examples.front() || id > examples.back()) continue;
      const auto it = std::lower_bound(examples.begin(), examples.end(), id);
      if (it == examples.end() || *it != id) continue;
      std::vector<std::uint64_t>& p = r.repeat_examples[it - examples.begin()].positions;
      if (p.size() < options_.examples) p.push_back(pos);
    }
  }
  return r;
}

}  // namespace sekka
