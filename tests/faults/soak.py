"""Per-minute figures of a soak (campaign.py --soak): requests and ids per second, latency
percentiles, and each server's RSS and open files; and an SVG plot of them. Pure."""

import bisect

from workload import OK


def percentile(sorted_values, q):
    if not sorted_values:
        return None
    k = min(len(sorted_values) - 1, int(q * len(sorted_values)))
    return sorted_values[k]


def per_minute(history):
    campaign = next(e for e in history.events if e.get("type") == "campaign")
    t0 = campaign["t0"]
    minutes = int(round((campaign["deadline"] - t0) / 60))
    latencies = [[] for _ in range(minutes)]
    ids = [0] * minutes
    errors = [0] * minutes
    for i in range(len(history)):
        m = int((history.start[i] - t0) // 60)
        if 0 <= m < minutes:
            if history.outcome[i] == OK:
                latencies[m].append(history.end[i] - history.start[i])
            else:
                errors[m] += 1
    for k in range(len(history.first)):
        r = history.ref[k]
        m = int((history.start[r] - t0) // 60)
        if 0 <= m < minutes:
            ids[m] += history.last[k] - history.first[k] + 1
    usage = [e for e in history.events if e.get("type") == "usage"]
    times = [e["t"] for e in usage]
    out = []
    for m in range(minutes):
        lat = sorted(latencies[m])
        # The last resource sample inside the minute.
        j = bisect.bisect_right(times, t0 + (m + 1) * 60) - 1
        servers = usage[j]["servers"] if j >= 0 else {}
        out.append({
            "minute": m + 1,
            "requests_per_s": round((len(lat) + errors[m]) / 60),
            "ids_per_s": round(ids[m] / 60),
            "errors": errors[m],
            "p50_ms": round(1000 * percentile(lat, 0.50), 2) if lat else None,
            "p99_ms": round(1000 * percentile(lat, 0.99), 2) if lat else None,
            "p999_ms": round(1000 * percentile(lat, 0.999), 2) if lat else None,
            "rss_kib": {s: v[0] for s, v in servers.items()},
            "fds": {s: v[1] for s, v in servers.items()},
        })
    return {"minutes": out}


def svg(soak, title):
    """Four small line charts (requests/s, p99 ms, RSS MiB, fds) over the minutes, as SVG."""
    rows = soak["minutes"]
    xs = [r["minute"] for r in rows]
    servers = sorted({s for r in rows for s in r["rss_kib"]})
    panels = [
        ("requests per second", {"all": [r["requests_per_s"] for r in rows]}),
        ("latency ms (p50, p99, p999)", {"p50": [r["p50_ms"] or 0 for r in rows],
                                         "p99": [r["p99_ms"] or 0 for r in rows],
                                         "p999": [r["p999_ms"] or 0 for r in rows]}),
        ("RSS MiB per server", {f"s{s}": [r["rss_kib"].get(s, 0) / 1024 for r in rows]
                                for s in servers}),
        ("open files per server", {f"s{s}": [r["fds"].get(s, 0) for r in rows] for s in servers}),
    ]
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]
    w, h, pad = 360, 200, 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * w}" height="{2 * h + 30}" '
             f'font-family="sans-serif" font-size="11">',
             f'<text x="10" y="18" font-size="14">{title}</text>']
    for p, (name, series) in enumerate(panels):
        ox, oy = (p % 2) * w, 30 + (p // 2) * h
        top = max([max(v) for v in series.values() if v] + [1]) * 1.1
        parts.append(f'<text x="{ox + pad}" y="{oy + 12}">{name} (max {top / 1.1:.4g})</text>')
        parts.append(f'<rect x="{ox + pad}" y="{oy + 20}" width="{w - pad - 10}" '
                     f'height="{h - 50}" fill="none" stroke="#999"/>')
        for k, (label, ys) in enumerate(series.items()):
            pts = []
            for x, y in zip(xs, ys):
                px = ox + pad + (x - xs[0]) / max(1, xs[-1] - xs[0]) * (w - pad - 10)
                py = oy + 20 + (h - 50) * (1 - y / top)
                pts.append(f"{px:.1f},{py:.1f}")
            c = colors[k % len(colors)]
            parts.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.5" '
                         f'points="{" ".join(pts)}"/>')
            parts.append(f'<text x="{ox + pad + 5 + 45 * k}" y="{oy + h - 18}" fill="{c}">'
                         f'{label}</text>')
        parts.append(f'<text x="{ox + pad}" y="{oy + h - 5}">minute 1 to {xs[-1]}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
