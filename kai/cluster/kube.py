"""A thin raw-JSON layer over the official `kubernetes` client.

The official client does configuration (kubeconfig, in-cluster service account, exec
plugins, token refresh) and authentication. What we skip is its typed models: listing 5,000
pods through them costs several times what `json.loads` of the same bytes costs (see
``bench/live.py --measure-client`` and the report in kai/cluster/NOTES.md), and the scheduler
hands plain dicts to ``kai.snapshot.builder`` anyway. Requests and watches go over kept-alive
connections that urllib3 opens with the client's TLS settings, written in one piece and read by
the ``httptools`` parser (:mod:`kai.cluster.wire`); through the client's urllib3 pool manager
when a proxy is configured.

    kube = Kube.from_kubeconfig(path)          # or Kube.in_cluster(), Kube(api_client)
    pods = kube.get("/api/v1/pods")             # dict, raises ApiError on 4xx/5xx
    kube.post(path, body)                       # create
    kube.patch(path, body, merge=True)          # JSON merge patch (or strategic for core kinds)
    resp = kube.stream("/api/v1/pods", {...})   # a streaming response for watches (iter_lines)

Every call raises :class:`ApiError` with the HTTP status (0 for transport errors).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from urllib3.poolmanager import SSL_KEYWORDS

from kai.cluster.wire import Stream, Wire, WireError

# One encoder for every request body (json.dumps makes a new one per call when given separators).
_JSON = json.JSONEncoder(separators=(",", ":"))


class ApiError(Exception):
    """A failed request: `status` is the HTTP status (0 when the server could not be reached)."""

    def __init__(self, status: int, reason: str, body: dict[str, Any] | None = None) -> None:
        self.status = status
        self.reason = reason
        self.body = body or {}
        message = self.body.get("message") if isinstance(self.body, dict) else None
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")

    @property
    def retry_after(self) -> float | None:
        details = self.body.get("details") if isinstance(self.body, dict) else None
        if isinstance(details, dict) and isinstance(details.get("retryAfterSeconds"), int | float):
            return float(details["retryAfterSeconds"])
        return None


@dataclass(frozen=True, slots=True)
class Resource:
    """One kind of object on the API server, and how to reach it."""

    kind: str
    api_version: str  # "v1" or "group/version"
    plural: str
    namespaced: bool

    @property
    def group(self) -> str:
        return self.api_version.split("/", 1)[0] if "/" in self.api_version else ""

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        """The collection path (all namespaces when `namespace` is None), or an object's path."""
        base = f"/api/{self.api_version}" if "/" not in self.api_version else f"/apis/{self.api_version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
            if sub:
                base += f"/{sub}"
        return base


NODES = Resource("Node", "v1", "nodes", False)
PODS = Resource("Pod", "v1", "pods", True)
EVENTS = Resource("Event", "v1", "events", True)
NAMESPACES = Resource("Namespace", "v1", "namespaces", False)
PVCS = Resource("PersistentVolumeClaim", "v1", "persistentvolumeclaims", True)
PVS = Resource("PersistentVolume", "v1", "persistentvolumes", False)
STORAGE_CLASSES = Resource("StorageClass", "storage.k8s.io/v1", "storageclasses", False)
CONFIGMAPS = Resource("ConfigMap", "v1", "configmaps", True)
QUEUES = Resource("Queue", "scheduling.run.ai/v2", "queues", False)
PODGROUPS = Resource("PodGroup", "scheduling.run.ai/v2alpha2", "podgroups", True)
BIND_REQUESTS = Resource("BindRequest", "scheduling.run.ai/v1alpha2", "bindrequests", True)
PRIORITY_CLASSES = Resource("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", False)
TOPOLOGIES = Resource("Topology", "kai.scheduler/v1alpha1", "topologies", False)
LEASES = Resource("Lease", "coordination.k8s.io/v1", "leases", True)
PDBS = Resource("PodDisruptionBudget", "policy/v1", "poddisruptionbudgets", True)
# Dynamic Resource Allocation (GA in Kubernetes 1.34).
DRA_API = "resource.k8s.io/v1"
DEVICE_CLASSES = Resource("DeviceClass", DRA_API, "deviceclasses", False)
RESOURCE_SLICES = Resource("ResourceSlice", DRA_API, "resourceslices", False)
RESOURCE_CLAIMS = Resource("ResourceClaim", DRA_API, "resourceclaims", True)
RESOURCE_CLAIM_TEMPLATES = Resource("ResourceClaimTemplate", DRA_API, "resourceclaimtemplates", True)
DRA_KINDS = (DEVICE_CLASSES, RESOURCE_SLICES, RESOURCE_CLAIMS, RESOURCE_CLAIM_TEMPLATES)


def object_key(obj: Mapping[str, Any]) -> str:
    """`namespace/name` for namespaced objects, `name` for cluster-scoped ones."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


class RateLimiter:
    """A token bucket (client-go's): `burst` tokens, refilled at `qps` per second; `take` waits for one."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._stamp = time.monotonic()
        self._lock = threading.Lock()

    def take(self) -> None:
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.qps)
            self._stamp = now
            self._tokens -= 1.0
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if wait > 0:
            time.sleep(wait)


