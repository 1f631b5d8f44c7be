"""The peers beside sekka in a campaign (--peer, docs/reliability.md): the peers' own servers,
written from their code (tests/peer_clients.py, sekka_testlib.leaf_take and tinyid_take),
drawing from what sekka's servers serve while the nemesis runs. Each records what it took, for
the checker (checker.py):

  leaf, tinyid     Leaf's or tinyid's allocation of the first tag on MariaDB's row: a
                   "peer_range" event (tag, first, last) once its commit returned.
  leaf-snowflake   two of Leaf's snowflake servers registered on the campaign's ZooKeeper beside
                   sekka's (worker.leaf_name): a "peer_range" event per batch of their ids
                   (space 0, the snowflake ids: runs of consecutive ids).
  cosid-redis      CosId instances on the Redis sekka keeps machine ids in (machines.store
                   ?schema=cosid), half on CosId's own Redis distributor, half asking sekka's
                   /machines on a random server: a "machine_hold" event per holding of a machine
                   id (from the reply that gave it until the instance gave it back, learnt it
                   lost, or went one safeGuardDuration without a guard answered).

Every peer is a thread of the campaign: it runs until the deadline and stops by itself."""

import logging
import os
import random
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))  # sekka_testlib, peer_clients

from peer_clients import CosIdRedisDistributor, LeafSnowflakeServer  # noqa: E402
from sekka_testlib import CosIdProxyClient, leaf_take, tinyid_take  # noqa: E402
from workload import runs_of  # noqa: E402

SEGMENT_PEERS = ("leaf", "tinyid")
PEERS = SEGMENT_PEERS + ("leaf-snowflake", "cosid-redis")
LEAF_NAME = "com.example.campaign"  # Leaf's leaf.name, sekka's worker.leaf_name
# CosId's namespace and machineBit for the instances: 8 machine ids for 12 instances, so that
# ids go from one to another all along.
MACHINE_NS, MACHINE_BITS, INSTANCES = "campaign", 3, 12


class Guarding:
    """The instances' safeGuardDuration and how often they guard: the duration is past the
    nemesis's largest clock step (5 s with --short, else 1 min) plus a few guard intervals, since
    the answering server's clock judges a lapse (docs/operations.md), as CosId's own
    distributors' clocks do."""

    def __init__(self, short):
        self.guard_s, self.every_s = (20, 2) if short else (120, 5)


def server_flags(peers, index):
    """The flags sekka's server `index` adds for the peers beside it."""
    flags = []
    if "leaf-snowflake" in peers:
        flags += ["--layout", "leaf", "--leaf-name", LEAF_NAME,
                  "--leaf-address", f"127.0.0.1:{9100 + index}"]
    return flags


class Peers:
    """The campaign's peers. Leaf's snowflake servers register when made (before sekka's
    servers start: the first node of a new registry is worker 0 to Leaf); start() runs every
    peer until the deadline; stop() waits for them and closes what is left."""

    def __init__(self, names, store, coord, tag, short):
        logging.getLogger("kazoo").setLevel(logging.ERROR)  # not a line per ZooKeeper fault
        self.names, self.store, self.tag = names, store, tag
        self.guarding = Guarding(short)
        self.threads = []
        self.leafs = []
        if "leaf-snowflake" in names:
            hosts = ",".join(f"127.0.0.1:{p}" for p in coord.client_ports)
            self.leafs = [LeafSnowflakeServer(hosts, LEAF_NAME, "127.0.0.9", 8080 + i)
                          for i in range(2)]

    def start(self, nodes, record, deadline, stopping):
        """`stopping`: an Event set when the campaign ends early (Ctrl-C, SIGTERM)."""
        def until():
            return time.monotonic() < deadline and not stopping.is_set()
        for peer in self.names:
            if peer in SEGMENT_PEERS:
                target, args = segment_peer, (peer, self.store, record, until, self.tag)
            elif peer == "leaf-snowflake":
                target, args = leaf_snowflake_peer, (self.leafs, record, until)
            else:
                target, args = cosid_peer, (self.store, nodes, record, until, self.guarding)
            self.threads.append(threading.Thread(target=target, args=args, daemon=True))
            self.threads[-1].start()

    def stop(self):
        for t in self.threads:
            t.join(timeout=60)
        for leaf in self.leafs:
            leaf.stop()


def segment_peer(peer, store, record, until, tag):
    """Leaf's or tinyid's server taking ranges of `tag` from the row sekka serves, through the
    store's faults: a range is recorded only once its commit returned; a failed call reconnects
    and goes on, as the peer's connection pool would."""
    conn = None
    while until():
        try:
            if conn is None:
                conn = store.connect(autocommit=peer == "tinyid")
            taken = leaf_take(conn, tag, 1000) if peer == "leaf" else tinyid_take(conn, tag)
            if taken:
                record({"type": "peer_range", "tag": tag, "first": taken[0],
                        "last": taken[1] - 1, "t": time.monotonic()})
            time.sleep(0.05)
        except Exception:  # noqa: BLE001 - the store is down or stopped: try again, as a pool
            if conn is not None:
                try:
                    conn.close()
                except Exception:  # noqa: BLE001
                    pass
            conn = None
            time.sleep(0.2)


