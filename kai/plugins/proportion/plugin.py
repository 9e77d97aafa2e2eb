"""proportion: hierarchical fair share (DRF over gpu, cpu and memory), queue order, queue capacity
checks (limits at every ancestor, non-preemptible work within deserved quota) and queue accounting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import numpy as np

from kai.api.keys import MIG_RESOURCE_PREFIX
from kai.framework.causes import Cause, QueueFigures
from kai.framework.decisions import QueueReport
from kai.framework.gpushare import node_fraction
from kai.framework.placement import tasks_to_allocate
from kai.framework.plugin import register_plugin
from kai.framework.podtable import CODE, status_mask
from kai.framework.session import Session
from kai.framework.statement import BatchHook
from kai.framework.status import SUCCESS, Status, unschedulable
from kai.model import (
    ALLOCATED,
    CPU,
    GPU,
    HOLDS_NODE,
    MEMORY,
    PodGroupInfo,
    PodInfo,
    PodStatus,
    QueueInfo,
    mig_compute,
)
from kai.plugins.proportion.fairshare import UNLIMITED, ShareRequest, divide
from kai.plugins.proportion.reclaim import ReclaimRules

RESOURCES = (GPU, CPU, MEMORY)  # the column order of every queue vector below
_ALLOCATED = status_mask(ALLOCATED)
_PENDING = CODE[PodStatus.PENDING]
LABELS = ("GPUs", "CPU millicores", "MB of memory")
MB = 1e6


@dataclass
class QueueAttrs:
    queue: QueueInfo
    deserved: np.ndarray
    limit: np.ndarray
    weight: np.ndarray
    request: np.ndarray = field(default_factory=lambda: np.zeros(3))
    allocated: np.ndarray = field(default_factory=lambda: np.zeros(3))
    allocated_np: np.ndarray = field(default_factory=lambda: np.zeros(3))  # of non-preemptible jobs
    fair_share: np.ndarray = field(default_factory=lambda: np.zeros(3))
    # `allocated` as floats, for the victim queue key; dropped whenever `allocated` changes (see _add).
    floats: list[float] | None = None

    @property
    def label(self) -> str:
        return self.queue.display_name or self.queue.name

    def allocatable(self, total: np.ndarray) -> np.ndarray:
        """max(deserved, fair share), capped by the limit where there is one (not by the cluster: a quota
        larger than the cluster stays as it is); -1 deserved means the limit, and with no limit either,
        everything (`total`)."""
        share = np.maximum(self.deserved, self.fair_share)
        share = np.where(self.limit == UNLIMITED, share, np.minimum(share, self.limit))
        return np.where(self.deserved == UNLIMITED, np.where(self.limit == UNLIMITED, total, self.limit), share)

    def unbounded(self) -> np.ndarray:
        """Resources whose allocatable share has no bound at all (-1 deserved and no limit)."""
        return (self.deserved == UNLIMITED) & (self.limit == UNLIMITED)


class AllocatableShare:
    """Queue order rule 7 as one element of a sort key: a queue whose allocatable share is at most the
    other's in every resource and smaller in one ranks first; shares that are not comparable that way
    (smaller in one resource, larger in another) tie, and the next rule decides. An unbounded share
    (-1 deserved, no limit) is larger than any number."""

    __slots__ = ("share",)

    def __init__(self, share: list[float]) -> None:
        self.share = share

    def __lt__(self, other: AllocatableShare) -> bool:
        pairs = list(zip(self.share, other.share, strict=True))
        return all(a <= b + 1e-9 for a, b in pairs) and any(a < b - 1e-9 for a, b in pairs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AllocatableShare) and not (self < other or other < self)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"AllocatableShare({self.share})"


def _first_over(
    path: list[QueueAttrs],
    request: np.ndarray,
    cap: str,
    used: str,
    lists: dict[int, tuple[np.ndarray, list[float]]],
) -> tuple[QueueAttrs, int] | None:
    """The first queue on the path (leaf first) and resource where used + request exceeds a set cap.
    `lists`: the caps as floats, per array (kept alive in the value; quotas and limits never change
    within a session)."""
    asked = None
    for attrs in path:
        array = getattr(attrs, cap)
        kept = lists.get(id(array))
        if kept is None or kept[0] is not array:
            kept = lists[id(array)] = (array, array.tolist())
        caps = kept[1]
        if caps[0] == caps[1] == caps[2] == UNLIMITED:
            continue
        if asked is None:
            asked = request.tolist()
        in_use = getattr(attrs, used).tolist()
        for col in range(3):
            if caps[col] != UNLIMITED and asked[col] > 0 and in_use[col] + asked[col] > caps[col] + 1e-9:
                return attrs, col
    return None


def _fmt(col: int, amount: float) -> str:
    if col == 0:
        return f"{amount:g} GPUs"
    if col == 1:
        return f"{amount / 1000:g} CPU cores"
    return f"{amount / 1e9:.4g} GB of memory"


@dataclass
class ProportionPlugin:
    k_value: float = 1.0
    saturation_multiplier: float = 1.0  # relcaimerSaturationMultiplier (reclaim's saturation-ratio rule)
    name: str = "proportion"
    attrs: dict[str, QueueAttrs] = field(default_factory=dict)

    # -- session open -------------------------------------------------------------------------
    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self._vectors: dict[object, np.ndarray] = {}
        self._paths: dict[str, list[QueueAttrs]] = {}
        self._job_requests: dict[str, np.ndarray] = {}
        self._amounts: dict[int, tuple[np.ndarray, float, float, float]] = {}  # id(queue vector) -> it, as floats
        self._by_id: dict[tuple[int, int], tuple[Any, Any, np.ndarray]] = {}  # (id(requests), id(gpu)) -> them, vector
        self._order_keys: dict[str, tuple[PodGroupInfo, tuple[Any, ...]]] = {}
        # per queue, its order key per request of the job next (until the queue's allocation changes)
        self._order_by_request: dict[str, dict[bytes, tuple[Any, ...]]] = {}
        self._constants: dict[str, tuple[list[float], list[float], list[float], AllocatableShare]] = {}
        self._cap_lists: dict[int, tuple[np.ndarray, list[float]]] = {}  # for _first_over
        self.total = self._total(ssn)
        for queue in ssn.queues.values():
            res = [queue.resources.get(r) for r in RESOURCES]
            self.attrs[queue.name] = QueueAttrs(
                queue,
                deserved=np.array([r.quota if r else 0.0 for r in res]),
                limit=np.array([r.limit if r else -1.0 for r in res]),
                weight=np.array([r.over_quota_weight if r else 1.0 for r in res]),
            )
        self._load(ssn)
        self._divide()
        ssn.decisions.queues = self.report()
        ssn.accounting = self
        hooks = ssn.hooks
        hooks.queue_order.append(self.queue_order_key)
        hooks.job_capacity.append(self.check_capacity)
        hooks.on_allocate.append(_Allocated(self))
        hooks.on_deallocate.append(lambda task: self._on_change(task, -1.0))
        ReclaimRules(self, self.saturation_multiplier, ssn).register()

    def _load(self, ssn: Session) -> None:
        """Every queue's allocation and request from the session's pods (request = allocated + pending),
        summed with one vectorised update per array, pod by pod in job order as one at a time would: each
        pod adds its queue vector to every queue of its job's queue path, leaf first."""
        table = ssn.table
        columns = table.columns
        if not len(columns.pods):
            return
        names = list(self.attrs)
        position = {name: i for i, name in enumerate(names)}
        # Per queue of the table's jobs (by its number, kai.framework.podtable.PodTable.queue_numbers): its
        # path's rows from the root down (empty for a queue the session does not know).
        queue_names, queue_of = table.queue_numbers()
        down: list[list[int]] = []
        for queue in queue_names:
            path = [position[q.name] for q in ssn.queue_path(queue)] if queue in self.attrs else []
            down.append(path[::-1])
        known = np.fromiter(map(bool, down), dtype=bool, count=len(down))
        pod_queue = queue_of[table.job_of]
        allocated = _ALLOCATED[columns.status]
        counted = known[pod_queue] & (allocated | (columns.status == _PENDING))
        if not counted.any():
            return
        # Each counted pod's queue vector, as a row of `vectors`: one per (Resources, GpuRequest) pair (any pod
        # of the pair gives it), but a gpu-memory pod's on its own (placed, it counts as its portion of its
        # node's GPUs).
        gpus = table.gpus.items
        by_memory = np.fromiter((g.memory_mib > 0 for g in gpus), dtype=bool, count=len(gpus))[columns.gpu]
        pair = columns.req * len(gpus) + columns.gpu
        plain = counted & ~by_memory
        plain_at = np.flatnonzero(plain)
        pairs = pair[plain_at]
        present = np.bincount(pairs, minlength=len(table.requests.items) * len(gpus)) > 0
        rank = np.cumsum(present) - 1  # a pair's row among the pairs present
        some = np.empty(len(present), dtype=np.intp)
        some[pairs] = plain_at  # a pod of each pair present
        pods = columns.pods
        vectors = [self.queue_vector(pods[i]) for i in some[np.flatnonzero(present)].tolist()]
        slot = np.empty(len(pods), dtype=np.intp)
        slot[plain_at] = rank[pairs]
        for i in np.flatnonzero(counted & by_memory).tolist():
            slot[i] = len(vectors)
            vectors.append(self.queue_vector(pods[i]))
        table_rows = np.array(vectors)
        depth = max(map(len, down))
        # Per depth from the root: each queue's row at that depth of the path (len(names), a bin of its own
        # that is dropped, where the path is shorter). A queue sits at one depth in every path through it,
        # so one bincount per depth adds, for each queue, its pods' vectors in pod order, as one update at
        # a time would: the same sums to the bit. A pod outside a field adds 0.0 (x + 0.0 is x: the sums
        # start at +0.0 and never become -0.0).
        outside = len(names)
        at_depth = [np.array([p[d] if len(p) > d else outside for p in down], dtype=np.intp) for d in range(depth)]
        touched = sorted({row for path in down for row in path})
        at = np.flatnonzero(counted)
        queues_of_pods, slots = pod_queue[at], slot[at]
        weights = [table_rows[:, c].take(slots) for c in range(3)]
        placed = allocated[at]
        non_preemptible = ~table.preemptible.take(table.job_of.take(at))
        targets = {"allocated": placed, "allocated_np": placed & non_preemptible, "request": None}
        rows_per_depth = [rows.take(queues_of_pods) for rows in at_depth]
        for field_name, mask in targets.items():
            if mask is not None and not mask.any():
                continue
            field_weights = weights if mask is None else [np.where(mask, w, 0.0) for w in weights]
            sums = np.zeros((outside + 1, 3))
            present = np.zeros(outside + 1, dtype=bool)
            for row in rows_per_depth:
                chosen = row if mask is None else row[mask]
                present[chosen] = True
                for c in range(3):
                    sums[:, c] += np.bincount(row, weights=field_weights[c], minlength=outside + 1)
            for i in touched:
                if present[i]:
                    setattr(self.attrs[names[i]], field_name, sums[i].copy())
                    self.attrs[names[i]].floats = None

    @staticmethod
    def _total(ssn: Session) -> np.ndarray:
        """What fair share divides: usable nodes' allocatable, less what other schedulers' pods hold. GPUs
        are whole GPUs plus MIG slices by their compute size (`nvidia.com/mig-3g.20gb` = 3), as in queue
        usage, plus the devices of GPU drivers' ResourceSlices (DRA)."""
        nodes = ssn.nodes
        to_queue = np.zeros((len(ssn.space.names), 3))  # session columns -> (GPUs, cpu, memory)
        for col, name in enumerate(ssn.space.names):
            if name == GPU:
                to_queue[col, 0] = 1.0
            elif name.startswith(MIG_RESOURCE_PREFIX):
                to_queue[col, 0] = mig_compute(name)
        to_queue[ssn.space.index(CPU), 1] = 1.0
        to_queue[ssn.space.index(MEMORY), 2] = 1.0
        usable = nodes.usable
        total = nodes.allocatable[usable].sum(axis=0) @ to_queue
        dra = np.fromiter(map(attrgetter("dra_gpus"), nodes.infos), dtype=float, count=len(nodes.infos))
        total[0] += dra[usable].sum() if dra.any() else 0  # DRA GPUs
        for pod in ssn.snapshot.foreign_pods:
            row = nodes.index.get(pod.node)
            if row is not None and usable[row] and pod.status in (PodStatus.RUNNING, PodStatus.RELEASING):
                total -= ssn.vector(pod) @ to_queue
                # Another scheduler's gpu-fraction pod takes its portion out of the total, as in KAI (which
                # does not do the same for a gpu-memory pod).
                total[0] -= pod.gpu.fraction * pod.gpu.num_devices
        return np.maximum(total, 0.0)

    def queue_vector(self, pod: PodInfo) -> np.ndarray:
        """What the pod counts as in queue accounting: (GPUs incl. fractions and MIG, cpu, memory)."""
        gpu = pod.gpu
        placed_by_memory = gpu.memory_mib > 0 and pod.status in HOLDS_NODE and pod.node in self.ssn.nodes.index
        if not placed_by_memory:  # the common case at once, by the objects' identity (kept alive in the entry)
            found = self._by_id.get((id(pod.requests), id(gpu)))
            if found is not None and found[0] is pod.requests and found[1] is gpu:
                return found[2]
        # Pods share Resources objects (one per distinct request); the GPU share comes from pod.gpu.
        key: object = (id(pod.requests), gpu, pod.node) if placed_by_memory else (id(pod.requests), gpu)
        vec = self._vectors.get(key)
        if vec is not None and not placed_by_memory:
            self._by_id[(id(pod.requests), id(gpu))] = (pod.requests, gpu, vec)
        if vec is None:
            if placed_by_memory:  # a placed gpu-memory pod counts as its portion of that node's GPUs
                row = self.ssn.nodes.index[pod.node]
                gpus = node_fraction(pod, int(self.ssn.gpus.node_memory[row])) * pod.gpu.num_devices + pod.gpu.dra
            elif pod.gpu.is_shared or pod.gpu.mig:
                gpus = pod.gpu.quota_gpus(self.ssn.min_gpu_memory_mib)
            else:
                gpus = pod.requests.get(GPU) + pod.gpu.dra  # DRA claims' GPUs, as KAI books them
            vec = np.array([gpus, pod.requests.get(CPU), pod.requests.get(MEMORY)])
            self._vectors[key] = vec
            if not placed_by_memory:
                self._by_id[(id(pod.requests), id(gpu))] = (pod.requests, gpu, vec)
        return vec

    def _path(self, queue: str) -> list[QueueAttrs]:
        path = self._paths.get(queue)
        if path is None:
            path = self._paths[queue] = [self.attrs[q.name] for q in self.ssn.queue_path(queue)]
        return path

    @staticmethod
    def _add(job: PodGroupInfo, vec: np.ndarray, path: list[QueueAttrs]) -> None:
        for attrs in path:
            attrs.allocated += vec
            attrs.floats = None
            if not job.preemptible:
                attrs.allocated_np += vec

    def _on_change(self, task: PodInfo, sign: float) -> None:
        job = self.ssn.jobs.get(task.job_key)
        if job is None:
            return
        path = self._paths.get(job.queue)
        if path is None:
            if job.queue not in self.attrs:
                return
            path = self._path(job.queue)
        elif not path:  # a queue the session does not know
            return
        vec = self.queue_vector(task)
        self._add(job, vec if sign == 1.0 else sign * vec, path)  # 1.0 * vec is vec
        self._job_requests.pop(job.key, None)
        order_keys, by_request = self._order_keys, self._order_by_request
        for attrs in path:
            order_keys.pop(attrs.queue.name, None)
            by_request.pop(attrs.queue.name, None)

    def _on_allocated(self, tasks: list[PodInfo]) -> None:
        """`_on_change(task, +1.0)` for each task in order: a run of tasks of one job with one queue vector
        is added in floats, one resource at a time, as the arrays' `+=` would add them one by one (a float
        addition is the same IEEE operation either way)."""
        start, count = 0, len(tasks)
        jobs, attrs_of = self.ssn.jobs, self.attrs
        while start < count:
            task = tasks[start]
            vec = self.queue_vector(task)
            job_key = task.job_key
            end = start + 1
            while end < count and tasks[end].job_key == job_key and self.queue_vector(tasks[end]) is vec:
                end += 1
            job = jobs.get(job_key)
            if job is None or job.queue not in attrs_of:
                for one in tasks[start:end]:
                    self._on_change(one, +1.0)
                start = end
                continue
            path = self._path(job.queue)
            if not path:  # a queue the session does not know: nothing to count
                start = end
                continue
            a0, a1, a2 = vec.tolist()
            times = end - start
            preemptible = job.preemptible
            for attrs in path:
                for target in (attrs.allocated,) if preemptible else (attrs.allocated_np, attrs.allocated):
                    t0, t1, t2 = target.tolist()
                    for _ in range(times):
                        t0 += a0
                        t1 += a1
                        t2 += a2
                    target[:] = floats = [t0, t1, t2]
                attrs.floats = floats  # the last target is `allocated`: its floats, as tolist gives them
            self._job_requests.pop(job.key, None)
            order_keys, by_request = self._order_keys, self._order_by_request
            for attrs in path:
                name = attrs.queue.name
                order_keys.pop(name, None)
                by_request.pop(name, None)
            start = end

    # -- fair share ---------------------------------------------------------------------------
    def _divide(self) -> None:
        queues = self.ssn.queues
        # Demand a parent can pass down is what its children can use (each capped by its limit).
        for name in self._post_order():
            attrs = self.attrs[name]
            if queues[name].children:
                child_demand = np.zeros(3)
                for child in queues[name].children:
                    c = self.attrs[child]
                    usable = np.where(c.limit == UNLIMITED, c.request, np.minimum(c.request, c.limit))
                    child_demand += np.maximum(usable, 0.0)  # a limit below zero: the child can use nothing
                attrs.request = child_demand
        if self.ssn.config.params.full_hierarchy_fairness:
            tops = sorted(n for n, q in queues.items() if not q.parent)
            self._divide_level(tops, self.total)
        else:
            # Fairness only among second-level queues, as if under one unlimited parent.
            seconds = sorted(n for n, q in queues.items() if q.parent and not queues[q.parent].parent)
            self._divide_level(seconds, self.total)
            for name, queue in queues.items():
                if not queue.parent:
                    self.attrs[name].fair_share = sum((self.attrs[c].fair_share for c in queue.children), np.zeros(3))

    def _divide_level(self, top: list[str], total: np.ndarray) -> None:
        """Divide `total` among the `top` queues, then each queue's share among its children, level by level
        (a work list, not recursion: a chain of a thousand queues must not exhaust the stack)."""
        work = [(top, total)]
        while work:
            names, amount = work.pop()
            self._divide_one_level(names, amount, work)

    def _divide_one_level(self, names: list[str], amount: np.ndarray, work: list[tuple[list[str], np.ndarray]]) -> None:
        for col in range(3):
            requests = []
            for name in names:
                a = self.attrs[name]
                requests.append(
                    ShareRequest(
                        name,
                        float(a.deserved[col]),
                        float(a.limit[col]),
                        float(a.weight[col]),
                        a.queue.priority,
                        float(a.request[col]),
                        a.queue.creation,
                        # time-based fair share: historical usage, a fraction of capacity (0 without it)
                        self.ssn.snapshot.queue_usage.get(name, {}).get(RESOURCES[col], 0.0),
                    )
                )
            shares = divide(float(amount[col]), requests, self.k_value)
            for name, value in shares.items():
                self.attrs[name].fair_share[col] = value
        for name in names:
            children = sorted(self.ssn.queues[name].children)
            if children:
                work.append((children, self.attrs[name].fair_share.copy()))

    def _post_order(self) -> list[str]:
        """Every queue after all of its children (iterative)."""
        order: list[str] = []
        queues = self.ssn.queues
        tops = sorted((n for n, q in queues.items() if not q.parent), reverse=True)
        stack: list[tuple[str, bool]] = [(n, False) for n in tops]
        while stack:
            name, expanded = stack.pop()
            if expanded:
                order.append(name)
                continue
            stack.append((name, True))
            stack.extend((child, False) for child in sorted(queues[name].children, reverse=True))
        return order

    # -- queue order --------------------------------------------------------------------------
    def queue_order_key(self, queue: QueueInfo, job: PodGroupInfo) -> tuple[Any, ...]:
        """KAI's queue order rules 1-7 as a sort key for the queue with this job next (cached until the queue's
        allocation changes, per job and per request: a job counts only by what its next batch asks for).
        The session appends rule 8 (older queue first) and the name."""
        name = queue.name
        cached = self._order_keys.get(name)
        if cached is not None and cached[0] is job:  # the job itself (kept in the entry): no key string made
            return cached[1]
        request = self.job_request(job)
        by_request = self._order_by_request.get(name)
        if by_request is None:
            by_request = self._order_by_request[name] = {}
        raw = request.tobytes()  # jobs asking for the same resources give the queue the same key
        key = by_request.get(raw)
        if key is None:
            attrs = self.attrs[name]
            key = by_request[raw] = self.order_key(attrs, request, attrs.allocated)
        self._order_keys[name] = (job, key)
        return key

    def order_key(self, attrs: QueueAttrs, request: np.ndarray, allocated: np.ndarray) -> tuple[Any, ...]:
        """The queue order (rules 1-7) of a queue whose next job asks for `request`, given what the queue
        has `allocated` (smaller key first; an evicting action may pass the allocation minus its victims
        and reverse the order). Every element compares on its own, so two keys tell which rule decides."""
        # The rules over the three resources written out (gpu, cpu, memory: the same comparisons and float
        # operations, in the same order, as over zipped lists).
        r0, r1, r2 = request.tolist()
        if allocated is attrs.allocated:  # its floats, kept until it changes
            floats = attrs.floats
            if floats is None:
                floats = attrs.floats = allocated.tolist()
            a0, a1, a2 = floats
        else:
            a0, a1, a2 = allocated.tolist()
        (f0, f1, f2), (d0, d1, d2), (c0, c1, c2), share = self._order_constants(attrs)
        w0, w1, w2 = a0 + r0, a1 + r1, a2 + r2
        over_used = a0 > f0 + 1e-9 and a1 > f1 + 1e-9 and a2 > f2 + 1e-9
        within_deserved = (
            (d0 == UNLIMITED or w0 <= d0 + 1e-9)
            and (d1 == UNLIMITED or w1 <= d1 + 1e-9)
            and (d2 == UNLIMITED or w2 <= d2 + 1e-9)
        )
        zero_share_use = c0 <= 0 < r0 or c1 <= 0 < r1 or c2 <= 0 < r2
        return (
            over_used,
            not within_deserved,
            -attrs.queue.priority,
            zero_share_use,
            max(
                w0 / c0 if c0 > 0 else w0 * 1000.0,
                w1 / c1 if c1 > 0 else w1 * 1000.0,
                w2 / c2 if c2 > 0 else w2 * 1000.0,
            ),
            max(
                a0 / c0 if c0 > 0 else a0 * 1000.0,
                a1 / c1 if c1 > 0 else a1 * 1000.0,
                a2 / c2 if c2 > 0 else a2 * 1000.0,
            ),
            share,
        )

    def _order_constants(self, attrs: QueueAttrs) -> tuple[list[float], list[float], list[float], AllocatableShare]:
        """What the queue order reads of a queue that does not change within the session: fair share,
        deserved, allocatable share (and rule 7's form of it)."""
        cached = self._constants.get(attrs.queue.name)
        if cached is None:
            allocatable = attrs.allocatable(self.total).tolist()
            unbounded = attrs.unbounded().tolist()
            share = AllocatableShare([np.inf if u else c for u, c in zip(unbounded, allocatable, strict=True)])
            cached = (attrs.fair_share.tolist(), attrs.deserved.tolist(), allocatable, share)
            self._constants[attrs.queue.name] = cached
        return cached

    def job_request(self, job: PodGroupInfo) -> np.ndarray:
        """Resources of the job's next batch (tasks to allocate): what each leaf below its minimum needs to
        reach it, or one more pod."""
        job_key = job.key
        cached = self._job_requests.get(job_key)
        if cached is not None:
            return cached
        leaves = job.leaves
        if len(leaves) == 1 and len(pending := leaves[0].pending()) == leaves[0].min_member - leaves[0].active():
            batch = pending  # a gang's whole rest: which pods, in which order, does not matter for the sum
        else:
            batch = tasks_to_allocate(self.ssn, job)
        request = self._sum(batch) if batch else np.zeros(3)
        self._job_requests[job_key] = request
        return request

    def _sum(self, pods: list[PodInfo]) -> np.ndarray:
        """The pods' queue vectors summed pod by pod in floats (as `np.zeros(3) + vector + ...` would)."""
        s0 = s1 = s2 = a0 = a1 = a2 = 0.0
        amounts = self._amounts
        requests = gpu = None
        by_memory = True
        for pod in pods:
            # A pod written as the one before (the same request objects, no gpu-memory) counts the same:
            # the rule of queue_vector's identity cache (`_by_id`), kept here without the call per pod.
            if by_memory or pod.requests is not requests or pod.gpu is not gpu:
                requests, gpu = pod.requests, pod.gpu
                by_memory = gpu.memory_mib > 0
                vec = self.queue_vector(pod)
                found = amounts.get(id(vec))
                if found is None or found[0] is not vec:
                    found = amounts[id(vec)] = (vec, *vec.tolist())
                _, a0, a1, a2 = found
            s0 += a0
            s1 += a1
            s2 += a2
        return np.array([s0, s1, s2])

    # -- capacity checks ----------------------------------------------------------------------
    def check_capacity(self, job: PodGroupInfo, tasks: list[PodInfo]) -> Status:
        """Capacity: limits at the leaf and every ancestor; non-preemptible jobs within deserved quota."""
        request = self._sum(tasks)
        path = self._path(job.queue)
        over = _first_over(path, request, "limit", "allocated", self._cap_lists)
        if over is not None:
            attrs, col = over
            message = (
                f"Queue {attrs.label} would exceed its limit of {_fmt(col, attrs.limit[col])}: "
                f"{_fmt(col, attrs.allocated[col])} in use and this job asks for {_fmt(col, request[col])} more."
            )
            room = max(float(attrs.limit[col] - attrs.allocated[col]), 0.0)
            free = _fmt(col, attrs.allocated[col] + request[col] - attrs.limit[col])
            remedy = f"wait until queue {attrs.queue.name}'s jobs free {free}, or raise its limit"
            if room > 1e-9:
                remedy = f"ask for at most {_fmt(col, room)}, or wait until queue {attrs.queue.name}'s jobs free {free}"
            cause = self._cause("OverLimit", message, remedy, attrs, job, col, request)
            return unschedulable("OverLimit", message, cause)
        over = None if job.preemptible else _first_over(path, request, "deserved", "allocated_np", self._cap_lists)
        if over is not None:
            attrs, col = over
            message = (
                f"Non-preemptible job would take queue {attrs.label} over its quota of "
                f"{_fmt(col, attrs.deserved[col])}: non-preemptible jobs already use "
                f"{_fmt(col, attrs.allocated_np[col])} and this job asks for {_fmt(col, request[col])}. "
                f"Only preemptible jobs may go over quota."
            )
            room = max(float(attrs.deserved[col] - attrs.allocated_np[col]), 0.0)
            remedy = "make the job preemptible" + (f", or ask for at most {_fmt(col, room)}" if room > 1e-9 else "")
            cause = self._cause("NonPreemptibleOverQuota", message, remedy, attrs, job, col, request)
            return unschedulable("NonPreemptibleOverQuota", message, cause)
        return SUCCESS

    def _cause(
        self, code: str, message: str, remedy: str, attrs: QueueAttrs, job: PodGroupInfo, col: int, request: np.ndarray
    ) -> Cause:
        cap = attrs.limit if code == "OverLimit" else attrs.deserved
        used = attrs.allocated if code == "OverLimit" else attrs.allocated_np
        numbers = {
            "resource": RESOURCES[col],
            "cap": float(cap[col]),
            "inUse": float(used[col]),
            "requested": float(request[col]),
        }
        figures = self.queue_figures(attrs.queue.name, job, request)
        return Cause(code, message, f"Queue {attrs.queue.name}", remedy, numbers, figures)

    def queue_figures(
        self, queue: str, job: PodGroupInfo | None = None, request: np.ndarray | None = None
    ) -> QueueFigures | None:
        """The queue's figures now (KAI's queueDetails), with the job's next batch as its request."""
        attrs = self.attrs.get(queue)
        if attrs is None:
            return None
        if request is None:
            request = self.job_request(job) if job is not None else np.zeros(3)
        units = self._units
        return QueueFigures(
            name=queue,
            deserved=self._quota(attrs.deserved),
            fair_share=units(np.maximum(attrs.fair_share, 0.0)),
            allocated=units(attrs.allocated),
            allocated_non_preemptible=units(attrs.allocated_np),
            requested=units(attrs.request),
            limit=self._quota(attrs.limit),
            job_requested=units(request),
            job_requested_non_preemptible=units(request if job is not None and not job.preemptible else np.zeros(3)),
        )

    @staticmethod
    def _units(vec: np.ndarray) -> dict[str, float]:
        return {"gpu": round(float(vec[0]), 6), "cpu": round(float(vec[1]), 3), "memory": round(float(vec[2]) / MB, 3)}

    def _quota(self, vec: np.ndarray) -> dict[str, float]:
        return {k: (-1.0 if vec[i] < 0 else v) for i, (k, v) in enumerate(self._units(vec).items())}

    # -- queries ------------------------------------------------------------------------------
    def fair_share(self, queue: str) -> dict[str, float]:
        return dict(zip(RESOURCES, self.attrs[queue].fair_share.tolist(), strict=True))

    def describe_queue(self, queue: str) -> str:
        """`queue q (quota ..., fair share ..., allocated ...)` in GPUs, and CPU/memory where they are bounded."""
        attrs = self.attrs.get(queue)
        if attrs is None:
            return f"queue {queue}"

        def amount(col: int, value: float) -> str:
            return "unlimited" if value < 0 else _fmt(col, value)

        parts = []
        for col in range(3):
            if col and attrs.deserved[col] < 0 and attrs.allocated[col] <= attrs.fair_share[col] + 1e-9:
                continue  # unbounded and not contested: not worth a word
            parts.append(
                f"quota {amount(col, attrs.deserved[col])}, fair share {_fmt(col, attrs.fair_share[col])}, "
                f"allocated {_fmt(col, attrs.allocated[col])}"
            )
        return f"queue {queue} ({'; '.join(parts)})"

    def report(self) -> dict[str, QueueReport]:
        def units(vec: np.ndarray) -> dict[str, float]:
            return {
                "gpu": round(float(vec[0]), 6),
                "cpu": round(float(vec[1]), 3),
                "memory": round(float(vec[2]) / MB, 3),
            }

        def quota(vec: np.ndarray) -> dict[str, float]:
            return {k: (-1.0 if vec[i] < 0 else v) for i, (k, v) in enumerate(units(vec).items())}

        # A fair share below zero (a negative quota or limit other than -1) is reported as 0, as KAI shows it.
        return {
            name: QueueReport(
                units(np.maximum(a.fair_share, 0.0)), units(a.allocated), quota(a.deserved), units(a.request)
            )
            for name, a in sorted(self.attrs.items())
        }


