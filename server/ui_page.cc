#include "server/ui_page.h"

#include "assets/assets.h"

namespace sekka::server {
namespace {

constexpr const char* kHead = R"(<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>sekka</title>
<style>
body { font-family: system-ui, sans-serif; margin: 20px; color: #1f2328; max-width: 1200px; }
h1 { font-size: 20px; margin: 0; } h2 { font-size: 15px; margin: 20px 0 8px; }
#when { color: #57606a; font-size: 13px; }
.tiles { display: grid; grid-template-columns: repeat(6, 1fr); gap: 10px; margin-top: 14px; }
.tile { border: 1px solid #d0d7de; border-radius: 6px; padding: 8px 10px; }
.tile .k { color: #57606a; font-size: 12px; } .tile .v { font-size: 18px; margin-top: 2px; }
.bad { color: #cf222e; } .good { color: #1a7f37; }
.grid { display: grid; grid-template-columns: 2fr 1fr; gap: 20px; }
.box { position: relative; height: 300px; }
</style>
<script>)";

constexpr const char* kBody = R"(</script></head><body>
<h1>sekka</h1><div id="when">connecting...</div>
<div class="tiles">
<div class="tile"><div class="k">worker id</div><div class="v" id="worker">-</div></div>
<div class="tile"><div class="k">lease</div><div class="v" id="lease">-</div></div>
<div class="tile"><div class="k">hwm ahead of now</div><div class="v" id="ahead">-</div></div>
<div class="tile"><div class="k">ids issued</div><div class="v" id="issued">-</div></div>
<div class="tile"><div class="k">clock steps back</div><div class="v" id="clock">-</div></div>
<div class="tile"><div class="k">connections</div><div class="v" id="connections">-</div></div>
</div>
<div class="grid">
<div><h2>Ids per second, last 10 minutes</h2><div class="box"><canvas id="rate"></canvas></div></div>
<div><h2>Segment buffers (share of a step)</h2><div class="box"><canvas id="buffers"></canvas></div></div>
</div>
<script>
const colors = ['#0969da','#1a7f37','#bf3989','#9a6700','#8250df','#cf222e','#1b7c83','#953800'];
const rate = new Chart(document.getElementById('rate'), {
  type: 'line', data: { labels: [], datasets: [] },
  options: { animation: false, maintainAspectRatio: false, elements: { point: { radius: 0 } },
    scales: { x: { ticks: { maxTicksLimit: 10 } }, y: { beginAtZero: true } } }
});
const buffers = new Chart(document.getElementById('buffers'), {
  type: 'bar', data: { labels: [], datasets: [{ label: 'buffered / step (%)', data: [],
    backgroundColor: '#8250df' }] },
  options: { animation: false, maintainAspectRatio: false, indexAxis: 'y',
    scales: { x: { min: 0, max: 200 } }, plugins: { legend: { display: false } } }
});
const body = document.body;
body.dataset.updates = '0';
function set(id, text, cls) {
  const e = document.getElementById(id);
  e.textContent = text;
  e.className = 'v' + (cls ? ' ' + cls : '');
}
function show(d) {
  document.getElementById('when').textContent =
    `${d.now} - sekka ${d.version}, layout ${d.layout} (runs out ${d.layout_runs_out}), up ${d.uptime_s} s`;
  set('worker', `${d.worker.worker_id} (${d.worker.source})`);
  set('lease', d.worker.lease_held ? 'held' : 'lost', d.worker.lease_held ? 'good' : 'bad');
  set('ahead', `${(d.hwm_ahead_ms / 1000).toFixed(1)} s`, d.hwm_ahead_ms > 0 ? 'good' : 'bad');
  set('issued', d.ids_issued.toLocaleString());
  set('clock', `${d.clock.backwards_events} (max ${d.clock.max_backwards_ms} ms)`,
      d.clock.backwards_events > 0 ? 'bad' : '');
  set('connections', String(d.connections));
  const h = d.history;
  rate.data.labels = h.map(p => p.t.slice(11, 19));
  const tags = [...new Set(h.flatMap(p => Object.keys(p.segments)))];
  rate.data.datasets = [{ label: 'snowflake', data: h.map(p => p.snowflake), borderColor: colors[0] }]
    .concat(tags.map((t, i) => ({ label: `segment ${t}`, data: h.map(p => p.segments[t] ?? 0),
      borderColor: colors[(i + 1) % colors.length] })));
  rate.update();
  buffers.data.labels = d.segments.map(s => s.tag);
  buffers.data.datasets[0].data = d.segments.map(s => s.step ? Math.round(100 * s.remaining / s.step) : 0);
  buffers.update();
  // For a reader and for tests: updates so far, ids issued at the first and the latest.
  if (!body.dataset.firstIssued) body.dataset.firstIssued = String(d.ids_issued);
  body.dataset.lastIssued = String(d.ids_issued);
  body.dataset.updates = String(Number(body.dataset.updates) + 1);
  if (body.dataset.drawn !== '2') body.dataset.drawn = String([rate, buffers].filter(c => {
    const px = c.ctx.getImageData(0, 0, c.width, c.height).data;
    for (let i = 3; i < px.length; i += 4 * 53) if (px[i] !== 0) return true;
    return false;
  }).length);
}
async function refresh() {
  try {
    const r = await fetch('/ui/data', { cache: 'no-store' });
    if (!r.ok) throw new Error(`HTTP ${r.status}`);
    show(await r.json());
  } catch (e) {
    document.getElementById('when').textContent = `cannot read /ui/data: ${e.message}`;
  }
}
refresh();
setInterval(refresh, 1000);
</script></body></html>
)";

}  // namespace

const std::string& UiPage() {
  static const std::string page = [] {
    std::string p = kHead;
    p += assets::ChartJs();
    p += kBody;
    return p;
  }();
  return page;
}

}  // namespace sekka::server
