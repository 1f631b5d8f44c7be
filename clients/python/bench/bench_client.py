#!/usr/bin/python3
"""The Python client's cost per id from its buffer against one ID.NEXT round trip per id with
python3-redis, and nextId() latency while 4 threads draw 100,000 ids/s together. Needs a
running sekka server: bench/run_clients.sh starts one and passes its RESP address.

    /usr/bin/python3 clients/python/bench/bench_client.py 127.0.0.1:6380
"""

import json
import os
import sys
import threading
import time

import redis

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sekka_client import Client  # noqa: E402


def per_id_from_buffer(c, rounds=40, per_round=40_000):
    """Rounds of draws, each after a pause in which the refill completes, so that no timed
    call waits for the server (whose own ceiling would be measured instead)."""
    timed = n = 0
    for r in range(rounds + 10):  # the first 10: the batch size grows
        time.sleep(0.05)
        t0 = time.perf_counter_ns()
        for _ in range(per_round):
            c.next_id()
        if r >= 10:
            timed += time.perf_counter_ns() - t0
            n += per_round
    return timed / n


def per_id_round_trip(address, n=20_000):
    host, port = address.rsplit(":", 1)
    r = redis.Redis(host=host, port=int(port))
    for _ in range(1000):
        r.execute_command("ID.NEXT")
    t0 = time.perf_counter_ns()
    for _ in range(n):
        r.execute_command("ID.NEXT")
    return (time.perf_counter_ns() - t0) / n


def latency_under_load(c, rate=100_000, threads=4, seconds=3.0):
    """Each thread draws rate/threads ids a second, paced in steps of 1 ms; every call timed."""
    samples = [[] for _ in range(threads)]
    per_ms = rate / threads / 1000

    def run(k):
        out = samples[k]
        start = time.perf_counter()
        done = 0
        while (elapsed := time.perf_counter() - start) < seconds:
            owed = int(elapsed * 1000 * per_ms) - done  # paced by the time passed
            for _ in range(owed):
                t0 = time.perf_counter_ns()
                c.next_id()
                out.append(time.perf_counter_ns() - t0)
            done += max(0, owed)
            time.sleep(0.0005)

    ts = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    every = sorted(x for s in samples for x in s)
    pick = lambda q: every[min(len(every) - 1, int(q * len(every)))] / 1000  # noqa: E731
    return {"ids": len(every), "ids_per_s": len(every) / seconds, "p50_us": pick(0.50),
            "p99_us": pick(0.99), "p999_us": pick(0.999), "max_us": every[-1] / 1000}


def main():
    address = sys.argv[1]
    with Client(servers=[address]) as c:
        buffered = per_id_from_buffer(c)
        trip = per_id_round_trip(address)
        load = latency_under_load(c)
        print(json.dumps({"language": "python", "next_id_ns": round(buffered, 1),
                          "round_trip_ns": round(trip, 1), "ratio": round(trip / buffered, 1),
                          "load": load, "stats": c.stats()}))


if __name__ == "__main__":
    main()
