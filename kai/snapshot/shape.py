"""The shape of every field the snapshot builder reads, checked before the builder reads it.

`check_shapes(objects)` walks each object of a kind the builder accepts (Node, Queue, PodGroup,
PriorityClass, Pod, Topology, and the DRA kinds DeviceClass, ResourceSlice, ResourceClaim,
ResourceClaimTemplate) along a schema of the fields the builder reads, and:

* turns a scalar where a string belongs (`name: 1`, `name: 2026-01-01`, a label value `true`) into the
  string the API server would store, as kubectl would have sent it;
* reports a value of the wrong type (a map or list where a string, number or timestamp belongs, a
  list where a map belongs, a string where a list belongs) as a Problem naming the object and the
  field path, and removes the value, so that the builder sees the field as unset and cannot fail on it;
* refuses what means nothing or what no node has: a number that is not finite, an integer outside
  int32 where Kubernetes stores an int32, a node advertising more than MAX_GPUS_PER_NODE GPUs, a
  pod spreading a fraction over more than that many devices.

Fields the builder does not read are not looked at. The walk is iterative, so a value nested
thousands deep costs nothing and never exhausts the stack, and every value shown in a message is
cut short (`kai.api.errors.show`).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from typing import Any

from kai.api import keys
from kai.api.errors import Problem, show
from kai.api.quantity import QuantityError, as_float
from kai.snapshot.builder import ACCEPTED_KINDS

# A node with more GPUs than this is refused: the largest servers have 8 to 16, a rack-scale node
# a few hundred; beyond this the number is a typo or an attack (10^8 GPUs takes gigabytes of arrays).
MAX_GPUS_PER_NODE = 4096
INT32 = (-(2**31), 2**31 - 1)
MAX_SUBGROUPS = 1000  # `maxItems` of spec.subGroups in the PodGroup CRD (and the admission webhook's limit)
MAX_SUBGROUP_DEPTH = 32  # levels of sub-group parents, as the admission webhook allows
MAX_QUEUE_DEPTH = 100  # levels of queues under a top-level queue (KAI's clusters use two to four)
MAX_NUMBER = 2.0**63  # queue quotas and limits: beyond int64 a number is not a quota


# -- the schema: a node is a check applied to a value; containers say what is inside ----------------------

Check = Callable[[Any], "tuple[bool, Any, str]"]  # -> (ok, normalised value, what it should be)


class Str:
    """A string; other scalars are taken in their string form."""


class Time:
    """An RFC 3339 timestamp (a string, or what YAML made of it)."""


class Int32:
    """A whole number within int32 (Kubernetes' `int32` fields)."""

    def __init__(self, message: str = "must be an integer") -> None:
        self.message = message


class Number:
    """A finite number (int or float)."""


class Duration:
    """A Go duration string or a number of seconds."""


class Quantities:
    """A map of resource name to quantity (each a string or a number)."""


# What the walk does with a field, decided once per schema node (see `_code`).
_TEXT_CODE, _MAP_CODE, _LIST_CODE, _OTHER_CODE = range(4)


def _code(schema: Any) -> int:
    if isinstance(schema, Str | Time):
        return _TEXT_CODE  # a string is kept as it is
    if isinstance(schema, Map):
        return _MAP_CODE
    if isinstance(schema, List):
        return _LIST_CODE
    return _OTHER_CODE


class Map:
    def __init__(self, fields: dict[str, Any] | None = None, values: Any = None, what: str = "a map") -> None:
        self.fields = fields or {}
        self.values = values  # every value (labels, annotations, nodeSelector)
        self.what = what
        self.strings = type(values) is Str  # a map of strings (labels, annotations)
        self.entries = [(key, child, _code(child)) for key, child in self.fields.items()]  # in the schema's order


class List:
    def __init__(self, item: Any) -> None:
        self.item = item
        self.code = _code(item)


STRINGS = Map(values=Str())
METADATA = Map(
    {
        "name": Str(),
        "namespace": Str(),
        "uid": Str(),
        "labels": STRINGS,
        "annotations": STRINGS,
        "creationTimestamp": Time(),
    }
)
RESOURCES = Map({"limits": Quantities(), "requests": Quantities()})
CONTAINER = Map({"name": Str(), "resources": RESOURCES})
REQUIREMENT = Map({"key": Str(), "operator": Str(), "values": List(Str())})
TERM = Map({"matchExpressions": List(REQUIREMENT), "matchFields": List(REQUIREMENT)})
TOPOLOGY_CONSTRAINT = Map({"topology": Str(), "requiredTopologyLevel": Str(), "preferredTopologyLevel": Str()})
QUEUE_RESOURCE = Map(
    {"quota": Number(), "overQuotaWeight": Number(), "limit": Number()},
    what="a map with quota, overQuotaWeight, limit",
)

# Dynamic Resource Allocation (resource.k8s.io/v1; v1beta1 keeps a request's fields beside its name and a
# device's under `basic`).
CEL_SELECTORS = List(Map({"cel": Map({"expression": Str()})}))
DRA_METADATA = Map(
    {
        **METADATA.fields,
        "ownerReferences": List(Map({"kind": Str(), "name": Str(), "uid": Str()})),
        "deletionTimestamp": Time(),
    }
)
NODE_SELECTOR = Map({"nodeSelectorTerms": List(TERM)})
EXACT_REQUEST = {"deviceClassName": Str(), "allocationMode": Str(), "selectors": CEL_SELECTORS}
CLAIM_DEVICES = Map(
    {
        "requests": List(Map({"name": Str(), "exactly": Map(EXACT_REQUEST), **EXACT_REQUEST})),
        "constraints": List(Map({"requests": List(Str()), "matchAttribute": Str()})),
    }
)
DEVICE_BODY = {"attributes": Map(values=Map()), "capacity": Map(values=Map())}
DRA_SCHEMAS: dict[str, Map] = {
    "DeviceClass": Map({"metadata": DRA_METADATA, "spec": Map({"selectors": CEL_SELECTORS})}),
    "ResourceSlice": Map(
        {
            "metadata": DRA_METADATA,
            "spec": Map(
                {
                    "driver": Str(),
                    "nodeName": Str(),
                    "pool": Map({"name": Str()}),
                    "nodeSelector": NODE_SELECTOR,
                    "devices": List(Map({"name": Str(), **DEVICE_BODY, "basic": Map(DEVICE_BODY)})),
                }
            ),
        }
    ),
    "ResourceClaim": Map(
        {
            "metadata": DRA_METADATA,
            "spec": Map({"devices": CLAIM_DEVICES}),
            "status": Map(
                {
                    "allocation": Map(
                        {
                            "devices": Map(
                                {
                                    "results": List(
                                        Map({"request": Str(), "driver": Str(), "pool": Str(), "device": Str()})
                                    )
                                }
                            ),
                            "nodeSelector": NODE_SELECTOR,
                        }
                    ),
                    "reservedFor": List(Map({"resource": Str(), "name": Str(), "uid": Str()})),
                }
            ),
        }
    ),
    "ResourceClaimTemplate": Map(
        {
            "metadata": DRA_METADATA,
            "spec": Map({"metadata": Map({"labels": STRINGS}), "spec": Map({"devices": CLAIM_DEVICES})}),
        }
    ),
}

SCHEMAS: dict[str, Map] = {
    "Node": Map(
        {
            "metadata": METADATA,
            "spec": Map({"taints": List(Map({"key": Str(), "value": Str(), "effect": Str()}))}),
            "status": Map({"allocatable": Quantities(), "conditions": List(Map({"type": Str(), "status": Str()}))}),
        }
    ),
    "Queue": Map(
        {
            "metadata": METADATA,
            "spec": Map(
                {
                    "parentQueue": Str(),
                    "displayName": Str(),
                    "priority": Int32(),
                    "preemptMinRuntime": Duration(),
                    "reclaimMinRuntime": Duration(),
                    "resources": Map(
                        {"gpu": QUEUE_RESOURCE, "cpu": QUEUE_RESOURCE, "memory": QUEUE_RESOURCE},
                        what="a map with gpu, cpu and memory",
                    ),
                }
            ),
        }
    ),
    "PodGroup": Map(
        {
            "metadata": METADATA,
            "spec": Map(
                {
                    "minMember": Int32("must be a whole number >= 1"),
                    "queue": Str(),
                    "priorityClassName": Str(),
                    "preemptibility": Str(),
                    "topologyConstraint": TOPOLOGY_CONSTRAINT,
                    "subGroups": List(
                        Map(
                            {
                                "name": Str(),
                                "minMember": Int32("must be a whole number >= 1"),
                                "parent": Str(),
                                "topologyConstraint": TOPOLOGY_CONSTRAINT,
                            }
                        )
                    ),
                }
            ),
        }
    ),
    "PriorityClass": Map({"metadata": METADATA, "value": Int32()}),
    "Pod": Map(
        {
            "metadata": METADATA,
            "spec": Map(
                {
                    "containers": List(CONTAINER),
                    "initContainers": List(CONTAINER),
                    "overhead": Quantities(),
                    "nodeName": Str(),
                    "schedulerName": Str(),
                    "priorityClassName": Str(),
                    "nodeSelector": STRINGS,
                    "tolerations": List(Map({"key": Str(), "operator": Str(), "value": Str(), "effect": Str()})),
                    "affinity": Map(
                        {
                            "nodeAffinity": Map(
                                {
                                    "requiredDuringSchedulingIgnoredDuringExecution": Map(
                                        {"nodeSelectorTerms": List(TERM)}
                                    )
                                }
                            )
                        }
                    ),
                    "schedulingGates": List(Map({"name": Str()})),
                    "resourceClaims": List(
                        Map({"name": Str(), "resourceClaimName": Str(), "resourceClaimTemplateName": Str()})
                    ),
                }
            ),
            "status": Map(
                {"phase": Str(), "resourceClaimStatuses": List(Map({"name": Str(), "resourceClaimName": Str()}))}
            ),
        }
    ),
    "Topology": Map({"metadata": METADATA, "spec": Map({"levels": List(Map({"nodeLabel": Str()}))})}),
    **DRA_SCHEMAS,
}
KINDS = {gk for gk in ACCEPTED_KINDS if gk[1] in SCHEMAS}  # the builder's kinds that have a schema here


def _type_name(value: Any) -> str:
    if isinstance(value, dict):
        return "a map"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, bytes):
        return "binary data"
    return f"a {type(value).__name__}"