class Kube:
    """Raw JSON requests through a `kubernetes.client.ApiClient` (its config, auth and connection pool)."""

    def __init__(self, api: k8s.ApiClient, timeout: float = 30.0) -> None:
        self.api = api
        self.timeout = timeout
        self.limiter: RateLimiter | None = None  # client-go's QPS/burst (KAI's --qps, --burst); None: unlimited
        # Requests and watches over kept-alive connections (kai.cluster.wire); None (a proxy, or a host that
        # is no http(s) URL): urllib3's request path through the client's pool manager, as the client does.
        self.wire, self._base_path = _wire_for(api)

    def rate_limit(self, qps: float, burst: int) -> Kube:
        """Limit requests as client-go does: qps > 0 limits, 0 means client-go's default (5/s, burst 10), < 0 none."""
        if qps < 0:
            self.limiter = None
        else:
            self.limiter = RateLimiter(qps or 5.0, burst if qps else 10)
        return self

    @classmethod
    def from_kubeconfig(cls, path: str | None = None, context: str | None = None, pool_size: int = 32) -> Kube:
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(config_file=path, context=context, client_configuration=configuration)
        configuration.connection_pool_maxsize = pool_size
        return cls(k8s.ApiClient(configuration))

    @classmethod
    def in_cluster(cls, pool_size: int = 32) -> Kube:
        configuration = k8s.Configuration()
        k8s_config.load_incluster_config(client_configuration=configuration)
        configuration.connection_pool_maxsize = pool_size
        return cls(k8s.ApiClient(configuration))

    @classmethod
    def connect(cls, kubeconfig: str | None = None, pool_size: int = 32) -> Kube:
        """In-cluster config when running in a pod and no kubeconfig is given, else the kubeconfig."""
        if kubeconfig is None:
            try:
                return cls.in_cluster(pool_size)
            except k8s_config.ConfigException:
                pass
        return cls.from_kubeconfig(kubeconfig, pool_size=pool_size)

    @property
    def host(self) -> str:
        return str(self.api.configuration.host)

    # -- requests ------------------------------------------------------------------------------
    def _send(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float | None] | None = None,
    ) -> urllib3.BaseHTTPResponse:
        """A request through the client's urllib3 pool manager (when there is no :attr:`wire`)."""
        if self.limiter is not None:
            self.limiter.take()
        if query:
            path = f"{path}?{urlencode({k: _query_value(v) for k, v in query.items() if v is not None})}"
        data = body if isinstance(body, bytes) or body is None else _JSON.encode(body)
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        _, url, headers, _, _ = self.api.param_serialize(
            method, path, header_params=headers, auth_settings=["BearerToken"]
        )
        try:
            return self.api.rest_client.pool_manager.request(
                method,
                url,
                body=data,
                headers=headers,
                preload_content=False,
                timeout=_timeout(timeout if timeout is not None else self.timeout),
                retries=False,
            )
        except urllib3.exceptions.HTTPError as err:
            raise ApiError(0, f"{type(err).__name__}: {err}") from err

    def _exchange(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None,
        body: Any,
        content_type: str,
        timeout: float | None,
    ) -> tuple[int, str, bytes]:
        """One request through :attr:`wire`: the official client's headers (its User-Agent, cookie and the
        bearer token its configuration gives now, refresh hook included) on a kept-alive connection."""
        assert self.wire is not None
        if self.limiter is not None:
            self.limiter.take()
        headers = self._headers(body is not None, content_type)
        data = body if body is None or isinstance(body, bytes) else _JSON.encode(body).encode()
        try:
            return self.wire.request(
                method, self._target(path, query), headers, data, timeout if timeout is not None else self.timeout
            )
        except WireError as err:
            raise ApiError(0, str(err)) from err

    def _target(self, path: str, query: Mapping[str, Any] | None) -> str:
        target = self._base_path + path
        if query:
            target = f"{target}?{urlencode({k: _query_value(v) for k, v in query.items() if v is not None})}"
        return target

    def _headers(self, has_body: bool, content_type: str) -> dict[str, str]:
        """What ``ApiClient.param_serialize`` puts in a request's headers, for a raw JSON request."""
        api = self.api
        headers = dict(api.default_headers)
        headers["Accept"] = "application/json"
        if has_body:
            headers["Content-Type"] = content_type
        if api.cookie:
            headers["Cookie"] = api.cookie
        token = api.configuration.auth_settings().get("BearerToken")
        if token and token.get("value"):
            headers[token["key"]] = token["value"]
        return headers

    def request(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> dict[str, Any]:
        if self.wire is not None:
            status, reason, data = self._exchange(method, path, query, body, content_type, timeout)
        else:
            resp = self._send(method, path, query, body, content_type, timeout)
            try:
                data = resp.read()
            except urllib3.exceptions.HTTPError as err:
                raise ApiError(0, f"{type(err).__name__}: {err}") from err
            finally:
                resp.release_conn()
            status, reason = resp.status, str(resp.reason or "")
        try:
            parsed = json.loads(data) if data else {}
        except ValueError:
            parsed = {"message": data[:200].decode("utf-8", "replace")}
        if status >= 400:
            raise ApiError(status, reason, parsed if isinstance(parsed, dict) else None)
        return parsed if isinstance(parsed, dict) else {"items": parsed}

    def get(self, path: str, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self.request("GET", path, query)

    def post(self, path: str, body: Any, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self.request("POST", path, query, body)

    def put(self, path: str, body: Any) -> dict[str, Any]:
        return self.request("PUT", path, None, body)

    def delete(self, path: str, body: Any = None, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self.request("DELETE", path, query, body)

    def patch(self, path: str, body: Any, kind: str = "merge") -> dict[str, Any]:
        """`kind`: merge (RFC 7386), strategic (core kinds only) or json (RFC 6902 list)."""
        content_type = {
            "merge": "application/merge-patch+json",
            "strategic": "application/strategic-merge-patch+json",
            "json": "application/json-patch+json",
        }[kind]
        return self.request("PATCH", path, None, body, content_type)

    def stream(
        self, path: str, query: Mapping[str, Any], read_timeout: float | None = None
    ) -> urllib3.BaseHTTPResponse | Stream:
        """A streaming GET (a watch): the caller reads lines (:func:`iter_lines`) and must `release_conn()` or
        `close()` it (`shutdown()` from another thread ends a blocked read)."""
        if self.wire is not None:
            if self.limiter is not None:
                self.limiter.take()
            try:
                stream = self.wire.stream(self._target(path, query), self._headers(False, ""), 10.0, read_timeout)
                if stream.status < 400:
                    return stream
                try:
                    data = stream.read()
                finally:
                    stream.release_conn()
            except WireError as err:
                raise ApiError(0, str(err)) from err
            try:
                parsed = json.loads(data) if data else {}
            except ValueError:
                parsed = {}
            raise ApiError(stream.status, stream.reason, parsed if isinstance(parsed, dict) else None)
        resp = self._send("GET", path, query, timeout=(10.0, read_timeout) if read_timeout else (10.0, None))
        if resp.status >= 400:
            try:
                data = resp.read()
            finally:
                resp.release_conn()
            try:
                parsed = json.loads(data) if data else {}
            except ValueError:
                parsed = {}
            raise ApiError(resp.status, str(resp.reason or ""), parsed if isinstance(parsed, dict) else None)
        return resp

    def list_all(self, path: str, query: Mapping[str, Any] | None = None, page_size: int = 500) -> dict[str, Any]:
        """Every page of a list, joined: {'items': [...], 'metadata': {'resourceVersion': ...}}."""
        items: list[dict[str, Any]] = []
        params = dict(query or {})
        if page_size:
            params["limit"] = page_size
        while True:
            page = self.get(path, params)
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return {"items": items, "metadata": meta, "kind": page.get("kind")}
            params["continue"] = token


def _wire_for(api: k8s.ApiClient) -> tuple[Wire | None, str]:
    """A :class:`Wire` with the connection settings the official client gave its pool manager, and the
    host's path prefix; (None, "") when its pool manager is a proxy's or the host is no http(s) URL."""
    manager = getattr(getattr(api, "rest_client", None), "pool_manager", None)
    if type(manager) is not urllib3.PoolManager:
        return None, ""
    try:
        url = urllib3.util.parse_url(str(api.configuration.host or ""))
    except urllib3.exceptions.LocationParseError:
        return None, ""
    if url.scheme not in ("http", "https") or not url.host:
        return None, ""
    skip = {"maxsize", "block", "retries", "timeout", "headers"}
    if url.scheme == "http":
        skip.update(SSL_KEYWORDS)
    conn_kw = {k: v for k, v in manager.connection_pool_kw.items() if k not in skip}
    maxsize = int(manager.connection_pool_kw.get("maxsize") or 10)
    host = url.host.strip("[]")  # an IPv6 literal as the socket wants it
    return Wire(url.scheme, host, url.port, conn_kw, maxsize), (url.path or "").rstrip("/")


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _timeout(value: float | tuple[float, float | None] | None) -> urllib3.Timeout | None:
    if value is None:
        return None
    if isinstance(value, tuple):
        return urllib3.Timeout(connect=value[0], read=value[1])
    return urllib3.Timeout(connect=min(10.0, value), read=value)


def iter_lines(resp: urllib3.BaseHTTPResponse | Stream) -> Iterator[bytes]:
    """The newline-separated lines of a streaming response, as they arrive."""
    if isinstance(resp, Stream):
        yield from resp.lines()
        return
    buffer = b""
    for chunk in resp.stream(amt=None, decode_content=True):
        if b"\n" not in chunk:
            buffer += chunk
            continue
        lines = (buffer + chunk).split(b"\n")  # one pass per chunk, not a copy of the rest per line
        buffer = lines.pop()
        for line in lines:
            if line:
                yield line
    if buffer.strip():
        yield buffer
