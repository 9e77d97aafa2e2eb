"""Keep-alive HTTP/1.1 requests to the API server, one write and one parse per request.

``Kube.request`` (every create, patch, delete and get of the live scheduler and binder) goes
through :class:`Wire` rather than urllib3's request path. The connection itself is still
urllib3's (``urllib3.connection.HTTPConnection`` / ``HTTPSConnection`` with the very keyword
arguments the official client gave its pool manager: CA, client certificate, hostname checks,
socket options), so TLS and verification are as before; what is skipped is the per-request
machinery around it, which cost about twice the request itself here (bench-live: ~1 ms of CPU per
request through urllib3 and ``http.client``, whose header parsing goes through ``email.parser``,
against ~0.35 ms written as one buffer and parsed by hand).

What it does, and no more:

* one ``sendall`` of the request line, headers and body (no Nagle wait between two TLS records);
* the response's status line and headers parsed from the raw bytes; a body by ``Content-Length``,
  ``chunked`` or up to the close; gzip only if the server sends it (we never ask for it);
* idle connections kept (LIFO, at most ``maxsize``) and reused unless the server said
  ``Connection: close``; before reuse, a connection the server has closed meanwhile (readable
  while idle) is dropped; a GET whose reused connection fails before any byte of the response
  is sent again once on a new connection (the keep-alive race; never a write);
* every failure (refused, reset, timeout, malformed) raises :class:`WireError`.

Watches keep urllib3's streaming responses (:meth:`kai.cluster.kube.Kube.stream`).
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import zlib
from typing import Any

from urllib3.connection import HTTPConnection, HTTPSConnection

MAX_HEAD = 1 << 20  # bytes of status line + headers before the response is refused as malformed
_RECV = 1 << 16


class WireError(Exception):
    """The request could not be carried out (no response, or a malformed one)."""


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
        head = bytes(buf[:end])
        del buf[: end + 4]
        lines = head.split(b"\r\n")
        parts = lines[0].split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/"):
            raise WireError(f"malformed status line {lines[0][:80]!r}")
        try:
            status = int(parts[1])
        except ValueError as err:
            raise WireError(f"malformed status line {lines[0][:80]!r}") from err
        reason = parts[2].decode("latin-1") if len(parts) > 2 else ""
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                continue
            key = name.strip().lower().decode("latin-1")
            text = value.strip().decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        return parts[0].decode("latin-1"), status, reason, headers

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

    def read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            line = self.read_line()
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError as err:
                raise WireError(f"malformed chunk size {line[:40]!r}") from err
            if size == 0:
                while self.read_line():  # trailers, up to the empty line
                    pass
                return b"".join(parts)
            parts.append(self.read_exact(size))
            if self.read_exact(2) != b"\r\n":
                raise WireError("malformed chunk end")

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

    def request(
        self, method: str, target: str, headers: dict[str, str], body: bytes | None, timeout: float
    ) -> Response:
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host_header}"]
        lines.extend(f"{k}: {v}" for k, v in headers.items())
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if body:
            data += body
        conn = self._take()
        if conn is not None:
            try:
                return self._exchange(conn, method, data, timeout)
            except _Unanswered as err:
                if method != "GET":
                    raise WireError(str(err.__cause__ or err)) from err
            # an idempotent request on a connection the server dropped meanwhile: once more, anew
        conn = self._connect(timeout)
        try:
            return self._exchange(conn, method, data, timeout)
        except _Unanswered as err:
            raise WireError(str(err.__cause__ or err)) from err

    def _exchange(self, conn: _Conn, method: str, data: bytes, timeout: float) -> Response:
        answered = False
        try:
            conn.sock.settimeout(timeout)
            conn.sock.sendall(data)
            while True:
                if not conn.buf:
                    conn._fill()
                answered = True
                version, status, reason, headers = conn.read_head()
                if 100 <= status < 200 and status != 101:
                    continue  # an interim response (100 Continue): the real one follows
                break
            keep = version != "HTTP/1.0" and "close" not in headers.get("connection", "").lower()
            if method == "HEAD" or status in (204, 304):
                body = b""
            elif "chunked" in headers.get("transfer-encoding", "").lower():
                body = conn.read_chunked()
            elif "content-length" in headers:
                try:
                    length = int(headers["content-length"])
                except ValueError as err:
                    raise WireError(f"malformed Content-Length {headers['content-length']!r}") from err
                body = conn.read_exact(length)
            else:
                body = conn.read_to_close()
                keep = False
            encoding = headers.get("content-encoding", "").lower()
            if encoding in ("gzip", "deflate"):
                body = zlib.decompress(body, 47 if encoding == "gzip" else zlib.MAX_WBITS)
        except WireError as err:
            conn.close()
            if not answered:
                raise _Unanswered(str(err)) from err
            raise
        except (OSError, zlib.error) as err:
            conn.close()
            if not answered and not isinstance(err, TimeoutError | socket.timeout):
                raise _Unanswered(f"{type(err).__name__}: {err}") from err
            raise WireError(f"{type(err).__name__}: {err}") from err
        except BaseException:
            conn.close()
            raise
        if keep:
            self._give_back(conn)
        else:
            conn.close()
        return Response(status, reason, headers, body)


class _Unanswered(WireError):
    """The server sent no byte of a response (the connection was closed or reset first)."""
