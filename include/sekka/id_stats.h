// include/sekka/id_stats.h
//
// A statistical look at ids (the articles sekka comes from: "a statistical look at ids shows
// the whole system's busy curve, drills down to each machine's share over time, and shows
// whether load is balanced"): decodes each id with a layout and counts ids per interval,
// overall and per worker id (the busiest ones, the rest together), each worker's share, the
// peak interval, quiet gaps (intervals with no id between the first and the last), and how
// much of a tick's sequence each worker used (how close to the layout's ceiling it ran).
//
//   IdStats s(options);
//   for (Id id : ids) s.Add(id);
//   StatsReport r = s.Finish();
//
// Memory: 8 bytes per id (Finish makes three passes: time range, totals, series). Sequence
// use is measured in input order: a worker's ids that come out of order split its ticks.

#ifndef SEKKA_ID_STATS_H_
#define SEKKA_ID_STATS_H_

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "sekka/layout.h"

namespace sekka {

struct StatsOptions {
  Layout layout = Layout::Default();
  std::int64_t interval_ms = 0;  // 0: chosen so that the range has about 60 to 200 intervals
  std::size_t top_workers = 10;  // workers with series of their own; the rest are summed
};

struct StatsReport {
  std::uint64_t ids = 0;      // ids counted (decodable in the layout)
  std::uint64_t skipped = 0;  // ids that do not decode in the layout (negative, outside)
  std::int64_t first_ms = 0;  // the earliest and latest decoded times
  std::int64_t last_ms = 0;
  std::int64_t interval_ms = 0;         // the bucket width
  std::vector<std::int64_t> starts_ms;  // each bucket's start
  std::vector<std::uint64_t> totals;    // ids per bucket

  struct Series {
    std::int64_t worker = -1;  // -1: all other workers (or, for a random layout, all ids)
    std::uint64_t ids = 0;
    double share = 0;  // of all ids
    std::vector<std::uint64_t> per_bucket;
  };
  std::vector<Series> series;  // the busiest workers first, then "others" if any
  struct WorkerTotal {
    std::int64_t worker = 0;
    std::uint64_t ids = 0;
    double share = 0;
    double max_sequence_use = 0;  // the fullest tick, as a share of ids_per_tick
  };
  std::vector<WorkerTotal> workers;  // every worker seen, busiest first

  std::size_t peak_bucket = 0;        // the busiest bucket
  std::uint64_t empty_buckets = 0;    // buckets with no id between the first and last
  std::size_t longest_gap_start = 0;  // the longest run of empty buckets
  std::size_t longest_gap_buckets = 0;

  // Sequence use per (worker, tick): ids in the tick over the layout's ids per tick, in ten
  // bins (0-10%, ..., 90-100%).
  std::array<std::uint64_t, 10> sequence_use{};
  std::uint64_t ticks = 0;             // (worker, tick) pairs seen
  std::uint64_t ticks_at_ceiling = 0;  // ticks whose whole sequence was used
  double mean_sequence_use = 0;
};

class IdStats {
 public:
  explicit IdStats(const StatsOptions& options) : options_(options) {}
  void Add(Id id) { ids_.push_back(id); }
  void Add(std::span<const Id> ids) { ids_.insert(ids_.end(), ids.begin(), ids.end()); }
  StatsReport Finish();

 private:
  StatsOptions options_;
  std::vector<Id> ids_;
};

// A round bucket width for the span [first_ms, last_ms]: 1, 2, 5 x 10^k ms, then 1 s, 5 s,
// 10 s, 30 s, 1 min, 5 min, 15 min, 30 min, 1 h, 3 h, 6 h, 12 h, 1 d, 7 d (the smallest that
// gives at most 200 buckets).
std::int64_t AutoIntervalMillis(std::int64_t first_ms, std::int64_t last_ms);

}  // namespace sekka

#endif  // SEKKA_ID_STATS_H_
