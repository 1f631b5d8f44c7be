// server/tag_series.h
//
// Which segment tags get /metrics series of their own (server.metrics_tags of them), and the
// one series the others are summed in, so that the scrape stays small however many tags a
// server serves (Prometheus' guidance on label cardinality) and every counter Prometheus reads
// only goes up:
//   1. A tag keeps its place while it issues ids; one that issued nothing for kIdlePlaceMs, or
//      is no longer served, gives it back (its series ends; it joins the sum).
//   2. A free place goes to the tag of the sum most active since the last scrape (ids issued,
//      and failed fetches, so that a store's outage shows per tag); one that did nothing takes
//      none (a client cannot hold the places with tags it made and left).
//   3. The sum's counters never go down: a tag that leaves the sum (to a place of its own, or
//      no longer served) leaves its counts behind in it. Its gauge (ids buffered) is the sum of
//      the tags in it now.
// Not thread-safe: Service::MetricsText calls it under its lock.

#ifndef SEKKA_SERVER_TAG_SERIES_H_
#define SEKKA_SERVER_TAG_SERIES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sekka/segment.h"

namespace sekka::server {

using TagStats = std::vector<std::pair<std::string, SegmentStats>>;

struct TagSplit {
  TagStats own;          // the tags with series of their own, by name
  SegmentStats summed;   // the sum's counters and gauge
  bool has_sum = false;  // the sum has had a member: its series is shown
};

class TagSeries {
 public:
  static constexpr std::int64_t kIdlePlaceMs = 10 * 60 * 1000;

  // Splits the tags served now (`tags`) for a scrape at `now_ms` (monotonic), with at most
  // `places` tags of their own.
  TagSplit Split(TagStats tags, std::size_t places, std::int64_t now_ms);

 private:
  struct Place {
    std::uint64_t issued;
    std::int64_t changed_ms;  // when `issued` last grew
  };
  std::unordered_map<std::string, Place> places_;
  std::unordered_map<std::string, SegmentStats> summed_last_;  // the sum's members last time
  SegmentStats left_;  // the counts of the tags that left the sum
  bool has_sum_ = false;
};

}  // namespace sekka::server

#endif  // SEKKA_SERVER_TAG_SERIES_H_
