"""KAI's metric definitions, written from KAI's scheduler metrics, its queue controller and
controller-runtime (the binder's): name (without the namespace prefix) -> (type, label names).
Histograms list their buckets' upper bounds. A kai endpoint must export each with this type and labels."""

from __future__ import annotations

MS_BUCKETS = [5.0 * 2**i for i in range(10)]  # Go's prometheus.ExponentialBuckets(5, 2, 10)

QUEUE = ("queue_name",)

SCHEDULER: dict[str, tuple[str, tuple[str, ...]]] = {
    "e2e_scheduling_latency_milliseconds": ("gauge", ()),
    "open_session_latency_milliseconds": ("gauge", ()),
    "close_session_latency_milliseconds": ("gauge", ()),
    "plugin_scheduling_latency_milliseconds": ("gauge", ("plugin", "OnSession")),
    "action_scheduling_latency_milliseconds": ("gauge", ("action",)),
    "task_scheduling_latency_milliseconds": ("histogram", ()),
    "usage_query_latency_milliseconds": ("histogram", ()),
    "podgroups_scheduled_by_action": ("counter", ("action",)),
    "podgroups_acted_on_by_action": ("counter", ("action",)),
    "scenarios_simulation_by_action": ("counter", ("action",)),
    "scenarios_filtered_by_action": ("counter", ("action",)),
    "total_preemption_attempts": ("counter", ()),
    "pod_group_evicted_pods_total": ("counter", ("podgroup", "namespace", "uid", "nodepool", "action")),
    "queue_fair_share_cpu_cores": ("gauge", QUEUE),
    "queue_fair_share_memory_gb": ("gauge", QUEUE),
    "queue_fair_share_gpu": ("gauge", QUEUE),
    "queue_cpu_usage": ("gauge", QUEUE),
    "queue_memory_usage": ("gauge", QUEUE),
    "queue_gpu_usage": ("gauge", QUEUE),
    # the queue controller's
    "queue_info": ("gauge", QUEUE),
    "queue_deserved_gpus": ("gauge", QUEUE),
    "queue_quota_cpu_cores": ("gauge", QUEUE),
    "queue_quota_memory_bytes": ("gauge", QUEUE),
    "queue_allocated_gpus": ("gauge", QUEUE),
    "queue_allocated_cpu_cores": ("gauge", QUEUE),
    "queue_allocated_memory_bytes": ("gauge", QUEUE),
}

# controller-runtime's, unprefixed (KAI's binder exports these and no metrics of its own)
BINDER: dict[str, tuple[str, tuple[str, ...]]] = {
    "controller_runtime_reconcile_total": ("counter", ("controller", "result")),
    "controller_runtime_reconcile_errors_total": ("counter", ("controller",)),
    "controller_runtime_reconcile_time_seconds": ("histogram", ("controller",)),
    "controller_runtime_max_concurrent_reconciles": ("gauge", ("controller",)),
    "controller_runtime_active_workers": ("gauge", ("controller",)),
}
UNPREFIXED = frozenset(BINDER)


def parse(text: str) -> dict[str, dict[str, object]]:
    """Prometheus text -> family name -> {"type", "labels" (set of label-name tuples), "buckets", "samples"}.
    Written by hand so that nothing renames a family (prometheus_client's parser strips ``_total``)."""
    families: dict[str, dict[str, object]] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            families[name] = {"type": kind, "labels": set(), "buckets": [], "samples": 0}
            continue
        if not line or line.startswith("#"):
            continue
        head, _, _value = line.rpartition(" ")
        name, _, rest = head.partition("{")
        labels: list[tuple[str, str]] = []
        for part in rest.rstrip("}").split('",') if rest else []:
            key, _, value = part.partition("=")
            labels.append((key.strip(","), value.strip('"')))
        family = next(
            (f for f in (name, name.removesuffix("_bucket"), name.removesuffix("_sum"), name.removesuffix("_count"))
             if f in families),
            None,
        )  # fmt: skip
        if family is None:
            continue
        entry = families[family]
        entry["samples"] = int(entry["samples"]) + 1  # type: ignore[call-overload]
        names = tuple(k for k, _ in labels if k != "le")
        entry["labels"].add(names)  # type: ignore[attr-defined]
        if name.endswith("_bucket"):
            le = dict(labels)["le"]
            if le != "+Inf" and float(le) not in entry["buckets"]:  # type: ignore[operator]
                entry["buckets"].append(float(le))  # type: ignore[attr-defined]
    return families


def mismatches(text: str, table: dict[str, tuple[str, tuple[str, ...]]], prefix: str) -> list[str]:
    """What the exported text gets wrong against `table` (empty: every family as KAI's)."""
    families = parse(text)
    wrong = []
    for short, (kind, labels) in table.items():
        name = short if short in UNPREFIXED else f"{prefix}_{short}"
        family = families.get(name)
        if family is None:
            wrong.append(f"{name}: missing")
            continue
        if family["type"] != kind:
            wrong.append(f"{name}: type {family['type']}, KAI's {kind}")
        seen = family["labels"] - {()} if labels else family["labels"]  # type: ignore[operator]
        if any(set(s) != set(labels) for s in seen):  # type: ignore[union-attr]
            wrong.append(f"{name}: labels {sorted(seen)}, KAI's {labels}")  # type: ignore[type-var]
        ms = kind == "histogram" and short.endswith("_milliseconds") and family["buckets"]
        if ms and family["buckets"] != MS_BUCKETS:
            wrong.append(f"{name}: buckets {family['buckets']}, KAI's {MS_BUCKETS}")
    return wrong
