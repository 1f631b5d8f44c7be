// sekka stats: reads ids like `sekka check`, aggregates them with IdStats and writes a
// terminal summary, CSV (start,worker,ids), JSON, or one self-contained HTML file whose charts
// (Chart.js, built into the binary) open offline in a browser.

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "assets/assets.h"
#include "cli/commands.h"
#include "cli/id_input.h"
#include "sekka/codec.h"
#include "sekka/id_stats.h"

namespace sekka::cli {
namespace {

using Json = nlohmann::ordered_json;

// Worker ids combine the datacenter and the worker part (datacenter << worker_bits | worker).
std::string WorkerName(std::int64_t worker, const Layout& layout) {
  if (worker >= 0 && layout.datacenter_bits() > 0) {
    return fmt::format("dc {} worker {}", worker >> layout.worker_bits(),
                       worker & ((std::int64_t{1} << layout.worker_bits()) - 1));
  }
  if (worker >= 0) return fmt::format("worker {}", worker);
  return layout.is_random() ? "all ids" : "other workers";
}

std::string Span(std::int64_t ms) {
  if (ms % 86'400'000 == 0) return fmt::format("{} d", ms / 86'400'000);
  if (ms % 3'600'000 == 0) return fmt::format("{} h", ms / 3'600'000);
  if (ms % 60'000 == 0) return fmt::format("{} min", ms / 60'000);
  if (ms % 1000 == 0) return fmt::format("{} s", ms / 1000);
  return fmt::format("{} ms", ms);
}

Json ReportJson(const StatsReport& r, const Layout& l, std::uint64_t not_ids) {
  Json buckets = Json::array();
  for (std::size_t b = 0; b < r.totals.size(); ++b) {
    buckets.push_back({{"start", FormatUtcMillis(r.starts_ms[b])}, {"ids", r.totals[b]}});
  }
  Json series = Json::array();
  for (const auto& s : r.series) {
    series.push_back({{"worker", s.worker},
                      {"name", WorkerName(s.worker, l)},
                      {"ids", s.ids},
                      {"share", s.share},
                      {"per_interval", s.per_bucket}});
  }
  Json workers = Json::array();
  for (const auto& w : r.workers) {
    Json one{{"worker", w.worker}, {"name", WorkerName(w.worker, l)}};
    if (l.datacenter_bits() > 0 && w.worker >= 0) {
      one["datacenter"] = w.worker >> l.worker_bits();
      one["worker_in_datacenter"] = w.worker & ((std::int64_t{1} << l.worker_bits()) - 1);
    }
    one["ids"] = w.ids;
    one["share"] = w.share;
    one["max_sequence_use"] = w.max_sequence_use;
    workers.push_back(std::move(one));
  }
  Json j{{"layout", l.name()}, {"ids", r.ids}, {"skipped", r.skipped}, {"not_ids", not_ids}};
  if (r.ids == 0) return j;
  const double seconds = static_cast<double>(r.interval_ms) / 1000.0;
  j["first"] = FormatUtcMillis(r.first_ms);
  j["last"] = FormatUtcMillis(r.last_ms);
  j["interval_ms"] = r.interval_ms;
  j["intervals"] = buckets;
  j["series"] = series;
  j["workers"] = workers;
  j["peak"] = {{"start", FormatUtcMillis(r.starts_ms[r.peak_bucket])},
               {"ids", r.totals[r.peak_bucket]},
               {"ids_per_second", static_cast<double>(r.totals[r.peak_bucket]) / seconds}};
  j["quiet"] = {
      {"empty_intervals", r.empty_buckets},
      {"longest_gap_start",
       r.longest_gap_buckets > 0 ? FormatUtcMillis(r.starts_ms[r.longest_gap_start]) : ""},
      {"longest_gap_ms", static_cast<std::int64_t>(r.longest_gap_buckets) * r.interval_ms}};
  if (!l.is_random()) {
    j["sequence_use"] = {{"bins", r.sequence_use},
                         {"ticks", r.ticks},
                         {"ticks_at_ceiling", r.ticks_at_ceiling},
                         {"mean", r.mean_sequence_use},
                         {"ids_per_tick", l.ids_per_tick()}};
  }
  return j;
}

// The HTML page: the report as JSON, Chart.js inline, three charts. Nothing is fetched.
std::string Html(const Json& report) {
  std::string data = report.dump();
  // Inside <script>, "</" would end the element: JSON allows "<\/" instead.
  std::string safe;
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (data[i] == '<' && i + 1 < data.size() && data[i + 1] == '/') {
      safe += "<\\/";
      ++i;
    } else {
      safe += data[i];
    }
  }
  std::string page = R"(<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>sekka stats</title>
<style>
body { font-family: system-ui, sans-serif; margin: 24px; color: #1f2328; max-width: 1200px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 24px 0 8px; }
#summary { color: #57606a; margin: 0 0 8px; }
.grid { display: grid; grid-template-columns: 1fr 1fr; gap: 24px; }
.box { position: relative; height: 340px; }
</style>
<script>)";
  page += assets::ChartJs();
  page += R"(</script></head><body>
<h1>sekka stats</h1><p id="summary"></p>
<h2>Busy curve: ids per interval, by worker</h2><div class="box"><canvas id="busy"></canvas></div>
<div class="grid">
<div><h2>Share per worker</h2><div class="box"><canvas id="share"></canvas></div></div>
<div><h2>Sequence use per tick (share of the layout's ceiling)</h2><div class="box"><canvas id="sequence"></canvas></div></div>
</div>
<script>
const report = )";
  page += safe;
  page += R"(;
const colors = ['#0969da','#1a7f37','#bf3989','#9a6700','#8250df','#cf222e','#1b7c83','#953800','#6e7781','#0550ae','#8c959f'];
document.getElementById('summary').textContent = report.ids === 0 ? 'No ids.' :
  `${report.ids.toLocaleString()} ids of layout ${report.layout}, ${report.first} to ${report.last}, ` +
  `${report.workers.length} worker(s); peak ${report.peak.ids.toLocaleString()} ids at ${report.peak.start}`;
window.sekkaCharts = [];
if (report.ids > 0) {
  const labels = report.intervals.map(b => b.start.replace('T', ' ').replace('Z', ''));
  window.sekkaCharts.push(new Chart(document.getElementById('busy'), {
    type: 'bar',
    data: { labels, datasets: report.series.map((s, i) => ({
      label: s.name, data: s.per_interval, backgroundColor: colors[i % colors.length],
      borderWidth: 0, barPercentage: 1.0, categoryPercentage: 1.0 })) },
    options: { animation: false, maintainAspectRatio: false,
      scales: { x: { stacked: true, ticks: { maxTicksLimit: 12 } }, y: { stacked: true, beginAtZero: true } } }
  }));
  window.sekkaCharts.push(new Chart(document.getElementById('share'), {
    type: 'bar',
    data: { labels: report.series.map(s => s.name), datasets: [{ label: 'share of all ids (%)',
      data: report.series.map(s => +(100 * s.share).toFixed(2)),
      backgroundColor: report.series.map((s, i) => colors[i % colors.length]) }] },
    options: { animation: false, maintainAspectRatio: false, indexAxis: 'y',
      plugins: { legend: { display: false } } }
  }));
  if (report.sequence_use) {
    window.sekkaCharts.push(new Chart(document.getElementById('sequence'), {
      type: 'bar',
      data: { labels: report.sequence_use.bins.map((_, i) => `${i * 10}-${i * 10 + 10}%`),
        datasets: [{ label: '(worker, tick) pairs', data: report.sequence_use.bins,
          backgroundColor: '#8250df' }] },
      options: { animation: false, maintainAspectRatio: false,
        scales: { y: { type: 'logarithmic' } } }
    }));
  }
}
// For a reader and for tests: how many charts there are, and how many have pixels drawn.
document.body.dataset.charts = String(window.sekkaCharts.length);
document.body.dataset.drawn = String(window.sekkaCharts.filter(c => {
  const d = c.ctx.getImageData(0, 0, c.width, c.height).data;
  for (let i = 3; i < d.length; i += 4 * 53) if (d[i] !== 0) return true;
  return false;
}).length);
</script></body></html>
)";
  return page;
}

}  // namespace

