#!/usr/bin/python3
"""What an open, idle connection costs `sekka serve` in memory (the fixed cost that comes on top
of server.max_buffer_mib; docs/reliability.md): N plain RESP connections that send nothing,
RSS before and after. Bounded: N connections (default 5,000), one server, stopped by its PID.

    /usr/bin/python3 bench/idle_connections.py [N]     # SEKKA_BIN picks the binary
"""

import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from sekka_testlib import Server, TempDirs  # noqa: E402


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    dirs = TempDirs()
    server = Server(dirs.path("data"), "--idle-timeout", "60s")
    conns = []
    try:
        before = server.rss_kib()
        for _ in range(n):
            conns.append(socket.create_connection(("127.0.0.1", server.resp_port), timeout=10))
        time.sleep(1)
        after = server.rss_kib()
        print("%d idle connections: RSS %.1f -> %.1f MiB, %.1f KiB each"
              % (n, before / 1024, after / 1024, (after - before) / n))
    finally:
        for c in conns:
            c.close()
        server.stop()
        dirs.cleanup()


if __name__ == "__main__":
    main()
