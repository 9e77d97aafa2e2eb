"""The simulator over time: kai's own scheduling cycle, run again and again in virtual time while
jobs arrive, run, are evicted and finish.

Each cycle is `kai.cycle.run_cycle` on the current snapshot, and its decisions are applied with
`kai.sim.simulate.apply_decisions` (bound pods run, evicted pods wait again). Between cycles the
simulator moves the world on: jobs are submitted at their submit time, a job that reached its gang
(every sub-group at minMember) runs and finishes once it has run for its duration, and a job
that an eviction takes below its gang restarts from its last checkpoint (from scratch without
checkpointing): its remaining pods are released too and, as a training job's controller deletes and
recreates them, its pods are back (pending) `restartDelay` later (30 s, a pod's default grace period).

Cycles happen on a grid of `cyclePeriod` virtual seconds. A cycle whose outcome could not differ
from the previous one is skipped: one runs when jobs arrived or finished, after a cycle that evicted
or pipelined pods (resources are being released), and — while jobs wait — after `idleCycleInterval`
of quiet, so that what depends on the clock gets its turn (time-based fair share, whose usage KAI
refreshes every `fetchInterval`; min-runtime protections; stale gangs). Each quiet cycle that decides
nothing doubles that interval, up to `maxIdleCycleInterval`; any event resets it. A quiet cycle after
one that changed nothing is answered from that one unless time could change its outcome (a min-runtime
protection running, a stale gang reaching its grace period, new usage figures: kai.cycle.CycleRunner).
`exact=True` runs every cycle of the grid instead, each in full.

Time-based fair share: when the scheduler config has `usageDBConfig`, the allocation history of
the simulation itself feeds `kai.usage`, refreshed every `fetchInterval`, and each cycle's
snapshot carries the resulting `queue_usage`.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from kai.cycle import CycleRunner, run_cycle
from kai.framework.config import SchedulerConfig
from kai.framework.decisions import Decisions
from kai.model import CPU, GPU, HOLDS_NODE, MEMORY, ClusterSnapshot, PodGroupInfo, PodInfo, PodStatus
from kai.sim.simulate import apply_decisions
from kai.usage import UsageHistory

EPS = 1e-9
RESOURCES = (GPU, CPU, MEMORY)


@dataclass(slots=True)
class SimJob:
    """One job's life in the simulation."""

    key: str  # namespace/name of its pod group
    queue: str
    submit: float  # epoch seconds
    duration: float  # seconds of running it needs in all
    gpus: float  # GPUs of all its pods
    checkpoint_interval: float = 0.0
    template: PodGroupInfo | None = None  # added at submit; None: already in the initial snapshot
    state: str = "future"  # future | pending | running | done
    first_start: float | None = None
    run_start: float | None = None
    progress: float = 0.0  # work saved so far (seconds)
    finish: float | None = None
    run_id: int = 0
    interruptions: int = 0
    evicted_pods: int = 0
    lost_seconds: float = 0.0
    lost_gpu_seconds: float = 0.0
    nodes: tuple[str, ...] = ()  # where its pods first ran
    displaced_by: list[tuple[float, str, str]] = field(default_factory=list)  # (time, action, by)


@dataclass(frozen=True, slots=True)
class TraceParams:
    cycle_period: float = 10.0
    idle_cycle_interval: float = 60.0
    max_idle_cycle_interval: float = 600.0
    until: float | None = None  # epoch seconds; None: until nothing can change
    exact: bool = False  # run every cycle of the grid
    restart_delay: float = 30.0  # an interrupted job's pods are back (pending) this long after the eviction


@dataclass(slots=True)
class CycleRecord:
    """What one cycle saw and did (gpu amounts in devices)."""

    time: float
    bound: int
    evicted: int
    pipelined: int
    fair_share: dict[str, float]  # leaf and inner queues, as the session computed it
    allocated: dict[str, float]  # after the decisions were applied
    usage: dict[str, float]  # gpu usage fed to the cycle (time-based fair share), else empty
    free_gpus: float
    fragmented_gpus: float  # free GPUs on nodes where no waiting pod fits
    pending_jobs: int
    pending_gpus: float


