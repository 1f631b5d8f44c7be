#!/usr/bin/python3
"""The console blocks of README.md and docs/getting-started.md run as written, in order, as a
new user types them on a fresh machine: a fresh data dir and lock dir, the build under test for
`sekka` and `./build/cli/sekka`. Each `$ ` line is run with bash; the lines under it are what it
prints, compared by shape (a run of digits matches any run of digits: ids and times differ on
every run). A `sekka serve` line keeps running, as in a terminal of its own, while the next
lines run; its first line is compared. What differs from a user's machine is only what ties a
block to it: free ports for 8080 and 6380, `redis-cli --no-raw` (a terminal's output, which
redis-cli drops when piped), `bash scripts/run.sh` run as the `sekka serve` it ends in, and the
package's set-up lines (`bash scripts/package.sh`, `apt ...`), which the package stage of
scripts/test.sh runs. Run with /usr/bin/python3; SEKKA_BIN names the binary."""

import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from free_port import free_port  # noqa: E402
from sekka_testlib import REPO, SEKKA, TempDirs  # noqa: E402

SET_UP = ("bash scripts/package.sh", "apt ")


def console_blocks(path):
    """The ```console blocks of `path` (relative to the repository), in order, each a list of
    [command, [the lines it prints]]."""
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        text = f.read()
    blocks = []
    for body in re.findall(r"```console\n(.*?)```", text, re.S):
        steps = []
        for line in body.splitlines():
            if line.startswith("$ "):
                steps.append([line[2:], []])
            elif steps:
                steps[-1][1].append(line)
        blocks.append(steps)
    return blocks


TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


def shape(line):
    """`line` as a pattern in which a time (2026-11-21T05:54:46.887Z) stands for any time and a
    run of six digits or more (an id, ms) for any such run; shorter numbers (a worker id, a
    step, a count) must be as shown."""
    out = []
    for i, part in enumerate(re.split(TIME, line)):
        out.append(TIME if i else "")
        out.extend(r"\d{6,}" if piece.isdigit() and len(piece) >= 6 else re.escape(piece)
                   for piece in re.split(r"(\d+)", part))
    return "".join(out)


class ConsoleBlocksTestCase(unittest.TestCase):
    def setUp(self):
        self.dirs = TempDirs()
        self.servers = []
        self.http, self.resp = free_port(), free_port()
        self.cwd = self.dirs.path("cwd")
        os.makedirs(self.cwd)
        self.env = dict(os.environ, SEKKA_WORKER_LOCK_DIR=self.dirs.path("worker-locks"),
                        PATH=os.path.dirname(os.path.abspath(SEKKA)) + ":" + os.environ["PATH"])

    def tearDown(self):
        for p in self.servers:
            p.terminate()
            p.wait(timeout=30)
            p.stdout.close()
        self.dirs.cleanup()

    def command(self, text):
        """`text` as this machine runs it (see the module's docstring)."""
        text = text.replace("bash scripts/run.sh", "sekka serve")
        text = text.replace("./build/cli/sekka", SEKKA)
        text = text.replace("127.0.0.1:8080", f"127.0.0.1:{self.http}")
        text = text.replace("-p 6380", f"-p {self.resp}")
        text = text.replace("redis-cli ", "redis-cli --no-raw ")
        if re.match(r"(sekka|\S+/sekka) serve\b", text):
            text = re.sub(r"serve\b", f"serve --http 127.0.0.1:{self.http} "
                                      f"--resp 127.0.0.1:{self.resp}", text, count=1)
        return text

    def as_shown(self, text):
        """Output with this machine's ports as the docs show them, and where the suite's epoll
        stage chose that path (SEKKA_SERVER_IO=epoll, scripts/test.sh), its I/O as the
        default's, which the docs show."""
        text = text.replace(f":{self.http}", ":8080").replace(f":{self.resp}", ":6380")
        if os.environ.get("SEKKA_SERVER_IO") == "epoll":
            text = text.replace(", I/O epoll)", ", I/O io_uring)")
        return text

    def serve(self, command, expected):
        """Starts a `sekka serve` line; compares its first line once it is listening."""
        p = subprocess.Popen(["bash", "-c", "exec " + command], cwd=self.cwd, env=self.env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.servers.append(p)
        first = self.as_shown(p.stdout.readline().rstrip("\n"))  # the banner, once it listens
        self.assertRegex(first, "^" + shape(expected[0]) + "$" if expected else "")

    def run_blocks(self, path):
        ran = 0
        for steps in console_blocks(path):
            for text, expected in steps:
                if text.startswith(SET_UP):
                    continue
                command = self.command(text)
                if " serve" in command and "--help" not in command:
                    self.serve(command, expected)
                    ran += 1
                    continue
                p = subprocess.run(["bash", "-c", command], cwd=self.cwd, env=self.env,
                                   capture_output=True, text=True, timeout=120)
                self.assertEqual(p.returncode, 0, f"$ {text}\n{p.stdout}{p.stderr}")
                if expected:
                    got = self.as_shown(p.stdout.rstrip("\n")).split("\n")
                    self.assertEqual(len(got), len(expected), f"$ {text}\n{p.stdout}")
                    for line, want in zip(got, expected):
                        self.assertRegex(line, "^" + shape(want) + "$", f"$ {text}")
                ran += 1
        return ran


class ReadmeTest(ConsoleBlocksTestCase):
    def test_the_readmes_examples_run_in_order(self):
        """Issue 43, point 1: after serve on its defaults, the README's third example (gen
        --layout twitter) exited 2 on the host's lock dir. Every example runs now, in order."""
        self.assertGreaterEqual(self.run_blocks("README.md"), 8)


class GettingStartedTest(ConsoleBlocksTestCase):
    def test_getting_started_runs_as_written(self):
        self.assertGreaterEqual(self.run_blocks("docs/getting-started.md"), 5)


if __name__ == "__main__":
    unittest.main(argv=sys.argv, verbosity=2)
