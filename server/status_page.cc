// server/status_page.cc: the data of the status page (/ui/data), sampled once a second for ten
// minutes. Part of Service; its own file so that service.cc is the engines.

#include <fmt/format.h>

#include <algorithm>

#include "server/http.h"
#include "server/service.h"

namespace sekka::server {

using http::JsonString;

void Service::SampleUi() {
  const std::int64_t mono = clock_.MonotonicMillis();
  {
    std::lock_guard lock(ui_mu_);
    if (ui_last_mono_ >= 0 && mono - ui_last_mono_ < 1000) return;
    ui_last_mono_ = mono;
  }
  UiSample sample;
  sample.t_ms = clock_.NowMillis();
  sample.snowflake = ids_issued_.load();
  for (const auto& per_protocol : counters_) {
    for (const auto& per_command : per_protocol) {
      for (const auto& n : per_command) sample.requests += n.load(std::memory_order_relaxed);
    }
  }
  for (const auto& o : open_) sample.connections += o.load();
  for (const SegmentSequence* q : segments_->Sequences()) {
    sample.tags.emplace_back(q->tag(), q->stats().issued);
  }
  // Bounded: the history keeps the busiest tags only (segment.max_tags may be 10,000).
  constexpr std::size_t kUiTags = 20;
  if (sample.tags.size() > kUiTags) {
    std::partial_sort(sample.tags.begin(), sample.tags.begin() + kUiTags, sample.tags.end(),
                      [](const auto& a, const auto& b) { return a.second > b.second; });
    sample.tags.resize(kUiTags);
  }
  std::lock_guard lock(ui_mu_);
  ui_history_.push_back(std::move(sample));
  while (ui_history_.size() > 601) ui_history_.pop_front();
}

std::string Service::UiJson() {
  std::vector<UiSample> history;
  {
    std::lock_guard lock(ui_mu_);
    history.assign(ui_history_.begin(), ui_history_.end());
  }
  // Rates between consecutive samples.
  std::string points = "[";
  for (std::size_t i = 1; i < history.size(); ++i) {
    const UiSample &a = history[i - 1], &b = history[i];
    const double dt = std::max<double>(1, static_cast<double>(b.t_ms - a.t_ms)) / 1000.0;
    auto rate = [&](std::uint64_t x, std::uint64_t y) {
      return y >= x ? static_cast<double>(y - x) / dt : 0.0;
    };
    std::string tags = "{";
    for (const auto& [tag, n] : b.tags) {
      std::uint64_t before = n;
      for (const auto& [t0, n0] : a.tags) {
        if (t0 == tag) before = n0;
      }
      if (tags.size() > 1) tags += ',';
      tags += fmt::format("{}:{:.1f}", JsonString(tag), rate(before, n));
    }
    tags += '}';
    if (points.size() > 1) points += ',';
    points += fmt::format(
        "{{\"t\":\"{}\",\"snowflake\":{:.1f},\"segments\":{},\"requests\":{:.1f},"
        "\"connections\":{}}}",
        FormatUtcMillis(b.t_ms), rate(a.snowflake, b.snowflake), tags, rate(a.requests, b.requests),
        b.connections);
  }
  points += ']';
  // The tags whose buffers are lowest first, at most 50 (segment.max_tags may be 10,000).
  std::vector<std::pair<const SegmentSequence*, SegmentStats>> tags;
  for (const SegmentSequence* q : segments_->Sequences()) tags.emplace_back(q, q->stats());
  auto fill = [](const SegmentStats& st) {
    return st.step > 0 ? static_cast<double>(st.remaining) / static_cast<double>(st.step) : 0.0;
  };
  std::stable_sort(tags.begin(), tags.end(),
                   [&](const auto& a, const auto& b) { return fill(a.second) < fill(b.second); });
  if (tags.size() > 50) tags.resize(50);
  std::string segments = "[";
  for (const auto& [q, st] : tags) {
    if (segments.size() > 1) segments += ',';
    segments += fmt::format(
        "{{\"tag\":{},\"remaining\":{},\"step\":{},\"issued\":{},\"waits\":{},"
        "\"store_errors\":{}}}",
        JsonString(q->tag()), st.remaining, st.step, st.issued, st.waits, st.fetch_errors);
  }
  segments += ']';
  const SnowflakeStats st = generator().stats();
  const WorkerInfo w = worker();
  const LeaseSnapshot lease = leased_->Snapshot();
  const std::int64_t now = clock_.NowMillis();
  std::int64_t connections = 0;
  for (const auto& o : open_) connections += o.load();
  return fmt::format(
      "{{\"now\":\"{}\",\"version\":\"{}\",\"uptime_s\":{},\"layout\":{},"
      "\"layout_runs_out\":\"{}\",\"worker\":{{\"source\":\"{}\",\"datacenter_id\":{},"
      "\"worker_id\":{},\"lease_held\":{}}},\"hwm\":\"{}\",\"hwm_ahead_ms\":{},\"hwm_reach_ms\":{},"
      "\"ids_issued\":{},\"clock\":{{\"backwards_events\":{},\"max_backwards_ms\":{},"
      "\"sequence_waits\":{}}},\"connections\":{},\"segments\":{},\"history\":{}}}",
      FormatUtcMillis(now), kVersion, (now - started_ms_) / 1000, JsonString(layout().name()),
      FormatUtcMillis(layout().end_millis()), w.source, w.datacenter_id, w.worker_id,
      lease.held ? "true" : "false", FormatUtcMillis(lease.hwm_millis), lease.hwm_millis - now,
      lease.reach_ms, ids_issued_.load(), st.clock_backwards_events, st.max_backwards_millis,
      st.sequence_waits, connections, segments, points);
}

}  // namespace sekka::server
