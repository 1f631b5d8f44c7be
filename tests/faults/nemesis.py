"""The nemesis: faults on a seeded schedule, one at a time. Each fault is injected, held, healed,
and followed by a wait until every server is ready again (bounded); its times go to the history
as a "fault" event: t0 (injected), heal, ready (None if the servers were not all ready within
the bound), kind, the servers it aims at (None: all) and the class of ids it should affect."""

import random
import signal
import time

from cluster import signal_pids, wait_for

RECOVERY_BOUND_S = 120

# name -> (weight, class, needs). Every kind runs once before any runs twice (a shuffled deck),
# so that a short campaign still covers each one.
KINDS = {
    "kill": (3, "snowflake", None),
    "pause_past_ttl": (3, "snowflake", None),
    "clock_back_100ms": (2, "snowflake", None),
    "clock_back_5s": (2, "snowflake", None),
    "clock_back_1min": (1, "snowflake", "long"),
    "clock_forward_100ms": (2, "snowflake", None),
    "clock_forward_5s": (2, "snowflake", None),
    "clock_forward_1min": (1, "snowflake", "long"),
    "clock_back_and_pause": (2, "snowflake", None),
    "restart_clock_back": (2, "snowflake", None),
    "fresh_data_dir": (2, "snowflake", None),
    "disk_full": (2, "snowflake", "tmpfs"),
    "coordinator_kill_leader": (2, "snowflake", None),
    "coordinator_pause_leader": (2, "snowflake", None),
    "coordinator_kill_minority": (2, "snowflake", None),
    "coordinator_kill_majority": (1, "snowflake", None),
    "coordinator_pause_majority": (1, "snowflake", None),
    # The segment store's (postgres_, mariadb_ or redis_, by the campaign's --store): its
    # process stopped (SIGSTOP), killed (SIGKILL, then started on its files), or restarted.
    "store_pause": (2, "segment", None),
    "store_crash": (2, "segment", None),
    "store_restart": (1, "segment", None),
    # One server's link to the coordinator (proxy.py), with --transport only.
    "link_delay": (3, "snowflake", "transport"),
    "link_late": (3, "snowflake", "transport"),
    "link_blackhole_past_ttl": (2, "snowflake", "transport"),
    "link_partition_past_ttl": (2, "snowflake", "transport"),
    "link_drop": (2, "snowflake", "transport"),
    "same_identity_takeover": (3, "snowflake", "transport"),
}
STEPS = {"100ms": 0.1, "5s": 5.0, "1min": 60.0}
def transport_rank(kind):
    """A --transport campaign deals the takeover first, which the fences alone guard, then its
    other link kinds (in the seed's order), then the rest: a short one is for them."""
    if kind == "same_identity_takeover":
        return 0
    return 1 if KINDS[kind][2] == "transport" else 2


