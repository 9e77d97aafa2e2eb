"""Why a pod group waits, or why it was evicted: structured, ranked causes.

A :class:`Cause` has a code, a one-sentence message, the object it names (``Queue q``,
``PodGroup ns/pg``, ``Node n``), the numbers behind it, and what would change it (``remedy``).
Queue causes also carry the queue's figures (:class:`QueueFigures`, KAI's ``queueDetails``).

Causes reach a job through the session's existing why-pending path: a check that fails returns a
:class:`~kai.framework.status.Status` that may carry a cause (proportion's capacity checks, topology),
evicting actions note why they could not make room (:meth:`Session.note_cause`), and when the session
closes, :func:`explain_job` adds what the end state shows (no node passes the predicates, the job is
larger than the cluster, above its queue's fair share, fragmented, short by k of m pods) and ranks
them all.

The rank: the cause that, removed, would let the job start comes first. Causes no eviction and no
waiting can remove (a missing queue, a feature kai lacks, a queue limit, quota for non-preemptible
work, no node that matches, a job larger than its nodes) come before the policies that stop
evictions (fair share, min-runtime, the disruption budget, reclaim's rules), which come before what
the cluster's current use shows (topology, fragmentation, a gang short of resources); notes about
the job's own state (not ready, pipelined) come last. Ties keep the order causes were found in.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kai.framework.status import Code
from kai.model import ACTIVE

if TYPE_CHECKING:
    from kai.framework.session import Session
    from kai.model import PodGroupInfo, PodInfo

EPS = 1e-9

# KAI's reason codes (PodGroup status.schedulingConditions[].reasons[].reason); every other code of
# ours is written there as PodSchedulingErrors, with our code in `kai explain`.
KAI_REASONS = frozenset({"OverLimit", "NonPreemptibleOverQuota", "QueueDoesNotExist"})

# Rank of each code (smaller first); see the module docstring.
RANKS: dict[str, int] = {
    "Evicted": 0,
    "QueueDoesNotExist": 1,
    "PodGroupDoesNotExist": 1,
    "NotBuilt": 2,
    "OverLimit": 3,
    "NonPreemptibleOverQuota": 4,
    "Unresolvable": 5,
    "NodePredicates": 5,
    "LargerThanCluster": 6,
    "OverFairShare": 7,
    "MinRuntime": 8,
    "DisruptionBudget": 9,
    "Topology": 12,
    "Fragmentation": 13,
    "GangShort": 14,
    "ReclaimRules": 15,
    "NoVictims": 15,
    "StaleJob": 16,
    "NotReady": 17,
    "Pipelined": 18,
}
# Codes that mean the job cannot run as it is, whatever other jobs do.
BLOCKING = frozenset(code for code, rank in RANKS.items() if 1 <= rank <= 6)


@dataclass(frozen=True, slots=True)
class QueueFigures:
    """A queue's figures at the time of the cause, in KAI's queue units (gpu devices, cpu millicores,
    memory MB); -1 is unlimited. As KAI's ``queueDetails``."""

    name: str
    deserved: dict[str, float]
    fair_share: dict[str, float]
    allocated: dict[str, float]
    allocated_non_preemptible: dict[str, float]
    requested: dict[str, float]
    limit: dict[str, float]
    job_requested: dict[str, float]
    job_requested_non_preemptible: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "deserved": self.deserved,
            "fairShare": self.fair_share,
            "allocated": self.allocated,
            "allocatedNonPreemptible": self.allocated_non_preemptible,
            "requested": self.requested,
            "limit": self.limit,
            "podGroupRequested": self.job_requested,
            "podGroupRequestedNonPreemptible": self.job_requested_non_preemptible,
        }


@dataclass(frozen=True, slots=True)
class Cause:
    code: str
    message: str
    subject: str = ""  # the object it names: "Queue q", "PodGroup ns/pg", "Node n"
    remedy: str = ""  # what would change it
    numbers: dict[str, Any] = field(default_factory=dict)
    queue: QueueFigures | None = None

    @property
    def rank(self) -> int:
        return RANKS.get(self.code, 15)

    @property
    def kai_reason(self) -> str:
        """The reason code KAI would write for it."""
        return self.code if self.code in KAI_REASONS else "PodSchedulingErrors"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "kaiReason": self.kai_reason,
            "rank": self.rank,
            "message": self.message,
            "subject": self.subject,
            "remedy": self.remedy,
            "numbers": dict(sorted(self.numbers.items())),
        }
        if self.queue is not None:
            out["queue"] = self.queue.to_json()
        return out


