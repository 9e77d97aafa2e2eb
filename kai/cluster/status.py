"""The third port: status, conditions, annotations and events after each cycle, written only on change.

What is written (KAI's status fields; where kai writes more: docs/differences.md):

* **pods** of a pending pod group with a reason: condition ``PodScheduled=False``, reason
  ``Unschedulable``, the why-pending message (unless the PodGroup says
  ``markUnschedulable: false``), and a warning event ``Unschedulable``;
* **PodGroups**: ``status.phase``, ``status.resourcesStatus`` (requested, allocated,
  allocatedNonPreemptible as quantities) and ``status.schedulingConditions`` (KAI's
  ``UnschedulableOnNodePool`` entry with the message; cleared once the group runs), plus the
  annotations ``kai.scheduler/last-start-timestamp`` and ``kai.scheduler/stale-podgroup-timestamp``
  the cycle decided;
* **Queues**, as KAI's queue controller: ``status.childQueues``, and ``status.allocated``,
  ``status.allocatedNonPreemptible``, ``status.requested`` summed from the pod groups' resources up
  the queue tree (:func:`queue_usage`); plus kai's ``status.fairShare`` (quantities).

"Only on change": the desired value is compared with what the cache shows *and* with the last
value written (the watch event of our own write may not have arrived yet), so a steady cluster
costs no writes at all; and only the dirty pod groups are worked out (see :meth:`StatusUpdater.update`),
so a steady cluster costs little more than a look at each group. Writes run on a small pool (KAI uses
5 workers) and never block the cycle; a key whose write is still in flight is skipped until the next
cycle.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kai.api import keys
from kai.api.timeutil import format_time
from kai.cluster.events import EventRecorder
from kai.cluster.kube import PODGROUPS, PODS, QUEUES, ApiError, Kube
from kai.framework.causes import KAI_REASONS, Cause, QueueFigures
from kai.framework.decisions import Decisions
from kai.model import ALIVE, CPU, GPU, ClusterSnapshot, PodStatus, Resources

log = logging.getLogger("kai.cluster.status")

NODE_POOL = "default"
_ABSENT = object()  # a key a decision map does not have
BOUND = frozenset({PodStatus.RUNNING, PodStatus.RELEASING})


def quantity(name: str, amount: float) -> str:
    """A quantity string for a resource amount in the model's units (cpu in millicores)."""
    if name == CPU:
        return f"{round(amount)}m"
    if abs(amount - round(amount)) < 1e-9:
        return str(round(amount))
    return f"{amount:.3f}".rstrip("0").rstrip(".")


def quantities(res: Resources) -> dict[str, str]:
    return {n: quantity(n, a) for n, a in sorted(res.amounts.items()) if a and n != "pods"}


def queue_quantities(values: dict[str, float]) -> dict[str, str]:
    """QueueReport units (``gpu`` devices, ``cpu`` millicores, ``memory`` MB) as Kubernetes quantities."""
    out = {}
    for name, amount in values.items():
        if amount < 0:
            continue  # unlimited: no quantity says it
        if name == "cpu":
            out["cpu"] = f"{round(amount)}m"
        elif name == "memory":
            out["memory"] = str(round(amount * 1_000_000))
        elif name == "gpu":
            out[keys.GPU_RESOURCE] = quantity(GPU, amount)
    return out


@dataclass(slots=True)
class GroupUsage:
    """A pod group's resources as KAI's podgroup controller counts them, after this cycle's decisions."""

    requested: Resources = field(default_factory=Resources)  # alive pods
    allocated: Resources = field(default_factory=Resources)  # pods holding a node (or given one now)
    running: int = 0
    pending: int = 0
    succeeded: int = 0
    failed: int = 0