class Nemesis:
    def __init__(self, rng_seed, nodes, coordinator, store, record, lease_ttl_s, long_steps,
                 supervisor, links=None, only=None):
        self.rng = random.Random(rng_seed)
        self.nodes = nodes
        self.coord = coordinator
        self.store = store  # Postgres, Mariadb or RedisStore (sekka_testlib); `name` prefixes kinds
        self.record = record
        self.ttl = lease_ttl_s
        self.supervisor = supervisor
        self.links = links  # proxy.Link per node, or None
        tmpfs = all(n.mounted for n in nodes)
        self.kinds = [k for k, (_, _, need) in KINDS.items()
                      if need is None or (need == "long" and long_steps) or
                      (need == "tmpfs" and tmpfs) or (need == "transport" and links)]
        if coordinator.size < 3:  # one Redis: its faults are the store's (the same process)
            self.kinds = [k for k in self.kinds if not k.startswith("coordinator_")]
        if only:  # --kinds: a targeted run
            self.kinds = [k for k in self.kinds if self.name(k) in only or k in only]
        self.deck = []

    def next_kind(self):
        if not self.deck:
            self.deck = [k for k in self.kinds for _ in range(KINDS[k][0])]
            self.rng.shuffle(self.deck)
            # Every kind once first (the transport kinds first of all, when there are links: a
            # short --transport campaign is for them), then the weighted rest.
            seen, head, tail = set(), [], []
            for k in self.deck:
                (tail if k in seen else head).append(k)
                seen.add(k)
            head.sort(key=transport_rank)  # stable: the seed's order within a rank
            self.deck = head + tail
        return self.deck.pop(0)

    def all_ready(self):
        return all(n.ready() for n in self.nodes) and self.coord.healthy()

    def run(self, until):
        """Faults until monotonic time `until` (the last one may end a little later)."""
        while time.monotonic() + 5 < until:
            kind = self.next_kind()
            servers, t0, heal = self.inject(kind)
            ready = time.monotonic() if wait_for(self.all_ready, RECOVERY_BOUND_S) else None
            self.record({"type": "fault", "kind": self.name(kind), "servers": servers, "t0": t0,
                         "heal": heal, "ready": ready, "class": KINDS[kind][1],
                         "keep_id": bool(servers) and all(self.nodes[i].keep_id
                                                          for i in servers)})
            time.sleep(self.rng.uniform(1.0, 3.0))

    def name(self, kind):
        """A kind as reports name it: the store's kinds by the store (postgres_crash)."""
        return kind.replace("store_", self.store.name + "_", 1) if kind.startswith("store_") \
            else kind

    def hold(self, lo, hi):
        time.sleep(self.rng.uniform(lo, hi))

    def inject(self, kind):
        """Injects and heals one fault; returns (servers aimed at or None, t0, heal time)."""
        rng = self.rng
        if kind.startswith("coordinator_"):
            return (None,) + self.coordinator_fault(kind)
        if kind.startswith("store_"):
            t0 = time.monotonic()
            if kind == "store_pause":
                self.store.signal(signal.SIGSTOP)
                self.hold(3, 8)
                self.store.signal(signal.SIGCONT)
            else:
                self.store.stop_server(crash=kind == "store_crash")
                self.hold(1, 3)
                self.store.start_server()
            return None, t0, time.monotonic()
        if kind == "same_identity_takeover":
            return self.same_identity_takeover()
        node = rng.choice(self.nodes)
        t0 = time.monotonic()
        if kind.startswith("link_"):
            self.link_fault(kind, self.links[node.index])
        elif kind == "kill":
            self.supervisor.kill(node)
            self.hold(0, 1)
            self.supervisor.start(node)
        elif kind == "pause_past_ttl":
            node.pause()
            self.hold(self.ttl + 1, self.ttl + 3)
            node.resume()
        elif kind.startswith("clock_back_") and kind != "clock_back_and_pause":
            step = STEPS[kind.rsplit("_", 1)[1]]
            node.set_offset(node.offset - step)
            self.hold(2, 5)
            node.set_offset(node.offset + step)
        elif kind.startswith("clock_forward_"):
            step = STEPS[kind.rsplit("_", 1)[1]]
            node.set_offset(node.offset + step)
            self.hold(2, 5)
            node.set_offset(node.offset - step)
        elif kind == "clock_back_and_pause":
            # The review's reproduction of repeated ids: a clock stepped back, then a pause
            # past the lease's TTL, so that the worker id is leased anew behind the hwm.
            node.set_offset(node.offset - 15)
            node.pause()
            self.hold(self.ttl + 1, self.ttl + 3)
            node.resume()
            self.hold(2, 4)
            node.set_offset(node.offset + 15)
        elif kind == "restart_clock_back":
            self.supervisor.kill(node)
            node.set_offset(node.offset - 5)
            self.supervisor.start(node)
            self.hold(6, 9)
            node.set_offset(node.offset + 5)
        elif kind == "fresh_data_dir":
            self.supervisor.kill(node)
            node.wipe_data()
            self.supervisor.start(node)
        elif kind == "disk_full":
            node.fill_disk()
            self.hold(3, 6)
            node.free_disk()
        else:
            raise ValueError(f"unknown fault kind {kind}")
        return [node.index], t0, time.monotonic()

    def same_identity_takeover(self):
        """Two processes with one worker.name (a configuration mistake): b restarts under a's
        identity and takes a's worker id over at once, while a's link is slow enough that its
        renewals time out now and then, so a may not know it lost the id when it next stores an
        hwm. The stores are fenced (etcd: the owner key's revision; ZooKeeper: the hwm node's
        version): without the fence, a would issue past what b waited out. The two then take
        the id from each other until b gets its own name back."""
        a, b = self.rng.sample(self.nodes, 2)
        own, keep = b.worker_name, b.keep_id
        t0 = time.monotonic()
        self.links[a.index].set("delay", (0.3, 1.2))
        self.supervisor.kill(b)
        # keep_id: b takes the id its (borrowed) identity holds, though its hwm lies ahead.
        b.worker_name, b.keep_id = a.worker_name, True
        self.supervisor.start(b)
        self.hold(self.ttl + 1, self.ttl + 3)
        self.links[a.index].heal()
        self.supervisor.kill(b)
        b.worker_name, b.keep_id = own, keep
        self.supervisor.start(b)
        return [a.index, b.index], t0, time.monotonic()

    def link_fault(self, kind, link):
        if kind == "link_delay":
            lo = self.rng.uniform(0.02, 0.2)
            link.set("delay", (lo, lo + self.rng.uniform(0.1, 1.0)))
            self.hold(3, 6)
        elif kind == "link_late":
            link.set("late")
            self.hold(3, 6)
        elif kind == "link_drop":
            link.set("drop")
            self.hold(1, 4)
        else:  # past the TTL: the server must notice it can no longer vouch for its ids
            link.set("blackhole" if "blackhole" in kind else "partition")
            self.hold(self.ttl + 1, self.ttl + 3)
        link.heal()

    def coordinator_fault(self, kind):
        c = self.coord
        rng = self.rng
        leader = c.leader()
        members = list(range(c.size))
        if leader is None:
            leader = rng.choice(members)
        others = [m for m in members if m != leader]
        t0 = time.monotonic()
        if kind == "coordinator_kill_leader":
            c.kill(leader)
            self.hold(2, 5)
            c.start(leader)
        elif kind == "coordinator_pause_leader":
            signal_pids([c.pid(leader)], signal.SIGSTOP)
            self.hold(self.ttl + 1, self.ttl + 3)
            signal_pids([c.pid(leader)], signal.SIGCONT)
        elif kind == "coordinator_kill_minority":
            victim = rng.choice(members)
            c.kill(victim)
            self.hold(2, 5)
            c.start(victim)
        elif kind == "coordinator_kill_majority":
            victims = [leader, rng.choice(others)]
            for v in victims:
                c.kill(v)
            self.hold(self.ttl + 1, self.ttl + 3)
            for v in victims:
                c.start(v)
        elif kind == "coordinator_pause_majority":
            victims = [leader, rng.choice(others)]
            pids = [c.pid(v) for v in victims]
            signal_pids(pids, signal.SIGSTOP)
            self.hold(self.ttl + 1, self.ttl + 3)
            signal_pids(pids, signal.SIGCONT)
        return t0, time.monotonic()
