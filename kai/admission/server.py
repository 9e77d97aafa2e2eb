"""The webhook server: HTTPS (stdlib `http.server` + `ssl`) serving AdmissionReview v1 on KAI's paths.

    server = WebhookServer(PodRules(), certs, host="0.0.0.0", port=9443).start()
    server.port          # the bound port (0 asks the OS for a free one)
    server.stop()

POST `/validate--v1-pod`, `/mutate--v1-pod`, `/validate-scheduling-run-ai-v2-queue`,
`/validate-scheduling-run-ai-v2alpha2-podgroup`; GET `/healthz` and `/readyz`.

Every request posted to a webhook path gets an AdmissionReview back (HTTP 200), as controller-runtime
answers: a body that is empty, larger than MAX_BODY, not UTF-8 JSON or not an AdmissionReview, an object
a rule cannot read, and a review that takes longer than REQUEST_SECONDS all get `allowed: false` with
a status code (400, 413, 500, 504) and a message of at most 1,024 characters. The server never dies on
one request, and what it logs about one is cut short too.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .certs import ServingCertificates
from .review import HANDLERS, BadReview, denial, review, truncate
from .rules import PodRules

log = logging.getLogger("kai.admission")

MAX_BODY = 8 * 1024 * 1024  # an object is at most 3 MiB in etcd; a review holds it and its old version
REQUEST_SECONDS = 10.0  # the API server's default webhook timeout: an answer later than this is useless
MAX_LOG = 300  # characters of a message logged about one request


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
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length > MAX_BODY or length < 0:
            self.close_connection = True  # the body is left unread: this connection cannot carry another
            raw = None
        else:
            raw = self.rfile.read(length)
        status, body = respond(path, raw, self.server.rules, self.server.request_seconds)
        if status == 200:
            self.server.reviews += 1
        self._send(status, body)


def _review_in_time(path: str, body: Any, rules: PodRules, seconds: float) -> dict[str, Any]:
    """`review(...)` in a helper thread, given up on (denied) after `seconds`."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = review(path, body, rules)
        except BaseException as err:  # handed to the request's thread
            outcome["error"] = err

    worker = threading.Thread(target=run, name="kai-admission-review", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        log.warning("webhook %s: no answer within %.0f s: denied", path, seconds)
        return denial(body, 504, "Timeout", f"the review took longer than {seconds:g} s and was abandoned")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def respond(path: str, raw: bytes | None, rules: PodRules, seconds: float = REQUEST_SECONDS) -> tuple[int, Any]:
    """The HTTP status and JSON body answering `raw` posted to `path` (None: a body over MAX_BODY)."""
    if path not in HANDLERS:
        return 404, {"error": truncate(f"no webhook at {path}", MAX_LOG)}
    if raw is None:
        return 200, denial(None, 413, "RequestEntityTooLarge", f"the request is larger than {MAX_BODY} bytes")
    if not raw:
        return 200, denial(None, 400, "BadRequest", "the request body is empty (expected an AdmissionReview)")
    try:
        body = json.loads(raw)
    except RecursionError:
        return 200, denial(None, 400, "BadRequest", "the request is nested too deeply to be an AdmissionReview")
    except ValueError as err:  # not UTF-8, not JSON
        return 200, denial(None, 400, "BadRequest", f"the request is not JSON: {truncate(str(err), MAX_LOG)}")
    try:
        result = _review_in_time(path, body, rules, seconds)
    except BadReview as err:
        return 200, denial(body, 400, "BadRequest", f"not an AdmissionReview: {err}")
    except Exception as err:  # a broken rule or an object of a shape no rule expected: deny, never die
        message = truncate(f"{type(err).__name__}: {err}", MAX_LOG)
        log.error("webhook %s failed: %s", path, message, exc_info=log.isEnabledFor(logging.DEBUG))
        return 200, denial(body, 500, "InternalError", f"kai could not read the object: {message}")
    response = result["response"]
    if not response.get("allowed"):
        log.info("%s: denied: %s", path, truncate(str(response.get("status", {}).get("message")), MAX_LOG))
    return 200, result


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], rules: PodRules, context: ssl.SSLContext) -> None:
        super().__init__(address, _Handler)
        self.rules = rules
        self.context = context
        self.reviews = 0
        self.request_seconds = REQUEST_SECONDS

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