def _string_form(value: Any) -> str | None:
    """What the API server would store for a scalar given where a string belongs (None: not a scalar)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else None
    if isinstance(value, dt.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, dt.date):
        return value.isoformat()
    return None


_DROPPED = object()
_TEXT = (Str, Time)  # leaf schemas that keep a string value as it is


class _Walk:
    def __init__(self, kind: str, obj: dict[str, Any]) -> None:
        self.kind, self.target = kind, obj
        self.name: str | None = None  # `describe(kind, obj)`, worked out at the first problem
        self.problems: list[Problem] = []

    @property
    def obj(self) -> str:
        if self.name is None:
            self.name = describe(self.kind, self.target)
        return self.name

    def problem(self, path: str, message: str) -> None:
        self.problems.append(Problem(self.obj, path, message))

    def scalar(self, schema: Any, value: Any, path: str) -> tuple[bool, Any]:
        """(keep, normalised value) for a leaf; a problem is recorded when keep is False."""
        if isinstance(schema, Str):
            text = _string_form(value)
            if text is None:
                self.problem(path, f"must be a string, got {_type_name(value)}: {show(value)}")
                return False, None
            return True, text
        if isinstance(schema, Time):
            if isinstance(value, str | dt.datetime):
                return True, value
            self.problem(path, f"is not an RFC 3339 timestamp: {show(value)}")
            return False, None
        if isinstance(schema, Int32):
            if isinstance(value, bool) or not isinstance(value, int):
                self.problem(path, f"{schema.message}, got {show(value)}")
                return False, None
            if not INT32[0] <= value <= INT32[1]:
                self.problem(path, f"must fit in 32 bits ({INT32[0]} to {INT32[1]}), got {value}")
                return False, None
            return True, value
        if isinstance(schema, Number | Duration):
            if isinstance(schema, Duration) and isinstance(value, str):
                return True, value
            if isinstance(value, bool) or not isinstance(value, int | float):
                if isinstance(schema, Number):
                    self.problem(path, f"must be a number, got {show(value)}")
                else:
                    self.problem(path, f"is not a duration: {show(value)}")
                return False, None
            try:
                number = float(value)
            except OverflowError:
                number = math.inf
            if not math.isfinite(number) or abs(number) > MAX_NUMBER:
                self.problem(path, f"must be a finite number below 2^63, got {show(value)}")
                return False, None
            return True, value
        return True, value

    def walk(self, schema: Map, root: dict[str, Any], base: str) -> None:
        """Check `root` against `schema` in place, depth first without recursion. What is already right
        (a string where a string belongs, a map where a map belongs) is passed over in place, without a
        call; the rest goes through `child`."""
        stack: list[tuple[Any, Any, str]] = [(schema, root, base)]
        pop, push = stack.pop, stack.append
        while stack:
            node_schema, value, path = pop()
            if type(node_schema) is Map:
                if node_schema.values is not None:
                    if node_schema.strings and all(type(k) is str and type(v) is str for k, v in value.items()):
                        continue  # a map of strings: nothing to check or normalise
                    self.values(node_schema, value, path)
                    continue
                for key, child_schema, code in node_schema.entries:
                    child = value.get(key)
                    if child is None:
                        continue
                    kind = type(child)
                    if code == _TEXT_CODE:
                        if kind is str:
                            continue  # a string where a string or a timestamp belongs: as it is
                    elif code == _MAP_CODE:
                        if kind is dict:
                            push((child_schema, child, f"{path}.{key}" if path else key))
                            continue
                    elif code == _LIST_CODE:
                        if kind is list:
                            push((child_schema, child, f"{path}.{key}" if path else key))
                            continue
                    elif type(child_schema) is Quantities and kind is dict and _plain_quantities(child):
                        continue
                    self.child(child_schema, value, key, f"{path}.{key}" if path else key, stack)
            elif type(node_schema) is List:
                item_schema, code = node_schema.item, node_schema.code
                for index, item in enumerate(value):
                    if code == _MAP_CODE and type(item) is dict:
                        push((item_schema, item, f"{path}[{index}]"))
                    elif not (code == _TEXT_CODE and type(item) is str):
                        self.child(item_schema, value, index, f"{path}[{index}]", stack)
                if any(item is _DROPPED for item in value):
                    value[:] = [item for item in value if item is not _DROPPED]

    def values(self, node_schema: Map, value: dict[Any, Any], path: str) -> None:
        """Every value of a map (labels, annotations, nodeSelector) against `node_schema.values`."""
        for key, child in list(value.items()):
            key_text = _string_form(key)
            child_path = f"{path}[{key_text if key_text is not None else show(key)}]"
            if key_text is None:
                self.problem(child_path, f"a key must be a string, got {_type_name(key)}")
                del value[key]
                continue
            if child is None:
                del value[key]
                continue
            ok, normal = self.scalar(node_schema.values, child, child_path)
            if key_text != key:
                del value[key]
            if ok:
                value[key_text] = normal
            elif key_text == key:
                del value[key]

    def child(self, schema: Any, parent: Any, key: Any, path: str, stack: list[tuple[Any, Any, str]]) -> None:
        value = parent[key]
        if isinstance(schema, Map):
            if not isinstance(value, dict):
                self.problem(path, f"must be {schema.what}, got {_type_name(value)}: {show(value)}")
                self.drop(parent, key)
            else:
                stack.append((schema, value, path))
        elif isinstance(schema, List):
            if not isinstance(value, list):
                self.problem(path, f"must be a list, got {_type_name(value)}: {show(value)}")
                self.drop(parent, key)
            else:
                stack.append((schema, value, path))
        elif isinstance(schema, Quantities):
            if not isinstance(value, dict):
                self.problem(path, f"must be a map of resource name to quantity, got {_type_name(value)}")
                self.drop(parent, key)
                return
            for name in list(value):
                amount = value[name]
                name_text = _string_form(name)
                if name_text is None or isinstance(amount, bool) or not isinstance(amount, str | int | float):
                    self.problem(f"{path}.{show(name)}", f"is not a quantity: {show(amount)}")
                    del value[name]
                elif name_text != name:
                    del value[name]
                    value[name_text] = amount
        else:
            ok, normal = self.scalar(schema, value, path)
            if ok:
                parent[key] = normal
            else:
                self.drop(parent, key)

    @staticmethod
    def drop(parent: Any, key: Any) -> None:
        if isinstance(parent, dict):
            del parent[key]
        else:
            parent[key] = _DROPPED  # removed once the whole list is checked, so that indexes stay right


def _plain_quantities(value: dict[Any, Any]) -> bool:
    """Every name a string and every amount a string: nothing for `child` to check or normalise."""
    return all(type(name) is str and type(amount) is str for name, amount in value.items())


def _group(api_version: Any) -> str:
    text = api_version if isinstance(api_version, str) else ""
    return text.split("/", 1)[0] if "/" in text else ""


def describe(kind: str, obj: dict[str, Any]) -> str:
    """`Kind namespace/name`, from whatever metadata there is (never fails)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    name = _string_form(meta.get("name")) or "<unnamed>"
    namespace = _string_form(meta.get("namespace"))
    name = name if len(name) <= 120 else name[:100] + "..."
    if namespace:
        namespace = namespace if len(namespace) <= 120 else namespace[:100] + "..."
        return f"{kind} {namespace}/{name}"
    return f"{kind} {name}"


