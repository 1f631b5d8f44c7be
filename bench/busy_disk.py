#!/usr/bin/python3
"""A server beside a heavy fsync'd writer (issue 44, "a busy disk"): how long the high-water
mark's store (write, fsync, rename) takes, and whether clients see UNAVAILABLE, first on a quiet
disk, then with `--writers` (4) `dd oflag=dsync bs=4M` writing beside it on the same disk, then
the same writers buffered (dirty pages an fsync may wait for).

    SEKKA_BIN=build/cli/sekka /usr/bin/python3 bench/busy_disk.py [--seconds 60] [--writers 4]

One client draws ID.BATCH 100 in a loop through each phase; the phases are bounded in time and
the writers stop with them (their files are removed). Everything is on 127.0.0.1 and in a temp dir
on the disk that holds /tmp. Prints one row per phase: calls, UNAVAILABLE replies, call latency
(p50, p99, max) and the hwm stores of the phase by the server's own histogram
(sekka_hwm_persist_seconds)."""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

import redis

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from free_port import free_port  # noqa: E402

SEKKA = os.environ.get("SEKKA_BIN", "build/cli/sekka")


def persist_histogram(http):
    """{le: cumulative count} of sekka_hwm_persist_seconds, from /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics", timeout=30) as r:
        text = r.read().decode()
    return {le: int(n) for le, n in
            re.findall(r'sekka_hwm_persist_seconds_bucket\{le="([^"]+)"\} (\d+)', text)}


def describe_stores(before, after):
    """The phase's stores: how many, and how many took longer than 0.1 s, 1 s (cumulative
    buckets of the histogram; the largest bucket edge that any store passed)."""
    delta = {le: after[le] - before.get(le, 0) for le in after}
    total = delta.get("+Inf", 0)
    edges = sorted((float(le), n) for le, n in delta.items() if le != "+Inf")
    over = {edge: total - n for edge, n in edges}
    slowest = max((edge for edge, n in edges if n < total), default=None)
    def past(limit):
        return next((n for edge, n in sorted(over.items()) if edge >= limit), 0)
    return total, past(0.1), past(1.0), slowest


def phase(name, client, http, seconds, writer_dir=None, writers=0, flags=()):
    stop_at = time.monotonic() + seconds
    # Bounded: 4 GiB each at most, written 4 MiB a time, stopped at the phase's end.
    procs = [subprocess.Popen(["dd", "if=/dev/zero", f"of={writer_dir}/ballast{i}", "bs=4M",
                               "count=1024", *flags],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for i in range(writers)]
    before = persist_histogram(http)
    latencies, errors, texts = [], 0, set()
    while time.monotonic() < stop_at:
        t0 = time.monotonic()
        try:
            client.execute_command("ID.BATCH", 100)
        except redis.ResponseError as e:
            errors += 1
            texts.add(str(e)[:80])
        latencies.append(time.monotonic() - t0)
    for i, p in enumerate(procs):
        p.terminate()
        p.wait(timeout=30)
        os.unlink(f"{writer_dir}/ballast{i}")
    total, over_01, over_1, slowest = describe_stores(before, persist_histogram(http))
    latencies.sort()
    q = lambda f: latencies[min(len(latencies) - 1, int(f * len(latencies)))] * 1e3  # noqa: E731
    print(f"| {name} | {len(latencies)} | {errors} | {q(0.5):.2f} / {q(0.99):.2f} / "
          f"{latencies[-1] * 1e3:.0f} | {total} | {over_01} | {over_1} | "
          f"{'-' if slowest is None else f'> {slowest:g} s'} |")
    for t in sorted(texts):
        print(f"    error: {t}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--writers", type=int, default=4, help="dd oflag=dsync processes")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sekka-busy-disk-") as d:
        http, resp = free_port(), free_port()
        env = dict(os.environ, SEKKA_WORKER_LOCK_DIR=os.path.join(d, "locks"))
        server = subprocess.Popen([SEKKA, "serve", "--http", f"127.0.0.1:{http}", "--resp",
                                   f"127.0.0.1:{resp}", "--data-dir", os.path.join(d, "data")],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True)
        try:
            server.stdout.readline()  # the banner: listening
            client = redis.Redis(host="127.0.0.1", port=resp, socket_timeout=30)
            print("| phase | calls | UNAVAILABLE | ms p50 / p99 / max | hwm stores | > 0.1 s "
                  "| > 1 s | slowest |")
            print("|---|---|---|---|---|---|---|---|")
            phase("quiet disk", client, http, args.seconds)
            phase(f"{args.writers} x dd oflag=dsync beside", client, http, args.seconds,
                  writer_dir=d, writers=args.writers, flags=["oflag=dsync"])
            # Buffered writers leave dirty pages that an fsync of the hwm's small file may have
            # to wait for (ext4's ordered journal commits them first).
            phase(f"{args.writers} x dd buffered beside", client, http, args.seconds,
                  writer_dir=d, writers=args.writers)
        finally:
            server.terminate()
            server.wait(timeout=30)
            server.stdout.close()


if __name__ == "__main__":
    main()