def usage(pg: Any, bound: set[str], evicted: set[str]) -> GroupUsage:
    """Shared GPUs count as fraction x devices of ``nvidia.com/gpu``, as KAI's podgroup controller adds them
    (a gpu-memory request without a fraction is not converted: kai does not read the node's GPU memory here)."""
    use = GroupUsage()
    for pod in pg.pods:
        status = pod.status
        if pod.key in bound:
            status = PodStatus.RUNNING
        elif pod.key in evicted:
            status = PodStatus.RELEASING
        requests = pod.requests
        if pod.gpu.fraction > 0:
            requests = requests.copy().add(Resources({GPU: pod.gpu.fraction * pod.gpu.num_devices}))
        if pod.gpu.dra:  # the GPUs of its DRA claims, as KAI's podgroup controller adds them
            requests = requests.copy().add(Resources({GPU: float(pod.gpu.dra)}))
        if status in ALIVE:
            use.requested.add(requests)
        if status in (PodStatus.RUNNING, PodStatus.ALLOCATED):
            use.allocated.add(requests)
            use.running += 1
        elif status in (PodStatus.PENDING, PodStatus.GATED, PodStatus.PIPELINED):
            use.pending += 1
        elif status is PodStatus.SUCCEEDED:
            use.succeeded += 1
        elif status is PodStatus.FAILED:
            use.failed += 1
    return use


class GroupUsages:
    """:func:`usage` per pod group, kept from one cycle to the next while the group holds the very same
    pod objects (the incremental snapshot shares a pod's PodInfo until its object changes) and none of
    them is bound or evicted by the cycle: a steady group costs an identity check, not a sum. Asked
    again for the very same group object in a cycle (or in the next, when it reused the snapshot), the
    answer is looked up by that object."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[Any, tuple[Any, ...], GroupUsage]] = {}
        self._seen: dict[str, tuple[Any, tuple[Any, ...], GroupUsage]] = {}

    def __call__(self, pg: Any, bound: set[str], evicted: set[str]) -> GroupUsage:
        key = pg.key
        entry = self._seen.get(key)
        if entry is not None and entry[0] is pg:  # asked before this cycle, about this very group
            return entry[2]
        kept = self._kept.get(key)
        if kept is not None and kept[0] is pg and kept[1] and not (bound or evicted):
            # The very group of the last cycle (a snapshot kept or patched around it): the same pods.
            self._seen[key] = kept
            return kept[2]
        pods = tuple(pg.pods)
        if (bound or evicted) and any(p.key in bound or p.key in evicted for p in pods):
            use = usage(pg, bound, evicted)
            self._seen[key] = (pg, (), use)  # never kept for another cycle: () matches no group's pods
            return use
        entry = entry or kept
        if entry is None or len(entry[1]) != len(pods) or any(a is not b for a, b in zip(entry[1], pods, strict=True)):
            entry = (pg, pods, usage(pg, bound, evicted))
        else:
            entry = (pg, entry[1], entry[2])
        self._seen[key] = entry
        return entry[2]

    def finish(self, groups: dict[str, Any] | None = None) -> None:
        """End of a cycle: keep only the groups it saw; or, given the cycle's `groups`, also what was
        kept of those it did not ask about (a caller that asks only about groups that changed)."""
        if groups is None:
            self._kept, self._seen = self._seen, {}
            return
        kept = self._kept
        kept.update(self._seen)
        self._seen = {}
        if len(kept) > len(groups):
            self._kept = {k: v for k, v in kept.items() if k in groups}


@dataclass(slots=True)
class QueueUsage:
    """KAI's queue controller's view of a queue: its children, and its pod groups' resources summed up
    the queue tree (a parent holds what its whole subtree holds)."""

    children: list[str]
    requested: Resources = field(default_factory=Resources)
    allocated: Resources = field(default_factory=Resources)
    allocated_non_preemptible: Resources = field(default_factory=Resources)


def queue_usage(
    snapshot: ClusterSnapshot,
    decisions: Decisions,
    usage_of: Callable[[Any, set[str], set[str]], GroupUsage] = usage,
) -> dict[str, QueueUsage]:
    """Every queue of the snapshot with its rolled-up pod group resources after the cycle's decisions."""
    bound = {b.pod for b in decisions.bindings}
    evicted = {e.pod for e in decisions.evictions}
    out = {name: QueueUsage(sorted(q.children)) for name, q in snapshot.queues.items()}
    for pg in snapshot.podgroups.values():
        use = usage_of(pg, bound, evicted)
        name, seen = pg.queue, set()
        while name in out and name not in seen:  # the leaf, then each ancestor
            seen.add(name)
            q = out[name]
            q.requested.add(use.requested)
            q.allocated.add(use.allocated)
            if not pg.preemptible:
                q.allocated_non_preemptible.add(use.allocated)
            name = snapshot.queues[name].parent
    return out