def leaf_snowflake_peer(leafs, record, until):
    """Leaf's servers issue ids all along (Leaf keeps issuing while ZooKeeper is down: its
    worker id is its node's, for good)."""
    while until():
        for leaf in leafs:
            ids = [leaf.next_id() for _ in range(100)]
            record({"type": "peer_range", "space": 0, "runs": runs_of(ids),
                    "t": time.monotonic()})
        time.sleep(0.02)


class Instance:
    """One CosId instance: it asks for a machine id until it has one, guards it every
    guarding interval, now and then gives it back (a clean stop) or vanishes without a word (a
    crash: its next life has a new instance id, as a rescheduled container has a new address).
    It stops using its id when it gives it back, when a guard answers that it lost it, or when
    its safeGuardDuration passed since the start of its last guard that was answered yes."""

    def __init__(self, name, ask, rng, record, guarding):
        self.name, self.ask, self.rng, self.record = name, ask, rng, record
        self.guard_s, self.every_s = guarding.guard_s, guarding.every_s
        self.life = 0
        self.held = None  # (machine id, since, last_ok)

    def instance_id(self):
        return f"{self.name}-{self.life}:8080"

    def end(self, until, why):
        machine, since, _ = self.held
        self.record({"type": "machine_hold", "machine": machine, "instance": self.instance_id(),
                     "from": since, "until": until, "why": why})
        self.held = None

    def step(self):
        begun = time.monotonic()
        if self.held is None:
            machine = self.ask("distribute", self.instance_id())
            if machine is not None and machine >= 0:
                self.held = (machine, time.monotonic(), begun)
            return 1.0 if self.held is None else self.every_s
        machine, since, last_ok = self.held
        if begun > last_ok + self.guard_s:
            self.end(last_ok + self.guard_s, "lapsed")
            return 0
        roll = self.rng.random()
        if roll < 0.04:
            self.end(begun, "reverted")
            self.ask("revert", self.instance_id())
            return 1.0
        if roll < 0.08:
            self.end(begun, "crashed")
            self.life += 1
            return 1.0
        answer = self.ask("guard", self.instance_id())
        if answer is True:
            self.held = (machine, since, begun)
        elif answer is False:
            self.end(min(time.monotonic(), last_ok + self.guard_s), "lost")
        return self.every_s

    def run(self, until):
        while until():
            pause = time.monotonic() + self.step()
            while until() and time.monotonic() < pause:
                time.sleep(min(0.2, max(0.0, pause - time.monotonic())))
        if self.held is not None:
            self.end(time.monotonic(), "campaign over")


def native_asker(store, guard_s):
    """Calls of CosId's Redis distributor: a machine id, True/False for a guard; None when
    Redis did not answer."""
    import redis  # Debian's python3-redis
    cosid = CosIdRedisDistributor(redis.Redis(host="127.0.0.1", port=store.port,
                                              socket_timeout=5, socket_connect_timeout=5))

    def ask(call, instance):
        try:
            if call == "distribute":
                return cosid.distribute(MACHINE_NS, MACHINE_BITS, instance, guard_s * 1000)[0]
            if call == "guard":
                return cosid.guard(MACHINE_NS, instance)
            return cosid.revert(MACHINE_NS, instance)
        except Exception:  # noqa: BLE001 - Redis paused, killed or restarting
            return None
    return ask


class _Port:
    def __init__(self, port):
        self.http_port = port


def proxy_asker(nodes, rng, guard_s):
    """Calls of CosId's proxy distributor on a random sekka server each time (a load balancer):
    a machine id, True/False for a guard (False: M-02 or M-03); None on any other answer."""
    guard = f"PT{guard_s}S"

    def ask(call, instance):
        client = CosIdProxyClient(_Port(rng.choice(nodes).http_port), timeout=5)
        try:
            if call == "distribute":
                status, body = client.distribute(MACHINE_NS, instance, False, MACHINE_BITS, guard)
                return body["machineId"] if status == 200 else None
            if call == "guard":
                status, body = client.guard(MACHINE_NS, instance, False, guard)
                if status == 200:
                    return True
                return False if body and body.get("code") in ("M-02", "M-03") else None
            return client.revert(MACHINE_NS, instance, False)[0] == 200
        except Exception:  # noqa: BLE001 - the server is down, paused or restarting
            return None
    return ask


def cosid_peer(store, nodes, record, until, guarding):
    rng, side = random.Random(7), INSTANCES // 2
    g = guarding.guard_s
    instances = [Instance(f"10.1.0.{i}", native_asker(store, g), random.Random(i), record,
                          guarding) for i in range(side)]
    instances += [Instance(f"10.2.0.{i}", proxy_asker(nodes, rng, g), random.Random(100 + i),
                           record, guarding) for i in range(side)]
    threads = [threading.Thread(target=i.run, args=(until,), daemon=True) for i in instances]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
