"""A minimal blocking RESP2 connection: commands out as arrays of bulk strings, replies in
(integers, bulk and simple strings, arrays, errors). Standard library only."""

from __future__ import annotations

import socket
from typing import Union

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


class Connection:
    """One TCP connection to one server. Not thread-safe: the client uses one from one thread."""

    def __init__(self, host: str, port: int, connect_timeout: float, timeout: float) -> None:
        self._sock = socket.create_connection((host, port), timeout=connect_timeout)
        self._sock.settimeout(timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buf = b""
        self._received = False  # a byte of the current command's reply came

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass

    def call(self, *args: Union[str, int, bytes]) -> Reply:
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            data = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(data), data))
        self._received = False
        try:
            self._sock.sendall(b"".join(out))
            return self._read()
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
            chunk = self._sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            self._received = True
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
        return [int(p[1:]) for p in parts[:n]]

    def _fill(self) -> None:
        chunk = self._sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self._received = True
        self._buf += chunk

    def _read(self) -> Reply:
        line = self._line()
        if not line:
            raise ProtocolError("an empty reply line")
        kind, rest = line[:1], line[1:]
        if kind == b":":
            return int(rest)
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RespError(rest.decode(errors="replace"))
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self._buf) < n + 2:
                self._fill()
            data, self._buf = self._buf[:n], self._buf[n + 2:]
            return data
        if kind == b"*":
            n = int(rest)
            if n < 0:
                return None
            fast = self._integers(n)
            if fast is not None:
                return fast
            items = []
            for _ in range(n):
                try:
                    items.append(self._read())
                except RespError as e:  # an error inside an array is a value there
                    items.append(e)
            return items
        raise ProtocolError(f"a reply starting with {kind!r}")
