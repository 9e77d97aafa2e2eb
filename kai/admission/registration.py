"""The ValidatingWebhookConfiguration and MutatingWebhookConfiguration that route requests to the server.

Pure: builds the two `admissionregistration.k8s.io/v1` objects from the CA bundle,
where the server is (a URL base such as `https://127.0.0.1:9443`, or an in-cluster
Service) and the selective-monitoring settings. `kai admission --register` applies
them; the Helm chart renders the same shape.

What goes where (as KAI's operator configures it):

* pod webhooks (mutate on CREATE, validate on CREATE and UPDATE): failurePolicy
  Fail, match condition `object.spec.schedulerName == '<name>'`, a namespaceSelector
  that excludes `kube-system` and the kai namespace and adds the namespace label
  selector, an objectSelector from the pod label selector; with `queue_label_namespaces`
  the namespace must carry the queue label key;
* Queue and PodGroup validation on CREATE and UPDATE.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kai.api import keys

from .review import POD_MUTATE_PATH, POD_VALIDATE_PATH, PODGROUP_VALIDATE_PATH, QUEUE_VALIDATE_PATH

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
DEFAULT_NAME = "kai-admission"


class SelectorError(ValueError):
    """A label selector string that cannot be parsed."""


_TERM = re.compile(
    r"""\s*(?:
        (?P<not>!)\s*(?P<nkey>[\w./-]+)                                  # !key
      | (?P<skey>[\w./-]+)\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)   # key in (a,b)
      | (?P<key>[\w./-]+)\s*(?P<eq>==|=|!=)\s*(?P<value>[\w./-]*)       # key=value, key!=value
      | (?P<ekey>[\w./-]+)                                              # key
    )\s*(?:,|$)""",
    re.VERBOSE,
)


def parse_selector(text: str | None) -> dict[str, Any]:
    """A label selector string (`a=b,c!=d,e in (x,y),f,!g`) as a LabelSelector object ({} selects all)."""
    if not text or not text.strip():
        return {}
    match_labels: dict[str, str] = {}
    expressions: list[dict[str, Any]] = []
    position = 0
    text = text.strip()
    while position < len(text):
        match = _TERM.match(text, position)
        if match is None or match.end() == position:
            raise SelectorError(f"cannot parse label selector {text!r} at {text[position:]!r}")
        position = match.end()
        if match["nkey"]:
            expressions.append({"key": match["nkey"], "operator": "DoesNotExist"})
        elif match["skey"]:
            values = [v.strip() for v in match["values"].split(",") if v.strip()]
            expressions.append({"key": match["skey"], "operator": "In" if match["op"] == "in" else "NotIn",
                                "values": values})
        elif match["key"]:
            if match["eq"] == "!=":
                expressions.append({"key": match["key"], "operator": "NotIn", "values": [match["value"]]})
            else:
                match_labels[match["key"]] = match["value"]
        else:
            expressions.append({"key": match["ekey"], "operator": "Exists"})
    selector: dict[str, Any] = {}
    if match_labels:
        selector["matchLabels"] = match_labels
    if expressions:
        selector["matchExpressions"] = expressions
    return selector


def merge_selectors(*selectors: Mapping[str, Any]) -> dict[str, Any]:
    """The AND of LabelSelector objects."""
    match_labels: dict[str, str] = {}
    expressions: list[dict[str, Any]] = []
    for selector in selectors:
        match_labels.update(selector.get("matchLabels") or {})
        expressions.extend(selector.get("matchExpressions") or [])
    result: dict[str, Any] = {}
    if match_labels:
        result["matchLabels"] = match_labels
    if expressions:
        result["matchExpressions"] = expressions
    return result


@dataclass(frozen=True)
class WebhookSettings:
    """Where the webhooks are served and which objects they see."""

    ca_bundle: bytes
    url_base: str = ""  # e.g. https://127.0.0.1:9443 (used when set)
    service_namespace: str = "kai-scheduler"
    service_name: str = DEFAULT_NAME
    service_port: int = 443
    name: str = DEFAULT_NAME
    scheduler_name: str = keys.SCHEDULER_NAME
    namespace_selector: Mapping[str, Any] = field(default_factory=dict)
    pod_selector: Mapping[str, Any] = field(default_factory=dict)
    excluded_namespaces: tuple[str, ...] = ("kube-system", "kai-scheduler")
    queue_label_namespaces: bool = False
    queue_label_key: str = keys.QUEUE_LABEL
    queue_selector: Mapping[str, Any] = field(default_factory=dict)
    podgroup_namespace_selector: Mapping[str, Any] = field(default_factory=dict)
    failure_policy: str = "Fail"
    timeout_seconds: int = 10
    labels: Mapping[str, str] = field(default_factory=lambda: {"app.kubernetes.io/part-of": "kai"})


def _client_config(settings: WebhookSettings, path: str) -> dict[str, Any]:
    config: dict[str, Any] = {"caBundle": base64.b64encode(settings.ca_bundle).decode()}
    if settings.url_base:
        config["url"] = settings.url_base.rstrip("/") + path
    else:
        config["service"] = {
            "namespace": settings.service_namespace,
            "name": settings.service_name,
            "path": path,
            "port": settings.service_port,
        }
    return config


def _webhook(settings: WebhookSettings, name: str, path: str, operations: list[str], group: str, version: str,
             resource: str, scope: str) -> dict[str, Any]:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": settings.failure_policy,
        "timeoutSeconds": settings.timeout_seconds,
        "clientConfig": _client_config(settings, path),
        "rules": [{
            "apiGroups": [group], "apiVersions": [version], "operations": operations,
            "resources": [resource], "scope": scope,
        }],
    }


def pod_namespace_selector(settings: WebhookSettings) -> dict[str, Any]:
    excluded: dict[str, Any] = {}
    if settings.excluded_namespaces:
        excluded = {"matchExpressions": [
            {"key": NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": list(settings.excluded_namespaces)},
        ]}
    queue: dict[str, Any] = {}
    if settings.queue_label_namespaces:
        queue = {"matchExpressions": [{"key": settings.queue_label_key, "operator": "Exists"}]}
    return merge_selectors(excluded, settings.namespace_selector, queue)


def webhook_configurations(settings: WebhookSettings) -> tuple[dict[str, Any], dict[str, Any]]:
    """(ValidatingWebhookConfiguration, MutatingWebhookConfiguration) for `settings`."""
    condition = [{
        "name": "kai-scheduler-pods",
        "expression": f"object.spec.schedulerName == {_cel_string(settings.scheduler_name)}",
    }]
    namespaces = pod_namespace_selector(settings)
    pod_validate = _webhook(settings, "pod-validation.kai.scheduler", POD_VALIDATE_PATH, ["CREATE", "UPDATE"],
                            "", "v1", "pods", "Namespaced")
    pod_mutate = _webhook(settings, "pod-mutation.kai.scheduler", POD_MUTATE_PATH, ["CREATE"], "", "v1", "pods",
                          "Namespaced")
    for hook in (pod_validate, pod_mutate):
        hook["namespaceSelector"] = namespaces
        hook["objectSelector"] = dict(settings.pod_selector)
        hook["matchConditions"] = condition
    pod_mutate["reinvocationPolicy"] = "IfNeeded"
    queue = _webhook(settings, "queue-validation.kai.scheduler", QUEUE_VALIDATE_PATH, ["CREATE", "UPDATE"],
                     "scheduling.run.ai", "v2", "queues", "Cluster")
    queue["objectSelector"] = dict(settings.queue_selector)
    podgroup = _webhook(settings, "podgroup-validation.kai.scheduler", PODGROUP_VALIDATE_PATH, ["CREATE", "UPDATE"],
                        "scheduling.run.ai", "v2alpha2", "podgroups", "Namespaced")
    podgroup["namespaceSelector"] = dict(settings.podgroup_namespace_selector)
    metadata = {"name": settings.name, "labels": dict(settings.labels)}
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": metadata,
        "webhooks": [pod_validate, queue, podgroup],
    }
    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": dict(metadata),
        "webhooks": [pod_mutate],
    }
    return validating, mutating


def _cel_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