def _node_limits(walk: _Walk, obj: dict[str, Any]) -> None:
    allocatable = (obj.get("status") or {}).get("allocatable") or {}
    raw = allocatable.get(keys.GPU_RESOURCE)
    if raw is None:
        return
    try:
        gpus = as_float(raw)
    except QuantityError:
        return  # the builder names it
    if gpus > MAX_GPUS_PER_NODE:
        walk.problem(
            f"status.allocatable.{keys.GPU_RESOURCE}",
            f"{show(raw)} GPUs on one node is more than kai accepts ({MAX_GPUS_PER_NODE})",
        )
        del allocatable[keys.GPU_RESOURCE]


def _pod_limits(walk: _Walk, obj: dict[str, Any]) -> None:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(keys.GPU_FRACTION_NUM_DEVICES_ANNOTATION)
    if isinstance(raw, str) and raw.strip().isdigit() and int(raw.strip()) > MAX_GPUS_PER_NODE:
        walk.problem(
            f"metadata.annotations[{keys.GPU_FRACTION_NUM_DEVICES_ANNOTATION}]",
            f"{show(raw)} devices is more than a node can have ({MAX_GPUS_PER_NODE})",
        )
        del annotations[keys.GPU_FRACTION_NUM_DEVICES_ANNOTATION]


