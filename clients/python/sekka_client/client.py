"""sekka's Python client: ids from a local buffer that a background thread refills from a list
of sekka servers over the Redis protocol (RESP2), with failover. Standard library only.

    from sekka_client import Client
    with Client(servers=["127.0.0.1:6380", "127.0.0.1:6381"]) as c:
        order_id = c.next_id()          # from the buffer: no network in steady state
        ids = c.next_ids(100)
        invoice_no = c.next("invoice")  # a segment tag: increasing within this client
        version = c.strict("ledger")    # a strict tag: one request, in the cluster's order

See docs/clients.md for the options and what each failure looks like.
"""

from __future__ import annotations

import collections
import re
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Deque, Dict, List, Optional, Sequence, Tuple, Union

from ._resp import (MAX_BATCH, Aborted, Connection, ProtocolError, RespError, StaleConnection,
                    tls_context)

# Error replies after which another server is tried (the server cannot issue ids now).
FAILOVER_PREFIXES = ("LEASELOST", "CLOCKBACKWARDS", "UNAVAILABLE")
AUTH_PREFIXES = ("NOAUTH", "WRONGPASS")
# Batch commands whose ids must come increasing.
INCREASING = ("SEG.NEXT", "STRICT.BATCH")


class SekkaError(Exception):
    """A request the servers refused (an unknown tag, a bad argument): not retried."""


class AuthError(SekkaError):
    """The servers refused the token (or one is needed)."""


class NoServerError(SekkaError):
    """No server could serve and the buffer is empty; the message names each server tried."""


class ClosedError(SekkaError):
    """The client was closed."""


def _closed() -> ClosedError:
    return ClosedError("the client is closed")


# A batch refused for its size names the server's server.max_batch: `count "5000" is not
# valid: allowed 1 to 1000` (docs/contract.md).
_ALLOWED = re.compile(r'^ERR count "\d+" is not valid: allowed 1 to (\d+)$')


