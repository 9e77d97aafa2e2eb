"""Hypothesis strategies that take valid inputs (snapshots, scheduler configs, AdmissionReviews) and change
one to three things: a field's type, a missing field, an extreme number, deep nesting, a hostile string,
or the bytes of the file itself (invalid UTF-8, BOM, UTF-16, truncation, YAML tags, aliases).

Values YAML cannot produce from a Python object (a plain `1e309`, nesting 50,000 deep) are written as
sentinels and replaced in the serialised text.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from tests.scenario import node, pod, podgroup, queue

ROOT = Path(__file__).resolve().parents[2]


# -- valid inputs ---------------------------------------------------------------------------------------


def _example_cluster() -> list[dict[str, Any]]:
    text = (ROOT / "examples" / "cluster.yaml").read_text(encoding="utf-8")
    return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]


def _small_clusters() -> list[list[dict[str, Any]]]:
    parents = [queue("dept"), queue("team-a", "dept", gpu={"quota": 2, "overQuotaWeight": 1, "limit": 8})]
    return [
        [
            node("n1", gpus=4, labels={"nvidia.com/gpu.memory": "40000"}),
            *parents,
            podgroup("train", "team-a", min_member=2),
            pod("train-0", group="train", gpus=1, cpu="1", memory="1Gi"),
            pod("train-1", group="train", gpus=1, cpu="1", memory="1Gi"),
            pod("frac", queue="team-a", annotations={"gpu-fraction": "0.5"}),
            pod("other", node="n1", scheduler="default-scheduler", gpus=1, phase="Running"),
        ],
        [
            node("n1", gpus=8, taints=[{"key": "gpu", "value": "x", "effect": "NoSchedule"}]),
            node("n2", gpus=8, labels={"zone": "a"}),
            *parents,
            podgroup(
                "sub",
                "team-a",
                min_member=2,
                subgroups=[{"name": "a", "minMember": 1}, {"name": "b", "minMember": 1, "parent": "a"}],
            ),
            pod("sub-0", group="sub", gpus=2, labels={"kai.scheduler/subgroup-name": "b"}),
            pod(
                "aff",
                queue="team-a",
                gpus=1,
                tolerations=[{"key": "gpu", "operator": "Exists"}],
                node_selector={"zone": "a"},
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                            ]
                        }
                    }
                },
            ),
            pod("run", queue="team-a", gpus=4, node="n1", created="2025-12-31T00:00:00Z"),
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "hi"}, "value": 200},
            {
                "apiVersion": "kai.scheduler/v1alpha1",
                "kind": "Topology",
                "metadata": {"name": "t"},
                "spec": {"levels": [{"nodeLabel": "zone"}]},
            },
        ],
    ]


SNAPSHOTS: list[list[dict[str, Any]]] = [_example_cluster(), *_small_clusters()]

CONFIGS: list[Any] = [
    None,
    {"actions": "allocate, consolidation, reclaim, preempt, stalegangeviction"},
    {
        "actions": "allocate, reclaim, preempt",
        "tiers": [
            {"plugins": [{"name": "predicates"}, {"name": "proportion"}, {"name": "priority"}]},
            {"plugins": [{"name": "gpupack"}, {"name": "nodeplacement", "arguments": {"gpu": "binpack"}}]},
        ],
        "schedulerParams": {
            "maxNumberConsolidationPreemptees": 16,
            "allowConsolidatingReclaim": True,
            "globalDefaultStalenessGracePeriod": "60s",
            "fullHierarchyFairness": True,
            "schedulerName": "kai-scheduler",
        },
        "queueDepthPerAction": {"allocate": 100, "reclaim": 10},
        "usageDBConfig": {"clientType": "prometheus", "usageParams": {"halfLifePeriod": "10m", "windowSize": "1h"}},
    },
]


def _review(kind: str, obj: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "4b0e1d2c-0000-0000-0000-000000000001",
            "kind": {"group": "", "version": "v1", "kind": kind},
            "operation": operation,
            "object": obj,
        },
    }


def _reviews() -> list[tuple[str, dict[str, Any]]]:
    shared = pod("frac", queue="q", annotations={"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"})
    whole = pod("whole", queue="q", gpus=2)
    update = _review("Pod", copy.deepcopy(shared), "UPDATE")
    update["request"]["oldObject"] = copy.deepcopy(whole)
    subgroups = [{"name": "root", "minMember": 1}] + [
        {"name": f"s{i}", "minMember": 1, "parent": "root" if i == 0 else f"s{i - 1}"} for i in range(5)
    ]
    return [
        ("/validate--v1-pod", _review("Pod", shared)),
        ("/validate--v1-pod", update),
        ("/mutate--v1-pod", _review("Pod", copy.deepcopy(shared))),
        ("/mutate--v1-pod", _review("Pod", whole)),
        ("/validate-scheduling-run-ai-v2-queue", _review("Queue", queue("q", "dept"))),
        ("/validate-scheduling-run-ai-v2alpha2-podgroup", _review("PodGroup", podgroup("g", "q", subgroups=subgroups))),
    ]


REVIEWS = _reviews()


# -- hostile values ---------------------------------------------------------------------------------------

# Raw YAML/JSON text put in place of a value: what no Python object dumps to.
RAW_YAML = {
    "INF": "1e309",
    "DOTINF": ".inf",
    "NEGINF": "-.inf",
    "NAN": ".nan",
    "DATE": "2026-01-01",
    "STAMP": "2026-01-01 10:00:00",
    "HEX": "0x10",
    "OCT": "0o17",
    "SEXA": "1:30",
    "BIN": "!!binary aGVsbG8=",
    "SET": "!!set {a, b}",
    "PYOBJ": "!!python/object:os.system ls",
    "NULL": "~",
    "DEEPFLOW300": "[" * 300 + "]" * 300,
    "DEEPFLOW3000": "[" * 3000 + "]" * 3000,
    "DEEPFLOW50000": "[" * 50000 + "]" * 50000,
    "DEEPMAP3000": "{a: " * 3000 + "1" + "}" * 3000,
}
RAW_JSON = {
    "INF": "1e309",
    "DOTINF": "Infinity",
    "NEGINF": "-Infinity",
    "NAN": "NaN",
    "DATE": '"2026-01-01"',
    "STAMP": '"2026-01-01 10:00:00"',
    "HEX": '"0x10"',
    "OCT": '"0o17"',
    "SEXA": '"1:30"',
    "BIN": '"aGVsbG8="',
    "SET": '["a", "b"]',
    "PYOBJ": '"x"',
    "NULL": "null",
    "DEEPFLOW300": "[" * 300 + "]" * 300,
    "DEEPFLOW3000": "[" * 3000 + "]" * 3000,
    "DEEPFLOW50000": "[" * 50000 + "]" * 50000,
    "DEEPMAP3000": '{"a": ' * 3000 + "1" + "}" * 3000,
}
SENTINEL = "@@RAW-{}@@"


def _nested(depth: int, leaf: Any = 1) -> Any:
    value: Any = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"a": value}
    return value


EXTREME_STRINGS = [
    "",
    " ",
    "1e309",
    "-1e309",
    "1e308",
    "NaN",
    "inf",
    "-1",
    "0",
    "1.9",
    "100000000",
    "1000000000",
    "1e8",
    "9223372036854775808",
    "99999999999999999999Ei",
    "1Ei",
    "0.0000000001n",
    "1.5",
    "\x00",
    "é",
    "\u202e",
    "\ud7ff",
    "a" * 100_000,
    "2026-01-01",
    "2026-13-45T99:99:99Z",
    "--",
    "Running",
    "kai-scheduler",
    "default",
]
EXTREME_NUMBERS = [
    0,
    -1,
    1,
    -2,
    2**31,
    2**63,
    2**64 + 1,
    10**8,
    10**9,
    10**30,
    -(10**30),
    1.9,
    0.5,
    1e-300,
    1e308,
    float("inf"),
    float("-inf"),
    float("nan"),
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(EXTREME_NUMBERS),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(EXTREME_STRINGS),
    st.text(max_size=12),
    st.dates(min_value=dt.date(1900, 1, 1), max_value=dt.date(2100, 1, 1)),
    st.sampled_from([SENTINEL.format(k) for k in RAW_YAML]),
)
hostile_values = st.one_of(
    scalars,
    st.lists(scalars, max_size=3),
    st.dictionaries(st.one_of(st.text(max_size=6), st.integers(0, 3)), scalars, max_size=3),
    st.sampled_from([10, 100, 200]).map(_nested),
)


# -- mutations -----------------------------------------------------------------------------------------------


def _paths(value: Any, prefix: tuple[Any, ...] = (), limit: int = 8) -> list[tuple[Any, ...]]:
    """Every path to a value inside `value` (dict keys and list indexes), breadth first."""
    out: list[tuple[Any, ...]] = []
    frontier = [(prefix, value)]
    while frontier:
        path, current = frontier.pop(0)
        if len(path) > limit:
            continue
        items = (
            current.items() if isinstance(current, dict) else enumerate(current) if isinstance(current, list) else ()
        )
        for key, child in items:
            out.append((*path, key))
            frontier.append(((*path, key), child))
    return out


def _get(root: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        root = root[key]
    return root


@st.composite
def mutated_objects(draw: st.DrawFn, bases: list[Any]) -> Any:
    """A base value (deep-copied) with one to three mutations."""
    root = copy.deepcopy(draw(st.sampled_from(bases)))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(root)
        if not paths:
            root = draw(hostile_values)
            break
        path = draw(st.sampled_from(paths))
        parent = _get(root, path[:-1])
        key = path[-1]
        action = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add", "wrap", "duplicate"]))
        if action == "replace":
            parent[key] = draw(hostile_values)
        elif action == "delete":
            del parent[key]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["name", "spec", "metadata", "x", "items", "kind", 7]))] = draw(hostile_values)
        elif action == "add":
            parent.append(draw(hostile_values))
        elif action == "wrap":
            parent[key] = draw(st.sampled_from([[parent[key]], {"x": parent[key]}, str(parent[key])[:50]]))
        else:
            parent[key] = copy.deepcopy(parent[key]) if not isinstance(parent[key], list) else parent[key] * 3
    return root


def _sanitise_for_json(value: Any) -> Any:
    """JSON cannot hold dates, bytes or non-string keys: what `kubectl -o json` would write instead."""
    if isinstance(value, dict):
        return {str(k): _sanitise_for_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_sanitise_for_json(v) for v in value]
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def dump(documents: list[Any], fmt: str) -> str:
    """Serialise as YAML documents, a YAML `v1 List`, or JSON, then put the raw sentinels in."""
    if fmt in ("json", "json-one"):
        body = documents[0] if fmt == "json-one" else {"apiVersion": "v1", "kind": "List", "items": documents}
        text = json.dumps(_sanitise_for_json(body))
        raw, quote = RAW_JSON, '"'
    else:
        if fmt == "list":
            documents = [{"apiVersion": "v1", "kind": "List", "items": documents}]
        text = yaml.safe_dump_all(documents, sort_keys=False, allow_unicode=True, width=1 << 30)
        raw, quote = RAW_YAML, "'"
    for key, replacement in raw.items():
        text = text.replace(f"{quote}{SENTINEL.format(key)}{quote}", replacement)
    return text


ATTACHMENTS = [
    "",
    "\n---\n" + "- " * 50_000 + "x\n",
    "\n---\n" + "- " * 3_000 + "x\n",
    "\n---\n" + "\n".join(f"{' ' * i}a{i}:" for i in range(300)) + " 1\n",
    "\n---\na: &a [x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c]\n"
    "e: [*d, *d, *d, *d, *d, *d, *d, *d]\n",
    "\n---\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" if i else "a0: &a0 [x]\n" for i in range(1500)),
    "\n---\nkind: List\napiVersion: v1\nitems: 5\n",
    "\n---\n[1, 2, 3]\n",
    "\n---\n!!python/object/apply:os.system [ls]\n",
    "\n---\n{unclosed: [1, 2\n",
]


@st.composite
def encoded(draw: st.DrawFn, text: str) -> bytes:
    """The text as bytes, sometimes damaged on the way."""
    data = text.encode("utf-8")
    action = draw(st.sampled_from(["none"] * 6 + ["badbyte", "bom", "utf16", "nul", "truncate", "latin1", "empty"]))
    if action == "badbyte":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x80\x80"])) + data[at:]
    elif action == "bom":
        data = b"\xef\xbb\xbf" + data
    elif action == "utf16":
        data = text.encode("utf-16")
    elif action == "nul":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + b"\x00" + data[at:]
    elif action == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    elif action == "latin1":
        data = text.encode("latin-1", errors="replace") + "\né".encode("latin-1")
    elif action == "empty":
        data = b""
    return data


@st.composite
def snapshot_files(draw: st.DrawFn) -> bytes:
    """The bytes of one mutated snapshot file."""
    documents = draw(mutated_objects(SNAPSHOTS))
    if not isinstance(documents, list):
        documents = [documents]
    fmt = draw(st.sampled_from(["yaml", "yaml", "list", "json"]))
    text = dump(documents, fmt)
    if fmt != "json":
        text += draw(st.sampled_from(ATTACHMENTS[:1] * 12 + ATTACHMENTS[1:]))
    return draw(encoded(text))


@st.composite
def config_files(draw: st.DrawFn) -> bytes:
    """The bytes of one mutated scheduler configuration file."""
    base = [c for c in CONFIGS if c is not None]
    config = draw(mutated_objects(base))
    text = dump([config], "yaml")
    return draw(encoded(text))


@st.composite
def admission_requests(draw: st.DrawFn) -> tuple[str, bytes]:
    """A webhook path and the bytes posted to it."""
    path, review = draw(st.sampled_from(REVIEWS))
    review = copy.deepcopy(review)
    choice = draw(st.sampled_from(["object", "object", "object", "review", "bytes", "long-chain"]))
    if choice == "object":
        review["request"]["object"] = draw(mutated_objects([review["request"]["object"]]))
    elif choice == "review":
        review = draw(mutated_objects([review]))
    elif choice == "long-chain":
        length = draw(st.sampled_from([100, 3000, 20000]))
        review["request"]["object"]["spec"]["subGroups"] = [
            {"name": f"s{i}", "minMember": 1, **({"parent": f"s{i - 1}"} if i else {})} for i in range(length)
        ]
    text = dump([review], "json-one")
    if choice == "bytes":
        return path, draw(encoded(text))
    return path, text.encode("utf-8")