def _subgroup_limits(walk: _Walk, obj: dict[str, Any]) -> None:
    spec = obj.get("spec") or {}
    subgroups = spec.get("subGroups")
    if not isinstance(subgroups, list):
        return
    if len(subgroups) > MAX_SUBGROUPS:
        walk.problem("spec.subGroups", f"has {len(subgroups)} sub-groups, more than {MAX_SUBGROUPS}")
        del spec["subGroups"]
        return
    parent = {
        str(g.get("name")).lower(): str(g.get("parent") or "").lower()
        for g in subgroups
        if isinstance(g, dict) and g.get("name")
    }
    depth: dict[str, int] = {}
    for start in parent:
        chain: list[str] = []
        current = start
        while current and current in parent and current not in depth and current not in chain:
            chain.append(current)
            current = parent[current]
        base = depth.get(current, 0)
        for offset, name in enumerate(reversed(chain), start=1):
            depth[name] = base + offset
    deepest = max(depth.values(), default=0)
    if deepest > MAX_SUBGROUP_DEPTH:
        walk.problem("spec.subGroups", f"nest {deepest} levels deep; at most {MAX_SUBGROUP_DEPTH} are allowed")
        del spec["subGroups"]


def check_shapes(objects: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Problem]]:
    """The objects fit for the builder (fixed in place), and a problem per field of the wrong shape.

    An object whose metadata is not a map or whose name is not a string is left out (the builder
    could not even name it); any other object stays, its wrongly shaped fields removed."""
    kept: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for obj in objects:
        kind = obj.get("kind")
        if not isinstance(kind, str) or (_group(obj.get("apiVersion")), kind) not in KINDS:
            kept.append(obj)  # ignored by the builder, with a warning
            continue
        walk = _Walk(kind, obj)
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            walk.problem("metadata", f"must be a map with a name, got {_type_name(meta)}: {show(meta)}")
            problems.extend(walk.problems)
            continue
        name = meta.get("name")
        if name is not None and _string_form(name) is None:
            walk.problem("metadata.name", f"must be a string, got {_type_name(name)}: {show(name)}")
            problems.extend(walk.problems)
            continue
        walk.walk(SCHEMAS[kind], obj, "")
        if kind == "Node":
            _node_limits(walk, obj)
        elif kind == "Pod":
            _pod_limits(walk, obj)
        elif kind == "PodGroup":
            _subgroup_limits(walk, obj)
        problems.extend(walk.problems)
        kept.append(obj)
    too_deep, depth_problems = _queue_depth(kept)
    problems.extend(depth_problems)
    return [o for o in kept if id(o) not in too_deep], problems


