#!/usr/bin/python3
"""Issue 42's attacks that need TLS or HTTP, long form: each on a real `sekka serve` and on the
peer a team would otherwise put there, in one run.

  half_handshakes  3,000 x scale ClientHellos that never finish, from 20 addresses
                   (127.0.0.2-21), against sekka and redis-server with TLS (--tls-port), both
                   with their memory settings (sekka --max-buffer-mib 16); records each
                   server's peak RSS, and its RSS 5 s after the attackers are gone.
  hello_replay     one address (127.0.0.2) replaying a ClientHello as fast as it can (connect,
                   send, read the server's first flight, close) for --seconds, while a good
                   client on 127.0.0.1 makes a whole TLS handshake every 100 ms; records the good
                   handshakes' times against the same client's unloaded ones (10 first).
  metrics_flood    4 connections pipelining GET /metrics (sekka with 3,000 tags, --open-metrics,
                   the worst case: with a token they get 401s) and the same pipelining of a
                   1.1 MB static file from nginx; meanwhile the good client (sekka: ID.NEXT on
                   an authenticated RESP connection; nginx: GET of a small file on a kept-alive
                   connection) records its answers' times.

Everything is bounded in count and time, uses 127.0.0.0/8 only, and stops every process it
started by its PID. Prints a Markdown table and writes OUT/tls_http.json.

    /usr/bin/python3 tests/hostile/tls_http.py --seconds 10 --scale 1 --out hostile-out
"""

import argparse
import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hostile  # noqa: E402
from sekka_testlib import client_hello  # noqa: E402  (hostile put tests/ on the path)

REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
TOKEN = hostile.TOKEN