@dataclass(slots=True)
class TraceResult:
    start: float
    end: float
    capacity: dict[str, float]  # gpu, cpu, memory of the usable nodes
    queues: dict[str, str]  # name -> parent
    jobs: list[SimJob]
    cycles: list[CycleRecord]
    # Allocation as a step function: from times[i] on, total[i] GPUs were allocated (by_queue per queue).
    alloc_times: list[float] = field(default_factory=list)
    alloc_total: list[float] = field(default_factory=list)
    alloc_by_queue: dict[str, list[float]] = field(default_factory=dict)
    time_based: bool = False
    evicted_pods: int = 0
    stopped_by: str = ""  # why the simulation ended

    @property
    def leaf_queues(self) -> list[str]:
        parents = set(self.queues.values())
        return sorted(q for q in self.queues if q not in parents)


def pod_vector(pod: PodInfo, min_gpu_memory_mib: float = 0.0) -> tuple[float, float, float]:
    """(GPUs as queue accounting counts them, cpu millicores, memory bytes)."""
    shared = pod.gpu.is_shared or pod.gpu.mig
    gpus = pod.gpu.quota_gpus(min_gpu_memory_mib) if shared else pod.requests.get(GPU) + pod.gpu.dra
    return (gpus, pod.requests.get(CPU), pod.requests.get(MEMORY))


