"""Keep-alive HTTP/1.1 requests to the API server, one write and one parse per request.

``Kube.request`` (every create, patch, delete and get of the live scheduler and binder) and
``Kube.stream`` (the reflectors' watches) go through :class:`Wire` rather than urllib3's request
path. The connection itself is still urllib3's (``urllib3.connection.HTTPConnection`` /
``HTTPSConnection`` with the very keyword arguments the official client gave its pool manager: CA,
client certificate, hostname checks, socket options), so TLS and verification are as before; what
is skipped is the per-request machinery around it, which cost about three times the request itself
here (bench-live: ~1 ms of CPU per request through urllib3 and ``http.client``, whose header parsing
goes through ``email.parser``, against ~0.3 ms written as one buffer and parsed by hand).

What it does, and no more:

* one ``sendall`` of the request line, headers and body (one TLS record and one system call where
  ``http.client`` makes two);
* the response's status line and headers parsed from the raw bytes; a body by ``Content-Length``,
  ``chunked`` or up to the close; gzip only if the server sends it (we never ask for it);
* idle connections kept (LIFO, at most ``maxsize``) and reused unless the server said
  ``Connection: close``; before reuse, a connection the server has closed meanwhile (readable
  while idle) is dropped; a GET whose reused connection fails before any byte of the response
  is sent again once on a new connection (the keep-alive race; never a write);
* every failure (refused, reset, timeout, malformed) raises :class:`WireError`;
* a watch (:meth:`Wire.stream`) is read as it arrives: :meth:`Stream.lines` yields each line as soon
  as it is whole (one split per chunk), and :meth:`Stream.shutdown` from another thread ends a read
  that is waiting.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import zlib
from collections.abc import Iterator
from typing import Any

from urllib3.connection import HTTPConnection, HTTPSConnection

MAX_HEAD = 1 << 20  # bytes of status line + headers before the response is refused as malformed
_RECV = 1 << 16


class WireError(OSError):
    """The request could not be carried out (no response, or a malformed one): a transport failure, as
    the OSError a socket raises (a watch's reader treats both alike)."""


class Response:
    __slots__ = ("body", "headers", "reason", "status")

    def __init__(self, status: int, reason: str, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body


class _Conn:
    __slots__ = ("buf", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def idle_closed(self) -> bool:
        """Whether the server closed (or wrote to) this idle connection: it cannot carry a request."""
        if self.buf:
            return True
        pending = getattr(self.sock, "pending", None)
        if pending is not None and pending():
            return True
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    # -- reading ---------------------------------------------------------------------------------
    def _fill(self) -> None:
        chunk = self.sock.recv(_RECV)
        if not chunk:
            raise WireError("connection closed by the server")
        self.buf += chunk

    def read_head(self) -> tuple[str, int, str, dict[str, str]]:
        buf = self.buf
        start = 0
        while True:
            end = buf.find(b"\r\n\r\n", start)
            if end >= 0:
                break
            if len(buf) > MAX_HEAD:
                raise WireError("response headers too long")
            start = max(0, len(buf) - 3)
            self._fill()
            buf = self.buf
        head = buf[:end].decode("latin-1")  # one decode; header lines are then split as text
        del buf[: end + 4]
        lines = head.split("\r\n")
        parts = lines[0].split(None, 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise WireError(f"malformed status line {lines[0][:80]!r}")
        try:
            status = int(parts[1])
        except ValueError as err:
            raise WireError(f"malformed status line {lines[0][:80]!r}") from err
        reason = parts[2] if len(parts) > 2 else ""
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                continue
            key = name.strip().lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        return parts[0], status, reason, headers

    def read_exact(self, n: int) -> bytes:
        buf = self.buf
        if len(buf) >= n:
            data = bytes(buf[:n])
            del buf[:n]
            return data
        out = bytearray(n)
        view = memoryview(out)
        have = len(buf)
        view[:have] = buf
        buf.clear()
        while have < n:
            got = self.sock.recv_into(view[have:], min(n - have, 1 << 20))
            if not got:
                raise WireError("connection closed in the middle of a response")
            have += got
        return bytes(out)

    def read_line(self) -> bytes:
        start = 0
        while True:
            end = self.buf.find(b"\r\n", start)
            if end >= 0:
                line = bytes(self.buf[:end])
                del self.buf[: end + 2]
                return line
            if len(self.buf) > MAX_HEAD:
                raise WireError("chunk header too long")
            start = max(0, len(self.buf) - 1)
            self._fill()

    def chunk_size(self) -> int:
        line = self.read_line()
        try:
            return int(line.split(b";", 1)[0].strip(), 16)
        except ValueError as err:
            raise WireError(f"malformed chunk size {line[:40]!r}") from err

    def trailers(self) -> None:
        while self.read_line():  # up to the empty line
            pass

    def read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size = self.chunk_size()
            if size == 0:
                self.trailers()
                return b"".join(parts)
            parts.append(self.read_exact(size))
            if self.read_exact(2) != b"\r\n":
                raise WireError("malformed chunk end")

    def read_some(self, most: int) -> bytes:
        """What is buffered or arrives next, at most `most` bytes; b"" at the end of the connection."""
        if self.buf:
            data = bytes(self.buf[:most])
            del self.buf[:most]
            return data
        return self.sock.recv(min(most, _RECV))

    def read_body(self, fields: dict[str, str]) -> tuple[bytes, bool]:
        """The body as the headers frame it, and whether it was framed (else it ran to the close)."""
        if "chunked" in fields.get("transfer-encoding", "").lower():
            return self.read_chunked(), True
        if "content-length" in fields:
            return self.read_exact(_length(fields)), True
        return self.read_to_close(), False

    def read_to_close(self) -> bytes:
        parts = [bytes(self.buf)]
        self.buf.clear()
        while True:
            chunk = self.sock.recv(_RECV)
            if not chunk:
                return b"".join(parts)
            parts.append(chunk)


class Wire:
    """Keep-alive connections to one API server (``scheme://host:port``); thread-safe."""

    def __init__(self, scheme: str, host: str, port: int | None, conn_kw: dict[str, Any], maxsize: int = 32) -> None:
        self.https = scheme == "https"
        self.host = host
        self.port = port or (443 if self.https else 80)
        self.conn_kw = conn_kw
        self.maxsize = max(1, maxsize)
        default_port = 443 if self.https else 80
        netloc = f"[{host}]" if ":" in host else host
        self.host_header = netloc if self.port == default_port else f"{netloc}:{self.port}"
        self._idle: list[_Conn] = []
        self._lock = threading.Lock()
        self.connections = 0  # opened so far (tests, the bench)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _connect(self, timeout: float) -> _Conn:
        klass = HTTPSConnection if self.https else HTTPConnection
        try:
            c = klass(self.host, self.port, timeout=min(10.0, timeout), **self.conn_kw)
            c.connect()
        except Exception as err:  # urllib3 raises its own errors and OSError
            raise WireError(f"{type(err).__name__}: {err}") from err
        sock = c.sock
        if sock is None:
            raise WireError("no connection")
        self.connections += 1
        return _Conn(sock)

    def _take(self) -> _Conn | None:
        while True:
            with self._lock:
                if not self._idle:
                    return None
                conn = self._idle.pop()
            if not conn.idle_closed():
                return conn
            conn.close()

    def _give_back(self, conn: _Conn) -> None:
        with self._lock:
            if len(self._idle) < self.maxsize:
                self._idle.append(conn)
                return
        conn.close()

    @staticmethod
    def _encode(method: str, target: str, host: str, headers: dict[str, str], body: bytes | None) -> bytes:
        lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
        lines.extend(f"{k}: {v}" for k, v in headers.items())
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return data + body if body else data

    def request(
        self, method: str, target: str, headers: dict[str, str], body: bytes | None, timeout: float
    ) -> Response:
        """One request, its whole response read."""
        data = self._encode(method, target, self.host_header, headers, body)
        conn, head = self._start(method, data, timeout, timeout)
        version, status, reason, fields = head
        try:
            keep = version != "HTTP/1.0" and "close" not in fields.get("connection", "").lower()
            if method == "HEAD" or status in (204, 304):
                payload = b""
            else:
                payload, framed = conn.read_body(fields)
                keep = keep and framed
            encoding = fields.get("content-encoding", "").lower()
            if encoding in ("gzip", "deflate"):
                payload = zlib.decompress(payload, 47 if encoding == "gzip" else zlib.MAX_WBITS)
        except WireError:
            conn.close()
            raise
        except (OSError, zlib.error) as err:
            conn.close()
            raise WireError(f"{type(err).__name__}: {err}") from err
        except BaseException:
            conn.close()
            raise
        if keep:
            self._give_back(conn)
        else:
            conn.close()
        return Response(status, reason, fields, payload)

    def stream(
        self, target: str, headers: dict[str, str], connect_timeout: float, read_timeout: float | None
    ) -> Stream:
        """A GET whose body is read as it comes (a watch): the caller reads :meth:`Stream.lines` and then
        calls :meth:`Stream.release_conn` (or :meth:`Stream.close` to drop the connection)."""
        data = self._encode("GET", target, self.host_header, headers, None)
        conn, head = self._start("GET", data, connect_timeout, read_timeout)
        return Stream(self, conn, head)

    def _start(
        self, method: str, data: bytes, connect_timeout: float, read_timeout: float | None
    ) -> tuple[_Conn, tuple[str, int, str, dict[str, str]]]:
        """Send the request (on an idle connection, else a new one) and read the response's head."""
        conn = self._take()
        if conn is not None:
            try:
                return conn, self._head(conn, data, read_timeout)
            except _Unanswered as err:
                if method != "GET":
                    raise WireError(str(err)) from err
            # an idempotent request on a connection the server dropped meanwhile: once more, anew
        conn = self._connect(connect_timeout)
        try:
            return conn, self._head(conn, data, read_timeout)
        except _Unanswered as err:
            raise WireError(str(err)) from err

    @staticmethod
    def _head(conn: _Conn, data: bytes, timeout: float | None) -> tuple[str, int, str, dict[str, str]]:
        answered = False
        try:
            conn.sock.settimeout(timeout)
            conn.sock.sendall(data)
            while True:
                if not conn.buf:
                    conn._fill()
                answered = True
                head = conn.read_head()
                if 100 <= head[1] < 200 and head[1] != 101:
                    continue  # an interim response (100 Continue): the real one follows
                return head
        except WireError as err:
            conn.close()
            if not answered:
                raise _Unanswered(str(err)) from err
            raise
        except OSError as err:
            conn.close()
            if not answered and not isinstance(err, TimeoutError | socket.timeout):
                raise _Unanswered(f"{type(err).__name__}: {err}") from err
            raise WireError(f"{type(err).__name__}: {err}") from err
        except BaseException:
            conn.close()
            raise


class Stream:
    """A response read as it arrives (``status``, ``reason``, ``headers``; then :meth:`lines` or :meth:`read`).

    :meth:`shutdown` (from another thread) ends a blocked read; :meth:`release_conn` gives a connection
    whose body was read to its end back to the pool and closes any other."""

    def __init__(self, wire: Wire, conn: _Conn, head: tuple[str, int, str, dict[str, str]]) -> None:
        self.wire = wire
        self.conn: _Conn | None = conn
        version, self.status, self.reason, self.headers = head
        self.keep = version != "HTTP/1.0" and "close" not in self.headers.get("connection", "").lower()
        self.complete = False
        encoding = self.headers.get("content-encoding", "").lower()
        self._inflate = None
        if encoding in ("gzip", "deflate"):
            self._inflate = zlib.decompressobj(47 if encoding == "gzip" else zlib.MAX_WBITS)

    def chunks(self) -> Iterator[bytes]:
        """The body's pieces as they come (each chunk of a chunked body)."""
        conn = self.conn
        if conn is None:
            return
        fields = self.headers
        try:
            if "chunked" in fields.get("transfer-encoding", "").lower():
                while True:
                    size = conn.chunk_size()
                    if size == 0:
                        conn.trailers()
                        break
                    piece = conn.read_exact(size)
                    if conn.read_exact(2) != b"\r\n":
                        raise WireError("malformed chunk end")
                    yield self._decoded(piece)
            elif "content-length" in fields:
                left = _length(fields)
                while left > 0:
                    piece = conn.read_some(left)
                    left -= len(piece)
                    yield self._decoded(piece)
            else:
                self.keep = False
                while True:
                    piece = conn.read_some(_RECV)
                    if not piece:
                        break
                    yield self._decoded(piece)
        except WireError:
            raise
        except OSError as err:
            raise WireError(f"{type(err).__name__}: {err}") from err
        except zlib.error as err:
            raise WireError(f"zlib.error: {err}") from err
        self.complete = True

    def _decoded(self, piece: bytes) -> bytes:
        return self._inflate.decompress(piece) if self._inflate is not None else piece

    def lines(self) -> Iterator[bytes]:
        """The body's non-empty newline-separated lines, each as soon as it is whole."""
        pending = b""
        for chunk in self.chunks():
            if b"\n" not in chunk:
                pending += chunk
                continue
            parts = (pending + chunk).split(b"\n")  # one split per chunk (a watch event is usually one)
            pending = parts.pop()
            for line in parts:
                if line:
                    yield line
        if pending.strip():
            yield pending

    def read(self) -> bytes:
        return b"".join(self.chunks())

    def shutdown(self) -> None:
        conn = self.conn
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.close()

    def release_conn(self) -> None:
        conn, self.conn = self.conn, None
        if conn is None:
            return
        if self.complete and self.keep:
            self.wire._give_back(conn)
        else:
            conn.close()


def _length(fields: dict[str, str]) -> int:
    try:
        return int(fields["content-length"])
    except ValueError as err:
        raise WireError(f"malformed Content-Length {fields['content-length']!r}") from err


class _Unanswered(WireError):
    """The server sent no byte of a response (the connection was closed or reset first)."""