class _Allocated(BatchHook):
    """The plugin's on_allocate hook: queue accounting, which placements do not read."""

    __slots__ = ("plugin",)

    def __init__(self, plugin: ProportionPlugin) -> None:
        self.plugin = plugin

    def __call__(self, task: PodInfo) -> None:
        self.plugin._on_allocated([task])

    def many(self, tasks: list[PodInfo]) -> None:
        self.plugin._on_allocated(tasks)


def _factory(args: dict[str, str]) -> ProportionPlugin:
    raw = args.get("kValue", "1.0")
    try:
        k_value = float(raw)
    except ValueError as err:
        raise ValueError(f"proportion: kValue must be a number, got {raw!r}") from err
    multiplier = 1.0
    for key in ("relcaimerSaturationMultiplier", "reclaimerUtilizationMultiplier"):  # KAI's spelling, the docs'
        if key in args:
            try:
                multiplier = float(args[key])
            except ValueError as err:
                raise ValueError(f"proportion: {key} must be a number, got {args[key]!r}") from err
            if multiplier <= 0:
                raise ValueError(f"proportion: {key} must be positive, got {args[key]!r}")
    return ProportionPlugin(k_value=max(k_value, 0.0), saturation_multiplier=multiplier)


register_plugin("proportion")(_factory)