namespace {

std::string StatsCsv(const StatsReport& r, const Layout& l) {
  std::string out = "start,worker,ids\n";
  for (const auto& s : r.series) {
    const std::string who =
        s.worker >= 0 ? std::to_string(s.worker) : (l.is_random() ? "all" : "others");
    for (std::size_t b = 0; b < r.totals.size(); ++b) {
      out += fmt::format("{},{},{}\n", FormatUtcMillis(r.starts_ms[b]), who, s.per_bucket[b]);
    }
  }
  return out;
}

std::string StatsText(const StatsReport& r, const Layout& l, std::uint64_t not_ids) {
  std::string out =
      fmt::format("layout        {}\nids           {}{}\n", l.name(), r.ids,
                  r.skipped + not_ids > 0
                      ? fmt::format(" ({} not ids of this layout, {} not ids)", r.skipped, not_ids)
                      : "");
  if (r.ids > 0) {
    const double seconds = static_cast<double>(r.last_ms - r.first_ms + 1) / 1000.0;
    out += fmt::format("time          {} to {} ({:.0f} ids/s on average)\n",
                       FormatUtcMillis(r.first_ms), FormatUtcMillis(r.last_ms),
                       static_cast<double>(r.ids) / seconds);
    out += fmt::format("intervals     {} of {}\n", r.totals.size(), Span(r.interval_ms));
    out += fmt::format(
        "peak          {} ids at {} ({:.0f} ids/s)\n", r.totals[r.peak_bucket],
        FormatUtcMillis(r.starts_ms[r.peak_bucket]),
        static_cast<double>(r.totals[r.peak_bucket]) * 1000.0 / static_cast<double>(r.interval_ms));
    out += fmt::format("quiet         {} empty intervals", r.empty_buckets);
    if (r.longest_gap_buckets > 0) {
      out += fmt::format("; longest {} from {}",
                         Span(static_cast<std::int64_t>(r.longest_gap_buckets) * r.interval_ms),
                         FormatUtcMillis(r.starts_ms[r.longest_gap_start]));
    }
    out += '\n';
    out += fmt::format("workers       {}\n", l.is_random() ? 0 : r.workers.size());
    if (!l.is_random()) {
      for (std::size_t i = 0; i < r.workers.size() && i < 10; ++i) {
        const auto& w = r.workers[i];
        out += fmt::format("  {:<20} {:>12} ids {:6.2f}%   fullest tick {:.1f}% of {}\n",
                           WorkerName(w.worker, l), w.ids, 100 * w.share, 100 * w.max_sequence_use,
                           l.ids_per_tick());
      }
      if (r.workers.size() > 10) out += fmt::format("  ... {} more\n", r.workers.size() - 10);
      out += fmt::format(
          "sequence use  {:.2f}% of the ceiling per tick on average; {} of {} "
          "ticks used it all\n",
          100 * r.mean_sequence_use, r.ticks_at_ceiling, r.ticks);
    }
  }
  return out;
}

}  // namespace

