"""Reading Dynamic Resource Allocation objects (`resource.k8s.io` v1, and the v1beta1 / v1beta2 shapes)
into the snapshot: ResourceSlices' devices, DeviceClasses, ResourceClaims and ResourceClaimTemplates,
and each pod's `spec.resourceClaims`.

A pod's claim entry names a ResourceClaim (`resourceClaimName`) or a ResourceClaimTemplate. For a
template, the claim is the one `status.resourceClaimStatuses` names, else the claim the pod owns for that
entry; when there is none yet (the resource-claim controller makes it as soon as the pod exists), a
claim is made here from the template, named `<pod>-<entry>` and marked `generated`, so that the pod is
scheduled as it will be once its claim exists.

What the API server would refuse (a request without a device class, a count below 1, an unknown
allocation mode) is a problem naming the object and field; the rest is read as written.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from kai.api.quantity import QuantityError, as_float
from kai.model import (
    DRA_PRIORITIZED_LIST,
    AllocatedDevice,
    ClusterSnapshot,
    Device,
    DeviceClassInfo,
    DeviceRequest,
    MatchConstraint,
    PodClaim,
    PodInfo,
    ResourceClaimInfo,
    SemVer,
    UnsupportedUse,
)
from kai.model.dra import ALL, EXACT_COUNT, is_gpu_class

if TYPE_CHECKING:
    from kai.snapshot.builder import SnapshotBuilder

GROUP = "resource.k8s.io"
KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"  # set by the resource-claim controller
PRIORITIZED_LIST = DRA_PRIORITIZED_LIST


def qualified(name: str, driver: str) -> str:
    """An attribute or capacity name with its domain (`model` of driver d is `d/model`)."""
    return name if "/" in name else f"{driver}/{name}"


def _selectors(raw: Any) -> tuple[str, ...]:
    out = []
    for sel in raw if isinstance(raw, list) else []:
        expr = ((sel or {}).get("cel") or {}).get("expression") if isinstance(sel, dict) else None
        if isinstance(expr, str) and expr.strip():
            out.append(expr)
    return tuple(out)


def _config(devices: Any) -> tuple[dict[str, Any], ...]:
    raw = devices.get("config") if isinstance(devices, dict) else None
    return tuple(c for c in raw or [] if isinstance(c, dict))


class DraReader:
    """Reads the DRA kinds the builder collected; `attach` then resolves each pod's claims."""

    def __init__(self, builder: SnapshotBuilder, snapshot: ClusterSnapshot) -> None:
        self.b = builder
        self.snapshot = snapshot
        self.templates: dict[str, tuple[tuple[DeviceRequest, ...], tuple[MatchConstraint, ...], dict[str, Any]]] = {}
        self.owned: dict[tuple[str, str], str] = {}  # (pod namespace/name, claim entry) -> claim key
        self.template_config: dict[str, tuple[dict[str, Any], ...]] = {}

    # -- objects ------------------------------------------------------------------------------
    def read(self) -> None:
        by_kind = self.b.by_kind
        for obj in by_kind.get("DeviceClass", []):
            name = obj["metadata"]["name"]
            spec = obj.get("spec") or {}
            config = tuple(c for c in spec.get("config") or [] if isinstance(c, dict))
            self.snapshot.device_classes[name] = DeviceClassInfo(name, _selectors(spec.get("selectors")), config)
        for obj in by_kind.get("ResourceSlice", []):
            self._slice(obj)
        gpus: dict[str, int] = {}
        for device in self.snapshot.devices:
            if device.node and is_gpu_class(device.driver):
                gpus[device.node] = gpus.get(device.node, 0) + 1
        for node in self.snapshot.nodes:
            node.dra_gpus = gpus.get(node.name, 0)
        for obj in by_kind.get("ResourceClaimTemplate", []):
            meta = obj["metadata"]
            key = f"{meta.get('namespace') or 'default'}/{meta['name']}"
            spec = ((obj.get("spec") or {}).get("spec") or {}).get("devices") or {}
            parsed = self._claim_spec("ResourceClaimTemplate", obj, "spec.spec.devices", spec)
            if parsed is not None:
                self.templates[key] = (*parsed, meta)
                self.template_config[key] = _config(spec)
        for obj in by_kind.get("ResourceClaim", []):
            claim = self._claim(obj)
            if claim is None:
                continue
            if claim.key in self.snapshot.resource_claims:
                self.b._problem("ResourceClaim", obj, "metadata.name", "is defined twice")
                continue
            self.snapshot.resource_claims[claim.key] = claim

    def _slice(self, obj: dict[str, Any]) -> None:
        spec = obj.get("spec") or {}
        driver = spec.get("driver")
        if not isinstance(driver, str) or not driver:
            self.b._problem("ResourceSlice", obj, "spec.driver", "is required")
            return
        pool = str(((spec.get("pool") or {}).get("name")) or "")
        node = str(spec.get("nodeName") or "")
        terms: tuple[Any, ...] = ()
        selector = spec.get("nodeSelector")
        if isinstance(selector, dict):
            parsed = self.b._node_selector_terms(
                "ResourceSlice", obj, "spec.nodeSelector.nodeSelectorTerms", selector.get("nodeSelectorTerms") or []
            )
            if parsed is None:
                return
            terms = parsed
        all_nodes = bool(spec.get("allNodes"))
        if not node and not all_nodes and not terms and not spec.get("perDeviceNodeSelection"):
            self.b._problem("ResourceSlice", obj, "spec", "must set one of nodeName, nodeSelector or allNodes")
            return
        for index, raw in enumerate(spec.get("devices") or []):
            if not isinstance(raw, dict) or not raw.get("name"):
                self.b._problem("ResourceSlice", obj, f"spec.devices[{index}].name", "is required")
                continue
            body = raw.get("basic") if isinstance(raw.get("basic"), dict) else raw  # v1beta1 nests it
            device = Device(
                driver=driver,
                pool=pool,
                name=str(raw["name"]),
                node=str(body.get("nodeName") or node),
                all_nodes=bool(body.get("allNodes")) or all_nodes,
                node_terms=terms,
                attributes=self._attributes(obj, index, driver, body.get("attributes")),
                capacity=self._capacity(obj, index, driver, body.get("capacity")),
            )
            self.snapshot.devices.append(device)

    def _attributes(self, obj: dict[str, Any], index: int, driver: str, raw: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in (raw or {}).items() if isinstance(raw, dict) else ():
            if not isinstance(value, dict):
                continue
            for kind in ("int", "bool", "string", "version"):
                if kind in value:
                    v = value[kind]
                    ok = {
                        "int": isinstance(v, int) and not isinstance(v, bool),
                        "bool": isinstance(v, bool),
                        "string": isinstance(v, str),
                        "version": isinstance(v, str),
                    }[kind]
                    if not ok:
                        where = f"spec.devices[{index}].attributes[{name}].{kind}"
                        self.b._problem("ResourceSlice", obj, where, f"must be a {kind}, got {v!r}")
                        break
                    out[qualified(str(name), driver)] = SemVer(v) if kind == "version" else v
                    break
        return out

    def _capacity(self, obj: dict[str, Any], index: int, driver: str, raw: Any) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, value in (raw or {}).items() if isinstance(raw, dict) else ():
            amount = value.get("value") if isinstance(value, dict) else value
            try:
                out[qualified(str(name), driver)] = as_float(amount)
            except QuantityError:
                where = f"spec.devices[{index}].capacity[{name}].value"
                self.b._problem("ResourceSlice", obj, where, f"is not a quantity: {amount!r}")
        return out

    def _claim_spec(
        self, kind: str, obj: dict[str, Any], where: str, devices: dict[str, Any]
    ) -> tuple[tuple[DeviceRequest, ...], tuple[MatchConstraint, ...]] | None:
        requests: list[DeviceRequest] = []
        for index, raw in enumerate(devices.get("requests") or []):
            at = f"{where}.requests[{index}]"
            if not isinstance(raw, dict) or not raw.get("name"):
                self.b._problem(kind, obj, f"{at}.name", "is required")
                return None
            if raw.get("firstAvailable"):
                requests.append(DeviceRequest(str(raw["name"]), "", (), PRIORITIZED_LIST, 0))
                continue
            body = raw.get("exactly") if isinstance(raw.get("exactly"), dict) else raw  # v1 nests it
            body_at = f"{at}.exactly" if body is not raw else at
            device_class = body.get("deviceClassName")
            if not isinstance(device_class, str) or not device_class:
                self.b._problem(kind, obj, f"{body_at}.deviceClassName", "is required")
                return None
            mode = str(body.get("allocationMode") or EXACT_COUNT)
            if mode not in (EXACT_COUNT, ALL):
                self.b._problem(kind, obj, f"{body_at}.allocationMode", f"must be ExactCount or All, got {mode!r}")
                return None
            count = body.get("count", 1 if mode == EXACT_COUNT else 0)
            if mode == EXACT_COUNT and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
                self.b._problem(kind, obj, f"{body_at}.count", f"must be a whole number >= 1, got {count!r}")
                return None
            requests.append(
                DeviceRequest(str(raw["name"]), device_class, _selectors(body.get("selectors")), mode, int(count or 0))
            )
        constraints = []
        for raw in devices.get("constraints") or []:
            if isinstance(raw, dict) and isinstance(raw.get("matchAttribute"), str):
                names = tuple(str(r) for r in raw.get("requests") or [])
                constraints.append(MatchConstraint(raw["matchAttribute"], names))
        return tuple(requests), tuple(constraints)

    def _claim(self, obj: dict[str, Any]) -> ResourceClaimInfo | None:
        meta, status = obj["metadata"], obj.get("status") or {}
        namespace = str(meta.get("namespace") or "default")
        devices = (obj.get("spec") or {}).get("devices") or {}
        parsed = self._claim_spec("ResourceClaim", obj, "spec.devices", devices if isinstance(devices, dict) else {})
        if parsed is None:
            return None
        owner = ""
        for ref in meta.get("ownerReferences") or []:
            if isinstance(ref, dict) and ref.get("kind") == "Pod" and ref.get("name"):
                owner = f"{namespace}/{ref['name']}"
        annotations = meta.get("annotations") or {}
        if owner and annotations.get(POD_CLAIM_NAME_ANNOTATION):
            self.owned[(owner, str(annotations[POD_CLAIM_NAME_ANNOTATION]))] = f"{namespace}/{meta['name']}"
        allocation = status.get("allocation")
        allocated, results, terms = False, [], ()
        if isinstance(allocation, dict):
            allocated = True
            for raw in ((allocation.get("devices") or {}).get("results")) or []:
                if isinstance(raw, dict):
                    results.append(
                        AllocatedDevice(
                            str(raw.get("request") or ""),
                            str(raw.get("driver") or ""),
                            str(raw.get("pool") or ""),
                            str(raw.get("device") or ""),
                        )
                    )
            selector = allocation.get("nodeSelector")
            if isinstance(selector, dict):
                parsed_terms = self.b._node_selector_terms(
                    "ResourceClaim",
                    obj,
                    "status.allocation.nodeSelector.nodeSelectorTerms",
                    selector.get("nodeSelectorTerms") or [],
                )
                if parsed_terms is None:
                    return None
                terms = parsed_terms
        reserved = tuple(
            f"{namespace}/{ref['name']}"
            for ref in status.get("reservedFor") or []
            if isinstance(ref, dict) and ref.get("name") and (ref.get("resource") or "pods") == "pods"
        )
        return ResourceClaimInfo(
            namespace=namespace,
            name=meta["name"],
            uid=str(meta.get("uid") or ""),
            requests=parsed[0],
            constraints=parsed[1],
            labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
            queue=str((meta.get("labels") or {}).get(self.b.queue_label_key) or ""),
            owner_pod=owner,
            allocated=allocated,
            devices=tuple(results),
            node_terms=terms,
            reserved_for=reserved,
            deleting=bool(meta.get("deletionTimestamp")),
            config=_config(devices),
        )

    # -- pods ---------------------------------------------------------------------------------
    def attach(self, obj: dict[str, Any], pod: PodInfo) -> None:
        """Resolve the pod's `spec.resourceClaims` and book the GPUs of its claims (as KAI does)."""
        entries = (obj.get("spec") or {}).get("resourceClaims")
        if not isinstance(entries, list) or not entries:
            return
        statuses = {
            str(s.get("name")): str(s.get("resourceClaimName"))
            for s in (obj.get("status") or {}).get("resourceClaimStatuses") or []
            if isinstance(s, dict) and s.get("resourceClaimName")
        }
        claims: list[PodClaim] = []
        for entry in entries:
            if not isinstance(entry, dict) or not entry.get("name"):
                continue
            name = str(entry["name"])
            if entry.get("resourceClaimName"):
                claims.append(PodClaim(name, f"{pod.namespace}/{entry['resourceClaimName']}"))
                continue
            template = str(entry.get("resourceClaimTemplateName") or "")
            if not template:
                claims.append(PodClaim(name, ""))
                continue
            key = self.owned.get((pod.key, name))
            if name in statuses:
                key = f"{pod.namespace}/{statuses[name]}"
            if key is None:
                key = self._generate(pod, name, template)
            claims.append(PodClaim(name, key, template))
        pod.resource_claims = tuple(claims)
        found = [self.snapshot.resource_claims[c.claim] for c in claims if c.claim in self.snapshot.resource_claims]
        gpus = sum(c.gpu_count for c in found)
        if gpus:
            pod.gpu = dataclasses.replace(pod.gpu, dra=gpus)
        for claim in found:
            for request in claim.requests:
                if request.mode == PRIORITIZED_LIST:
                    self.snapshot.unsupported.append(
                        UnsupportedUse(
                            PRIORITIZED_LIST,
                            "Pod",
                            pod.key,
                            "spec.resourceClaims",
                            f"ResourceClaim {claim.key} request {request.name} (firstAvailable)",
                        )
                    )

    def _generate(self, pod: PodInfo, entry: str, template: str) -> str:
        """The claim the resource-claim controller will make for the pod's entry from the template."""
        found = self.templates.get(f"{pod.namespace}/{template}")
        key = f"{pod.namespace}/{pod.name}-{entry}"
        if found is None:
            return ""  # the plugin says the template is missing
        requests, constraints, meta = found
        config = self.template_config.get(f"{pod.namespace}/{template}", ())
        if key not in self.snapshot.resource_claims:
            labels = (meta.get("labels") or {}) if isinstance(meta, dict) else {}
            self.snapshot.resource_claims[key] = ResourceClaimInfo(
                namespace=pod.namespace,
                name=f"{pod.name}-{entry}",
                requests=requests,
                constraints=constraints,
                labels={str(k): str(v) for k, v in labels.items()},
                template=template,
                generated=True,
                owner_pod=pod.key,
                config=config,
            )
        return key