def _queue_depth(objects: list[dict[str, Any]]) -> tuple[set[int], list[Problem]]:
    """Queues more than MAX_QUEUE_DEPTH levels below a top-level queue: left out, one problem per chain."""
    parent: dict[str, str] = {}
    by_name: dict[str, dict[str, Any]] = {}
    for obj in objects:
        if obj.get("kind") == "Queue" and _group(obj.get("apiVersion")) == "scheduling.run.ai":
            name = str(obj["metadata"].get("name") or "")
            spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
            parent[name] = str(spec.get("parentQueue") or "")
            by_name.setdefault(name, obj)
    depth: dict[str, int] = {}
    for start in parent:
        chain: list[str] = []
        current = start
        while current and current not in depth and current not in chain:
            chain.append(current)
            current = parent.get(current, "")
        base = depth.get(current, 0) if current not in chain else 0  # a cycle: the builder names it
        for offset, name in enumerate(reversed(chain), start=1):
            depth[name] = base + offset
    too_deep = {name for name, d in depth.items() if d > MAX_QUEUE_DEPTH + 1}
    problems = [
        Problem(
            describe("Queue", by_name[name]),
            "spec.parentQueue",
            f"is {depth[name] - 1} levels below a top-level queue; kai accepts at most {MAX_QUEUE_DEPTH}",
        )
        for name in sorted(too_deep)
        if name in by_name and parent[name] not in too_deep
    ]
    return {id(by_name[n]) for n in too_deep if n in by_name}, problems