class StatusUpdater:
    """Port: writes what a cycle found out, asynchronously and only on change."""

    def __init__(
        self,
        kube: Kube,
        events: EventRecorder,
        workers: int = 5,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.kube = kube
        self.events = events
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="status")
        self._written: dict[str, Any] = {}
        self._in_flight: set[str] = set()
        self._lock = threading.Lock()
        self.writes = 0
        self.skipped = 0
        self._transition = 0
        self.usages = GroupUsages()
        # Pod groups whose status and annotations needed no write when last worked out, with what that was
        # decided from: the same raw object, an equal usage and equal inputs again need no write again.
        self._clean: dict[str, tuple[Any, ...]] = {}
        # The dirty tracking (see `update`): the groups that needed nothing at all when last seen, each
        # with its (snapshot group, PodGroup object, outcome); the last cycle's snapshot groups; where each
        # pod of them lives (pod key -> group key); and the last queue roll-up with each group's share in it.
        self._steady: dict[str, tuple[Any, Any, Any]] = {}
        self._last_groups: dict[str, Any] = {}
        self._group_of: dict[str, str] = {}
        self._rolled_up: dict[str, QueueUsage] | None = None
        self._tree: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._shares: dict[str, tuple[str, bool, GroupUsage]] = {}
        self.steady_skipped = 0  # pod groups the last update left alone as steady (for tests and the bench)
        # The last update's (snapshot, decisions, queue_usage): the scheduler's queue gauges read the same.
        self.last_queue_usage: tuple[Any, Any, dict[str, QueueUsage]] | None = None

    # -- the cycle's entry point ----------------------------------------------------------------
    def update(
        self, decisions: Decisions, snapshot: ClusterSnapshot, pods: dict, podgroups: dict, queues: dict
    ) -> None:
        """Write what the cycle changed. Only the *dirty* pod groups are worked out: a group that needed
        nothing last cycle (no write, no event, no pod condition) needs nothing again while it is the
        very same snapshot group (the incremental snapshot keeps a group's object while neither its
        PodGroup nor any of its pods changed), with the very same PodGroup object and an equal outcome,
        no pod of it bound or evicted by this cycle and no annotation of it decided."""
        bound = {b.pod for b in decisions.bindings}
        evicted = {e.pod for e in decisions.evictions}
        now = format_time(snapshot.now)
        groups = snapshot.podgroups
        last_groups = self._last_groups
        special = self._touched(bound, evicted)
        touched = set(special)
        special.update(decisions.last_start)
        special.update(decisions.stale_since)
        jobs = decisions.jobs
        steady = self._steady
        # The last pair of outcomes compared: running outcomes are one object per queue in a cycle.
        last_pair: tuple[Any, Any, bool] = (None, None, True)
        changed: list[str] = []  # groups that are other objects than last cycle's (or new)
        skipped = 0
        for key, pg in groups.items():
            was = steady.get(key)
            raw_pg = podgroups.get(key)
            if was is not None and was[0] is pg:  # steady last cycle: the same object as then
                if was[1] is raw_pg and key not in special:
                    outcome = jobs.get(key)
                    before = was[2]
                    if before is outcome:
                        equal = True
                    elif before is last_pair[0] and outcome is last_pair[1]:
                        equal = last_pair[2]
                    else:
                        equal = before == outcome
                        last_pair = (before, outcome, equal)
                    if equal:
                        skipped += 1
                        steady[key] = (pg, raw_pg, outcome)
                        continue
            elif last_groups.get(key) is not pg:
                changed.append(key)
            outcome = jobs.get(key)
            if self._group(key, pg, raw_pg, outcome, decisions, pods, bound, evicted, now):
                steady[key] = (pg, raw_pg, outcome)
            elif was is not None:
                del steady[key]
        self.steady_skipped = skipped
        for kept in (steady, self._clean):  # entries of groups that are gone
            if len(kept) > len(groups):
                for key in [k for k in kept if k not in groups]:
                    del kept[key]
        self._index(groups, changed)
        self._refused_podgroups(snapshot, pods, podgroups, queues, now)
        rolled_up = self._roll_up(snapshot, decisions, bound, evicted, changed, touched)
        self.last_queue_usage = (snapshot, decisions, rolled_up)  # the scheduler's queue gauges read it too
        for name, use in rolled_up.items():
            raw_queue = queues.get(name)
            if raw_queue is None:
                continue
            desired: dict[str, Any] = {
                "childQueues": use.children,
                "allocated": quantities(use.allocated),
                "allocatedNonPreemptible": quantities(use.allocated_non_preemptible),
                "requested": quantities(use.requested),
            }
            report = decisions.queues.get(name)
            if report is not None:
                desired["fairShare"] = queue_quantities(report.fair_share)
            self._write_status(f"Queue {name}", QUEUES.path(name=name, sub="status"), raw_queue, desired)
        self.usages.finish(groups)
        self._last_groups = groups

    def _touched(self, bound: set[str], evicted: set[str]) -> set[str]:
        """The groups (as last indexed) of the pods bound or evicted now."""
        group_of = self._group_of
        return {g for p in (bound | evicted if evicted else bound) if (g := group_of.get(p)) is not None}

    def _index(self, groups: dict[str, Any], changed: list[str]) -> None:
        """Where each pod lives, for the groups that are new objects. A pod that joins a group makes the
        group a new object, so every pod of the snapshot is indexed right; entries of pods that are gone
        are dropped when every group is new (a snapshot built from scratch)."""
        if len(changed) == len(groups):
            self._group_of = {p.key: key for key, pg in groups.items() for p in pg.pods}
            return
        group_of = self._group_of
        for key in changed:
            for p in groups[key].pods:
                group_of[p.key] = key

    def _roll_up(
        self,
        snapshot: ClusterSnapshot,
        decisions: Decisions,
        bound: set[str],
        evicted: set[str],
        changed: list[str],
        touched: set[str],
    ) -> dict[str, QueueUsage]:
        """:func:`queue_usage`, or the last one again when it is certain to be the same: the same groups
        and queue tree, and every group that changed (another object, or a pod of it bound or evicted
        now) in the same queue with the same preemptibility and an equal usage."""
        groups, last = snapshot.podgroups, self._rolled_up
        tree = {name: (q.parent, tuple(q.children)) for name, q in snapshot.queues.items()}
        if last is not None and len(groups) == len(self._last_groups) and tree == self._tree:
            shares, last_groups = self._shares, self._last_groups
            fresh: dict[str, tuple[str, bool, GroupUsage]] = {}
            for key in (*changed, *touched):
                pg = groups.get(key)
                if pg is None or key not in last_groups:  # a group came (and so, as many as came, went)
                    break
                share = (pg.queue, pg.preemptible, self.usages(pg, bound, evicted))
                if shares.get(key) != share:
                    break
                fresh[key] = share
            else:
                shares.update(fresh)
                return last
        shares = {}

        def usage_of(pg: Any, bound: set[str], evicted: set[str]) -> GroupUsage:
            use = self.usages(pg, bound, evicted)
            shares[pg.key] = (pg.queue, pg.preemptible, use)
            return use

        rolled_up = queue_usage(snapshot, decisions, usage_of)
        self._rolled_up, self._shares, self._tree = rolled_up, shares, tree
        return rolled_up

    def _group(
        self,
        key: str,
        pg: Any,
        raw_pg: dict[str, Any] | None,
        outcome: Any,
        decisions: Decisions,
        pods: dict,
        bound: set[str],
        evicted: set[str],
        now: str,
    ) -> bool:
        """One pod group's conditions, events, status and annotations; True when it needed none."""
        message = outcome.message if outcome else ""
        reason = outcome.reason if outcome else ""
        causes = outcome.causes if outcome else []
        if message and causes and reason not in ("NotReady", "Pipelined"):
            message = cause_text(causes[0])
        explain = bool(message) and reason not in ("NotReady", "Pipelined")
        quiet = not explain
        if explain:  # only then are the pending pods needed
            pending_pods = [p for p in pg.pods if p.status is PodStatus.PENDING and p.key not in bound]
            explain = bool(pending_pods)
        if explain:
            mark = raw_pg is None or (raw_pg.get("spec") or {}).get("markUnschedulable") is not False
            for pod in pending_pods:
                raw = pods.get(pod.key)
                if raw is None:
                    continue
                self.events.record(raw, "Warning", "Unschedulable", message)
                if mark:
                    self._pod_condition(raw, message, now)
        elif message and reason == "NotReady" and raw_pg is not None:
            self.events.record(raw_pg, "Normal", "NotReady", message)
            quiet = False
        if raw_pg is not None:
            text = message if explain else ""
            reasons = condition_reasons(causes, reason, text)
            quiet = self._podgroup(key, pg, raw_pg, decisions, bound, evicted, text, reasons, now) and quiet
        return quiet

    # -- pods -----------------------------------------------------------------------------------
    def _pod_condition(self, raw: dict[str, Any], message: str, now: str) -> None:
        for cond in (raw.get("status") or {}).get("conditions") or []:
            if (
                cond.get("type") == "PodScheduled"
                and cond.get("status") == "False"
                and cond.get("reason") == "Unschedulable"
                and cond.get("message") == message
            ):
                return
        meta = raw["metadata"]
        key = f"Pod {meta['namespace']}/{meta['name']}/{meta.get('uid')}"
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastTransitionTime": now,
        }
        memo = ("PodScheduled", message)
        self._submit(
            key,
            memo,
            lambda: self.kube.patch(
                PODS.path(meta["namespace"], meta["name"], "status"),
                {"status": {"conditions": [condition]}},
                kind="strategic",
            ),
        )

    # -- pod groups -----------------------------------------------------------------------------
    def _podgroup(
        self,
        key: str,
        pg: Any,
        raw: dict[str, Any],
        decisions: Decisions,
        bound: set[str],
        evicted: set[str],
        message: str,
        reasons: list[dict[str, Any]],
        now: str,
    ) -> bool:
        """The PodGroup's status and annotations; True when neither needed a write."""
        use = self.usages(pg, bound, evicted)
        outcome = decisions.jobs.get(key)
        inputs = (
            outcome,
            message,
            reasons,
            pg.min_member,
            pg.preemptible,
            decisions.last_start.get(key, _ABSENT),
            decisions.stale_since.get(key, _ABSENT),
        )
        clean = self._clean.get(key)
        if clean is not None and clean[0] is raw and (clean[1] is use or clean[1] == use) and clean[2] == inputs:
            return True
        requested, allocated = use.requested, use.allocated
        running, pending, succeeded, failed = use.running, use.pending, use.succeeded, use.failed
        desired: dict[str, Any] = {
            "phase": "Running" if running and running >= pg.min_member else (outcome.status if outcome else "Pending"),
            "running": running,
            "pending": pending,
            "succeeded": succeeded,
            "failed": failed,
            "resourcesStatus": {
                "requested": quantities(requested),
                "allocated": quantities(allocated),
                "allocatedNonPreemptible": {} if pg.preemptible else quantities(allocated),
            },
        }
        current = raw.get("status") or {}
        old_conditions = current.get("schedulingConditions") or []
        if message:
            desired["schedulingConditions"] = scheduling_conditions(old_conditions, message, reasons, now)
        elif old_conditions and running:
            desired["schedulingConditions"] = []
        written = self._write_status(
            f"PodGroup {key}",
            PODGROUPS.path(raw["metadata"]["namespace"], raw["metadata"]["name"], "status"),
            raw,
            desired,
        )
        annotations: dict[str, str | None] = {}
        have = (raw.get("metadata") or {}).get("annotations") or {}
        if key in decisions.last_start:
            value = format_time(decisions.last_start[key])
            if have.get(keys.LAST_START_TIMESTAMP_ANNOTATION) != value:
                annotations[keys.LAST_START_TIMESTAMP_ANNOTATION] = value
        if key in decisions.stale_since:
            moment = decisions.stale_since[key]
            value = format_time(moment) if moment is not None else None
            if have.get(keys.STALE_TIMESTAMP_ANNOTATION) != value:
                annotations[keys.STALE_TIMESTAMP_ANNOTATION] = value
        if not written and not annotations:
            self._clean[key] = (raw, use, inputs)
            return True
        self._clean.pop(key, None)
        if annotations:
            meta = raw["metadata"]
            self._submit(
                f"PodGroup {key} annotations",
                annotations,
                lambda: self.kube.patch(
                    PODGROUPS.path(meta["namespace"], meta["name"]), {"metadata": {"annotations": annotations}}
                ),
            )
        return False

    def _refused_podgroups(
        self, snapshot: ClusterSnapshot, pods: dict, podgroups: dict, queues: dict, now: str
    ) -> None:
        """PodGroups the cycle left out because their queue does not exist, and that have pods of this
        scheduler (pods that are not another scheduler's): KAI's QueueDoesNotExist condition."""
        missing = {}
        for key in podgroups.keys() - snapshot.podgroups.keys():
            raw = podgroups[key]
            queue = str((raw.get("spec") or {}).get("queue") or "")
            if queue and queue not in queues:
                missing[key] = raw
        if not missing:
            return
        foreign = {p.key for p in snapshot.foreign_pods}
        ours: set[str] = set()
        for pod_key, raw_pod in pods.items():
            meta = raw_pod.get("metadata") or {}
            group = (meta.get("annotations") or {}).get(keys.POD_GROUP_ANNOTATION)
            if group and pod_key not in foreign:
                ours.add(f"{meta.get('namespace')}/{group}")
        for key in sorted(ours & set(missing)):
            self._refused_podgroup(key, missing[key], now)

    def _refused_podgroup(self, key: str, raw: dict[str, Any], now: str) -> None:
        queue = str((raw.get("spec") or {}).get("queue") or "")
        message = f"Queue '{queue}' does not exist: create it, or name an existing leaf queue in spec.queue."
        reasons = [{"reason": "QueueDoesNotExist", "message": message, "details": {"queueDetails": {"name": queue}}}]
        old = (raw.get("status") or {}).get("schedulingConditions") or []
        desired = {"schedulingConditions": scheduling_conditions(old, message, reasons, now)}
        meta = raw["metadata"]
        self._write_status(f"PodGroup {key}", PODGROUPS.path(meta["namespace"], meta["name"], "status"), raw, desired)

    # -- plumbing -------------------------------------------------------------------------------
    def _write_status(self, key: str, path: str, raw: dict[str, Any], desired: dict[str, Any]) -> bool:
        """Write `desired` unless the object says it already; False when there was nothing to write."""
        current = raw.get("status") or {}
        if all(_same(current.get(k), v) for k, v in desired.items()):
            # Nothing to write. Forget what was last written rather than remember `desired`: the cache may
            # be behind a write of ours still on its way back (it shows an older value that happens to be
            # the desired one); remembered, a later change back to `desired` would never be written.
            with self._lock:
                if key not in self._in_flight:
                    self._written.pop(key, None)
            return False
        # The patch is made on the writer's thread, and only when the write is not skipped.
        self._submit(key, desired, lambda: self.kube.patch(path, {"status": _with_removals(current, desired)}))
        return True

    def _submit(self, key: str, memo: Any, write: Callable[[], Any]) -> None:
        with self._lock:
            if len(self._written) > 200_000:  # a bound on memory: forgetting costs one extra write each
                self._written.clear()
            if self._written.get(key) == memo or key in self._in_flight:
                self.skipped += 1
                return
            self._in_flight.add(key)

        def run() -> None:
            try:
                log.debug("writing %s: %s", key, memo)
                write()
                with self._lock:
                    self._written[key] = memo
                self.writes += 1
            except ApiError as err:
                if err.status != 404:
                    log.warning("%s: status not written: %s", key, err)
            finally:
                with self._lock:
                    self._in_flight.discard(key)

        self.pool.submit(run)

    def forget(self, key: str) -> None:
        with self._lock:
            self._written.pop(key, None)

    def shutdown(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=False)


