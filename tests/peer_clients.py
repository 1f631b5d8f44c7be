"""The peers' own code beside sekka, written from their sources (no peer's code is copied or
run): CosId's Redis and JDBC machine distributors, and Meituan Leaf's snowflake server with its
ZooKeeper holder. Used by tests/peers_test.py and the fault campaign (tests/faults). Run with
/usr/bin/python3 (python3-redis, python3-pymysql, python3-kazoo)."""

import json
import random
import threading
import time


# CosId's own machine distributors, written from CosId's code (its Redis scripts and its JDBC
# distributor's statements), for the instances that still use them beside sekka's /machines.

# CosId's RedisMachineIdDistributor distribute, step by step: the instance's own id, else a
# given-back one, else the next from the adder, else one whose holder's stamp is at or before
# safeGuardAt. KEYS: "{namespace}". ARGV: instanceId, maxMachineId, now, safeGuardAt.
COSID_REDIS_DISTRIBUTE = """
local itc = 'cosid:' .. KEYS[1] .. ':itc_idx'
local rev = 'cosid:' .. KEYS[1] .. ':revert'
local adder = 'cosid:' .. KEYS[1] .. ':adder'
local instance, max_id = ARGV[1], tonumber(ARGV[2])
local now, safe_at = tonumber(ARGV[3]), tonumber(ARGV[4])
local function split(state)
  local bar = string.find(state, '|', 1, true)
  return tonumber(string.sub(state, 1, bar - 1)), tonumber(string.sub(state, bar + 1))
end
local function hold(id, stamp)
  redis.call('hset', itc, instance, tostring(id) .. '|' .. tostring(stamp))
  return {id, stamp}
end
local mine = redis.call('hget', itc, instance)
if mine then return hold(split(mine), now) end
local back = redis.call('hgetall', rev)
if #back > 0 then
  redis.call('hdel', rev, back[1])
  return hold(tonumber(back[1]), math.max(tonumber(back[2]), now))
end
if not redis.call('get', adder) then redis.call('set', adder, -1) end
if tonumber(redis.call('get', adder)) < max_id then return hold(redis.call('incr', adder), now) end
local all = redis.call('hgetall', itc)
for i = 1, #all, 2 do
  local id, stamp = split(all[i + 1])
  if stamp <= safe_at then
    redis.call('hdel', itc, all[i])
    return hold(id, now)
  end
end
return {-1, -1}
"""

# CosId's guard and (non-stable) revert: 1 when the instance holds an id, else 0 (lost).
# ARGV: instanceId, stamp.
COSID_REDIS_GUARD = """
local itc = 'cosid:' .. KEYS[1] .. ':itc_idx'
local state = redis.call('hget', itc, ARGV[1])
if not state then return 0 end
redis.call('hset', itc, ARGV[1], string.sub(state, 1, string.find(state, '|', 1, true)) .. ARGV[2])
return 1
"""
COSID_REDIS_REVERT = """
local itc = 'cosid:' .. KEYS[1] .. ':itc_idx'
local state = redis.call('hget', itc, ARGV[1])
if not state then return 0 end
redis.call('hdel', itc, ARGV[1])
redis.call('hset', 'cosid:' .. KEYS[1] .. ':revert',
           string.sub(state, 1, string.find(state, '|', 1, true) - 1), ARGV[2])
return 1
"""


class CosIdRedisDistributor:
    """An instance's calls of CosId's RedisMachineIdDistributor (non-stable instances)."""

    def __init__(self, client):
        self.r = client

    def distribute(self, ns, bits, instance, guard_ms):
        now = int(time.time() * 1000)
        got = self.r.eval(COSID_REDIS_DISTRIBUTE, 1, "{" + ns + "}", instance, (1 << bits) - 1,
                          now, max(0, now - guard_ms))
        return int(got[0]), int(got[1])

    def guard(self, ns, instance):
        return self.r.eval(COSID_REDIS_GUARD, 1, "{" + ns + "}", instance,
                           int(time.time() * 1000)) == 1

    def revert(self, ns, instance):
        return self.r.eval(COSID_REDIS_REVERT, 1, "{" + ns + "}", instance,
                           int(time.time() * 1000)) == 1


# CosId's cosid_machine table (init-cosid-mysql.sql's columns and indexes).
COSID_MACHINE_TABLE = (
    "CREATE TABLE cosid_machine (name VARCHAR(100) NOT NULL PRIMARY KEY, "
    "namespace VARCHAR(100) NOT NULL, machine_id INT UNSIGNED NOT NULL DEFAULT 0, "
    "last_timestamp BIGINT UNSIGNED NOT NULL DEFAULT 0, "
    "instance_id VARCHAR(100) NOT NULL DEFAULT '', "
    "distribute_time BIGINT UNSIGNED NOT NULL DEFAULT 0, "
    "revert_time BIGINT UNSIGNED NOT NULL DEFAULT 0, INDEX idx_namespace (namespace), "
    "INDEX idx_instance_id (instance_id)) ENGINE=InnoDB")


