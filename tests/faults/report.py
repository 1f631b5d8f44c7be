#!/usr/bin/python3
"""Markdown tables for docs/reliability.md from campaign results: one row per run, and per
fault kind the count and the unavailability and recovery figures over all runs of a coordinator.

  /usr/bin/python3 tests/faults/report.py OUT_DIR...   (each holding result.json and history/)

A result.json written by an older checker is judged again from its history."""

import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import checker  # noqa: E402


def load(directory):
    with open(os.path.join(directory, "result.json")) as f:
        r = json.load(f)
    if "fault_events" not in r or "unexplained_connection_failures" not in r:
        # Written by an older checker: judge the history again with this one.
        rechecked = checker.check(os.path.join(directory, "history"), r.get("tags", ()))
        for key in ("coordinator", "seed", "minutes", "servers", "clients"):
            rechecked[key] = r[key]
        r = rechecked
    return r


def fmt_s(v):
    return "–" if v is None else f"{v:.2f}"


def main(dirs):
    runs = [load(d) for d in dirs]
    print("| coordinator | seed | minutes | requests | ids checked | faults | repeated ids | "
          "segment order violations | strict requests | strict order violations | "
          "undocumented errors | dropped connections | crashes |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        crashes = sum(1 for e in r["server_exits"] if not e["expected"])
        print(f"| {r['coordinator']} | {r['seed']} | {r['minutes']:g} | {r['requests']:,} | "
              f"{r['ids_checked']:,} | {len(r['fault_events'])} | {r['repeated_ids']} | "
              f"{r['segment_order_violations']} | {r.get('strict_requests', 0):,} | "
              f"{r.get('strict_order_violations', 0)} | {r['undocumented_errors']} | "
              f"{r['unexplained_connection_failures']} | {crashes} |")
    for coordinator in sorted({r["coordinator"] for r in runs}):
        events = [e for r in runs if r["coordinator"] == coordinator for e in r["fault_events"]]
        print(f"\n**{coordinator}** ({sum(1 for r in runs if r['coordinator'] == coordinator)} "
              f"runs): unavailability = the longest time the servers a fault aims at issued no "
              "ids of its class (snowflake; segment for PostgreSQL faults), from the fault until "
              "every server was ready again; recovery = from the heal until every server was "
              "ready.\n")
        print("| fault | count | unavailable median s | max s | recovery median s | max s |")
        print("|---|---|---|---|---|---|")
        kinds = sorted({e["kind"] for e in events})
        for kind in kinds:
            items = [e for e in events if e["kind"] == kind]
            un = [e["unavailable_s"] for e in items]
            rec = [e["recovery_s"] for e in items if e["recovery_s"] is not None]
            print(f"| {kind} | {len(items)} | {fmt_s(statistics.median(un))} | {fmt_s(max(un))} "
                  f"| {fmt_s(statistics.median(rec) if rec else None)} | "
                  f"{fmt_s(max(rec) if rec else None)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