def cause_text(cause: Cause) -> str:
    """The first cause as one line for a pod's condition and events: what, and what would change it."""
    text = cause.message.rstrip(".") + "."
    return f"{text} What would change it: {cause.remedy}." if cause.remedy else text


def queue_details(figures: QueueFigures) -> dict[str, Any]:
    """KAI's ``details.queueDetails``: the queue's figures as quantities (unlimited ones left out)."""
    return {
        "name": figures.name,
        "queueRequestedResources": queue_quantities(figures.requested),
        "queueDeservedResources": queue_quantities(figures.deserved),
        "queueAllocatedResources": queue_quantities(figures.allocated),
        "queueAllocatedNonPreemptibleResources": queue_quantities(figures.allocated_non_preemptible),
        "queueResourceLimits": queue_quantities(figures.limit),
        "podGroupRequestedResources": queue_quantities(figures.job_requested),
        "podGroupRequestedNonPreemptibleResources": queue_quantities(figures.job_requested_non_preemptible),
    }


def condition_reasons(causes: list[Cause], reason: str, message: str) -> list[dict[str, Any]]:
    """``reasons[]`` of the scheduling condition: one per cause in rank order, with KAI's reason code and,
    for queue causes, ``details.queueDetails``; without causes, the fit error's own reason."""
    if not message:
        return []
    if not causes:
        return [{"reason": reason if reason in KAI_REASONS else "PodSchedulingErrors", "message": message}]
    out = []
    for cause in causes:
        entry: dict[str, Any] = {"reason": cause.kai_reason, "message": cause_text(cause)}
        if cause.queue is not None:
            entry["details"] = {"queueDetails": queue_details(cause.queue)}
        out.append(entry)
    return out


