"""Keep-alive HTTP/1.1 to the API server: one write per request, the response parsed by httptools.

``Kube.request`` (every create, patch, delete and get of the live scheduler and binder) and
``Kube.stream`` (the reflectors' watches) go through :class:`Wire` rather than urllib3's request
path. The pieces:

* the **connection** is urllib3's (``urllib3.connection.HTTPConnection`` / ``HTTPSConnection``
  opened with the very keyword arguments the official client gave its pool manager: CA, client
  certificate, hostname checks, socket options), so TLS and verification are the client's;
* the **response** is parsed by ``httptools`` (the llhttp parser: status line, headers, framing by
  ``Content-Length`` or ``chunked``, keep-alive); what kai adds is the one framing rule llhttp
  leaves to its caller (a body with neither header runs to the close) and gzip/deflate should a
  server send it (kai never asks for it);
* the **request** is written as one buffer (request line, the client's headers, ``Host``,
  ``Content-Length``, body): one TLS record and one system call where ``http.client`` makes two,
  header values checked for line breaks as ``http.client`` checks them.

Why: in bench-live a request through urllib3 and ``http.client`` (whose header parsing goes through
``email.parser``) cost ~0.5-0.8 ms of CPU, five of them per bound pod; here ~0.15-0.27 ms (see
kai/cluster/NOTES.md).

Connections: idle ones are kept (LIFO, at most ``maxsize``) and used again unless the server said
``Connection: close`` (``should_keep_alive``); before reuse, a connection the server has closed
meanwhile (readable while idle) is dropped; a GET whose kept connection fails before any byte of the
response is sent again once on a new connection (the keep-alive race; never a write). Every failure
(refused, reset, timeout, malformed) raises :class:`WireError`. A watch (:meth:`Wire.stream`) is
read as it arrives: :meth:`Stream.lines` yields each line as soon as it is whole, and
:meth:`Stream.shutdown` from another thread ends a read that is waiting.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import zlib
from collections.abc import Iterator
from typing import Any

import httptools
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.util import wait_for_read

_RECV = 1 << 16


class WireError(OSError):
    """The request could not be carried out (no response, or a malformed one): a transport failure, as
    the OSError a socket raises (a watch's reader treats both alike)."""


class _Unanswered(WireError):
    """The server sent no byte of a response (the connection was closed or reset first)."""


class _Message:
    """httptools' callbacks for one response (and any interim 1xx before it) on one connection."""

    __slots__ = (
        "body",
        "complete",
        "encoding",
        "extra",
        "framed",
        "head",
        "keep",
        "parser",
        "reason",
        "started",
        "status",
    )

    def __init__(self) -> None:
        self.parser: Any = None  # the connection's parser, set once it exists (and unset after the response)
        self.started = False  # a byte of a response has come
        self.head = False  # the final response's headers are all in
        self.complete = False
        self.extra = False  # bytes of another response after this one: the connection cannot be used again
        self.status = 0
        self.reason = b""
        self.body: list[bytes] = []
        self.framed = False  # Content-Length or Transfer-Encoding given (else the body runs to the close)
        self.encoding = b""
        self.keep = False  # the server keeps the connection open after this response (llhttp's rules)

    def on_message_begin(self) -> None:
        if self.complete:
            self.extra = True  # what follows is no part of this response: left out, and the connection closed
        if self.extra:
            return
        self.started = True
        self.reason = b""
        self.framed = False
        self.encoding = b""

    def on_status(self, reason: bytes) -> None:
        if not self.extra:
            self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.extra:
            return
        name = name.lower()
        if name in (b"content-length", b"transfer-encoding"):
            self.framed = True
        elif name == b"content-encoding":
            self.encoding = value.strip().lower()

    def on_headers_complete(self) -> None:
        if self.extra:
            return
        status = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            return  # an interim response (100 Continue): the real one follows
        self.status = status
        self.head = True

    def on_body(self, body: bytes) -> None:
        if not self.extra:
            self.body.append(body)

    def on_message_complete(self) -> None:
        if self.head and not self.extra:
            self.complete = True
            self.keep = self.parser.should_keep_alive()  # (valid until the callback returns)


class _Conn:
    """One connection and the parser of the response now on it."""

    __slots__ = ("message", "parser", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.message = _Message()
        self.parser: Any = None

    def begin(self) -> _Message:
        message = self.message = _Message()
        self.parser = message.parser = httptools.HttpResponseParser(message)
        return message

    def end(self) -> None:
        self.message.parser = None  # no reference cycle parser -> message -> parser left behind
        self.parser = None

    def close(self) -> None:
        self.end()
        with contextlib.suppress(OSError):
            self.sock.close()

    def idle_closed(self) -> bool:
        """Whether the server closed (or wrote to) this idle connection: it cannot carry a request."""
        pending = getattr(self.sock, "pending", None)
        if pending is not None and pending():
            return True
        try:
            return wait_for_read(self.sock, timeout=0)  # poll where there is poll (select: fds < 1024 only)
        except (OSError, ValueError):
            return True

    def feed(self) -> bool:
        """Read what arrives next into the parser; False at the end of the connection."""
        data = self.sock.recv(_RECV)
        if not data:
            return False
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as err:
            raise WireError(f"malformed response: {err}") from err
        return True

    def finish(self) -> None:
        """The connection ended: complete a response whose body runs to the close, else fail."""
        message = self.message
        if message.head and not message.framed and not message.complete:
            message.complete = True
            return
        raise WireError("connection closed in the middle of a response")


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
        conn.end()
        with self._lock:
            if len(self._idle) < self.maxsize:
                self._idle.append(conn)
                return
        conn.close()

    def _encode(self, method: str, target: str, headers: dict[str, str], body: bytes | None) -> bytes:
        if " " in target or "\r" in target or "\n" in target:
            raise WireError(f"a request target with a space or a line break: {target[:80]!r}")
        head = f"{method} {target} HTTP/1.1\r\nHost: {self.host_header}\r\n"
        for name, value in headers.items():
            value = str(value)
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
                raise WireError(f"header {name!r} has a line break in its name or value")
            head += f"{name}: {value}\r\n"
        if body is not None or method in ("POST", "PUT", "PATCH"):
            head += f"Content-Length: {len(body or b'')}\r\n"
        data = (head + "\r\n").encode("latin-1")
        return data + body if body else data

    def request(
        self, method: str, target: str, headers: dict[str, str], body: bytes | None, timeout: float
    ) -> tuple[int, str, bytes]:
        """One request, its whole response read: (status, reason, body)."""
        data = self._encode(method, target, headers, body)
        conn = self._start(method, data, timeout, timeout)
        message = conn.message
        try:
            while not message.complete:
                if not conn.feed():
                    conn.finish()
            payload = b"".join(message.body)
            if message.encoding:
                payload = _inflate(message.encoding).decompress(payload)
        except WireError:
            conn.close()
            raise
        except (OSError, zlib.error) as err:
            conn.close()
            raise WireError(f"{type(err).__name__}: {err}") from err
        except BaseException:
            conn.close()
            raise
        status, reason = message.status, message.reason.decode("latin-1")
        if message.keep and message.framed and not message.extra:
            self._give_back(conn)
        else:
            conn.close()
        return status, reason, payload

    def stream(
        self, target: str, headers: dict[str, str], connect_timeout: float, read_timeout: float | None
    ) -> Stream:
        """A GET whose body is read as it comes (a watch): the caller reads :meth:`Stream.lines` and then
        calls :meth:`Stream.release_conn` (or :meth:`Stream.close` to drop the connection)."""
        data = self._encode("GET", target, headers, None)
        return Stream(self, self._start("GET", data, connect_timeout, read_timeout))

    def _start(self, method: str, data: bytes, connect_timeout: float, read_timeout: float | None) -> _Conn:
        """Send the request (on an idle connection, else a new one) and read up to the response's head."""
        conn = self._take()
        if conn is not None:
            try:
                return self._head(conn, data, read_timeout)
            except _Unanswered as err:
                if method != "GET":
                    raise WireError(str(err)) from err
            # an idempotent request on a connection the server dropped meanwhile: once more, anew
        conn = self._connect(connect_timeout)
        try:
            return self._head(conn, data, read_timeout)
        except _Unanswered as err:
            raise WireError(str(err)) from err

    @staticmethod
    def _head(conn: _Conn, data: bytes, timeout: float | None) -> _Conn:
        message = conn.begin()
        try:
            conn.sock.settimeout(timeout)
            conn.sock.sendall(data)
            while not message.head:
                if not conn.feed():
                    if not message.started:
                        raise _Unanswered("connection closed by the server before it answered")
                    raise WireError("connection closed in the middle of a response")
            return conn
        except WireError:
            conn.close()
            raise
        except OSError as err:
            conn.close()
            if not message.started and not isinstance(err, TimeoutError | socket.timeout):
                raise _Unanswered(f"{type(err).__name__}: {err}") from err
            raise WireError(f"{type(err).__name__}: {err}") from err
        except BaseException:
            conn.close()
            raise


class Stream:
    """A response read as it arrives (``status``, ``reason``; then :meth:`lines` or :meth:`read`).

    :meth:`shutdown` (from another thread) ends a blocked read; :meth:`release_conn` gives a connection
    whose body was read to its end back to the pool and closes any other."""

    def __init__(self, wire: Wire, conn: _Conn) -> None:
        self.wire = wire
        self.conn: _Conn | None = conn
        message = conn.message
        self.status = message.status
        self.reason = message.reason.decode("latin-1")
        self._inflate = _inflate(message.encoding) if message.encoding else None

    @property
    def complete(self) -> bool:
        return self.conn is not None and self.conn.message.complete

    def chunks(self) -> Iterator[bytes]:
        """The body's pieces as they come."""
        conn = self.conn
        if conn is None:
            return
        message = conn.message
        try:
            while True:
                if message.body:
                    pieces, message.body = message.body, []
                    for piece in pieces:
                        yield self._inflate.decompress(piece) if self._inflate is not None else piece
                if message.complete:
                    return
                if not conn.feed():
                    conn.finish()
        except WireError:
            raise
        except OSError as err:
            raise WireError(f"{type(err).__name__}: {err}") from err
        except zlib.error as err:
            raise WireError(f"zlib.error: {err}") from err

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
        message = conn.message
        if message.complete and message.keep and message.framed and not message.extra:
            self.wire._give_back(conn)
        else:
            conn.close()


def _inflate(encoding: bytes) -> Any:
    if encoding == b"gzip":
        return zlib.decompressobj(47)
    if encoding == b"deflate":
        return zlib.decompressobj(zlib.MAX_WBITS)
    raise WireError(f"a response in an encoding kai did not ask for: {encoding.decode('latin-1')!r}")
