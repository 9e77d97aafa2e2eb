"""Kube's raw JSON requests and watches (kept-alive connections, responses parsed by httptools:
kai.cluster.wire) against a scripted loopback server.

The server answers each request with the bytes a test scripts (framing by Content-Length, chunked or
up to the close; keep-alive or not), so each case checks what Kube makes of one way an HTTP/1.1 server
may answer, and what it sends: the official client's headers, the host's path prefix.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable

import pytest
from kubernetes import client as k8s

from kai.cluster.kube import ApiError, Kube, iter_lines
from kai.cluster.wire import Stream

Reply = Callable[[str, str, bytes], tuple[bytes, bool]]  # (method, target, body) -> (raw response, close after)


class ScriptedServer:
    """Loopback HTTP/1.1 server: each request is answered by `reply`; counts connections and requests."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            self.open.append(sock)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = sock.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, _, buf = buf.partition(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
                length = int(headers.get("content-length") or 0)
                while len(buf) < length:
                    buf += sock.recv(65536)
                body, buf = buf[:length], buf[length:]
                self.requests.append((method, target, headers, body))
                raw, close = self.reply(method, target, body)
                sock.sendall(raw)
                if close:
                    sock.close()
                    return
        except OSError:
            return

    def drop_idle(self) -> None:
        """Close every connection from the server's side (as an idle timeout does)."""
        for sock in self.open:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self.open = []

    def close(self) -> None:
        self.listener.close()
        self.drop_idle()

    def kube(self, **settings: object) -> Kube:
        config = k8s.Configuration()
        config.host = f"http://127.0.0.1:{self.port}"
        config.api_key = {"BearerToken": "secret-token"}
        config.api_key_prefix = {"BearerToken": "Bearer"}
        for name, value in settings.items():
            setattr(config, name, value)
        return Kube(k8s.ApiClient(config), timeout=5)


def sized(status: str, payload: bytes, extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}\r\n{extra}\r\n"
    return head.encode() + payload


def chunked(status: str, parts: list[bytes]) -> bytes:
    body = b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in parts) + b"0\r\n\r\n"
    return f"HTTP/1.1 {status}\r\nTransfer-Encoding: chunked\r\n\r\n".encode() + body


@pytest.fixture
def serve():
    servers: list[ScriptedServer] = []

    def make(reply: Reply) -> ScriptedServer:
        servers.append(ScriptedServer(reply))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def echo(method: str, target: str, body: bytes) -> tuple[bytes, bool]:
    answer = {"method": method, "target": target, "body": json.loads(body) if body else None}
    return sized("200 OK", json.dumps(answer).encode()), False


def test_requests_share_one_kept_alive_connection_and_carry_the_clients_headers(serve):
    server = serve(echo)
    kube = server.kube()
    first = kube.post("/api/v1/namespaces/a/events", {"reason": "Scheduled", "message": "ü"})
    second = kube.get("/api/v1/pods", {"limit": 5, "watch": False})
    third = kube.patch("/apis/x/v1/things/t/status", {"status": {"phase": "Running"}})
    assert first["method"] == "POST"
    assert first["target"] == "/api/v1/namespaces/a/events"
    assert first["body"] == {"reason": "Scheduled", "message": "ü"}
    assert second["target"] == "/api/v1/pods?limit=5&watch=false"
    assert third["body"] == {"status": {"phase": "Running"}}
    assert server.connections == 1
    _, _, headers, _ = server.requests[0]
    assert headers["authorization"] == "Bearer secret-token"
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"].startswith("OpenAPI-Generator")
    assert headers["host"] == f"127.0.0.1:{server.port}"
    assert server.requests[2][2]["content-type"] == "application/merge-patch+json"
    assert "content-type" not in server.requests[1][2]  # a GET has no body


def test_a_chunked_body_is_joined(serve):
    server = serve(lambda m, t, b: (chunked("200 OK", [b'{"items": [', b'1, 2', b"]}"]), False))
    kube = server.kube()
    assert kube.get("/api/v1/pods") == {"items": [1, 2]}
    assert kube.get("/api/v1/pods") == {"items": [1, 2]}
    assert server.connections == 1


