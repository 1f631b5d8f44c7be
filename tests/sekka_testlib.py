"""Helpers for end-to-end tests: start the real `sekka serve` on 127.0.0.1 with ports the kernel
picks (port 0), find where it listens from its first stdout line, talk to it, and stop it by PID.
Every server and temp dir a test makes is cleaned up by the test's tearDown (or at exit)."""

import atexit
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

SEKKA = os.environ.get("SEKKA_BIN", "build/cli/sekka")
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
LISTEN_RE = re.compile(r"HTTP on http://(\S+), Redis protocol on (\S+) \(worker id (\d+)")

_live = []


def _cleanup():
    for proc in list(_live):
        if proc.poll() is None:
            proc.kill()
            proc.wait()


atexit.register(_cleanup)


class Server:
    """One `sekka serve` process."""

    def __init__(self, data_dir, *flags, env=None, faketime_file=None, wait=True):
        self.data_dir = data_dir
        self.env = dict(os.environ)
        if env:
            self.env.update(env)
        if faketime_file:
            self.env.update({"LD_PRELOAD": FAKETIME_LIB, "FAKETIME_TIMESTAMP_FILE": faketime_file,
                             "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1"})
        args = [SEKKA, "serve", "--http", "127.0.0.1:0", "--resp", "127.0.0.1:0",
                "--data-dir", data_dir, *flags]
        self.stderr_path = os.path.join(data_dir + ".log")
        self.stderr = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.stderr,
                                     env=self.env, text=True)
        _live.append(self.proc)
        self.http = self.resp = None
        self.worker_id = None
        if wait:
            self.wait_listening()

    def wait_listening(self, timeout=30):
        """Reads the first stdout line; returns False if the process exited instead."""
        deadline = time.time() + timeout
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=max(1, deadline - time.time()))
            return False
        m = LISTEN_RE.search(line)
        if not m:
            raise AssertionError(f"unexpected first line: {line!r}")
        self.http, self.resp, self.worker_id = m.group(1), m.group(2), int(m.group(3))
        return True

    @property
    def http_port(self):
        return int(self.http.rsplit(":", 1)[1])

    @property
    def resp_port(self):
        return int(self.resp.rsplit(":", 1)[1])

    def stderr_text(self):
        if not self.stderr.closed:
            self.stderr.flush()
        with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, timeout=15):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc in _live:
            _live.remove(self.proc)
        self.proc.stdout.close()
        self.stderr.close()
        return self.proc.returncode

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    # HTTP
    def get(self, path, headers=None, conn=None):
        own = conn is None
        if own:
            conn = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=30)
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        body = r.read().decode()
        result = (r.status, dict(r.getheaders()), body)
        if own:
            conn.close()
        return result

    def get_json(self, path, headers=None, conn=None):
        status, hdrs, body = self.get(path, headers, conn)
        return status, json.loads(body) if body else None

    # RESP over a raw socket (the clients under test are redis-cli and python3-redis).
    def resp_raw(self, payload, read_until_close=False, timeout=5):
        with socket.create_connection(("127.0.0.1", self.resp_port), timeout=timeout) as s:
            s.sendall(payload)
            data = b""
            try:
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                    if not read_until_close and data.endswith(b"\r\n"):
                        break
            except socket.timeout:
                pass
            return data


def redis_cli(server, *args, extra=()):
    p = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(server.resp_port), *extra, *args],
                       capture_output=True, text=True, timeout=30)
    return p.stdout.strip()


class TempDirs:
    """A temp dir for a test's data dirs; removed at cleanup."""

    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="sekka-test-")

    def path(self, name):
        return os.path.join(self.root, name)

    def cleanup(self):
        shutil.rmtree(self.root, ignore_errors=True)