int RunStats(const StatsFlags& flags) {
  Result<Layout> layout = ParseLayout(flags.layout);
  if (!layout.ok()) return Fail(kExitUsage, layout.error().message);
  const IdInput input{flags.files, flags.db, flags.query};
  if (Status s = CheckIdInput(input); !s.ok()) return Fail(kExitUsage, s.error().message);
  if (flags.top < 1 || flags.top > 100) {
    return Fail(kExitUsage, fmt::format("--top {} is out of range: allowed 1 to 100", flags.top));
  }
  if (static_cast<int>(flags.json) + static_cast<int>(flags.csv) > 1) {
    return Fail(kExitUsage, "--json and --csv: choose one");
  }
  StatsOptions options;
  options.layout = *layout;
  options.top_workers = static_cast<std::size_t>(flags.top);
  if (flags.interval != "auto") {
    Result<std::int64_t> ms = ParseDurationMillis(flags.interval);
    if (!ms.ok() || *ms < 1) {
      return Fail(kExitUsage, fmt::format("--interval \"{}\": allowed auto or a duration from 1ms, "
                                          "e.g. 100ms, 1s, 5m, 1h",
                                          flags.interval));
    }
    options.interval_ms = *ms;
  }
  IdStats stats(options);
  IdTextScanner scanner;
  if (Status s = ReadIds(input, scanner, [&](std::span<const Id> ids) { stats.Add(ids); });
      !s.ok()) {
    return Fail(s.error().code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure,
                s.error().message);
  }
  const StatsReport r = stats.Finish();
  const Layout& l = *layout;
  if (r.totals.size() > 1'000'000) {
    return Fail(kExitUsage, fmt::format("--interval {} gives {} intervals: allowed at most "
                                        "1,000,000 (a longer interval, or auto)",
                                        flags.interval, r.totals.size()));
  }
  const Json report = ReportJson(r, l, scanner.bad_count());
  if (!flags.html.empty()) {
    std::ofstream out(flags.html, std::ios::binary | std::ios::trunc);
    out << Html(report);
    out.close();
    if (!out) return Fail(kExitFailure, fmt::format("cannot write {}", flags.html));
  }
  if (flags.json) {
    std::cout << report.dump(2) << '\n';
  } else if (flags.csv) {
    std::cout << StatsCsv(r, l);
  } else {
    std::cout << StatsText(r, l, scanner.bad_count());
    if (!flags.html.empty()) std::cout << fmt::format("html          {}\n", flags.html);
  }
  std::cout.flush();
  return kExitOk;
}

}  // namespace sekka::cli