def test_a_body_up_to_the_close_and_connection_close_open_a_new_connection_next_time(serve):
    replies = iter(
        [
            (b'HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{"a": 1}', True),
            (sized("200 OK", b'{"b": 2}', "Connection: close\r\n"), True),
            (sized("200 OK", b'{"c": 3}'), False),
        ]
    )
    server = serve(lambda m, t, b: next(replies))
    kube = server.kube()
    assert kube.get("/x") == {"a": 1}
    assert kube.get("/x") == {"b": 2}
    assert kube.get("/x") == {"c": 3}
    assert server.connections == 3


def test_an_error_status_becomes_api_error_with_the_servers_status_object(serve):
    status = {"kind": "Status", "message": "pods \"p\" already exists", "reason": "AlreadyExists", "code": 409}
    server = serve(lambda m, t, b: (sized("409 Conflict", json.dumps(status).encode()), False))
    with pytest.raises(ApiError) as caught:
        server.kube().post("/api/v1/namespaces/a/pods", {})
    assert caught.value.status == 409
    assert caught.value.reason == "Conflict"
    assert caught.value.body["reason"] == "AlreadyExists"


def test_an_interim_100_continue_is_skipped(serve):
    server = serve(lambda m, t, b: (b"HTTP/1.1 100 Continue\r\n\r\n" + sized("201 Created", b'{"ok": true}'), False))
    assert server.kube().post("/x", {}) == {"ok": True}


def test_a_server_that_is_not_there_is_status_0(serve):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    config = k8s.Configuration()
    config.host = f"http://127.0.0.1:{port}"
    with pytest.raises(ApiError) as caught:
        Kube(k8s.ApiClient(config), timeout=2).get("/api/v1/pods")
    assert caught.value.status == 0


def test_a_server_that_does_not_answer_in_time_is_status_0(serve):
    def late(method: str, target: str, body: bytes) -> tuple[bytes, bool]:
        threading.Event().wait(2)
        return b"", True

    server = serve(late)
    kube = server.kube()
    kube.timeout = 0.3
    with pytest.raises(ApiError) as caught:
        kube.get("/slow")
    assert caught.value.status == 0
    assert len(server.requests) == 1  # a timeout is not sent again (retries=False)


def test_a_host_with_a_path_prefix_keeps_it(serve):
    server = serve(echo)
    config = k8s.Configuration()
    config.host = f"http://127.0.0.1:{server.port}/k8s/clusters/c-1/"
    assert Kube(k8s.ApiClient(config)).get("/api/v1/pods")["target"] == "/k8s/clusters/c-1/api/v1/pods"


def test_a_watch_yields_each_line_once_whole_however_the_chunks_cut_it(serve):
    events = [{"type": "ADDED", "object": {"n": i}} for i in range(3)]
    text = b"".join(json.dumps(e).encode() + b"\n" for e in events)
    cuts = [text[:5], text[5:40], text[40:41], text[41:]]  # a line over three chunks, two in one
    server = serve(lambda m, t, b: (chunked("200 OK", cuts), False))
    kube = server.kube()
    stream = kube.stream("/api/v1/pods", {"watch": "true"})
    assert isinstance(stream, Stream)
    assert [json.loads(line) for line in iter_lines(stream)] == events
    stream.release_conn()
    kube.get("/api/v1/pods")  # the watch read to its end: its connection is used again
    assert server.connections == 1
    assert server.requests[0][1] == "/api/v1/pods?watch=true"


def test_a_watch_refused_by_the_server_is_api_error(serve):
    gone = {"kind": "Status", "reason": "Expired", "code": 410}
    server = serve(lambda m, t, b: (sized("410 Gone", json.dumps(gone).encode()), False))
    with pytest.raises(ApiError) as caught:
        server.kube().stream("/api/v1/pods", {"watch": "true"})
    assert caught.value.status == 410
    assert caught.value.body["reason"] == "Expired"


def test_a_proxy_in_the_configuration_keeps_the_pool_managers_path(serve):
    server = serve(echo)
    assert server.kube().wire is not None
    assert server.kube(proxy="http://127.0.0.1:1").wire is None