def ranked(causes: Iterable[Cause]) -> list[Cause]:
    """Sorted by rank (stable), one cause per (code, subject): the first found wins."""
    seen: set[tuple[str, str]] = set()
    out = []
    for cause in causes:
        key = (cause.code, cause.subject)
        if key not in seen:
            seen.add(key)
            out.append(cause)
    return sorted(out, key=lambda c: c.rank)


def num(value: float) -> str:
    """A number as people write it: 8, 0.5, 33.33."""
    if abs(value - round(value)) < 1e-6:
        return str(round(value))
    return f"{value:.2f}".rstrip("0").rstrip(".")


def gpus(value: float) -> str:
    return f"{num(value)} GPU" + ("" if abs(value - 1) < 1e-9 else "s")


# -- the end-of-cycle analysis -----------------------------------------------------------------------


@dataclass(slots=True)
class _Fit:
    """How many of the batch's tasks fit on the nodes that pass their predicates."""

    tasks: int
    fit_free: int  # with what is free (idle or being released) now
    fit_empty: int  # on empty nodes (everything evicted)
    passing: int  # nodes that pass the first task's predicates
    free_total: np.ndarray  # free resources summed over passing nodes
    need_total: np.ndarray
    gpus_to_move: float  # GPUs consolidation would have to move so that the batch fits (fragmentation)
    most_free_gpus: float  # free GPUs on the matching node with the most
    reasons: Counter[str]  # why nodes fail the first task that does not fit (kube-scheduler's histogram)