def scheduling_conditions(
    old_conditions: list[dict[str, Any]], message: str, reasons: list[dict[str, Any]], now: str
) -> list[dict[str, Any]]:
    """KAI's one ``UnschedulableOnNodePool`` entry for the node pool; kept as it is while it says the same."""
    for c in old_conditions:
        if (
            c.get("nodePool") == NODE_POOL
            and c.get("message") == message
            and c.get("reason") == "Unschedulable"
            and _same(c.get("reasons"), reasons)
        ):
            return old_conditions
    ids = [int(c.get("transitionID") or 0) for c in old_conditions if str(c.get("transitionID", "")).isdigit()]
    return [
        {
            "type": "UnschedulableOnNodePool",
            "nodePool": NODE_POOL,
            "reason": "Unschedulable",
            "message": message,
            "reasons": reasons,
            "transitionID": str(max(ids, default=0) + 1),
            "lastTransitionTime": now,
            "status": "True",
        }
    ]


def _same(have: Any, want: Any) -> bool:
    """Whether the object's current value already says what we want (empty == absent)."""
    if not want and not have:
        return True
    if isinstance(want, dict) and isinstance(have, dict):
        keys_ = set(want) | set(have)
        return all(_same(have.get(k), want.get(k)) for k in keys_)
    return have == want


def _with_removals(current: dict[str, Any], desired: dict[str, Any]) -> dict[str, Any]:
    """The merge patch for `desired`: within each map it sets, a key `current` has and `desired` lacks
    becomes null (a merge patch of ``{}`` would leave the old keys); other status fields are left alone."""
    return {k: _nested(current.get(k), v) for k, v in desired.items()}


def _nested(have: Any, want: Any) -> Any:
    if not isinstance(want, dict) or not isinstance(have, dict):
        return want
    out: dict[str, Any] = {k: _nested(have.get(k), v) for k, v in want.items()}
    for k in have:
        if k not in want:
            out[k] = None
    return out
