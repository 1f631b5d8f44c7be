"""A minimal blocking RESP2 connection: commands out as arrays of bulk strings, replies in
(integers, bulk and simple strings, arrays, errors). Standard library only."""

from __future__ import annotations

import errno
import ipaddress
import os
import select
import socket
import ssl
import threading
import time
from typing import List, Optional, Tuple, Union

Reply = Union[int, bytes, str, None, list]


class RespError(Exception):
    """An error reply from the server (``-PREFIX message``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.prefix = message.split(" ", 1)[0]


class ProtocolError(Exception):
    """The server's bytes were not RESP2."""


class StaleConnection(ConnectionError):
    """The connection failed before any byte of the reply came (the server had closed it, or
    restarted): the command can be sent once more on a new connection."""


def _resolve(host: str, port: int, timeout: float) -> List[Tuple]:
    """The addresses of `host`, within `timeout`: getaddrinfo has no timeout of its own, so a
    name (not an address literal) is looked up on a thread that may outlive this call."""
    try:
        ipaddress.ip_address(host)
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except ValueError:
        pass
    found: list = []
    done = threading.Event()

    def lookup() -> None:
        try:
            found.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as e:
            found.append(e)
        done.set()

    threading.Thread(target=lookup, name="sekka-resolve", daemon=True).start()
    if not done.wait(timeout):
        raise TimeoutError(f"looking up {host} took over {timeout:.3f} s")
    if isinstance(found[0], OSError):
        raise found[0]
    return found[0]


# The most ids one batch may hold: the server's largest server.max_batch.
MAX_BATCH = 10_000_000


def tls_context(ca_file: Optional[str], cert_file: Optional[str],
                key_file: Optional[str]) -> Optional[ssl.SSLContext]:
    """The TLS context of the client's connections, or None (plain TCP) when no option is set.
    `ca_file` is the CA that signed the servers' certificates ("system": the system's CAs);
    `cert_file` and `key_file` a client certificate (PEM), for servers that require one.
    Raises ValueError naming the option that cannot be used."""
    if ca_file is None and cert_file is None and key_file is None:
        return None
    if (cert_file is None) != (key_file is None):
        raise ValueError("tls_cert_file and tls_key_file go together: give both or neither")
    try:
        ctx = ssl.create_default_context(cafile=None if ca_file in (None, "system") else ca_file)
    except (OSError, ssl.SSLError) as e:
        raise ValueError(f"tls_ca_file = {ca_file!r} cannot be used: {e}") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_file is not None:
        try:
            # An encrypted key fails here (an empty passphrase), never a prompt on the terminal.
            ctx.load_cert_chain(cert_file, key_file, password=b"")
        except (OSError, ssl.SSLError) as e:
            raise ValueError(f"tls_cert_file = {cert_file!r} with tls_key_file = {key_file!r} "
                             f"cannot be used: {e}") from None
    return ctx


class Aborted(OSError):
    """The client closed while this connection was being made."""


def _connect(family, kind, proto, address, deadline: float, wake: int) -> socket.socket:
    """A socket connected to `address` by `deadline`; a byte on `wake` (the client closing)
    ends the wait at once."""
    sock = socket.socket(family, kind, proto)
    try:
        sock.setblocking(False)
        rc = sock.connect_ex(address)
        if rc not in (0, errno.EINPROGRESS):
            raise OSError(rc, os.strerror(rc))
        if rc == errno.EINPROGRESS:
            left = deadline - time.monotonic()
            poll = select.poll()  # not select(): it fails on descriptors from 1024 up
            poll.register(wake, select.POLLIN)
            poll.register(sock, select.POLLOUT)
            events = dict(poll.poll(max(0, int(left * 1000))))
            if wake in events:
                raise Aborted("the client is closed")
            if sock.fileno() not in events:
                raise TimeoutError("connect timed out")
            rc = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if rc != 0:
                raise OSError(rc, os.strerror(rc))
        sock.setblocking(True)
        return sock
    except BaseException:
        sock.close()
        raise


