"""The webhook server: HTTPS (stdlib `http.server` + `ssl`) serving AdmissionReview v1 on KAI's paths.

    server = WebhookServer(PodRules(), certs, host="0.0.0.0", port=9443).start()
    server.port          # the bound port (0 asks the OS for a free one)
    server.stop()

POST `/validate--v1-pod`, `/mutate--v1-pod`, `/validate-scheduling-run-ai-v2-queue`,
`/validate-scheduling-run-ai-v2alpha2-podgroup`; GET `/healthz` and `/readyz`. A body
that is not an AdmissionReview gets HTTP 400; a rule that raises gets an HTTP 500 with
the error (the API server then applies the webhook's failurePolicy): the server never dies
on one request.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .certs import ServingCertificates
from .review import BadReview, review
from .rules import PodRules

log = logging.getLogger("kai.admission")

MAX_BODY = 8 * 1024 * 1024


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path in ("/healthz", "/readyz", "/livez"):
            self._send(200, {"status": "ok"})
        else:
            self._send(404, {"error": f"no such path {self.path}"})

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if 0 < length <= MAX_BODY else b""
        status, body = respond(path, raw, self.server.rules)
        if status == 200:
            self.server.reviews += 1
        self._send(status, body)


def respond(path: str, raw: bytes, rules: PodRules) -> tuple[int, Any]:
    """The HTTP status and JSON body answering `raw` posted to `path`."""
    if not raw:
        return 400, {"error": "expected a JSON AdmissionReview body"}
    try:
        body = json.loads(raw)
        result = review(path, body, rules)
    except KeyError:
        return 404, {"error": f"no webhook at {path}"}
    except (ValueError, BadReview) as err:
        return 400, {"error": f"bad AdmissionReview: {err}"}
    except Exception as err:  # a broken rule must not take the server down
        log.exception("webhook %s failed", path)
        return 500, {"error": f"{type(err).__name__}: {err}"}
    response = result["response"]
    if not response.get("allowed"):
        log.info("%s: denied: %s", path, response.get("status", {}).get("message"))
    return 200, result


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], rules: PodRules, context: ssl.SSLContext) -> None:
        super().__init__(address, _Handler)
        self.rules = rules
        self.context = context
        self.reviews = 0

    def get_request(self) -> tuple[Any, Any]:
        sock, address = self.socket.accept()
        sock.settimeout(30)
        # Handshake in the handler thread (not here), so a stalled client cannot block accepts.
        return self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("connection from %s failed", client_address, exc_info=True)


class WebhookServer:
    """The admission webhooks over TLS, in a background thread."""

    def __init__(self, rules: PodRules, certs: ServingCertificates, host: str = "127.0.0.1", port: int = 0) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(str(certs.cert_file), str(certs.key_file))
        self.certs = certs
        self._server = _Server((host, port), rules, context)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    @property
    def reviews(self) -> int:
        """AdmissionReviews answered so far."""
        return self._server.reviews

    @property
    def rules(self) -> PodRules:
        return self._server.rules

    def start(self) -> WebhookServer:
        self._thread = threading.Thread(target=self._server.serve_forever, name="kai-admission", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
