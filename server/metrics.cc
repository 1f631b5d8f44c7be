// server/metrics.cc: GET /metrics, Prometheus's text format (docs/contract.md section 10), one
// function per family group. Part of Service; its own file so that service.cc is the engines.

#include <fmt/format.h>

#include "server/service.h"
#include "server/tag_series.h"

namespace sekka::server {

// Appends the families of the text: "# HELP" and "# TYPE", then the samples the caller adds.
struct MetricsWriter {
  std::string out;
  void Family(std::string_view name, std::string_view type, std::string_view help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  // A label's value as the text format spells it: UTF-8 as it is, `\`, `"` and a newline escaped
  // (a tag may hold the first two: docs/contract.md, "Tags").
  static std::string Label(std::string_view value) {
    std::string escaped;
    for (const char c : value) {
      if (c == '\\' || c == '"') escaped += '\\';
      escaped += c == '\n' ? std::string("\\n") : std::string(1, c);
    }
    return escaped;
  }
};

// Ids issued by engine, and the snowflake engine's waits and clock steps.
void Service::AppendIdMetrics(MetricsWriter& w) {
  const SnowflakeStats st = generator().stats();
  w.Family("sekka_ids_issued_total", "counter", "Ids issued, by engine.");
  w.out += fmt::format("sekka_ids_issued_total{{engine=\"snowflake\"}} {}\n", ids_issued_.load());
  static constexpr const char* kEngines[] = {"segment", "random", "uuid", "ulid"};
  for (int e = 0; e < 4; ++e) {
    w.out +=
        fmt::format("sekka_ids_issued_total{{engine=\"{}\"}} {}\n", kEngines[e], issued_[e].load());
  }
  w.Family("sekka_sequence_waits_total", "counter",
           "Waits for the next tick because a tick's sequence was used up.");
  w.out += fmt::format("sekka_sequence_waits_total {}\n", st.sequence_waits);
  w.Family("sekka_clock_backwards_total", "counter",
           "Calls that found the clock behind time already used.");
  w.out += fmt::format("sekka_clock_backwards_total {}\n", st.clock_backwards_events);
  w.Family("sekka_clock_backwards_max_seconds", "gauge", "The largest backward clock step seen.");
  w.out += fmt::format("sekka_clock_backwards_max_seconds {}\n",
                       static_cast<double>(st.max_backwards_millis) / 1000.0);
  w.Family("sekka_wait_seconds_total", "counter", "Time spent waiting for the clock.");
  w.out +=
      fmt::format("sekka_wait_seconds_total {}\n", static_cast<double>(st.wait_millis) / 1000.0);
}

// The worker id, its lease, the layout's end and the hwm.
void Service::AppendLeaseMetrics(MetricsWriter& w) {
  const WorkerInfo w_info = worker();
  w.Family("sekka_worker_id", "gauge", "The worker id this process holds.");
  w.out += fmt::format("sekka_worker_id{{source=\"{}\",datacenter=\"{}\"}} {}\n", w_info.source,
                       w_info.datacenter_id, w_info.worker_id);
  const LeaseSnapshot snap = leased_->Snapshot();
  w.Family("sekka_lease_held", "gauge", "1 while this process holds its worker id.");
  w.out += fmt::format("sekka_lease_held {}\n", snap.held ? 1 : 0);
  if (coordinated_) {
    w.Family("sekka_lease_age_seconds", "gauge", "Time since the worker id lease was acquired.");
    w.out += fmt::format("sekka_lease_age_seconds {:.3f}\n",
                         static_cast<double>(clock_.NowMillis() - snap.acquired_millis) / 1000.0);
    w.Family("sekka_lease_renew_seconds", "gauge", "Latency of the last lease renewal.");
    w.out += fmt::format("sekka_lease_renew_seconds {:.6f}\n",
                         static_cast<double>(snap.renew_micros) / 1e6);
    w.Family("sekka_coordinator_calls_total", "counter",
             "Calls to the coordinator (etcd or ZooKeeper).");
    w.out += fmt::format("sekka_coordinator_calls_total {}\n", snap.coordinator_calls);
    w.Family("sekka_coordinator_errors_total", "counter", "Coordinator calls that failed.");
    w.out += fmt::format("sekka_coordinator_errors_total {}\n", snap.coordinator_errors);
    w.Family("sekka_leases_lost_total", "counter", "Times the worker id lease was lost.");
    w.out += fmt::format("sekka_leases_lost_total {}\n", snap.leases_lost);
  }
  w.Family("sekka_layout_remaining_seconds", "gauge",
           "Time left until the layout's time field runs out (negative: it has).");
  w.out += fmt::format("sekka_layout_remaining_seconds{{layout=\"{}\"}} {:.0f}\n", layout().name(),
                       static_cast<double>(layout().end_millis() - clock_.NowMillis()) / 1000.0);
  w.Family("sekka_hwm_timestamp_seconds", "gauge", "The persisted high-water mark (Unix time).");
  w.out += fmt::format("sekka_hwm_timestamp_seconds {:.3f}\n",
                       static_cast<double>(snap.hwm_millis) / 1000.0);
  w.Family("sekka_hwm_reach_seconds", "gauge",
           "How far ahead of the clock the next high-water mark reaches (it grows with slow "
           "stores).");
  w.out +=
      fmt::format("sekka_hwm_reach_seconds {:.3f}\n", static_cast<double>(snap.reach_ms) / 1000.0);
  w.Family("sekka_hwm_persist_seconds", "histogram",
           "Time to store a high-water mark (the lease, and the data dir's copy).");
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < kHwmStoreBucketsMicros.size(); ++i) {
    cumulative += snap.store_buckets[i];
    w.out += fmt::format("sekka_hwm_persist_seconds_bucket{{le=\"{}\"}} {}\n",
                         static_cast<double>(kHwmStoreBucketsMicros[i]) / 1e6, cumulative);
  }
  cumulative += snap.store_buckets.back();
  w.out += fmt::format("sekka_hwm_persist_seconds_bucket{{le=\"+Inf\"}} {}\n", cumulative);
  w.out += fmt::format("sekka_hwm_persist_seconds_sum {}\n",
                       static_cast<double>(snap.store_micros) / 1e6);
  w.out += fmt::format("sekka_hwm_persist_seconds_count {}\n", snap.stores);
  w.Family("sekka_hwm_persist_errors_total", "counter",
           "High-water marks that could not be stored (or copied into the data dir).");
  w.out += fmt::format("sekka_hwm_persist_errors_total {}\n", snap.store_errors);
}

// Requests by protocol, command and result.
void Service::AppendRequestMetrics(MetricsWriter& w) {
  w.Family("sekka_requests_total", "counter", "Requests, by protocol, command and result.");
  for (int p = 0; p < kProtocols; ++p) {
    for (int c = 0; c < static_cast<int>(Command::kCount_); ++c) {
      for (int r = 0; r < 2; ++r) {
        const std::uint64_t n = counters_[p][c][r].load(std::memory_order_relaxed);
        if (n == 0) continue;
        w.out +=
            fmt::format("sekka_requests_total{{protocol=\"{}\",command=\"{}\",result=\"{}\"}} {}\n",
                        ProtocolName(static_cast<Protocol>(p)),
                        CommandName(static_cast<Command>(c)), r == 0 ? "ok" : "error", n);
      }
    }
  }
}

// Per segment tag.
void Service::AppendSegmentMetrics(MetricsWriter& w) {
  TagStats seg = ServedSegments();
  // Tags whose row never loaded: their failed loads, so that an outage from the start is seen.
  for (const auto& [tag, failed] : segments_->LoadErrors()) {
    SegmentStats st;
    st.fetch_errors = failed;
    seg.emplace_back(tag, std::move(st));
  }
  // Series of their own for server.metrics_tags tags, the rest summed (TagSeries).
  const TagSplit split = metrics_tags_.Split(
      std::move(seg), static_cast<std::size_t>(config_.metrics_tags), clock_.MonotonicMillis());
  auto per_tag = [&](std::string_view name, std::string_view type, std::string_view help,
                     auto value, bool summed = true) {
    w.Family(name, type, help);
    for (const auto& [tag, st] : split.own)
      w.out += fmt::format("{}{{tag=\"{}\"}} {}\n", name, MetricsWriter::Label(tag), value(st));
    if (split.has_sum && summed) w.out += fmt::format("{} {}\n", name, value(split.summed));
  };
  per_tag("sekka_segment_issued_total", "counter", "Segment ids issued (or skipped), by tag.",
          [](const SegmentStats& st) { return st.issued; });
  per_tag("sekka_segment_remaining", "gauge", "Segment ids buffered in this process, by tag.",
          [](const SegmentStats& st) { return st.remaining; });
  per_tag(
      "sekka_segment_step", "gauge", "The step of the last range fetched, by tag.",
      [](const SegmentStats& st) { return st.step; }, /*summed=*/false);
  per_tag("sekka_segment_fetches_total", "counter", "Ranges fetched from the store, by tag.",
          [](const SegmentStats& st) { return st.fetches; });
  per_tag("sekka_segment_fetch_seconds_total", "counter", "Time spent fetching ranges, by tag.",
          [](const SegmentStats& st) { return static_cast<double>(st.fetch_micros_total) / 1e6; });
  per_tag("sekka_segment_store_errors_total", "counter",
          "Failed range fetches and loads of the tag's row, by tag.",
          [](const SegmentStats& st) { return st.fetch_errors; });
  per_tag("sekka_segment_waits_total", "counter", "Callers that found both buffers empty, by tag.",
          [](const SegmentStats& st) { return st.waits; });
  per_tag("sekka_segment_unavailable_total", "counter", "Callers that gave up at the deadline.",
          [](const SegmentStats& st) { return st.unavailable; });
}

// Strict ids: where requests were answered, and the calls followers made to leaders (their ratio
// is the coalescing).
void Service::AppendStrictMetrics(MetricsWriter& w) {
  if (strict_ == nullptr) return;
  const StrictTags::Stats st = strict_->stats();
  w.Family("sekka_strict_requests_total", "counter",
           "Strict-id requests answered, by where: led here, or forwarded to the leader.");
  w.out += fmt::format("sekka_strict_requests_total{{path=\"led\"}} {}\n", st.led);
  w.out += fmt::format("sekka_strict_requests_total{{path=\"forwarded\"}} {}\n", st.forwarded);
  w.Family("sekka_strict_leader_calls_total", "counter",
           "Calls this server made to strict tags' leaders (coalesced requests count once).");
  w.out += fmt::format("sekka_strict_leader_calls_total {}\n", st.leader_calls);
  w.Family("sekka_strict_elections_total", "counter", "Strict tags this server took the lead of.");
  w.out += fmt::format("sekka_strict_elections_total {}\n", st.elections);
}

// Connections: open, refused at the limit, closed for a limit.
void Service::AppendConnectionMetrics(MetricsWriter& w) {
  w.Family("sekka_connections_open", "gauge", "Open client connections, by protocol.");
  for (int p = 0; p < kProtocols; ++p) {
    w.out += fmt::format("sekka_connections_open{{protocol=\"{}\"}} {}\n",
                         ProtocolName(static_cast<Protocol>(p)), open_[p].load());
  }
  w.Family("sekka_connections_rejected_total", "counter",
           "Connections refused at the connection limit.");
  for (int p = 0; p < kProtocols; ++p) {
    w.out += fmt::format("sekka_connections_rejected_total{{protocol=\"{}\"}} {}\n",
                         ProtocolName(static_cast<Protocol>(p)), rejected_[p].load());
  }
  w.Family("sekka_connections_shed_total", "counter",
           "Connections the server closed for breaking a limit, by reason.");
  for (int r = 0; r < kShedReasons; ++r) {
    w.out += fmt::format("sekka_connections_shed_total{{reason=\"{}\"}} {}\n",
                         ShedReasonName(static_cast<ShedReason>(r)), shed_[r].load());
  }
}

std::string Service::MetricsText() {
  std::lock_guard lock(metrics_mu_);
  const std::int64_t now = clock_.MonotonicMillis();
  if (!metrics_text_.empty() && now - metrics_at_ms_ < kMetricsCacheMs) return metrics_text_;
  MetricsWriter w;
  AppendIdMetrics(w);
  AppendLeaseMetrics(w);
  AppendRequestMetrics(w);
  AppendSegmentMetrics(w);
  AppendStrictMetrics(w);
  AppendConnectionMetrics(w);
  metrics_text_ = std::move(w.out);
  metrics_at_ms_ = now;
  return metrics_text_;
}

}  // namespace sekka::server