class Connection:
    """One TCP connection to one server. Not thread-safe: the client uses one from one thread,
    except `abort`, which any thread may call to end a call in flight."""

    def __init__(self, host: str, port: int, connect_timeout: float, timeout: float,
                 wake: int, tls: Optional[ssl.SSLContext] = None) -> None:
        deadline = time.monotonic() + connect_timeout
        last: Optional[OSError] = None
        self._sock = None
        for family, kind, proto, _, address in _resolve(host, port, connect_timeout):
            if deadline <= time.monotonic():
                break
            try:
                self._sock = _connect(family, kind, proto, address, deadline, wake)
                break
            except Aborted:
                raise
            except OSError as e:
                last = e
        if self._sock is None:
            raise last or TimeoutError(f"connect timed out after {connect_timeout:.3f} s")
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:  # the handshake within what is left of connect_timeout
            self._sock.settimeout(max(deadline - time.monotonic(), 0.001))
            try:
                self._sock = tls.wrap_socket(self._sock, server_hostname=host)
            except BaseException:
                self._sock.close()
                raise
        self._timeout = timeout
        self._deadline = 0.0  # monotonic: the current command's whole reply is due by then
        self._buf = b""
        self._received = False  # a byte of the current command's reply came

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass

    def abort(self) -> None:
        """Ends a call in flight on another thread at once (it fails with an OSError)."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _recv(self, size: int) -> bytes:
        """Bytes of the reply, by the command's deadline: a server that drips one byte at a
        time cannot hold a call past `timeout`."""
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no reply within {self._timeout:.3f} s")
        self._sock.settimeout(left)
        chunk = self._sock.recv(size)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self._received = True
        return chunk

    def call(self, *args: Union[str, int, bytes]) -> Reply:
        """The reply to one command (an error reply raises RespError)."""
        return self._exchange(args, self._read)

    def ids(self, n: int, increasing: bool, *args: Union[str, int, bytes]) -> List[int]:
        """The reply to a batch command for `n` ids, which must be an array of exactly `n`
        distinct ids from 0 to 2^63 - 1, increasing if `increasing` (a tag's; a snowflake
        layout may be descending or sharded): anything else is a ProtocolError
        (docs/contract.md)."""
        return self._exchange(args, lambda: self._ids(n, increasing))

    def _exchange(self, args, read):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            data = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(data), data))
        self._received = False
        self._deadline = time.monotonic() + self._timeout
        try:
            self._sock.settimeout(self._timeout)
            self._sock.sendall(b"".join(out))
            return read()
        except TimeoutError:
            raise
        except OSError as e:  # ConnectionError among them; not a timeout
            if self._received or self._buf:
                raise
            raise StaleConnection(f"{type(e).__name__}: {e}") from e

    def _line(self) -> bytes:
        while True:
            end = self._buf.find(b"\r\n")
            if end >= 0:
                line, self._buf = self._buf[:end], self._buf[end + 2:]
                return line
            if len(self._buf) > 1 << 20:
                raise ProtocolError("a reply line over 1 MiB")
            self._fill()

    def _integers(self, n: int):
        """An array of `n` integers (ID.BATCH's reply) parsed in bulk, or None if the next
        element is not an integer (the general path then reads it). Chunks are gathered and
        joined once, and only new bytes are scanned for line ends."""
        if n == 0:
            return None
        while not self._buf:
            self._fill()
        if self._buf[:1] != b":":
            return None
        chunks = [self._buf]
        have = self._buf.count(b"\r\n")
        size = len(self._buf)
        while have < n:
            if size > 64 * n + (1 << 16):
                raise ProtocolError("an array of integers longer than its elements allow")
            chunk = self._recv(1 << 20)
            have += chunk.count(b"\r\n")
            if chunks[-1][-1:] == b"\r" and chunk[:1] == b"\n":
                have += 1  # a line end split between two reads
            chunks.append(chunk)
            size += len(chunk)
        parts = b"".join(chunks).split(b"\r\n", n)
        if not all(p[:1] == b":" for p in parts[:n]):
            self._buf = b"\r\n".join(parts)
            return None
        self._buf = parts[n] if len(parts) > n else b""
        return [_integer(p[1:]) for p in parts[:n]]

    def _fill(self) -> None:
        self._buf += self._recv(1 << 16)

    def _ids(self, n: int, increasing: bool) -> List[int]:
        line = self._line()
        if line[:1] == b"-":
            raise RespError(line[1:].decode(errors="replace"))
        if line != b"*%d" % n:
            raise ProtocolError(f"a reply to a batch of {n} that is not {n} ids: {line[:40]!r}")
        ids = self._integers(n)
        if ids is None:
            ids = [self._element() for _ in range(n)]
        for i, v in enumerate(ids):
            if not 0 <= v < 1 << 63 or (increasing and i > 0 and v <= ids[i - 1]):
                raise ProtocolError(f"not an id, or not increasing, in a batch: {v} at {i}")
        if not increasing and len(set(ids)) != n:
            raise ProtocolError("an id twice in a batch")
        return ids

    def _element(self) -> int:
        """One id of a batch: an integer, or a decimal bulk string."""
        try:
            v = self._read(nested=False)
        except RespError as e:  # no reply of sekka's has one: the server is broken
            raise ProtocolError(f"an error inside an array: {e}") from None
        if isinstance(v, bytes):
            v = _integer(v)
        if not isinstance(v, int):
            raise ProtocolError(f"a batch element that is not an id: {v!r}")
        return v

    def _read(self, nested: bool = True) -> Reply:
        line = self._line()
        if not line:
            raise ProtocolError("an empty reply line")
        kind, rest = line[:1], line[1:]
        if kind == b":":
            return _integer(rest)
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RespError(rest.decode(errors="replace"))
        if kind == b"$":
            n = _integer(rest)
            if n > (64 << 20 if nested else 20):  # an id in an array: at most 20 characters
                raise ProtocolError(f"a bulk string of {n} bytes")
            if n < 0:
                return None
            while len(self._buf) < n + 2:
                self._fill()
            data, self._buf = self._buf[:n], self._buf[n + 2:]
            return data
        if kind == b"*":
            n = _integer(rest)
            if not nested:  # no reply of sekka's nests arrays
                raise ProtocolError("an array inside an array")
            if n > MAX_BATCH:
                raise ProtocolError(f"an array of {n} elements")
            if n < 0:
                return None
            fast = self._integers(n)
            if fast is not None:
                return fast
            items = []
            for _ in range(n):
                try:
                    items.append(self._read(nested=False))
                except RespError as e:  # no reply of sekka's has one: the server is broken
                    raise ProtocolError(f"an error inside an array: {e}") from None
            return items
        raise ProtocolError(f"a reply starting with {kind!r}")


def _integer(text: bytes) -> int:
    """A RESP integer: an optional minus and decimal digits only (int() would also take
    spaces, underscores and a plus)."""
    digits = text[1:] if text[:1] == b"-" else text
    if not digits.isdigit() or len(digits) > 19:
        raise ProtocolError(f"{text[:40]!r} is not an integer")
    return int(text)