class CosIdJdbcDistributor:
    """An instance's calls of CosId's JdbcMachineIdDistributor, statement for statement, on an
    autocommit pymysql connection (non-stable instances; names padded to 4 digits, as its
    getNamespacedMachineId pads them)."""

    def __init__(self, mariadb):
        self.db = mariadb

    def distribute(self, ns, bits, instance, guard_ms):
        import pymysql
        conn = self.db.connect()
        try:
            with conn.cursor() as cur:
                now = int(time.time() * 1000)
                safe_at = max(0, now - guard_ms)
                cur.execute("select machine_id, last_timestamp from cosid_machine where "
                            "namespace=%s and instance_id=%s and last_timestamp>%s",
                            (ns, instance, safe_at))
                row = cur.fetchone()
                if row:
                    self._guard(cur, ns, instance, row[0])
                    return row[0], now
                cur.execute("select machine_id, last_timestamp from cosid_machine where "
                            "namespace=%s and (instance_id='' or last_timestamp<=%s)", (ns, safe_at))
                row = cur.fetchone()
                if row and cur.execute(
                        "update cosid_machine set instance_id=%s,last_timestamp=%s,"
                        "distribute_time=%s where name=%s and (instance_id='' or "
                        "last_timestamp<=%s)",
                        (instance, now, now, f"{ns}.{row[0]:04d}", safe_at)) > 0:
                    return row[0], row[1]
                while True:
                    cur.execute("select max(machine_id)+1 as next_machine_id from cosid_machine "
                                "where namespace=%s", (ns,))
                    nxt = cur.fetchone()[0] or 0
                    if nxt > (1 << bits) - 1:
                        return -1, -1
                    try:
                        cur.execute("insert into cosid_machine (name, namespace, machine_id, "
                                    "last_timestamp, instance_id, distribute_time, revert_time) "
                                    "values (%s,%s,%s,%s,%s,%s,0)",
                                    (f"{ns}.{nxt:04d}", ns, nxt, now, instance, now))
                        return nxt, now
                    except pymysql.err.IntegrityError:
                        continue
        finally:
            conn.close()

    @staticmethod
    def _guard(cur, ns, instance, machine_id):
        return cur.execute("update cosid_machine set last_timestamp=%s where namespace=%s and "
                           "instance_id=%s and machine_id=%s",
                           (int(time.time() * 1000), ns, instance, machine_id)) > 0

    def guard(self, ns, instance, machine_id):
        conn = self.db.connect()
        try:
            with conn.cursor() as cur:
                return self._guard(cur, ns, instance, machine_id)
        finally:
            conn.close()

    def revert(self, ns, instance):
        conn = self.db.connect()
        try:
            with conn.cursor() as cur:
                now = int(time.time() * 1000)
                return cur.execute("update cosid_machine set instance_id=%s,last_timestamp=%s,"
                                   "revert_time=%s where namespace=%s and instance_id=%s",
                                   ("", now, now, ns, instance)) > 0
        finally:
            conn.close()


class LeafSnowflakeServer:
    """What one of Meituan Leaf's snowflake servers does (leaf-core, SnowflakeZookeeperHolder and
    SnowflakeIDGenImpl), with kazoo for Curator: under /snowflake/<leaf.name>/forever it finds
    the node of its ip:port, or makes one (persistent sequential, data {"ip","port","timestamp"};
    the first node of a new registry is worker 0 unparsed); a node of its own must not hold a
    timestamp past its clock; the node's sequence is its worker id (0 to 1023); every 3 s it
    rewrites the node with its clock; ids are (ms - twepoch) << 22 | worker << 12 | sequence,
    the sequence starting at 0 to 99 each ms. Its local-file fallback is left out."""

    TWEPOCH = 1288834974657

    def __init__(self, hosts, name, ip, port):
        from kazoo.client import KazooClient
        self.zk = KazooClient(hosts=hosts, timeout=30)
        self.zk.start(timeout=60)
        self.ip, self.port = ip, str(port)
        forever = f"/snowflake/{name}/forever"
        address = f"{ip}:{port}"
        if not self.zk.exists(forever):
            self.path = self.zk.create(f"{forever}/{address}-", self.data(), makepath=True,
                                       sequence=True)
            self.worker_id = 0
        else:
            nodes = {child.split("-")[0]: child for child in self.zk.get_children(forever)}
            if address in nodes:
                self.path = f"{forever}/{nodes[address]}"
                endpoint = json.loads(self.zk.get(self.path)[0])
                if endpoint["timestamp"] > int(time.time() * 1000):
                    raise AssertionError("init timestamp check error")
                self.worker_id = int(nodes[address].split("-")[1])
            else:
                self.path = self.zk.create(f"{forever}/{address}-", self.data(), sequence=True)
                self.worker_id = int(self.path.split("-")[1])
        assert 0 <= self.worker_id <= 1023, "workerID must gte 0 and lte 1023"
        self.last, self.sequence = 0, 0
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.reporter = threading.Thread(target=self.report, daemon=True)
        self.reporter.start()

    def data(self):
        return json.dumps({"ip": self.ip, "port": self.port,
                           "timestamp": int(time.time() * 1000)}).encode()

    def report(self):
        self.stopped.wait(1)
        while not self.stopped.is_set():
            try:  # Leaf's updateNewData logs a failed write and tries again 3 s later
                self.zk.set(self.path, self.data())
            except Exception:  # noqa: BLE001 - ZooKeeper down or the session moving
                pass
            self.stopped.wait(3)

    def next_id(self):
        with self.lock:
            now = int(time.time() * 1000)
            assert now >= self.last, "clock moved backwards"
            if now == self.last:
                self.sequence = (self.sequence + 1) & 4095
                if self.sequence == 0:
                    self.sequence = random.randrange(100)
                    while now <= self.last:
                        now = int(time.time() * 1000)
            else:
                self.sequence = random.randrange(100)
            self.last = now
            return (now - self.TWEPOCH) << 22 | self.worker_id << 12 | self.sequence

    def stop(self):
        self.stopped.set()
        self.reporter.join(10)
        self.zk.stop()
        self.zk.close()