class TraceSimulator:
    """Runs the scheduling cycle in virtual time over a set of jobs."""

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        jobs: list[SimJob],
        config: SchedulerConfig,
        params: TraceParams,
        progress: Callable[[float], None] | None = None,
        stop_when_started: set[str] | None = None,
        reuse: bool = True,
    ) -> None:
        """`reuse`: each cycle's session starts from the last one's (the same decisions without it)."""
        self.config = config
        self.params = params
        self.progress = progress
        self.stop_keys = set(stop_when_started or ())
        self.start = snapshot.now
        self.state = snapshot
        self.jobs = {job.key: job for job in jobs}
        self.arrivals = sorted((j for j in jobs if j.template is not None), key=lambda j: (j.submit, j.key))
        self.next_arrival = 0
        self.completions: list[tuple[float, int, str, int]] = []
        self.requeues: list[tuple[float, int, str, PodGroupInfo]] = []  # restarted jobs coming back
        self._seq = 0
        nodes = snapshot.nodes
        self.node_row = {n.name: i for i, n in enumerate(nodes)}
        self.usable = np.array([n.usable for n in nodes], dtype=bool)
        self.min_gpu_mem = float(min((n.gpu_memory_mib for n in nodes if n.gpu_memory_mib), default=0))
        alloc = np.array([[n.allocatable.get(r) for r in RESOURCES] for n in nodes]).reshape(len(nodes), 3)
        self.free = alloc.copy()
        self.capacity = alloc[self.usable].sum(axis=0) if len(nodes) else np.zeros(3)
        self.parents = {name: q.parent for name, q in snapshot.queues.items()}
        self.alloc = {name: np.zeros(3) for name in snapshot.queues}
        self.pod_node: dict[str, int] = {}
        self.pod_job: dict[str, str] = {}  # pod key -> its pod group's key
        self.pending_shapes: Counter[tuple[float, float, float]] = Counter()
        self.pending_jobs: set[str] = set()
        self.running_jobs: set[str] = set()
        self.usage_params = config.usage_db.params if config.usage_db is not None else None
        self.history = UsageHistory() if self.usage_params is not None else None
        self.last_fetch: float | None = None
        self.last_cycle: float | None = None
        self.dirty = False
        self.idle_interval = params.idle_cycle_interval
        self.events_since_cycle = True
        self.last_decisions: Decisions | None = None
        # Quiet cycles (no event since the last one, which changed nothing) whose outcome cannot differ are
        # answered from the last one (kai.cycle.CycleRunner checks what time changes); `exact` runs them all.
        # Each cycle's session starts from the last one's (kai.cycle.SessionReuse): the pod groups the
        # simulator replaces are new objects, so the session reads them again.
        self.runner = CycleRunner(config, lambda snap, cfg: run_cycle(snap, cfg, reuse=self.runner.reuse), reuse)
        self.changed_allocation = False
        self.evicted_pods = 0
        self.cycles: list[CycleRecord] = []
        self.alloc_times: list[float] = []
        self.alloc_total: list[float] = []
        self.alloc_by_queue: dict[str, list[float]] = {name: [] for name in snapshot.queues}
        self._adopt_initial(snapshot)

    # -- bookkeeping ----------------------------------------------------------------------------
    def _adopt_initial(self, snapshot: ClusterSnapshot) -> None:
        """Account what already holds nodes, and the jobs that are already in the snapshot."""
        for pod in snapshot.foreign_pods:
            row = self.node_row.get(pod.node)
            if row is not None and pod.status in HOLDS_NODE:
                self.free[row] -= pod_vector(pod, self.min_gpu_mem)
        for key, pg in snapshot.podgroups.items():
            job = self.jobs.get(key)
            for pod in pg.pods:
                self.pod_job[pod.key] = key
                if pod.status is PodStatus.RELEASING:  # on its way out: gone by the first cycle
                    pod.status, pod.node = PodStatus.SUCCEEDED, ""
                    if pod.owner is not None:
                        pod.owner.recount()
                elif pod.status in HOLDS_NODE and pod.node in self.node_row:
                    self._pod_runs(pg, pod, pod.node, pending_before=False)
                elif pod.status is PodStatus.PENDING:
                    self.pending_shapes[pod_vector(pod, self.min_gpu_mem)] += 1
            if job is None:
                continue
            if pg.phase() == "Running":
                job.state, job.run_start = "running", self.start
                job.first_start = job.first_start if job.first_start is not None else self.start
                self.running_jobs.add(key)
                self._schedule_completion(job, self.start)
            else:
                job.state = "pending"
                self.pending_jobs.add(key)
        self._record_allocation(self.start)

    def _queue_path(self, queue: str) -> list[str]:
        path = []
        while queue:
            path.append(queue)
            queue = self.parents.get(queue, "")
        return path

    def _pod_runs(self, pg: PodGroupInfo, pod: PodInfo, node: str, pending_before: bool = True) -> None:
        vec = pod_vector(pod, self.min_gpu_mem)
        row = self.node_row[node]
        self.free[row] -= vec
        self.pod_node[pod.key] = row
        if pg.queue in self.alloc:
            self.alloc[pg.queue] += vec
        if pending_before:
            self.pending_shapes[vec] -= 1
            if self.pending_shapes[vec] <= 0:
                del self.pending_shapes[vec]

    def _pod_stops(self, pg: PodGroupInfo, pod: PodInfo, back_to_pending: bool) -> None:
        row = self.pod_node.pop(pod.key, None)
        vec = pod_vector(pod, self.min_gpu_mem)
        if row is not None:
            self.free[row] += vec
            if pg.queue in self.alloc:
                self.alloc[pg.queue] -= vec
        if back_to_pending:
            self.pending_shapes[vec] += 1

    def _record_allocation(self, t: float) -> None:
        totals = {name: np.zeros(3) for name in self.alloc}
        for name, vec in self.alloc.items():
            for queue in self._queue_path(name):
                if queue in totals:
                    totals[queue] += vec
        leaf_total = float(sum(v[0] for v in self.alloc.values()))
        if self.alloc_times and self.alloc_times[-1] == t:
            self.alloc_times.pop()
            self.alloc_total.pop()
            for series in self.alloc_by_queue.values():
                series.pop()
        self.alloc_times.append(t)
        self.alloc_total.append(max(leaf_total, 0.0))
        for name, series in self.alloc_by_queue.items():
            series.append(max(float(totals[name][0]), 0.0))
        if self.history is not None:
            capacity = dict(zip(RESOURCES, self.capacity.tolist(), strict=True))
            amounts = {q: dict(zip(RESOURCES, np.maximum(v, 0.0).tolist(), strict=True)) for q, v in totals.items()}
            self.history.record(t, amounts, capacity)

    def _schedule_completion(self, job: SimJob, now: float) -> None:
        remaining = max(job.duration - job.progress, 0.0)
        self._seq += 1
        heapq.heappush(self.completions, (now + remaining, self._seq, job.key, job.run_id))

    # -- time -----------------------------------------------------------------------------------
    def _grid_at_or_after(self, moment: float) -> float:
        period = self.params.cycle_period
        steps = math.ceil((moment - self.start) / period - 1e-9)
        t = self.start + max(steps, 0) * period
        if self.last_cycle is not None and t <= self.last_cycle + EPS:
            t = self.last_cycle + period
        return t

    def _next_completion(self) -> float | None:
        while self.completions:
            when, _, key, run_id = self.completions[0]
            job = self.jobs[key]
            if job.state == "running" and job.run_id == run_id:
                return when
            heapq.heappop(self.completions)
        return None

    def _next_cycle(self) -> float | None:
        candidates: list[float] = []
        if self.last_cycle is None:
            candidates.append(self.start)
        elif self.params.exact or self.dirty:
            candidates.append(self.last_cycle + self.params.cycle_period)
        if self.next_arrival < len(self.arrivals):
            candidates.append(self._grid_at_or_after(self.arrivals[self.next_arrival].submit))
        completion = self._next_completion()
        if completion is not None:
            candidates.append(self._grid_at_or_after(completion))
        if self.requeues:
            candidates.append(self._grid_at_or_after(self.requeues[0][0]))
        future = self.next_arrival < len(self.arrivals) or completion is not None or bool(self.requeues)
        if self.pending_jobs and self.last_cycle is not None and future:
            candidates.append(self._grid_at_or_after(self.last_cycle + self.idle_interval))
        if not candidates:
            return None
        if not future and not self.dirty and self.last_cycle is not None:
            return None  # nothing runs, nothing arrives, and the last cycle changed nothing: it never will
        return min(candidates)

    def _advance(self, t: float) -> None:
        """Finish jobs and submit jobs up to `t` (completions first, each at its own instant)."""
        while True:
            when = self._next_completion()
            if when is None or when > t + EPS:
                break
            _, _, key, _ = heapq.heappop(self.completions)
            self._complete(self.jobs[key], when)
            self.events_since_cycle = True
        while self.requeues and self.requeues[0][0] <= t + EPS:
            _, _, key, pg = heapq.heappop(self.requeues)
            self.state.podgroups[key] = pg
            for pod in pg.pods:
                self.pending_shapes[pod_vector(pod, self.min_gpu_mem)] += 1
            self.events_since_cycle = True
        while self.next_arrival < len(self.arrivals) and self.arrivals[self.next_arrival].submit <= t + EPS:
            job = self.arrivals[self.next_arrival]
            self.next_arrival += 1
            assert job.template is not None
            self.state.podgroups[job.key] = job.template
            job.template = None
            job.state = "pending"
            self.pending_jobs.add(job.key)
            self.events_since_cycle = True
            for pod in self.state.podgroups[job.key].pods:
                self.pod_job[pod.key] = job.key
                if pod.status is PodStatus.PENDING:
                    self.pending_shapes[pod_vector(pod, self.min_gpu_mem)] += 1

    def _complete(self, job: SimJob, when: float) -> None:
        pg = self.state.podgroups.pop(job.key)
        for pod in pg.pods:
            self._pod_stops(pg, pod, back_to_pending=False)
            self.pod_job.pop(pod.key, None)
            if pod.status is PodStatus.PENDING:
                vec = pod_vector(pod, self.min_gpu_mem)
                self.pending_shapes[vec] -= 1
                if self.pending_shapes[vec] <= 0:
                    del self.pending_shapes[vec]
        job.state, job.finish = "done", when
        job.progress = job.duration
        self.running_jobs.discard(job.key)
        self._record_allocation(when)

    # -- one cycle -------------------------------------------------------------------------------
    def _cycle(self, t: float) -> None:
        state = self.state
        state.now = t
        usage_gpu: dict[str, float] = {}
        if self.history is not None and self.usage_params is not None:
            if self.last_fetch is None or t - self.last_fetch >= self.usage_params.fetch_interval - EPS:
                state.queue_usage = self.history.usage(t, self.usage_params)
                self.last_fetch = t
                if self.usage_params.window_type == "sliding":
                    self.history.forget_before(t - self.usage_params.window_size)
            usage_gpu = {q: round(v.get(GPU, 0.0), 6) for q, v in state.queue_usage.items()}
        decisions = self.runner.run(state, changed=self.events_since_cycle or self.params.exact)
        self.last_decisions = decisions
        new = self._apply_decisions(state, decisions)
        self.state = new
        self.last_cycle = t
        self.dirty = self._apply(new, decisions, t)
        if self.changed_allocation:
            self._record_allocation(t)
        if self.events_since_cycle or self.changed_allocation or self.dirty:
            self.idle_interval = self.params.idle_cycle_interval
        else:  # a quiet cycle that decided nothing: wait longer before the next quiet one
            self.idle_interval = min(self.idle_interval * 2, max(self.params.max_idle_cycle_interval, 0.0))
            self.idle_interval = max(self.idle_interval, self.params.idle_cycle_interval)
        self.events_since_cycle = False
        self._record_cycle(t, decisions, usage_gpu)

    def _apply_decisions(self, state: ClusterSnapshot, decisions: Decisions) -> ClusterSnapshot:
        """`apply_decisions` on the pod groups the decisions name (the others are left as they are,
        which spares cloning every running job each cycle); the state is updated in place."""
        keys = set(decisions.last_start) | set(decisions.stale_since)
        for pod_key in [b.pod for b in decisions.bindings] + [e.pod for e in decisions.evictions]:
            job_key = self.pod_job.get(pod_key)
            if job_key is not None:
                keys.add(job_key)
        keys &= state.podgroups.keys()
        if not keys:
            return state
        subset = ClusterSnapshot(
            now=state.now,
            nodes=state.nodes,
            queues=state.queues,
            podgroups={key: state.podgroups[key] for key in sorted(keys)},
            foreign_pods=state.foreign_pods,
            topologies=state.topologies,
            warnings=state.warnings,
            queue_usage=state.queue_usage,
        )
        state.podgroups.update(apply_decisions(subset, decisions).podgroups)
        return state

    def _apply(self, new: ClusterSnapshot, decisions: Decisions, t: float) -> bool:
        touched: dict[str, dict[str, PodInfo]] = {}

        def pod_of(pod_key: str) -> tuple[PodGroupInfo, PodInfo] | None:
            job_key = self.pod_job.get(pod_key)
            pg = new.podgroups.get(job_key) if job_key is not None else None
            if pg is None:
                return None
            pods = touched.get(pg.key)
            if pods is None:
                pods = touched[pg.key] = {p.key: p for p in pg.pods}
            pod = pods.get(pod_key)
            return None if pod is None else (pg, pod)

        started: set[str] = set()
        for binding in decisions.bindings:
            found = pod_of(binding.pod)
            if found is None:
                continue
            pg, pod = found
            self._pod_runs(pg, pod, binding.node)
            started.add(pg.key)
        hit: set[str] = set()
        for eviction in decisions.evictions:
            found = pod_of(eviction.pod)
            if found is None:
                continue
            pg, pod = found
            if pod.key not in self.pod_node:
                continue
            self._pod_stops(pg, pod, back_to_pending=pod.status is PodStatus.PENDING)
            self.evicted_pods += 1
            job = self.jobs.get(pg.key)
            if job is not None:
                job.evicted_pods += 1
                job.displaced_by.append((t, eviction.action, eviction.by))
            hit.add(pg.key)
        for key in sorted(hit):
            self._maybe_restart(new.podgroups[key], t)
        for key in sorted(started):
            job = self.jobs.get(key)
            pg = new.podgroups[key]
            if job is None or job.state != "pending" or pg.below_min():
                continue
            job.state, job.run_start = "running", t
            if job.first_start is None:
                job.first_start = t
                job.nodes = tuple(sorted({p.node for p in pg.pods if p.node}))
            self.pending_jobs.discard(key)
            self.running_jobs.add(key)
            self._schedule_completion(job, t)
        # Bindings alone leave nothing for the next cycle to do that this one could not; evictions and
        # pipelined pods do (resources being released, jobs waiting for them).
        self.changed_allocation = bool(decisions.bindings or decisions.evictions or hit)
        return bool(decisions.evictions or decisions.pipelined or hit)

    def _maybe_restart(self, pg: PodGroupInfo, t: float) -> None:
        """A running job that an eviction took below its gang restarts from its last checkpoint."""
        job = self.jobs.get(pg.key)
        if job is None or job.state != "running" or not pg.below_min():
            return
        done = job.progress + (t - (job.run_start if job.run_start is not None else t))
        interval = job.checkpoint_interval
        saved = math.floor(done / interval + EPS) * interval if interval > 0 else 0.0
        saved = min(saved, done)
        job.lost_seconds += done - saved
        job.lost_gpu_seconds += (done - saved) * job.gpus
        job.progress = saved
        job.interruptions += 1
        job.run_id += 1
        job.state, job.run_start = "pending", None
        self.running_jobs.discard(pg.key)
        self.pending_jobs.add(pg.key)
        for pod in pg.pods:
            if pod.key in self.pod_node:
                self._pod_stops(pg, pod, back_to_pending=True)
                pod.status, pod.node, pod.gpu_groups = PodStatus.PENDING, "", ()
        for sub in pg.leaves:
            sub.recount()
        if self.params.restart_delay > 0:
            # Its pods are deleted and recreated by the job's controller: it is back after the delay.
            self._withdraw(self.state.podgroups.pop(pg.key))
            self._seq += 1
            heapq.heappush(self.requeues, (t + self.params.restart_delay, self._seq, pg.key, pg))

    def _withdraw(self, pg: PodGroupInfo) -> None:
        for pod in pg.pods:
            if pod.status is PodStatus.PENDING:
                vec = pod_vector(pod, self.min_gpu_mem)
                self.pending_shapes[vec] -= 1
                if self.pending_shapes[vec] <= 0:
                    del self.pending_shapes[vec]

    def _record_cycle(self, t: float, decisions: Decisions, usage_gpu: dict[str, float]) -> None:
        free_gpu = self.free[:, 0]
        free_total = float(np.maximum(free_gpu[self.usable], 0.0).sum()) if free_gpu.size else 0.0
        fragmented = 0.0
        shapes = [s for s in self.pending_shapes if s[0] > 0]
        if shapes and free_gpu.size:
            fits = np.zeros(free_gpu.size, dtype=bool)
            for shape in shapes:
                fits |= (self.free >= np.array(shape) - 1e-6).all(axis=1)
            idle = self.usable & ~fits & (free_gpu > EPS)
            fragmented = float(free_gpu[idle].sum())
        pending_gpus = float(sum(s[0] * n for s, n in self.pending_shapes.items()))
        allocated = {name: round(float(vec[0]), 6) for name, vec in self._totals().items()}
        self.cycles.append(
            CycleRecord(
                time=t,
                bound=len(decisions.bindings),
                evicted=len(decisions.evicted_once()),
                pipelined=len(decisions.pipelined),
                fair_share={name: q.fair_share.get("gpu", 0.0) for name, q in decisions.queues.items()},
                allocated=allocated,
                usage=usage_gpu,
                free_gpus=free_total,
                fragmented_gpus=fragmented,
                pending_jobs=len(self.pending_jobs),
                pending_gpus=pending_gpus,
            )
        )

    def _totals(self) -> dict[str, np.ndarray]:
        totals = {name: np.zeros(3) for name in self.alloc}
        for name, vec in self.alloc.items():
            for queue in self._queue_path(name):
                if queue in totals:
                    totals[queue] += vec
        return totals

    # -- the loop --------------------------------------------------------------------------------
    def run(self) -> TraceResult:
        stopped_by = "nothing left to do"
        end = self.start
        while True:
            t = self._next_cycle()
            if t is None:
                break
            if self.params.until is not None and t > self.params.until + EPS:
                stopped_by = "time limit"
                self._advance(self.params.until)
                end = self.params.until
                break
            self._advance(t)
            self._cycle(t)
            end = t
            if self.progress is not None:
                self.progress(t)
            if self.stop_keys and all(self.jobs[k].first_start is not None for k in self.stop_keys):
                stopped_by = "the job started"
                break
        finishes = [j.finish for j in self.jobs.values() if j.finish is not None]
        end = max([end, *finishes])
        self._record_allocation(end)
        return TraceResult(
            start=self.start,
            end=end,
            capacity=dict(zip(("gpu", "cpu", "memory"), self.capacity.tolist(), strict=True)),
            queues=dict(self.parents),
            jobs=sorted(self.jobs.values(), key=lambda j: (j.submit, j.key)),
            cycles=self.cycles,
            alloc_times=self.alloc_times,
            alloc_total=self.alloc_total,
            alloc_by_queue=self.alloc_by_queue,
            time_based=self.history is not None,
            evicted_pods=self.evicted_pods,
            stopped_by=stopped_by,
        )