def _per_node(free: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """How many tasks of request `vec` fit on each node row of `free`."""
    cols = np.flatnonzero(vec > EPS)
    if cols.size == 0:
        return np.full(free.shape[0], 1 << 30, dtype=np.int64)
    ratio = np.floor((free[:, cols] + EPS) / vec[cols])
    return np.maximum(ratio.min(axis=1), 0).astype(np.int64)


def _fit(ssn: Session, job: PodGroupInfo, tasks: list[PodInfo]) -> _Fit | None:
    from kai.framework.placement import filter_nodes, no_node_reasons

    nodes = ssn.nodes
    if not tasks or not len(nodes):
        return None
    free_all = nodes.idle + nodes.releasing
    remaining_free = free_all.copy()
    remaining_empty = nodes.allocatable.copy()
    fit_free = fit_empty = 0
    reasons: Counter[str] = Counter()
    passing = 0
    masks: dict[Any, np.ndarray] = {}
    first_mask: np.ndarray | None = None
    need_total = np.zeros(free_all.shape[1])
    for task in tasks:
        sig = task.placement_signature
        mask = masks.get(sig)
        if mask is None:
            mask = masks[sig] = filter_nodes(ssn, task)
        if first_mask is None:
            first_mask, passing = mask, int(mask.sum())
        vec = ssn.vector(task)
        need_total += vec
        rows = np.flatnonzero(mask & (_per_node(remaining_free, vec) > 0))
        if rows.size:
            remaining_free[rows[0]] -= vec
            fit_free += 1
        elif not reasons:
            reasons = no_node_reasons(ssn, task)
        rows = np.flatnonzero(mask & (_per_node(remaining_empty, vec) > 0))
        if rows.size:
            remaining_empty[rows[0]] -= vec
            fit_empty += 1
    assert first_mask is not None
    free_total = free_all[first_mask].sum(axis=0)
    move = 0.0
    g = float(ssn.vector(tasks[0])[nodes.gpu_col])
    if g > EPS and fit_free < len(tasks):
        # Whole free GPUs stranded on nodes where a task does not fit: topping nodes up to one more task
        # each, cheapest first, is what consolidation would have to move.
        free_gpu = free_all[first_mask, nodes.gpu_col]
        cap = nodes.allocatable[first_mask, nodes.gpu_col]
        rest = np.mod(free_gpu + EPS, g)
        costs = sorted(float(g - r) for r, c, f in zip(rest, cap, free_gpu, strict=True) if c + EPS >= g and r > EPS)
        missing = len(tasks) - fit_free
        move = sum(costs[:missing]) if len(costs) >= missing else math.inf
    most = float(free_all[first_mask, nodes.gpu_col].max()) if first_mask.any() else 0.0
    return _Fit(len(tasks), fit_free, fit_empty, passing, free_total, need_total, move, round(most, 6), reasons)


def _resource_phrase(ssn: Session, vec: np.ndarray) -> str:
    names = ssn.space.names
    parts = []
    for col in np.flatnonzero(vec > EPS):
        name = names[col]
        amount = float(vec[col])
        if col == ssn.nodes.gpu_col:
            parts.append(gpus(amount))
        elif name == "cpu":
            parts.append(f"{num(amount / 1000)} CPU cores")
        elif name == "memory":
            parts.append(f"{num(amount / 1e9)} GB of memory")
        elif name != "pods":
            parts.append(f"{num(amount)} {name}")
    return ", ".join(parts) or "nothing"


def _placement_causes(ssn: Session, job: PodGroupInfo, tasks: list[PodInfo], fit: _Fit) -> list[Cause]:
    out: list[Cause] = []
    subject = f"PodGroup {job.key}"
    m = fit.tasks
    gpu_col = ssn.nodes.gpu_col
    if fit.passing == 0:
        text = ", ".join(f"{n} {r}" for r, n in sorted(fit.reasons.items(), key=lambda kv: (-kv[1], kv[0])))
        out.append(
            Cause(
                "NodePredicates",
                f"No node passes the predicates of pod {tasks[0].key}" + (f": {text}." if text else "."),
                subject,
                "change the pods' node selector, affinity or tolerations, or add matching nodes",
                {"nodes": len(ssn.nodes), "passing": 0, "reasons": dict(fit.reasons)},
            )
        )
        return out
    if fit.fit_empty < m:
        per_task = ssn.vector(tasks[0])
        out.append(
            Cause(
                "LargerThanCluster",
                f"Even with every other pod gone, the {fit.passing} node(s) that match hold only "
                f"{fit.fit_empty} of the {m} pod(s) of {_resource_phrase(ssn, per_task)} the job needs at once.",
                subject,
                f"ask for at most {fit.fit_empty} pods of {_resource_phrase(ssn, per_task)}, or add nodes"
                if fit.fit_empty
                else "ask for less per pod than the largest matching node has, or add larger nodes",
                {"pods": m, "fitOnEmptyNodes": fit.fit_empty, "matchingNodes": fit.passing},
            )
        )
        return out
    if fit.fit_free >= m:
        return out
    short = np.maximum(fit.need_total - fit.free_total, 0.0)
    if not (short > EPS).any() and math.isfinite(fit.gpus_to_move):
        move = round(fit.gpus_to_move, 6)
        g = float(ssn.vector(tasks[0])[gpu_col])
        single = m == 1
        spread = (
            f"no node has {gpus(g)} free (at most {gpus(fit.most_free_gpus)} on one node)"
            if single
            else f"only {fit.fit_free} of the {m} pods ({gpus(g)} each) fit on the nodes as they are"
        )
        out.append(
            Cause(
                "Fragmentation",
                f"The matching nodes have {gpus(float(fit.free_total[gpu_col]))} free in all, enough for the job's "
                f"{gpus(float(fit.need_total[gpu_col]))}, but spread out: {spread}.",
                subject,
                (f"starts when {gpus(g)} free up on one node" if single else f"starts when {gpus(move)} more free up "
                 "on the right nodes") + f"; consolidation would have to move {gpus(move)}",
                {
                    "freeGpus": round(float(fit.free_total[gpu_col]), 6),
                    "neededGpus": round(float(fit.need_total[gpu_col]), 6),
                    "mostFreeGpusOnOneNode": fit.most_free_gpus,
                    "podsThatFit": fit.fit_free,
                    "pods": m,
                    "gpusToMove": move,
                },
            )
        )
        return out
    reasons = ", ".join(f"{n} {r}" for r, n in sorted(fit.reasons.items(), key=lambda kv: (-kv[1], kv[0])))
    what = _resource_phrase(ssn, short) if (short > EPS).any() else "room on suitable nodes"
    gang = f"Resources were found for {fit.fit_free} of the {m} pods the job needs at once" if m > 1 else (
        f"Pod {tasks[0].key} fits on no node"
    )
    out.append(
        Cause(
            "GangShort",
            f"{gang}" + (f": {reasons}." if reasons else "."),
            subject,
            f"starts when another {what} free up",
            {
                "pods": m,
                "podsThatFit": fit.fit_free,
                "short": {ssn.space.names[c]: float(short[c]) for c in np.flatnonzero(short > EPS)},
                "reasons": dict(fit.reasons),
            },
        )
    )
    return out


def _fair_share_cause(ssn: Session, job: PodGroupInfo, cache: dict[Any, Any]) -> Cause | None:
    accounting = ssn.accounting
    if accounting is None:
        return None
    figures = accounting.queue_figures(job.queue, job)
    if figures is None:
        return None
    share, allocated, want = figures.fair_share["gpu"], figures.allocated["gpu"], figures.job_requested["gpu"]
    if want <= EPS or allocated + want <= share + 1e-6:
        return None
    held = cache.get(("held", job.queue))
    if held is None:
        held = cache[("held", job.queue)] = _held_elsewhere(ssn, job.queue)
    if held <= EPS:
        return None  # within its share, or nothing any other queue holds that a reclaim could take
    room = max(share - allocated, 0.0)
    remedy = (
        f"ask for at most {gpus(room)}" if room > EPS else f"waits for queue {job.queue}'s running jobs to finish"
    )
    return Cause(
        "OverFairShare",
        f"Queue {job.queue} has a fair share of {gpus(share)} and uses {gpus(allocated)}; this job asks for "
        f"{gpus(want)} more, so no reclaim will make room for it (it can use only GPUs nobody else needs).",
        f"Queue {job.queue}",
        remedy,
        {"fairShare": share, "allocated": allocated, "requested": want, "deserved": figures.deserved["gpu"]},
        figures,
    )


def note_action_failure(ssn: Session, action: str, job: PodGroupInfo, why: str) -> None:
    """An evicting action found no acceptable victims for the job (`why`: the last rule that refused)."""
    code = "ReclaimRules" if action == "reclaim" else "NoVictims"
    if "disruption budget" in why:
        code = "DisruptionBudget"
    text = f"{action} found no set of victims that makes room" + (f": {why}" if why else "") + "."
    remedy = {
        "ReclaimRules": "waits until other queues use more than their fair share, or for idle GPUs",
        "NoVictims": "waits for lower-priority or movable jobs to make room, or for idle GPUs",
        "DisruptionBudget": _STATE_REMEDY["DisruptionBudget"],
    }[code]
    ssn.note_cause(job, Cause(code, text, f"PodGroup {job.key}", remedy, {"action": action}))


def protected_victim(ssn: Session, preemptor: PodGroupInfo, victim: PodGroupInfo, action: str, until: float) -> None:
    """Min-runtime kept `victim` from being evicted for `preemptor` until `until` (epoch seconds)."""
    held = sum(float(ssn.vector(p)[ssn.nodes.gpu_col]) for p in victim.pods if p.status in ACTIVE)
    ssn.note_cause(
        preemptor,
        Cause(
            "MinRuntime",
            f"job {victim.key} is protected from {action} by its min-runtime",
            f"PodGroup {victim.key}",
            "",
            {"victim": victim.key, "until": until, "gpus": round(held, 6), "action": action},
        ),
    )


def _merge_min_runtime(notes: list[Cause], free_gpus: float, need_gpus: float) -> Cause | None:
    """One cause for all victims min-runtime protects, when they would have made room."""
    from kai.api.timeutil import format_time

    protected = [c for c in notes if c.code == "MinRuntime"]
    if not protected:
        return None
    victims = {}
    for c in protected:
        key = c.numbers["victim"]
        victims[key] = min(victims.get(key, c.numbers["until"]), c.numbers["until"])
    held = sum({c.numbers["victim"]: c.numbers["gpus"] for c in protected}.values())
    if need_gpus > EPS and free_gpus + held + EPS < need_gpus:
        return None  # even all of them would not make room
    first = min(victims, key=lambda k: (victims[k], k))
    names = ", ".join(sorted(victims))
    return Cause(
        "MinRuntime",
        f"The jobs whose eviction would make room are protected by their queue's min-runtime: {names} "
        f"({gpus(held)} in all).",
        f"PodGroup {first}",
        f"waits for job {first}'s min-runtime until {format_time(victims[first])}",
        {"victims": {k: format_time(v) for k, v in sorted(victims.items())}, "gpus": held},
    )


def _held_elsewhere(ssn: Session, queue: str) -> float:
    """GPUs the queues outside `queue`'s own top-level queue held when the session opened."""
    reports = ssn.decisions.queues
    path = ssn.queue_path(queue)
    own = path[-1].name if path else queue
    return sum(
        r.allocated.get("gpu", 0.0)
        for name, r in reports.items()
        if name != own and (q := ssn.queues.get(name)) is not None and not q.parent
    ) + _held_in_siblings(ssn, path)


def _held_in_siblings(ssn: Session, path: list[Any]) -> float:
    """GPUs held by the sibling subtrees along the queue's path (reclaim between siblings of a parent)."""
    reports = ssn.decisions.queues
    total = 0.0
    for child, parent in itertools.pairwise(path):
        for name in parent.children:
            if name != child.name and name in reports:
                total += reports[name].allocated.get("gpu", 0.0)
    return total


def explain_job(
    ssn: Session, job: PodGroupInfo, fit_status: Any, reason: str, message: str, cache: dict[Any, Any] | None = None
) -> list[Cause]:
    """The ranked causes of a job that ends the session pending (or was evicted in it). `cache` (one dict
    for the whole close) shares the node analysis between jobs of the same shape: the state no longer
    changes once the actions are done."""
    from kai.framework.placement import tasks_to_allocate

    cache = {} if cache is None else cache

    causes: list[Cause] = []
    if fit_status is not None and getattr(fit_status, "cause", None) is not None:
        causes.append(fit_status.cause)
    elif reason in ("NotReady", "Pipelined", "StaleJob", "DisruptionBudget"):
        causes.append(Cause(reason, message, f"PodGroup {job.key}", _STATE_REMEDY.get(reason, "")))
    elif fit_status is not None and fit_status.code is Code.UNRESOLVABLE:  # a pre-predicate no eviction helps
        causes.append(
            Cause("Unresolvable", fit_status.message, f"PodGroup {job.key}", "change the pod spec", {"reason": reason})
        )
    notes = ssn.noted_causes.get(job.key, [])
    causes.extend(c for c in notes if c.code != "MinRuntime")
    for use in ssn.snapshot.unsupported:
        if use.name == job.key or any(use.name == p.key for p in job.pods):
            causes.append(
                Cause("NotBuilt", use.note, f"{use.kind} {use.name}", f"leave out {use.field} (not built in kai)", {})
            )
    if job.has_pending() and reason not in ("NotReady", "Pipelined"):
        tasks = tasks_to_allocate(ssn, job)
        shape = tuple((t.placement_signature, ssn.vector(t).tobytes(), t.gpu) for t in tasks)
        if shape not in cache:
            cache[shape] = _fit(ssn, job, tasks)
        fit = cache[shape]
        if fit is not None:
            placement = _placement_causes(ssn, job, tasks, fit)
            if placement and placement[0].code in ("Fragmentation", "GangShort"):
                share = _fair_share_cause(ssn, job, cache)
                if share is not None:
                    causes.append(share)
                gpu = ssn.nodes.gpu_col
                protected = _merge_min_runtime(notes, float(fit.free_total[gpu]), float(fit.need_total[gpu]))
                if protected is not None:
                    causes.append(protected)
            causes.extend(placement)
    if not job.has_pending():
        causes = [c for c in causes if c.code not in ("ReclaimRules", "NoVictims")]
    return ranked(causes)


_STATE_REMEDY = {
    "NotReady": "starts to be scheduled once its workload has created minMember pods",
    "Pipelined": "starts when the pods being released are gone",
    "StaleJob": "its workload controller restarts the pods",
    "DisruptionBudget": "raise schedulerParams maxEvictedToRequestedGpuRatio / maxEvictedGpusPerQueuePerCycle",
}


def eviction_causes(ssn: Session) -> dict[str, list[Cause]]:
    """For each pod group that lost pods this cycle: who took its place, by which rule."""
    rules = {
        "reclaim": "reclaim (fair share: the preemptor's queue is below its fair share and takes back resources)",
        "preempt": "preempt (priority: a higher-priority job of the same queue)",
        "consolidation": "consolidation (moved to another node to make room; it is placed again)",
        "stalegangeviction": "stale-gang eviction (fewer pods running than its minMember for too long)",
    }
    counts: Counter[tuple[str, str, str]] = Counter()
    if not ssn.decisions.evictions:
        return {}
    evicted = {e.pod for e in ssn.decisions.evictions}
    jobs = {p.key: job.key for job in ssn.jobs.values() for p in job.pods if p.key in evicted}
    for e in ssn.decisions.evictions:
        counts[(jobs.get(e.pod, ""), e.action, e.by)] += 1
    out: dict[str, list[Cause]] = {}
    for (key, action, by), pods in sorted(counts.items()):
        if not key:
            continue
        rule = rules.get(action, action)
        preemptor = ssn.jobs.get(by)
        extra = ""
        if preemptor is not None and action == "preempt":
            victim = ssn.jobs.get(key)
            extra = f" (priority {preemptor.priority} over {victim.priority if victim else '?'})"
        text = f"{pods} pod(s) evicted by {rule}" + (f" for {by}{extra}" if by else "") + "."
        out.setdefault(key, []).append(
            Cause(
                "Evicted",
                text,
                f"PodGroup {by}" if by else f"PodGroup {key}",
                "returns to the queue; starts again when resources allow",
                {"pods": pods, "action": action, "by": by},
            )
        )
    return out
