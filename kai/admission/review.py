"""AdmissionReview v1 in and out: which rule a webhook path runs, and the response it returns.

Pure: `review(path, request_body, rules)` takes the decoded AdmissionReview the API
server posted and returns the AdmissionReview to send back. The HTTPS server
(`kai.admission.server`) only moves bytes.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Any

from kai.api.errors import Problem

from .rules import PodRules, mutate_pod, queue_warnings, validate_pod, validate_podgroup, validate_queue

# The paths KAI's components serve (controller-runtime's naming), so KAI's webhook configurations apply.
POD_VALIDATE_PATH = "/validate--v1-pod"
POD_MUTATE_PATH = "/mutate--v1-pod"
QUEUE_VALIDATE_PATH = "/validate-scheduling-run-ai-v2-queue"
PODGROUP_VALIDATE_PATH = "/validate-scheduling-run-ai-v2alpha2-podgroup"
PATHS = (POD_VALIDATE_PATH, POD_MUTATE_PATH, QUEUE_VALIDATE_PATH, PODGROUP_VALIDATE_PATH)

Request = Mapping[str, Any]


class BadReview(ValueError):
    """The body is not an AdmissionReview v1 request."""


MAX_MESSAGE = 1024  # characters of a denial message: hostile values are never echoed in full


def truncate(text: str, limit: int = MAX_MESSAGE) -> str:
    return text if len(text) <= limit else f"{text[: limit - 40]}... ({len(text)} characters in all)"


def _validation(problems: list[Problem]) -> dict[str, Any]:
    if not problems:
        return {"allowed": True}
    message = truncate("; ".join(str(p) for p in sorted(set(problems))))
    return {"allowed": False, "status": {"code": 403, "reason": "Forbidden", "message": message}}


def denial(body: Any, code: int, reason: str, message: str) -> dict[str, Any]:
    """An AdmissionReview that refuses the request (its uid kept when there is one), as controller-runtime
    answers what it cannot decode: HTTP 200, `allowed: false`, the code in the status."""
    request = body.get("request") if isinstance(body, Mapping) else None
    uid = request.get("uid") if isinstance(request, Mapping) else None
    api_version = body.get("apiVersion") if isinstance(body, Mapping) else None
    return {
        "apiVersion": api_version if isinstance(api_version, str) and len(api_version) < 64 else "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {
            "uid": uid if isinstance(uid, str) and len(uid) <= 128 else "",
            "allowed": False,
            "status": {"code": code, "reason": reason, "message": truncate(message)},
        },
    }


def _pod_validate(request: Request, rules: PodRules) -> dict[str, Any]:
    old = request.get("oldObject") if request.get("operation") == "UPDATE" else None
    return _validation(validate_pod(request.get("object") or {}, rules, old if isinstance(old, Mapping) else None))


def _pod_mutate(request: Request, rules: PodRules) -> dict[str, Any]:
    patch = mutate_pod(request.get("object") or {}, rules)
    if not patch:
        return {"allowed": True}
    encoded = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"allowed": True, "patchType": "JSONPatch", "patch": encoded}


def _queue_validate(request: Request, rules: PodRules) -> dict[str, Any]:
    queue = request.get("object") or {}
    response = _validation(validate_queue(queue))
    warnings = queue_warnings(queue) if response["allowed"] else []
    if warnings:
        response["warnings"] = warnings  # kubectl prints each as "Warning: ..."
    return response


def _podgroup_validate(request: Request, rules: PodRules) -> dict[str, Any]:
    return _validation(validate_podgroup(request.get("object") or {}))


HANDLERS: dict[str, Callable[[Request, PodRules], dict[str, Any]]] = {
    POD_VALIDATE_PATH: _pod_validate,
    POD_MUTATE_PATH: _pod_mutate,
    QUEUE_VALIDATE_PATH: _queue_validate,
    PODGROUP_VALIDATE_PATH: _podgroup_validate,
}


def review(path: str, body: Any, rules: PodRules) -> dict[str, Any]:
    """The AdmissionReview response for `body` posted to `path` (KeyError: unknown path; BadReview: bad body)."""
    handler = HANDLERS[path]
    if not isinstance(body, Mapping) or not isinstance(body.get("request"), Mapping):
        raise BadReview("expected an AdmissionReview with a request")
    request = body["request"]
    uid = request.get("uid", "")
    if not isinstance(uid, str) or len(uid) > 128:
        raise BadReview("request.uid must be a string (a UID)")
    if request.get("operation") == "DELETE" or not isinstance(request.get("object"), Mapping):
        response: dict[str, Any] = {"allowed": True}
    else:
        response = handler(request, rules)
    response["uid"] = uid
    api_version = body.get("apiVersion")
    return {
        "apiVersion": api_version if isinstance(api_version, str) and len(api_version) < 64 else "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response,
    }
