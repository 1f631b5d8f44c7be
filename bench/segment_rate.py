#!/usr/bin/python3
"""Drives one segment tag at a steady rate (default 100,000 ids/s, as SEG.NEXT batches of 1000)
for a bounded time and prints, per second, how many ranges the server fetched from its store
(sekka_segment_fetches_total). Used by bench/run_server.sh; stops by itself."""

import http.client
import sys
import time

import redis

resp_port, http_port, tag = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rate, seconds = int(sys.argv[4]) if len(sys.argv) > 4 else 100_000, 30
batch = 1000


def fetches():
    c = http.client.HTTPConnection("127.0.0.1", http_port, timeout=10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    for line in text.splitlines():
        if line.startswith(f'sekka_segment_fetches_total{{tag="{tag}"}}'):
            return int(line.split()[-1])
    return 0


r = redis.Redis(host="127.0.0.1", port=resp_port)
start = time.monotonic()
per_second, last, issued = [], fetches(), 0
for second in range(seconds):
    for i in range(rate // batch):
        r.execute_command("SEG.NEXT", tag, batch)
        issued += batch
        # Spread the batches over the second.
        target = start + second + (i + 1) * batch / rate
        delay = target - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    now = fetches()
    per_second.append(now - last)
    last = now
elapsed = time.monotonic() - start
print(f"issued {issued} ids in {elapsed:.1f} s ({issued / elapsed:,.0f} ids/s)")
print("store allocations per second:", " ".join(str(n) for n in per_second))
print(f"after warm-up (last 20 s): {sum(per_second[10:])} allocations, "
      f"at most {max(per_second[10:])} in any second")