def test_a_connection_the_server_closed_while_idle_is_not_used_again(serve):
    server = serve(echo)
    kube = server.kube()
    kube.post("/x", {"n": 1})
    server.drop_idle()
    # The dropped connection is seen as closed before it is written to (on loopback the server's FIN is
    # in the client's socket when close returns): the write goes out once, on a new connection.
    assert kube.post("/x", {"n": 2})["body"] == {"n": 2}
    assert server.connections == 2
    assert [r[3] for r in server.requests] == [b'{"n":1}', b'{"n":2}']


def test_a_get_on_a_connection_reset_before_any_answer_is_sent_again_once_but_a_write_is_not(serve):
    answered: list[str] = []

    def reply(method: str, target: str, body: bytes) -> tuple[bytes, bool]:
        if target.endswith("/drop") and len(answered) % 2 == 0:
            answered.append("dropped")
            return b"", True  # closes without a byte of response
        answered.append("answered")
        return sized("200 OK", b"{}"), False

    server = serve(reply)
    kube = server.kube()
    kube.get("/ok")  # one kept-alive connection
    answered.clear()
    assert kube.get("/drop") == {}  # dropped on the kept connection, then answered on a new one
    assert answered == ["dropped", "answered"]
    answered.clear()
    with pytest.raises(ApiError) as caught:  # a write on a connection closed before answering: not repeated
        kube.post("/drop", {})
    assert caught.value.status == 0
    assert answered == ["dropped"]


def test_a_response_cut_short_is_status_0_and_its_connection_is_not_used_again(serve):
    replies = iter([(sized("200 OK", b'{"a": 1}')[:-3], True), (sized("200 OK", b'{"b": 2}'), False)])
    server = serve(lambda m, t, b: next(replies))
    kube = server.kube()
    with pytest.raises(ApiError) as caught:
        kube.get("/x")
    assert caught.value.status == 0
    assert kube.get("/x") == {"b": 2}
    assert server.connections == 2


def test_a_malformed_response_is_status_0(serve):
    server = serve(lambda m, t, b: (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n{}", False))
    with pytest.raises(ApiError) as caught:
        server.kube().get("/x")
    assert caught.value.status == 0


def test_a_gzip_body_is_inflated(serve):
    import gzip

    payload = gzip.compress(b'{"items": []}')
    server = serve(lambda m, t, b: (sized("200 OK", payload, "Content-Encoding: gzip\r\n"), False))
    assert server.kube().get("/x") == {"items": []}


def test_a_header_value_with_a_line_break_is_not_sent(serve):
    server = serve(echo)
    kube = server.kube()
    kube.api.default_headers["X-Evil"] = "a\r\nInjected: yes"
    with pytest.raises(ApiError) as caught:
        kube.get("/x")
    assert caught.value.status == 0
    assert server.requests == []


def test_shutdown_ends_a_watch_that_waits_and_its_connection_is_not_used_again(serve):
    first = b'{"type": "ADDED"}\n'
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + f"{len(first):x}\r\n".encode() + first + b"\r\n"
    server = serve(lambda m, t, b: (head, False) if "watch" in t else (sized("200 OK", b"{}"), False))
    kube = server.kube()
    stream = kube.stream("/api/v1/pods", {"watch": "true"})
    lines = iter_lines(stream)
    assert next(lines) == first.strip()
    threading.Timer(0.2, stream.shutdown).start()
    with pytest.raises(OSError):  # the read that waited for the next event ends
        next(lines)
    stream.close()
    stream.release_conn()
    kube.get("/x")
    assert server.connections == 2


def test_bytes_after_the_answer_are_no_part_of_it_and_its_connection_is_not_used_again(serve):
    twice = sized("200 OK", b'{"a": 1}') + sized("200 OK", b'{"x": 0}')
    replies = iter([(twice, False), (sized("200 OK", b"{}"), False)])
    server = serve(lambda m, t, b: next(replies))
    kube = server.kube()
    assert kube.get("/x") == {"a": 1}
    assert kube.get("/x") == {}
    assert server.connections == 2
