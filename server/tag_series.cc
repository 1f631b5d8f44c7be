#include "server/tag_series.h"

#include <algorithm>
#include <functional>
#include <tuple>

namespace sekka::server {
namespace {

// Adds `b`'s counters to `a` (not its gauges).
void AddCounters(SegmentStats& a, const SegmentStats& b) {
  a.issued += b.issued;
  a.fetches += b.fetches;
  a.fetch_errors += b.fetch_errors;
  a.fetch_micros_total += b.fetch_micros_total;
  a.waits += b.waits;
  a.unavailable += b.unavailable;
}

}  // namespace

TagSplit TagSeries::Split(TagStats tags, std::size_t places, std::int64_t now_ms) {
  std::unordered_map<std::string, const SegmentStats*> now;  // the tags served (until moved)
  for (const auto& [tag, st] : tags) now.emplace(tag, &st);
  // 1. Places kept while their tags issue ids; an idle one goes back to the sum, where what it
  // issues from now on counts.
  std::unordered_map<std::string, SegmentStats> demoted;
  for (auto it = places_.begin(); it != places_.end();) {
    const auto served = now.find(it->first);
    Place& place = it->second;
    if (served != now.end() && served->second->issued != place.issued) {
      place = {served->second->issued, now_ms};
    }
    const bool idle = now_ms - place.changed_ms >= kIdlePlaceMs;
    if (served != now.end() && !idle) {
      ++it;
      continue;
    }
    if (served != now.end()) demoted.emplace(it->first, *served->second);
    it = places_.erase(it);
  }
  TagSplit out;
  TagStats summed;
  for (auto& e : tags) (places_.contains(e.first) ? out.own : summed).push_back(std::move(e));
  // 2. Free places to those of the sum most active since the last split (ids issued, and
  // failed fetches, so that a store's outage shows per tag; a new tag: all it did); one that did
  // nothing takes none.
  static const SegmentStats kNone;
  auto before = [&](const std::string& tag) -> const SegmentStats& {
    if (const auto it = summed_last_.find(tag); it != summed_last_.end()) return it->second;
    const auto it = demoted.find(tag);
    return it == demoted.end() ? kNone : it->second;
  };
  std::vector<std::pair<std::uint64_t, std::size_t>> recent;  // (activity since, index)
  for (std::size_t i = 0; i < summed.size(); ++i) {
    const SegmentStats& st = summed[i].second;
    const SegmentStats& was = before(summed[i].first);
    const std::uint64_t since = st.issued - was.issued + st.fetch_errors - was.fetch_errors;
    if (since > 0) recent.emplace_back(since, i);
  }
  std::sort(recent.begin(), recent.end(), std::greater<>());
  std::vector<bool> promoted(summed.size(), false);
  for (const auto& [since, i] : recent) {
    if (places_.size() >= places) break;
    places_.emplace(summed[i].first, Place{summed[i].second.issued, now_ms});
    promoted[i] = true;
  }
  // 3. The sum's counters never go down: a tag that leaves it leaves its counts (a promoted one
  // its counts now, one no longer served its last).
  for (const auto& [tag, last] : summed_last_) {
    if (!now.contains(tag)) AddCounters(left_, last);
  }
  std::unordered_map<std::string, SegmentStats> members;
  out.summed = SegmentStats{};
  for (std::size_t i = 0; i < summed.size(); ++i) {
    auto& [tag, st] = summed[i];
    if (promoted[i]) {
      if (summed_last_.contains(tag)) AddCounters(left_, st);
      out.own.push_back(std::move(summed[i]));
      continue;
    }
    AddCounters(out.summed, st);
    out.summed.remaining += st.remaining;
    members.emplace(tag, st);
  }
  AddCounters(out.summed, left_);
  summed_last_ = std::move(members);
  has_sum_ = has_sum_ || !summed_last_.empty();
  out.has_sum = has_sum_;
  std::sort(out.own.begin(), out.own.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

}  // namespace sekka::server