class Proc:
    """A server process, stopped by its PID; RSS from /proc."""

    def __init__(self, args, log, env=None):
        self.log = open(log, "ab")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=self.log, env=env,
                                     preexec_fn=hostile._die_with_parent)

    def rss_kib(self):
        return hostile.rss_kib(self.proc.pid) or 0

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def wait_port(port, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((hostile.HOST, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nothing listens on %d" % port)


def token_file(tmp):
    """The token in a file only its owner reads (--auth-token-file), made once per run."""
    path = os.path.join(tmp, "token")
    if not os.path.exists(path):
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write(TOKEN + "\n")
    return path


def sekka_env(tmp):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEKKA_")}
    env["SEKKA_WORKER_LOCK_DIR"] = os.path.join(tmp, "locks")
    os.makedirs(env["SEKKA_WORKER_LOCK_DIR"], exist_ok=True, mode=0o700)
    return env


def tls_servers(tmp, sekka_bin, certs):
    """(name, Proc, TLS port) of sekka and redis-server, both with TLS only."""
    sp, rp = hostile.free_ports(2)
    token = token_file(tmp)
    sekka = Proc([sekka_bin, "serve", "--http", "", "--resp", "127.0.0.1:%d" % sp,
                  "--data-dir", os.path.join(tmp, "data"), "--auth-token-file", token,
                  "--tls-cert-file", certs("server.crt"), "--tls-key-file", certs("server.key"),
                  "--max-buffer-mib", "16", "--max-unauthenticated-per-address", "100000"],
                 os.path.join(tmp, "sekka.log"), sekka_env(tmp))
    redis = Proc([hostile.REDIS_SERVER, "--bind", "127.0.0.1", "--port", "0", "--tls-port",
                  str(rp), "--tls-cert-file", certs("server.crt"), "--tls-key-file",
                  certs("server.key"), "--tls-ca-cert-file", certs("ca.crt"),
                  "--tls-auth-clients", "no", "--save", "", "--appendonly", "no", "--dir", tmp,
                  "--requirepass", TOKEN, "--maxclients", "10000"],
                 os.path.join(tmp, "redis.log"))
    wait_port(sp)
    wait_port(rp)
    return [("sekka", sekka, sp), ("redis", redis, rp)]


def half_handshakes(servers, scale):
    hello = client_hello()
    rows = []
    for name, proc, port in servers:
        before = proc.rss_kib()
        peak = before
        conns = []
        for i in range(int(3000 * scale)):
            try:
                c = socket.create_connection((hostile.HOST, port), timeout=10,
                                             source_address=("127.0.0.%d" % (2 + i % 20), 0))
                c.sendall(hello)
                conns.append(c)
            except OSError:
                pass
            if i % 100 == 0:
                peak = max(peak, proc.rss_kib())
        time.sleep(1)
        peak = max(peak, proc.rss_kib())
        for c in conns:
            c.close()
        time.sleep(5)  # the handshakes still waiting their turn end, then the trim
        rows.append({"attack": "half_handshakes", "target": name, "rss_before_mib":
                     before / 1024, "peak_rss_mib": peak / 1024,
                     "rss_after_mib": proc.rss_kib() / 1024, "connections": len(conns)})
    return rows


def good_handshake(port, ca):
    ctx = ssl.create_default_context(cafile=ca)
    t0 = time.perf_counter()
    with socket.create_connection((hostile.HOST, port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1"):
            return (time.perf_counter() - t0) * 1000


def hello_replay(servers, seconds, ca):
    hello = client_hello()
    rows = []
    for name, proc, port in servers:
        unloaded = sorted(good_handshake(port, ca) for _ in range(10))
        stop = threading.Event()
        replays = [0]

        def replay():
            while not stop.is_set():
                try:
                    with socket.create_connection((hostile.HOST, port), timeout=2,
                                                  source_address=("127.0.0.2", 0)) as c:
                        c.sendall(hello)
                        c.settimeout(0.2)
                        if c.recv(5):
                            replays[0] += 1
                except OSError:
                    pass
        threads = [threading.Thread(target=replay) for _ in range(4)]
        for t in threads:
            t.start()
        loaded, errors = [], 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                loaded.append(good_handshake(port, ca))
            except (OSError, ssl.SSLError):
                errors += 1
            time.sleep(0.1)
        stop.set()
        for t in threads:
            t.join()
        loaded.sort()
        p50u = hostile.percentile(unloaded, 0.5)
        rows.append({"attack": "hello_replay", "target": name,
                     "replays_answered_per_s": replays[0] / seconds,
                     "good_unloaded_p50_ms": p50u,
                     "good_p50_ms": hostile.percentile(loaded, 0.5),
                     "good_max_ms": loaded[-1] if loaded else None,
                     "good_p50_ratio": (hostile.percentile(loaded, 0.5) or 0) / p50u,
                     "good_errors": errors})
    return rows


def pipeline_get(port, path, count, stop):
    request = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % path).encode() * count
    while not stop.is_set():
        try:
            with socket.create_connection((hostile.HOST, port), timeout=5) as c:
                c.sendall(request)
                while not stop.is_set() and c.recv(1 << 20):
                    pass
        except OSError:
            pass


def flood(port, path, seconds, good):
    stop = threading.Event()
    threads = [threading.Thread(target=pipeline_get, args=(port, path, 50, stop))
               for _ in range(4)]
    for t in threads:
        t.start()
    times, errors = [], 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        t0 = time.perf_counter()
        try:
            good()
            times.append((time.perf_counter() - t0) * 1000)
        except (OSError, ConnectionError, http.client.HTTPException):
            errors += 1
        time.sleep(0.01)
    stop.set()
    for t in threads:
        t.join()
    times.sort()
    return {"good_p50_ms": hostile.percentile(times, 0.5),
            "good_p99_ms": hostile.percentile(times, 0.99),
            "good_max_ms": times[-1] if times else None, "good_errors": errors}


def metrics_flood(tmp, sekka_bin, seconds, tags):
    hp, rp, np = hostile.free_ports(3)
    store = "sqlite:" + os.path.join(tmp, "segments.db")
    token = token_file(tmp)
    sekka = Proc([sekka_bin, "serve", "--http", "127.0.0.1:%d" % hp, "--resp",
                  "127.0.0.1:%d" % rp, "--data-dir", os.path.join(tmp, "mdata"),
                  "--auth-token-file", token, "--segment-store", store,
                  "--segment-auto-create", "true", "--open-metrics", "true"],
                 os.path.join(tmp, "sekka-http.log"), sekka_env(tmp))
    rows = []
    try:
        wait_port(rp)
        conn = hostile.RespConn(rp, 30)
        conn.auth()
        conn.sock.sendall(b"".join(hostile.resp_command("SEG.NEXT", "tag-%05d" % i)
                                   for i in range(tags)))
        for _ in range(tags):
            conn.reply()
        good = hostile.RespConn(rp, 5)
        good.auth()
        r = flood(hp, "/metrics", seconds, lambda: good.call("ID.NEXT"))
        c = http.client.HTTPConnection("127.0.0.1", hp, timeout=30)
        c.request("GET", "/metrics")
        size = len(c.getresponse().read())
        rows.append(dict(attack="metrics_flood", target="sekka", reply_bytes=size, **r))
    finally:
        sekka.stop()
    www = os.path.join(tmp, "www")
    os.makedirs(www)
    with open(os.path.join(www, "big"), "wb") as f:
        f.write(b"x" * 1_100_000)
    with open(os.path.join(www, "small"), "wb") as f:
        f.write(b"ok\n")
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write("daemon off; worker_processes 1; pid %s/nginx.pid; error_log %s/nginx.err;\n"
                "events { worker_connections 1024; }\n"
                "http { access_log off; client_body_temp_path %s; proxy_temp_path %s;\n"
                "  fastcgi_temp_path %s; uwsgi_temp_path %s; scgi_temp_path %s;\n"
                "  server { listen 127.0.0.1:%d; root %s; } }\n"
                % (tmp, tmp, tmp, tmp, tmp, tmp, tmp, np, www))
    nginx = Proc(["/usr/sbin/nginx", "-c", conf, "-p", tmp], os.path.join(tmp, "nginx.log"))
    try:
        wait_port(np)
        keep = http.client.HTTPConnection("127.0.0.1", np, timeout=5)

        def small():
            keep.request("GET", "/small")
            keep.getresponse().read()
        r = flood(np, "/big", seconds, small)
        rows.append(dict(attack="metrics_flood", target="nginx", reply_bytes=1_100_000, **r))
    finally:
        nginx.stop()
    return rows


def table(rows):
    out = ["| attack | target | figures |", "|---|---|---|"]
    for r in rows:
        figures = ", ".join("%s %s" % (k, ("%.2f" % v) if isinstance(v, float) else v)
                            for k, v in r.items() if k not in ("attack", "target"))
        out.append("| %s | %s | %s |" % (r["attack"], r["target"], figures))
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--out", default="hostile-out")
    args = ap.parse_args(argv)
    sekka_bin = os.environ.get("HOSTILE_SEKKA_BIN", hostile.DEFAULT_SEKKA)
    tmp = tempfile.mkdtemp(prefix="sekka-tls-http-")
    rows = []
    try:
        certs_dir = os.path.join(tmp, "certs")
        subprocess.run([os.path.join(REPO, "scripts", "test_certs.sh"), certs_dir], check=True,
                       capture_output=True)

        def certs(name):
            return os.path.join(certs_dir, name)
        servers = tls_servers(tmp, sekka_bin, certs)
        try:
            rows += half_handshakes(servers, args.scale)
            rows += hello_replay(servers, args.seconds, certs("ca.crt"))
        finally:
            for _, proc, _ in servers:
                proc.stop()
        rows += metrics_flood(tmp, sekka_bin, args.seconds, int(3000 * args.scale))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "tls_http.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
