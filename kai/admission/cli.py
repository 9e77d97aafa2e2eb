"""`kai admission`: run the webhook server, and optionally register it with the API server.

    kai admission --port 9443 --cert-dir /etc/kai/tls                  # in a cluster (Helm mounts the certs)
    kai admission --kubeconfig kc --register --url https://127.0.0.1:9443   # a dev cluster

With `--register` the server creates (or updates) its ValidatingWebhookConfiguration and
MutatingWebhookConfiguration with the CA bundle of its certificates, pointing at `--url`
(or at the in-cluster Service), and with the selective-monitoring selectors. Errors are
one line on stderr, never a traceback.
"""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from kai.api import keys

from .certs import DEFAULT_HOSTS, default_cert_dir, ensure_certificates
from .registration import SelectorError, WebhookSettings, parse_selector, webhook_configurations
from .rules import DEFAULT_GPU_RUNTIME_CLASS, PodRules
from .server import WebhookServer

VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


def apply_webhook_configurations(kube: Any, settings: WebhookSettings) -> None:
    """Create or replace both webhook configurations (`kube` is a `kai.cluster.kube.Kube`)."""
    from kai.cluster.kube import ApiError

    validating, mutating = webhook_configurations(settings)
    for base, body in ((VALIDATING, validating), (MUTATING, mutating)):
        path = f"{base}/{settings.name}"
        try:
            current = kube.get(path)
        except ApiError as err:
            if err.status != 404:
                raise
            kube.post(base, body)
            continue
        body = {**body, "metadata": {**body["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}}
        kube.put(path, body)


def delete_webhook_configurations(kube: Any, name: str) -> None:
    from kai.cluster.kube import ApiError

    for base in (VALIDATING, MUTATING):
        try:
            kube.delete(f"{base}/{name}")
        except ApiError as err:
            if err.status != 404:
                raise


def admission(
    port: Annotated[int, typer.Option(help="HTTPS port to serve the webhooks on.")] = 9443,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "0.0.0.0",
    cert_dir: Annotated[
        Path | None,
        typer.Option(help="Folder with tls.crt/tls.key (and ca.crt); generated if empty (default: a private folder "
                     "kai-admission-certs-<uid> in the temporary directory)."),
    ] = None,
    cert_host: Annotated[list[str] | None, typer.Option(help="Host name or IP for a generated certificate "
                                                              "(repeatable).")] = None,
    scheduler_name: Annotated[str, typer.Option(help="Pods with this schedulerName are handled.")] = (
        keys.SCHEDULER_NAME
    ),
    gpu_sharing: Annotated[bool, typer.Option(help="Allow gpu-fraction / gpu-memory requests.")] = False,
    gpu_runtime_class: Annotated[str, typer.Option(help="runtimeClassName set on GPU pods; empty disables.")] = (
        DEFAULT_GPU_RUNTIME_CLASS
    ),
    register: Annotated[bool, typer.Option(help="Create/update the webhook configurations at start.")] = False,
    url: Annotated[str, typer.Option(help="With --register: the URL base the API server calls "
                                          "(default: the in-cluster Service).")] = "",
    service_namespace: Annotated[str, typer.Option(help="With --register: namespace of the Service.")] = (
        "kai-scheduler"
    ),
    service_name: Annotated[str, typer.Option(help="With --register: name of the Service.")] = "kai-admission",
    webhook_name: Annotated[str, typer.Option(help="Name of the webhook configurations.")] = "kai-admission",
    namespace_selector: Annotated[str, typer.Option(help="Label selector: only pods in matching namespaces.")] = "",
    pod_selector: Annotated[str, typer.Option(help="Label selector: only matching pods.")] = "",
    queue_label_namespaces: Annotated[bool, typer.Option(help="Only namespaces carrying the queue label key.")] = (
        False
    ),
    kubeconfig: Annotated[Path | None, typer.Option(help="Kubeconfig (default: in-cluster, then ~/.kube/config).")] = (
        None
    ),
    verbose: Annotated[bool, typer.Option("-v", "--verbose", help="Log every request.")] = False,
) -> None:
    """Serve the admission webhooks (GPU-sharing validation, GPU runtime class, Queue and PodGroup checks)."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        namespaces = parse_selector(namespace_selector)
        pods = parse_selector(pod_selector)
    except SelectorError as err:
        raise _fail(str(err)) from None
    hosts = tuple(cert_host or ()) or (*DEFAULT_HOSTS, f"{service_name}.{service_namespace}.svc")
    cert_dir = cert_dir or default_cert_dir()
    try:
        certs = ensure_certificates(cert_dir, hosts)
    except OSError as err:
        raise _fail(f"--cert-dir {cert_dir}: {err.strerror or err}") from None
    rules = PodRules(scheduler_name=scheduler_name, gpu_sharing=gpu_sharing, gpu_runtime_class=gpu_runtime_class)
    try:
        server = WebhookServer(rules, certs, host=host, port=port)
    except OSError as err:
        raise _fail(f"cannot listen on {host}:{port}: {err.strerror or err}") from None
    if register:
        from kai.cluster.kube import Kube

        settings = WebhookSettings(
            ca_bundle=certs.ca_bundle, url_base=url, service_namespace=service_namespace,
            service_name=service_name, name=webhook_name, scheduler_name=scheduler_name,
            namespace_selector=namespaces, pod_selector=pods, queue_label_namespaces=queue_label_namespaces,
        )
        try:
            apply_webhook_configurations(Kube.connect(str(kubeconfig) if kubeconfig else None), settings)
        except Exception as err:  # any failure (bad kubeconfig, refused, 403) is one line for the user
            raise _fail(f"cannot register the webhooks: {err}") from None
    logging.getLogger("kai.admission").info(
        "serving webhooks on https://%s:%d (certificates %s)", host, server.port,
        "generated" if certs.generated else f"from {cert_dir}",
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)
