"""A seeded fault layer at the transport, for the campaign's --transport tier: the real etcd and
ZooKeeper client code of every `sekka serve`, against real members, through one TCP proxy per
(server, member) on 127.0.0.1. A fault therefore cuts or slows one server's link to the
coordinator while the other servers' links stay whole (a partial partition, the case leases and
fences are for). Modes of a link (set and healed by the nemesis):

  ok         bytes pass as they come
  delay      every chunk, both ways, waits a delay drawn per chunk from the link's range: replies
             arrive late (some after the caller gave up: its call budget is lease_ttl / 4), and
             replies on different connections overtake each other
  late       requests pass; replies wait 1 to 2 s, past the call budget: a write lands at the
             coordinator while its caller sees a timeout and may try again
  blackhole  requests pass, replies are dropped: the lease stays alive at the coordinator while
             its holder hears nothing
  partition  nothing passes either way (connections stay open, as across a dead switch)
  drop       every connection is closed, and new ones are closed at once

Healing closes every connection that lost bytes (a blackhole, a partition), as a client that
times out does. The delays come from random.Random(seed), so a seed fixes which faults come,
for how long and how large; the interleaving with real processes is not fixed (they run in
real time)."""

import random
import socket
import threading
import time

MODES = ("ok", "delay", "late", "blackhole", "partition", "drop")


class Link:
    """One server's links to every coordinator member."""

    def __init__(self, upstream_ports, seed):
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.mode = "ok"
        self.delay_s = (0.0, 0.0)
        self.stopping = threading.Event()
        self.conns = set()  # (client socket, upstream socket), guarded by lock
        self.proxies = [Proxy(self, port) for port in upstream_ports]

    @property
    def ports(self):
        return [p.port for p in self.proxies]

    def set(self, mode, delay_s=(0.0, 0.0)):
        assert mode in MODES, mode
        with self.lock:
            self.mode = mode
            self.delay_s = delay_s
        if mode == "drop":
            self.close_all()

    def heal(self):
        with self.lock:
            lossy = self.mode in ("blackhole", "partition")
            self.mode = "ok"
        if lossy:
            self.close_all()

    def close_all(self):
        with self.lock:
            conns, self.conns = list(self.conns), set()
        for pair in conns:
            for s in pair:
                close_quietly(s)

    def draw_delay(self, lo, hi):
        with self.lock:
            return self.rng.uniform(lo, hi)

    def stop(self):
        self.stopping.set()
        for p in self.proxies:
            close_quietly(p.sock)
        self.close_all()


class Proxy:
    """127.0.0.1:port -> 127.0.0.1:upstream, through `link`'s mode."""

    def __init__(self, link, upstream):
        self.link = link
        self.upstream = upstream
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.accept_loop, daemon=True).start()

    def accept_loop(self):
        link = self.link
        while not link.stopping.is_set():
            try:
                client, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            if link.mode == "drop":
                close_quietly(client)
                continue
            try:
                up = socket.create_connection(("127.0.0.1", self.upstream), timeout=2)
            except OSError:
                close_quietly(client)  # a member that is down refuses, as it would directly
                continue
            client.settimeout(None)
            up.settimeout(None)
            with link.lock:
                link.conns.add((client, up))
            threading.Thread(target=self.pump, args=(client, up, False), daemon=True).start()
            threading.Thread(target=self.pump, args=(up, client, True), daemon=True).start()

    def pump(self, src, dst, reply):
        link = self.link
        try:
            while not link.stopping.is_set():
                data = src.recv(65536)
                if not data:
                    break
                mode = link.mode
                if mode == "partition" or (mode == "blackhole" and reply):
                    continue
                if mode == "drop":
                    break
                if mode == "delay":
                    time.sleep(link.draw_delay(*link.delay_s))
                elif mode == "late" and reply:
                    time.sleep(link.draw_delay(1.0, 2.0))
                dst.sendall(data)
        except OSError:
            pass
        finally:
            close_quietly(src)
            close_quietly(dst)
            with link.lock:
                link.conns.discard((src, dst) if not reply else (dst, src))


def close_quietly(s):
    """Shut down first: that wakes a thread blocked in recv() on it, which close() alone does
    not."""
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass
