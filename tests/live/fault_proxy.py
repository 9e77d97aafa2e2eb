"""A fault-injecting HTTP proxy in front of the real API server, on loopback only.

Clients talk plain HTTP to the proxy (no auth); the proxy forwards to kube-apiserver over TLS
as the cluster admin. With the configured probabilities it answers a request itself instead:

* write requests (POST, PUT, PATCH, DELETE): 409 Conflict, 429 Too Many Requests (with
  Retry-After) or 500 Internal Server Error, as a Kubernetes ``Status`` object;
* watch requests: 410 Gone (the client must relist), or the stream is cut after a moment.

Request loops are bounded by the test that drives them; the proxy stops with :meth:`stop`.
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import urllib3


class FaultProxy:
    def __init__(
        self,
        upstream: str,
        ca_cert: Path,
        client_cert: Path,
        client_key: Path,
        write_fault_rate: float = 0.15,
        watch_fault_rate: float = 0.3,
        seed: int = 7,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.pool = urllib3.PoolManager(
            maxsize=64, ca_certs=str(ca_cert), cert_file=str(client_cert), key_file=str(client_key), retries=False
        )
        self.write_fault_rate = write_fault_rate
        self.watch_fault_rate = watch_fault_rate
        self.enabled = True
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.injected: Counter[str] = Counter()
        self.forwarded = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _body(self) -> bytes | None:
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else None

            def _status(self, code: int, reason: str, message: str, retry_after: int = 0) -> None:
                body = json.dumps(
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "message": f"injected: {message}",
                        "reason": reason,
                        "code": code,
                        **({"details": {"retryAfterSeconds": retry_after}} if retry_after else {}),
                    }
                ).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                if retry_after:
                    self.send_header("Retry-After", str(retry_after))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self) -> None:
                body = self._body()
                watch = self.command == "GET" and "watch=" in self.path
                fault = proxy.pick(self.command, watch)
                if fault == "409":
                    return self._status(409, "Conflict", "the object has been modified")
                if fault == "429":
                    return self._status(429, "TooManyRequests", "slow down", retry_after=1)
                if fault == "500":
                    return self._status(500, "InternalError", "etcd hiccup")
                if fault == "410":
                    return self._status(410, "Expired", "too old resource version")
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                resp = proxy.pool.request(
                    self.command,
                    proxy.upstream + self.path,
                    body=body,
                    headers=headers,
                    preload_content=False,
                    timeout=urllib3.Timeout(connect=5, read=None if watch else 30),
                )
                with proxy.lock:
                    proxy.forwarded += 1
                self.send_response(resp.status)
                for k, v in resp.headers.items():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                if not watch:
                    data = resp.read()
                    resp.release_conn()
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return None
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                cut_after = proxy.rng.uniform(0.5, 3.0) if fault == "cut" else None
                started = threading.Event()
                timer = None
                if cut_after is not None:
                    timer = threading.Timer(cut_after, resp.shutdown)
                    timer.start()
                try:
                    for chunk in resp.stream(amt=None, decode_content=False):
                        started.set()
                        self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                        self.wfile.flush()
                except Exception:  # the cut, or the client went away
                    self.close_connection = True
                    return None
                finally:
                    if timer is not None:
                        timer.cancel()
                    resp.close()
                if cut_after is not None:
                    self.close_connection = True  # end without the final chunk: a broken stream
                    return None
                self.wfile.write(b"0\r\n\r\n")
                return None

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def pick(self, method: str, watch: bool) -> str | None:
        with self.lock:
            if not self.enabled:
                return None
            roll = self.rng.random()
            if watch:
                if roll < self.watch_fault_rate / 2:
                    fault = "410"
                elif roll < self.watch_fault_rate:
                    fault = "cut"
                else:
                    return None
            elif method in ("POST", "PUT", "PATCH", "DELETE") and roll < self.write_fault_rate:
                fault = self.rng.choice(["409", "429", "500"])
            else:
                return None
            self.injected[fault] += 1
            return fault

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def kubeconfig(self, path: Path) -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "proxy", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}],
            "users": [{"name": "anonymous", "user": {}}],
            "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "anonymous"}}],
            "current-context": "proxy",
        }
        path.write_text(json.dumps(config))
        return path