def _parse_servers(servers: Union[str, Sequence[str]]) -> List[Tuple[str, int]]:
    """[(host, port)] of "host:port" or "[v6 address]:port" items."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    if items in ([], [""]):
        raise ValueError("servers is empty: give at least one host:port")
    out = []
    for i, item in enumerate(items):
        host, sep, port = item.strip().rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"servers[{i}] = {item!r} is not host:port (a port from 1 to 65535)")
        out.append((host, int(port)))
    return out


# The longest any time option may be: a day (longer ones overflow timers and deadlines).
MAX_SECONDS = 86_400.0


def _check_options(batch, min_batch, max_batch, low_water, **times) -> None:
    """Raises ValueError naming the first option out of its range and what is allowed."""
    sizes = (min_batch, batch, max_batch)
    if not all(type(n) is int for n in sizes) or not 1 <= min_batch <= batch <= max_batch <= MAX_BATCH:
        raise ValueError(f"batch sizes min_batch {min_batch}, batch {batch}, max_batch "
                         f"{max_batch}: allowed whole numbers, 1 <= min_batch <= batch <= "
                         f"max_batch <= {MAX_BATCH}")
    if not 0 < low_water < 1:
        raise ValueError(f"low_water = {low_water}: allowed above 0 and below 1")
    for name, value in times.items():
        if not 0 < value <= MAX_SECONDS:
            raise ValueError(f"{name} = {value}: allowed above 0 and at most {MAX_SECONDS:.0f} "
                             f"seconds")
    if times["backoff_max"] < times["backoff_min"]:
        raise ValueError(f"backoff_max = {times['backoff_max']}: allowed at least "
                         f"backoff_min ({times['backoff_min']})")


class _Server:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.conn: Optional[Connection] = None
        self.down_until = 0.0  # monotonic
        self.backoff = 0.0
        self.last_error = ""

    @property
    def name(self) -> str:
        return f"{self.host}:{self.port}"

    def drop(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class _Pool:
    """The servers, used by the refill thread only (but `abort`). A failed server is skipped
    until its backoff (doubling from `backoff_min` to `backoff_max`) runs out."""

    def __init__(self, servers, token, connect_timeout, timeout, backoff_min, backoff_max,
                 tls=None):
        self.lock = threading.Lock()  # guards `aborted` and each server's `conn`
        self.aborted = False
        # A byte written here by abort() ends a connect in progress (its select() waits on it).
        self.wake_r, self.wake_w = socket.socketpair()
        self.servers = [_Server(h, p) for h, p in servers]
        self.token = token
        self.tls = tls  # an ssl.SSLContext, or None: plain TCP
        self.connect_timeout, self.timeout = connect_timeout, timeout
        self.backoff_min, self.backoff_max = backoff_min, backoff_max
        self.current = 0
        self.failovers = 0

    def close(self) -> None:
        for s in self.servers:
            s.drop()
        self.wake_r.close()
        self.wake_w.close()

    def abort(self) -> None:
        """From any thread: ends the refill thread's call in flight at once, and every later
        one before it reaches a server."""
        with self.lock:
            if self.aborted:
                return
            self.aborted = True
            self.wake_w.send(b"x")
            for s in self.servers:
                if s.conn is not None:
                    s.conn.abort()

    def names(self) -> str:
        return ", ".join(s.name for s in self.servers)

    def pause_until_one_is_up(self, deadline: float) -> bool:
        """Sleeps until a server's backoff runs out, or to `deadline`, whichever is first; an
        abort ends it at once. False when the deadline came first or the pool was aborted."""
        now = time.monotonic()
        up = min(s.down_until for s in self.servers)
        if up >= deadline:
            return False
        if up > now:
            select.select([self.wake_r], [], [], up - now)
        return not self.aborted

    def _connect(self, s: _Server) -> Connection:
        if self.aborted:
            raise _closed()
        try:
            conn = Connection(s.host, s.port, self.connect_timeout, self.timeout,
                              self.wake_r.fileno(), self.tls)
        except Aborted:
            raise _closed() from None
        with self.lock:
            if self.aborted:
                conn.close()
                raise _closed()
            s.conn = conn
        if self.token is not None:
            try:
                conn.call("AUTH", self.token)
            except RespError as e:
                s.drop()
                if e.prefix in AUTH_PREFIXES or e.prefix == "ERR":
                    raise AuthError(f"sekka server {s.name} refused the token: {e}") from None
                raise
        return conn

    def _call_on(self, s: _Server, n: int, args) -> List[int]:
        """`args` on server `s`. A connection made before this call that fails before any byte
        of the reply (the server closed it while idle, or restarted) is replaced and the command
        sent once more, without counting against the server: a command the server did run costs
        a range, never an id."""
        reused = s.conn is not None
        conn = s.conn if reused else self._connect(s)
        try:
            return conn.ids(n, args[0] in INCREASING, *args)
        except StaleConnection:
            if not reused or self.aborted:
                raise
            s.drop()
            return self._connect(s).ids(n, args[0] in INCREASING, *args)

    def call(self, count: int, *args) -> List[int]:
        """The `count` ids of the first server that answers batch command `args`, trying each once
        from the current one. Raises NoServerError naming each server tried; AuthError and
        SekkaError at once."""
        now = time.monotonic()
        n = len(self.servers)
        order = [(self.current + i) % n for i in range(n)]
        up = [i for i in order if self.servers[i].down_until <= now]
        if not up:  # all backing off: try the one that comes back first
            up = [min(order, key=lambda i: self.servers[i].down_until)]
        tried = []
        for i in up:
            s = self.servers[i]
            try:
                reply = self._call_on(s, count, args)
            except RespError as e:
                if e.prefix in AUTH_PREFIXES:
                    s.drop()
                    raise AuthError(f"sekka server {s.name}: {e}") from None
                if e.prefix not in FAILOVER_PREFIXES:
                    raise SekkaError(f"sekka server {s.name}: {e}") from None
                s.last_error = str(e)
            except (OSError, ProtocolError) as e:
                if self.aborted:
                    raise _closed() from None
                s.last_error = f"{type(e).__name__}: {e}"
            else:
                s.backoff = 0.0
                s.down_until = 0.0
                if i != self.current:
                    self.failovers += 1
                    self.current = i
                return reply
            tried.append(i)
            s.drop()
            s.backoff = min(self.backoff_max, max(self.backoff_min, s.backoff * 2))
            s.down_until = time.monotonic() + s.backoff
        # Every server, with its last error (those backing off were not tried this time).
        cmd = " ".join(str(a) for a in args)
        each = [f"{s.name} ({s.last_error}{'' if i in tried else '; backing off'})"
                for i, s in enumerate(self.servers)]
        raise NoServerError(f"no sekka server could serve {cmd}: " + ", ".join(each))


@dataclass
class _Batch:
    ids: List[int]
    expires: float  # monotonic
    pos: int = 0


@dataclass
class _Stream:
    """The buffer of one id source: snowflake ids (key None) or one segment tag."""

    key: Optional[str]
    size: int
    batches: Deque[_Batch] = field(default_factory=collections.deque)
    wanted: bool = False  # a refill is asked for
    busy: bool = False  # the refill thread is fetching for it
    attempts: int = 0  # refills finished (either way)
    error: Optional[Exception] = None  # the last refill's failure, None after a success
    retry_at: float = 0.0  # no refill asked by the low-water mark before this (after a failure)
    high: int = -1  # tags: the highest id queued or handed out; later ones must be above it
    last_refill: Optional[float] = None
    left: int = 0  # ids in `batches` not handed out yet


class Client:
    """Ids from a local buffer, refilled in the background from `servers` (``"host:port,..."``
    or a list). Thread-safe. Options (seconds where a time):

    - ``token``: the servers' ``server.auth_token`` (sent with AUTH on each connection)
    - ``connect_timeout`` (1.0), ``timeout`` (1.0): per connection attempt and per command
    - ``batch`` (1000): the first batch size; it adapts between ``min_batch`` (100) and
      ``max_batch`` (100000) so that a batch lasts about ``target_refill`` (1.0): shorter, it
      doubles; over twice as long, it halves (Leaf's rule)
    - ``low_water`` (0.5): a refill starts when fewer than this share of a batch is left
    - ``validity`` (10.0): ids buffered longer are dropped, so ids stay roughly time-ordered
      and a dead server's ids are not handed out after it
    - ``backoff_min`` (0.1), ``backoff_max`` (5.0): how long a failed server is skipped
    - ``strict_wait`` (30.0): how long a strict call tries the servers, again and again,
      before it raises NoServerError (a strict tag's leader failover takes the servers'
      ``worker.lease_ttl`` and a few seconds)
    - ``tls_ca_file`` (None: plain TCP): TLS to servers whose certificates this CA file (PEM)
      signed, or ``"system"`` for the system's CAs; ``tls_cert_file`` and ``tls_key_file``: a
      client certificate for servers that require one (``server.tls_client_ca_file``)
    """

    def __init__(self, servers: Union[str, Sequence[str]], token: Optional[str] = None, *,
                 connect_timeout: float = 1.0, timeout: float = 1.0, batch: int = 1000,
                 min_batch: int = 100, max_batch: int = 100_000, target_refill: float = 1.0,
                 low_water: float = 0.5, validity: float = 10.0, backoff_min: float = 0.1,
                 backoff_max: float = 5.0, strict_wait: float = 30.0,
                 tls_ca_file: Optional[str] = None, tls_cert_file: Optional[str] = None,
                 tls_key_file: Optional[str] = None) -> None:
        _check_options(batch, min_batch, max_batch, low_water, connect_timeout=connect_timeout,
                       timeout=timeout, target_refill=target_refill, validity=validity,
                       backoff_min=backoff_min, backoff_max=backoff_max,
                       strict_wait=strict_wait)
        tls = tls_context(tls_ca_file, tls_cert_file, tls_key_file)
        addresses = _parse_servers(servers)
        pool_args = (token, connect_timeout, timeout, backoff_min, backoff_max, tls)
        self._pool = _Pool(addresses, *pool_args)
        # Strict calls have connections of their own, used by one caller at a time: the refill
        # thread's are busy with batches, and a strict id is never buffered.
        self._strict_pool = _Pool(addresses, *pool_args)
        self._strict_lock = threading.Lock()
        self._strict_wait = strict_wait
        self._batch, self._min, self._max = batch, min_batch, max_batch
        self._target, self._low_water, self._validity = target_refill, low_water, validity
        # A caller with an empty buffer waits at most this long: every server tried twice.
        self._max_wait = 2 * (connect_timeout + timeout) * len(self._pool.servers) + 1
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._streams: Dict[Optional[str], _Stream] = {}
        self._snowflake = self._stream(None)
        self._closed = False
        self._served = self._refills = self._dropped = 0
        self._thread = threading.Thread(target=self._refill_loop, name="sekka-refill",
                                         daemon=True)
        self._thread.start()

    # The API.

    def next_id(self) -> int:
        """The next snowflake id. Raises NoServerError, AuthError, SekkaError."""
        # The fast path, inline: the first batch has an id and has not expired.
        with self._lock:
            s = self._snowflake
            if s.batches and not self._closed:
                b = s.batches[0]
                if b.pos < len(b.ids) and b.expires > time.monotonic():
                    value = b.ids[b.pos]
                    b.pos += 1
                    s.left -= 1
                    self._served += 1
                    if s.left < self._low_water * s.size and not (s.wanted or s.busy):
                        self._want(s)
                    return value
        return self._next(None)

    def next_ids(self, n: int) -> List[int]:
        """`n` snowflake ids, increasing."""
        if n < 0:
            raise ValueError("n must be 0 or more")
        return [self._next(None) for _ in range(n)]

    def next(self, tag: str) -> int:
        """The next id of segment tag `tag`, above every id this client gave for it."""
        if not tag:
            raise ValueError("tag is empty")
        return self._next(tag)

    def strict(self, tag: str) -> int:
        """The next strict id of `tag` (docs/contract.md section 15): larger than every id of
        the tag that any client of the cluster got before this call began."""
        return self.strict_batch(tag, 1)[0]

    def strict_batch(self, tag: str, n: int) -> List[int]:
        """`n` consecutive strict ids of `tag`, larger than every id of the tag that any client
        got before this call began. One request, never buffered: on a connection error, a
        timeout or an -UNAVAILABLE (a leader failover) the servers are tried again, in turn
        and with their backoff, for up to ``strict_wait``; then NoServerError."""
        if not tag:
            raise ValueError("tag is empty")
        if type(n) is not int or not 1 <= n <= MAX_BATCH:
            raise ValueError(f"n = {n!r}: allowed a whole number from 1 to {MAX_BATCH}")
        # strict_wait bounds the whole call, its turn for the connections included.
        deadline = time.monotonic() + self._strict_wait
        if not self._strict_lock.acquire(timeout=self._strict_wait):
            raise NoServerError(f"no strict ids within {self._strict_wait:g}s: the client's "
                                f"other strict calls held its connections")
        try:
            while True:
                if self._closed:
                    raise _closed()
                try:
                    ids = self._strict_pool.call(n, "STRICT.BATCH", tag, n)
                except NoServerError as e:
                    if self._strict_pool.pause_until_one_is_up(deadline):
                        continue
                    if self._closed:
                        raise _closed() from None
                    raise NoServerError(f"no strict ids within {self._strict_wait:g}s: {e}") \
                        from None
                if ids[-1] - ids[0] != n - 1:
                    raise SekkaError(f"the ids of STRICT.BATCH {tag} {n} are not consecutive: "
                                     f"{ids[0]} to {ids[-1]}")
                return ids
        finally:
            self._strict_lock.release()

    def stats(self) -> Dict[str, int]:
        """Counters: ids served locally, refills, failovers, ids buffered now, ids dropped
        (expired, or not above ids already given)."""
        with self._lock:
            buffered = sum(s.left for s in self._streams.values())
            return {"served": self._served, "refills": self._refills,
                    "failovers": self._pool.failovers + self._strict_pool.failovers,
                    "buffered": buffered, "dropped": self._dropped}

    def close(self) -> None:
        """Stops the refill (a call in flight is cut off), wakes waiting callers with
        ClosedError, and closes every connection. Later calls raise ClosedError."""
        with self._lock:
            self._closed = True
            self._cond.notify_all()
        self._pool.abort()
        self._strict_pool.abort()
        self._thread.join()
        self._pool.close()
        with self._strict_lock:  # a strict call in flight has ended: the abort cut it off
            self._strict_pool.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # The buffer.

    def _stream(self, key: Optional[str]) -> _Stream:
        s = self._streams.get(key)
        if s is None:
            s = self._streams[key] = _Stream(key, self._batch)
        return s

    def _want(self, s: _Stream) -> None:
        """Asks for a refill by the low-water mark, unless one just failed. REQUIRES: the lock."""
        if time.monotonic() >= s.retry_at:
            s.wanted = True
            self._cond.notify_all()

    def _take(self, s: _Stream) -> Optional[int]:
        """An id from the buffer, or None. REQUIRES: the lock."""
        now = time.monotonic()
        while s.batches and (s.batches[0].expires <= now or
                             s.batches[0].pos == len(s.batches[0].ids)):
            b = s.batches.popleft()
            s.left -= len(b.ids) - b.pos
            self._dropped += len(b.ids) - b.pos
        if s.left < self._low_water * s.size and not s.wanted and not s.busy:
            self._want(s)
        if not s.batches:
            return None
        b = s.batches[0]
        value = b.ids[b.pos]
        b.pos += 1
        s.left -= 1
        self._served += 1
        return value

    def _next(self, key: Optional[str]) -> int:
        with self._lock:
            if self._closed:
                raise _closed()
            s = self._stream(key)
            value = self._take(s)
            if value is not None:
                return value
            # Wait for refills: raise the first failure that ends after this call began, or
            # give up when none brought an id within the wait bound.
            start = s.attempts
            deadline = time.monotonic() + self._max_wait
            while True:
                if not s.wanted and not s.busy:
                    s.wanted = True
                    self._cond.notify_all()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise NoServerError(
                        f"no ids within {self._max_wait:.1f}s from {self._pool.names()}")
                self._cond.wait(left)
                if self._closed:
                    raise _closed()
                value = self._take(s)
                if value is not None:
                    return value
                if s.attempts > start:
                    if s.error is not None:
                        raise s.error
                    start = s.attempts  # a refill with nothing usable: ask again

    def _learn_max_batch(self, error: Exception, n: int) -> bool:
        """A batch of `n` refused because the server allows fewer: keep to its size from now
        on. REQUIRES: the lock."""
        m = _ALLOWED.match(str(error).split(": ", 1)[-1])
        if type(error) is not SekkaError or m is None or not 0 < int(m.group(1)) < n:
            return False
        self._max = int(m.group(1))
        self._min = min(self._min, self._max)
        return True

    def _refill_loop(self) -> None:
        while True:
            with self._lock:
                while not self._closed and not any(s.wanted for s in self._streams.values()):
                    self._cond.wait()
                if self._closed:
                    return
                s = next(s for s in self._streams.values() if s.wanted)
                s.wanted, s.busy = False, True
                now = time.monotonic()
                if s.last_refill is not None:  # adapt: how long did the last batch last?
                    lasted = now - s.last_refill
                    if lasted < self._target / 2:
                        s.size = min(self._max, s.size * 2)
                    elif lasted > self._target * 2:
                        s.size = max(self._min, s.size // 2)
                n = s.size
            try:
                if s.key is None:
                    ids = self._pool.call(n, "ID.BATCH", n)
                else:
                    ids = self._pool.call(n, "SEG.NEXT", s.key, n)
                error = None
            except SekkaError as e:
                ids, error = [], e
            except Exception as e:  # noqa: BLE001 - a defect here must not end the thread
                ids, error = [], SekkaError(f"the refill failed: {type(e).__name__}: {e}")
            with self._lock:
                s.busy = False
                if error is not None and self._learn_max_batch(error, n):
                    s.size = self._max
                    s.wanted = True  # at once, with the server's size: not a failure
                    continue
                s.attempts += 1
                s.error = error
                if error is None:
                    self._refills += 1
                    s.last_refill = time.monotonic()
                    # A tag's ids stay increasing within the client: after a failover another
                    # server's buffered range may be below ids already given. Snowflake ids
                    # are kept as served (a spread layout has no order to keep).
                    fresh = ids if s.key is None else [i for i in ids if i > s.high]
                    self._dropped += len(ids) - len(fresh)
                    if fresh:
                        s.high = max(s.high, fresh[-1])
                        s.batches.append(_Batch(fresh, s.last_refill + self._validity))
                        s.left += len(fresh)
                else:
                    s.retry_at = time.monotonic() + self._pool.backoff_min
                self._cond.notify_all()
