#include "sekka/id_stats.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace sekka {

std::int64_t AutoIntervalMillis(std::int64_t first_ms, std::int64_t last_ms) {
  static constexpr std::int64_t kSteps[] = {
      1,         2,         5,          10,         20,         50,         100,        200,
      500,       1000,      5000,       10'000,     30'000,     60'000,     300'000,    900'000,
      1'800'000, 3'600'000, 10'800'000, 21'600'000, 43'200'000, 86'400'000, 604'800'000};
  const std::int64_t span = std::max<std::int64_t>(1, last_ms - first_ms + 1);
  for (std::int64_t step : kSteps) {
    if (span / step < 200) return step;
  }
  return kSteps[std::size(kSteps) - 1] * std::max<std::int64_t>(1, span / kSteps[22] / 200 + 1);
}

namespace {

// An id's fields as the statistics count them.
struct Decoded {
  std::int64_t ms = 0, worker = 0, tick = 0, sequence = 0;
};

// Decodes `id` in layout `l` into `d`; false when it is not an id of the layout.
bool Decode(const Layout& l, Id id, Decoded& d) {
  Result<IdFields> f = l.Decompose(id);
  if (!f.ok()) return false;
  d.ms = l.TickToMillis(f->tick);
  d.worker = l.is_random() ? -1 : (f->datacenter << l.worker_bits()) | f->worker;
  d.tick = f->tick;
  d.sequence = f->sequence;
  return true;
}

// What pass 1 finds besides the report's counts: the time range and the totals per worker.
struct FirstPass {
  std::int64_t first = std::numeric_limits<std::int64_t>::max();
  std::int64_t last = std::numeric_limits<std::int64_t>::min();
  std::unordered_map<std::int64_t, StatsReport::WorkerTotal> totals;
};

// Pass 1 over `ids`: the time range, the totals per worker, and sequence use (input order);
// the counts of ids, skipped ids and sequence use go into `r`.
FirstPass CountFirstPass(const Layout& l, const std::vector<Id>& ids, StatsReport& r) {
  FirstPass pass;
  struct Current {
    std::int64_t tick = -1;
    std::int64_t max_sequence = -1;
  };
  std::unordered_map<std::int64_t, Current> current;
  const double per_tick = static_cast<double>(l.ids_per_tick());
  double use_sum = 0;
  auto close_tick = [&](std::int64_t worker, const Current& c) {
    if (c.tick < 0) return;
    const double use = static_cast<double>(c.max_sequence + 1) / per_tick;
    ++r.ticks;
    use_sum += use;
    ++r.sequence_use[std::min<std::size_t>(9, static_cast<std::size_t>(use * 10))];
    if (c.max_sequence + 1 >= l.ids_per_tick()) ++r.ticks_at_ceiling;
    StatsReport::WorkerTotal& w = pass.totals[worker];
    w.max_sequence_use = std::max(w.max_sequence_use, use);
  };
  for (Id id : ids) {
    Decoded d;
    if (!Decode(l, id, d)) {
      ++r.skipped;
      continue;
    }
    ++r.ids;
    pass.first = std::min(pass.first, d.ms);
    pass.last = std::max(pass.last, d.ms);
    StatsReport::WorkerTotal& w = pass.totals[d.worker];
    w.worker = d.worker;
    ++w.ids;
    if (!l.is_random()) {
      Current& c = current[d.worker];
      if (c.tick != d.tick) {
        close_tick(d.worker, c);
        c.tick = d.tick;
        c.max_sequence = -1;
      }
      c.max_sequence = std::max(c.max_sequence, d.sequence);
    }
  }
  for (const auto& [worker, c] : current) close_tick(worker, c);
  if (r.ticks > 0) r.mean_sequence_use = use_sum / static_cast<double>(r.ticks);
  return pass;
}

// Sets r.starts_ms and r.totals (zeros) for r's time range and interval; returns the first
// bucket's start.
std::int64_t PlaceBuckets(StatsReport& r) {
  // Buckets aligned to the interval (in Unix time), so that "1 min" buckets start on minutes.
  const std::int64_t base =
      r.first_ms - (r.first_ms % r.interval_ms + r.interval_ms) % r.interval_ms;
  const auto buckets = static_cast<std::size_t>((r.last_ms - base) / r.interval_ms + 1);
  r.starts_ms.resize(buckets);
  for (std::size_t b = 0; b < buckets; ++b) {
    r.starts_ms[b] = base + static_cast<std::int64_t>(b) * r.interval_ms;
  }
  r.totals.assign(buckets, 0);
  return base;
}

// Sets each worker's share in `totals` and lists the workers in r.workers, busiest first.
void RankWorkers(std::unordered_map<std::int64_t, StatsReport::WorkerTotal>& totals,
                 StatsReport& r) {
  for (auto& [worker, w] : totals) {
    w.share = static_cast<double>(w.ids) / static_cast<double>(r.ids);
    r.workers.push_back(w);
  }
  std::sort(r.workers.begin(), r.workers.end(), [](const auto& a, const auto& b) {
    return a.ids != b.ids ? a.ids > b.ids : a.worker < b.worker;
  });
}

// Starts r.series: one for each of the first `own` workers of r.workers, then one for all the
// others if there are any. Returns the series of each worker that has one of its own.
std::unordered_map<std::int64_t, std::size_t> StartSeries(StatsReport& r, std::size_t own) {
  const std::size_t buckets = r.totals.size();
  std::unordered_map<std::int64_t, std::size_t> series_of;
  for (std::size_t i = 0; i < own; ++i) {
    series_of[r.workers[i].worker] = r.series.size();
    r.series.push_back({r.workers[i].worker, r.workers[i].ids, r.workers[i].share,
                        std::vector<std::uint64_t>(buckets, 0)});
  }
  if (own < r.workers.size()) {
    r.series.push_back({-1, 0, 0, std::vector<std::uint64_t>(buckets, 0)});
  }
  return series_of;
}

// Pass 2 over `ids`: ids per bucket, overall and per series (`others`: the series of the
// workers without one of their own).
void CountBuckets(const Layout& l, const std::vector<Id>& ids, std::int64_t base,
                  const std::unordered_map<std::int64_t, std::size_t>& series_of,
                  std::size_t others, StatsReport& r) {
  for (Id id : ids) {
    Decoded d;
    if (!Decode(l, id, d)) continue;
    const auto b = static_cast<std::size_t>((d.ms - base) / r.interval_ms);
    ++r.totals[b];
    const auto it = series_of.find(d.worker);
    StatsReport::Series& s = r.series[it != series_of.end() ? it->second : others];
    ++s.per_bucket[b];
    if (it == series_of.end()) ++s.ids;
  }
}

// Sets r's peak bucket, its count of empty buckets and its longest run of them.
void FindPeakAndGaps(StatsReport& r) {
  const std::size_t buckets = r.totals.size();
  r.peak_bucket = static_cast<std::size_t>(std::max_element(r.totals.begin(), r.totals.end()) -
                                           r.totals.begin());
  std::size_t run = 0;
  for (std::size_t b = 0; b < buckets; ++b) {
    if (r.totals[b] == 0) {
      ++r.empty_buckets;
      if (++run > r.longest_gap_buckets) {
        r.longest_gap_buckets = run;
        r.longest_gap_start = b + 1 - run;
      }
    } else {
      run = 0;
    }
  }
}

}  // namespace

StatsReport IdStats::Finish() {
  StatsReport r;
  const Layout& l = options_.layout;
  // Pass 1: the time range, the totals per worker, and sequence use (input order).
  FirstPass pass = CountFirstPass(l, ids_, r);
  if (r.ids == 0) return r;
  r.first_ms = pass.first;
  r.last_ms = pass.last;
  r.interval_ms =
      options_.interval_ms > 0 ? options_.interval_ms : AutoIntervalMillis(pass.first, pass.last);
  const std::int64_t base = PlaceBuckets(r);
  // The workers, busiest first; the top ones get series.
  RankWorkers(pass.totals, r);
  const std::size_t own = std::min(options_.top_workers, r.workers.size());
  const std::unordered_map<std::int64_t, std::size_t> series_of = StartSeries(r, own);
  // Pass 2: per bucket, overall and per series (the others' series follows the own ones).
  CountBuckets(l, ids_, base, series_of, /*others=*/own, r);
  if (own < r.workers.size()) {
    r.series.back().share = static_cast<double>(r.series.back().ids) / static_cast<double>(r.ids);
  }
  // Peak and quiet gaps.
  FindPeakAndGaps(r);
  return r;
}

}  // namespace sekka
