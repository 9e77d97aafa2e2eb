"""The live scheduling loop: every period, cache view -> snapshot -> ``run_cycle`` -> ports.

One cycle (:meth:`Scheduler.run_once`):

1. read the clock once (``now``) and take the cache's view (``kai.cluster.cache``);
2. delete stale BindRequests (failed, node gone, pod gone), so their pods are Pending again;
3. ``build_snapshot(view.objects, now, scheduler_name)`` — the very builder ``kai simulate``
   uses; objects it rejects are logged (once per problem) and get a warning event, and the
   cycle goes on without them; objects that use a feature kai has not built (the snapshot's
   ``unsupported``) are logged, counted (``kai_unsupported_feature_uses_total``) and get a warning
   event, once each. Incrementally: the builder's ``ConversionMemo`` converts each pod and node
   once per change of its object; where only pods, pod groups and nodes changed, only the pod
   groups they affect are built again and the others are kept from the last snapshot
   (:mod:`kai.cluster.incremental`); and when the cache's view is the very one of the last cycle
   (nothing changed), the last build is reused with the new ``now`` (the builder reads ``now``
   for nothing else), so such a cycle builds nothing; a patched snapshot that reads as the last one
   (``IncrementalSnapshot.unchanged``: e.g. pods the last one had Binding are now bound where their
   BindRequests said) counts as unchanged too;
4. ``run_cycle(snapshot, config, run_step)`` — the core, timed per step through ``run_step``
   (through :class:`kai.cycle.CycleRunner`, which answers a cycle on the very same view from the
   last one when that one decided nothing, the snapshot reads the same and the time changes nothing);
5. hand the decisions to the ports: :class:`~kai.cluster.writers.BindRequestWriter`,
   :class:`~kai.cluster.writers.Evictor`, :class:`~kai.cluster.status.StatusUpdater`.

The core never learns that it runs live: it gets a snapshot and returns ``Decisions``. For
record-and-replay, the objects the builder accepted and ``now`` are kept (``last_input``) and
can be written as a snapshot file that ``kai simulate -f FILE --now NOW`` replays (the offline
loader refuses a snapshot with any bad object; live, bad objects are only left out).
"""

from __future__ import annotations

import dataclasses
import gc
import json
import logging
import operator
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kai.api import keys
from kai.api.errors import Problem
from kai.api.timeutil import format_time
from kai.cluster import partition
from kai.cluster.cache import CacheView, ClusterCache
from kai.cluster.events import EventRecorder
from kai.cluster.incremental import IncrementalSnapshot, PartialMemo
from kai.cluster.metrics import Metrics
from kai.cluster.status import GroupUsages, QueueUsage, queue_usage
from kai.cluster.usagedb import usage_source
from kai.cycle import CycleRunner, run_cycle
from kai.framework.config import SchedulerConfig
from kai.framework.decisions import Binding, Decisions, Eviction
from kai.model import CPU, GPU, MEMORY, ClusterSnapshot, UnsupportedUse
from kai.snapshot.builder import BuildResult
from kai.usage import UsageTracker, snapshot_capacity

log = logging.getLogger("kai.cluster.scheduler")

GC_EVERY = 10.0  # seconds between the loop's garbage collections of what is not frozen (see Scheduler.run)
GC_FULL_EVERY = 300.0  # seconds between its collections of everything


class BindRequestPort(Protocol):
    def write(self, bindings: list[Binding], pods: dict, snapshot: ClusterSnapshot) -> list[Binding]: ...

    def delete_stale(self, stale: list[tuple[dict[str, Any], str]]) -> int: ...


class EvictorPort(Protocol):
    def evict(self, evictions: list[Eviction], pods: dict, podgroups: dict, snapshot: ClusterSnapshot) -> list: ...


class StatusPort(Protocol):
    def update(
        self, decisions: Decisions, snapshot: ClusterSnapshot, pods: dict, podgroups: dict, queues: dict
    ) -> None: ...


@dataclass
class CycleInput:
    """What a cycle's snapshot was built from: enough to replay it offline."""

    now: float
    objects: list[dict[str, Any]]

    def as_list(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "List",
            "metadata": {"annotations": {"kai.scheduler/snapshot-time": format_time(self.now)}},
            "items": self.objects,
        }

    def write(self, path: Path) -> Path:
        """JSON is YAML: ``kai simulate -f`` reads this file as it is."""
        path.write_text(json.dumps(self.as_list()))
        return path


@dataclass
class CycleReport:
    number: int
    now: float
    seconds: float
    steps: dict[str, float]
    decisions: Decisions
    bound: list[Binding] = field(default_factory=list)
    evicted: list[Eviction] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    plugins: dict[str, float] = field(default_factory=dict)  # plugin -> seconds of its OnSessionOpen
    cpu: float = 0.0  # CPU seconds the cycle's thread spent on it
    steps_cpu: dict[str, float] = field(default_factory=dict)  # the same per step (+ "status": status and metrics)


class Scheduler:
    def __init__(
        self,
        cache: ClusterCache,
        config: SchedulerConfig,
        *,
        bind_requests: BindRequestPort,
        evictor: EvictorPort,
        status: StatusPort,
        events: EventRecorder,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
        period: float = 1.0,
        record_dir: Path | None = None,
        record_every: int = 0,
        on_cycle: Callable[[CycleReport], None] | None = None,
        queue_label_key: str = keys.QUEUE_LABEL,
        nodepool_label_key: str = keys.NODE_POOL_LABEL,
        partition_label_value: str = "",
    ) -> None:
        self.cache = cache
        self.queue_label_key = queue_label_key
        self.nodepool_label_key = nodepool_label_key
        self.partition_label_value = partition_label_value
        self.config = config
        self.bind_requests = bind_requests
        self.evictor = evictor
        self.status = status
        self.events = events
        self.metrics = metrics
        self.clock = clock
        self.period = period
        self.record_dir = record_dir
        self.record_every = record_every
        self.on_cycle = on_cycle
        self.cycles = 0
        self.last_input: CycleInput | None = None
        self.last_report: CycleReport | None = None
        self.last_snapshot: ClusterSnapshot | None = None
        self.last_loop = time.monotonic()
        self._known_problems: set[Problem] = set()
        self._known_unsupported: set[UnsupportedUse] = set()
        for name in config.not_built:  # the configuration reader warned; count them once
            if metrics is not None:
                metrics.unsupported.labels(f"plugin/{name}").inc()
        self._stop = threading.Event()
        # The incremental snapshot: conversions kept between cycles, and the last view and its build.
        self.memo = PartialMemo()
        self.incremental = IncrementalSnapshot(self.memo, getattr(cache, "stores", {}))
        self.runner = CycleRunner(config, self._cycle)
        self._steps: tuple[Callable[[str, Callable[[], None]], None], Any] = (lambda name, step: step(), None)
        self.usages = GroupUsages()  # pod group usage for the queue gauges, kept while a group is unchanged
        self._capacity_of: tuple[list[Any], dict[str, float]] | None = None  # (the nodes, their capacity)
        self._last_build: tuple[CacheView, list[dict[str, Any]], BuildResult] | None = None
        self._unlabelled = partition.Unlabelled()  # the default partition's memo of objects without the label
        # Time-based fair share (usageDBConfig set): usage from Prometheus, or the scheduler's own record.
        self.usage = usage_source(
            config.usage_db, metrics_namespace=metrics.namespace if metrics is not None else "kai", metrics=metrics
        )

    # -- one cycle --------------------------------------------------------------------------------
    def run_once(self) -> CycleReport:
        started, cpu_started = time.perf_counter(), time.thread_time()
        now = self.clock()
        view = self.cache.view()
        if view.stale_bind_requests:
            self.bind_requests.delete_stale(view.stale_bind_requests)
        objects, result, result_reused = self._build(view, now)
        self._report_problems(result.problems, view)
        snapshot = result.snapshot
        self.last_snapshot = snapshot
        self._report_unsupported(snapshot.unsupported, view)
        if self.usage is not None:
            self.usage.observe(snapshot)
            t_usage = time.perf_counter()
            snapshot.queue_usage = self.usage.queue_usage(now)
            if self.metrics is not None and isinstance(self.usage, UsageTracker):  # its own history
                self.metrics.usage_query.observe((time.perf_counter() - t_usage) * 1000)
        self.last_input = CycleInput(now, _accepted(objects, result.problems))
        steps: dict[str, float] = {}
        steps_cpu: dict[str, float] = {"snapshot": time.thread_time() - cpu_started}

        def run_step(name: str, step: Callable[[], None]) -> None:
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                step()
            finally:
                steps[name] = time.perf_counter() - t0
                steps_cpu[name] = time.thread_time() - c0

        plugins: dict[str, float] = {}

        def plugin_step(name: str, step: Callable[[], None]) -> None:
            t0 = time.perf_counter()
            try:
                step()
            finally:
                plugins[name] = time.perf_counter() - t0

        steps["snapshot"] = time.perf_counter() - started
        # The core, unless the cycle provably decides what the last one did (kai.cycle.CycleRunner: the
        # very same view, inert decisions last time, and `now` changing nothing).
        self._steps = (run_step, plugin_step)
        decisions = self.runner.run(snapshot, changed=not result_reused)
        t0, c0 = time.perf_counter(), time.thread_time()
        evicted = (
            self.evictor.evict(decisions.evictions, view.pods, view.podgroups, snapshot) if decisions.evictions else []
        )
        bound = self.bind_requests.write(decisions.bindings, view.pods, snapshot) if decisions.bindings else []
        steps["apply"] = time.perf_counter() - t0
        c1 = time.thread_time()
        steps_cpu["apply"] = c1 - c0
        self.status.update(decisions, snapshot, view.pods, view.podgroups, view.queues)
        seconds = time.perf_counter() - started
        self.cycles += 1
        report = CycleReport(self.cycles, now, seconds, steps, decisions, bound, evicted, result.problems, plugins)
        report.steps_cpu = steps_cpu
        self.last_report = report
        self._observe(report, snapshot, view)
        report.cpu = time.thread_time() - cpu_started
        steps_cpu["status"] = time.thread_time() - c1
        if self.record_dir is not None and self.record_every and self.cycles % self.record_every == 0:
            self.record(self.record_dir)
        if self.on_cycle is not None:
            self.on_cycle(report)
        return report

    def _cycle(self, snapshot: ClusterSnapshot, config: SchedulerConfig) -> Decisions:
        run_step, plugin_step = self._steps
        # The session starts from the last one's (kai.cycle.SessionReuse): the incremental snapshot keeps
        # the pod groups and nodes nothing changed as the same objects, and builds new ones for the rest.
        return run_cycle(snapshot, config, run_step, plugin_step, self.runner.reuse)

    def _build(self, view: CacheView, now: float) -> tuple[list[dict[str, Any]], BuildResult, bool]:
        """The cycle's snapshot from the view (and whether it reads as the last one, at `now`: the view
        is the same, or the patch changed nothing the core reads)."""
        last = self._last_build
        if last is not None and last[0] is view:
            _, objects, built = last
            return objects, BuildResult(dataclasses.replace(built.snapshot, now=now), built.problems), True
        objects = partition.select(
            view.objects, self.nodepool_label_key, self.partition_label_value, self._unlabelled
        )
        result = self.incremental.build(
            view,
            objects,
            now,
            scheduler_name=self.config.params.scheduler_name,
            storage_listed=view.storage_listed,
            queue_label_key=self.queue_label_key,
        )
        if objects is not view.objects:  # a node pool's scheduler: a queue of another pool is not "missing"
            result.problems[:] = partition.explain(
                result.problems, view.queues, self.nodepool_label_key, self.partition_label_value
            )
        self._last_build = (view, objects, result)
        return objects, result, self.incremental.unchanged

    def record(self, folder: Path) -> Path | None:
        """Write the last cycle's input as `snapshot-<cycle>.yaml` (+ its decisions as JSON)."""
        if self.last_input is None or self.last_report is None:
            return None
        folder.mkdir(parents=True, exist_ok=True)
        path = self.last_input.write(folder / f"snapshot-{self.cycles:06d}.yaml")
        decided = {"now": format_time(self.last_input.now), **self.last_report.decisions.placements()}
        (folder / f"decisions-{self.cycles:06d}.json").write_text(json.dumps(decided, indent=1))
        return path

    def _report_problems(self, problems: list[Problem], view: CacheView) -> None:
        fresh = set(problems) - self._known_problems
        self._known_problems = set(problems)
        for problem in sorted(fresh):
            log.warning("left out of the snapshot: %s", problem)
            kind, _, name = problem.obj.partition(" ")
            raw = {"Pod": view.pods, "PodGroup": view.podgroups, "Queue": view.queues, "Node": view.nodes}.get(
                kind, {}
            ).get(name)
            if raw is not None:
                self.events.record(
                    raw, "Warning", "InvalidObject", f"Not scheduled: {problem.field}: {problem.message}"
                )

    def _report_unsupported(self, uses: list[UnsupportedUse], view: CacheView) -> None:
        fresh = set(uses) - self._known_unsupported
        self._known_unsupported = set(uses)
        for use in sorted(fresh, key=lambda u: (u.feature, u.kind, u.name)):
            log.warning("%s", use.message)
            if self.metrics is not None:
                self.metrics.unsupported.labels(use.feature).inc()
            raw = {"Pod": view.pods, "PodGroup": view.podgroups, "Queue": view.queues, "Node": view.nodes}.get(
                use.kind, {}
            ).get(use.name)
            if raw is not None:
                self.events.record(raw, "Warning", "UnsupportedFeature", use.note)

    def _observe(self, report: CycleReport, snapshot: ClusterSnapshot, view: CacheView) -> None:
        m = self.metrics
        if m is None:
            return
        m.e2e.set(report.seconds * 1000)
        m.cycle_seconds.observe(report.seconds)
        for name, seconds in report.steps.items():
            if name == "open_session":
                m.open_session.set(seconds * 1000)
            elif name == "close_session":
                m.close_session.set(seconds * 1000)
            elif name not in ("snapshot", "apply"):
                m.action.labels(name).set(seconds * 1000)
        for name, seconds in report.plugins.items():
            m.plugin.labels(name, "OnSessionOpen").set(seconds * 1000)
        m.pods_scheduled.inc(len(report.bound))
        if report.bound:
            created = self._created(snapshot, report.bound)
            for b in report.bound:
                if created.get(b.pod):
                    m.task_scheduling.observe(max(0.0, report.now - created[b.pod]) * 1000)
        counters = {
            "scheduled": m.podgroups_scheduled,
            "acted_on": m.podgroups_acted_on,
            "simulated": m.scenarios_simulated,
            "filtered": m.scenarios_filtered,
        }
        for (counter, action), n in report.decisions.counts.items():
            if counter == "preemption_attempts":
                m.preemption_attempts.inc(n)
            elif counter in counters:
                counters[counter].labels(action).inc(n)
        for e in report.evicted:
            m.evictions.labels(e.action).inc()
        for name, q in report.decisions.queues.items():
            m.queue(name, q.fair_share, snapshot.queue_usage.get(name, {}))
        rolled_up = getattr(self.status, "last_queue_usage", None)  # the status port's, for this very cycle
        if rolled_up is not None and rolled_up[0] is snapshot and rolled_up[1] is report.decisions:
            self._observe_queues(m, snapshot, rolled_up[2])
        else:
            self._observe_queues(m, snapshot, queue_usage(snapshot, report.decisions, self.usages))
            self.usages.finish()

    def _created(self, snapshot: ClusterSnapshot, bound: list[Binding]) -> dict[str, float]:
        """The creation time of each bound pod, looked up in the groups the incremental snapshot's index
        names for them (every pod of the snapshot when one of them is not found so)."""
        wanted = {b.pod for b in bound}
        home = self.incremental.home
        created: dict[str, float] = {}
        for group in {home.get(key) for key in wanted}:
            pg = snapshot.podgroups.get(group) if group else None
            if pg is not None:
                created.update((p.key, p.creation) for p in pg.pods if p.key in wanted)
        if len(created) < len(wanted):
            return {p.key: p.creation for pg in snapshot.podgroups.values() for p in pg.pods}
        return created

    def _capacity(self, snapshot: ClusterSnapshot) -> dict[str, float]:
        """The cluster's capacity, summed again only when the snapshot's nodes are other objects (the
        incremental snapshot keeps a node's NodeInfo while its Node object is the same)."""
        nodes, kept = snapshot.nodes, self._capacity_of
        if kept is not None and len(kept[0]) == len(nodes) and all(map(operator.is_, kept[0], nodes)):
            return kept[1]
        capacity = snapshot_capacity(snapshot)
        self._capacity_of = (list(nodes), capacity)
        return capacity

    def _observe_queues(self, m: Metrics, snapshot: ClusterSnapshot, usages: dict[str, QueueUsage]) -> None:
        """KAI's queue-controller gauges: the spec's quotas and the rolled-up allocation (as Queue status)."""

        def cores(millicores: float) -> float:
            return millicores if millicores == -1 else millicores / 1000

        for name, use in usages.items():
            spec = snapshot.queues[name].resources
            m.queue_info.labels(name).set(1)
            m.queue_deserved_gpus.labels(name).set(spec[GPU].quota)
            m.queue_quota_cpu.labels(name).set(cores(spec[CPU].quota))
            m.queue_quota_memory.labels(name).set(spec[MEMORY].quota)  # bytes (the model's unit); -1 kept
            m.queue_allocated_gpus.labels(name).set(use.allocated.gpu)
            m.queue_allocated_cpu.labels(name).set(use.allocated.cpu / 1000)
            m.queue_allocated_memory.labels(name).set(use.allocated.memory)
        capacity = self._capacity(snapshot)
        m.cluster_capacity.labels("nvidia_com_gpu").set(capacity[GPU])
        m.cluster_capacity.labels("cpu").set(capacity[CPU] / 1000)
        m.cluster_capacity.labels("memory").set(capacity[MEMORY])

    # -- the loop -------------------------------------------------------------------------------
    def run(self, is_leader: Callable[[], bool] = lambda: True, max_cycles: int = 0) -> None:
        """Cycle every `period` while leading, until :meth:`stop` (or `max_cycles` cycles).

        Garbage collection: the process holds a large, long-lived heap (every object of the cluster as
        parsed JSON, which reference counting frees when a watch event replaces it) and each cycle
        leaves a few thousand objects in reference cycles (the session's plugins and hooks, the last
        snapshot's pod groups). The collector's own trigger runs full collections over that whole heap
        every few cycles; instead, while the loop runs, automatic collection is off and, between
        cycles, every `GC_EVERY` seconds what is not frozen is collected and what survives is frozen
        (`gc.freeze`: not scanned again, still freed by reference counting), so that a collection scans
        only what the last seconds made; every `GC_FULL_EVERY` seconds everything is unfrozen and
        collected (what became garbage in a cycle while frozen is reclaimed then). What the process
        holds when the caches first have synced (their lists: the whole cluster) is frozen before the
        first cycle without a collection, so that the first collection, too, scans only what the loop
        made (the first full one, `GC_FULL_EVERY` seconds on, scans it once).
        """
        collecting = gc.isenabled()
        gc.disable()
        last_collect = last_full = time.monotonic()
        lists_frozen = False
        try:
            while not self._stop.is_set():
                began = time.monotonic()
                self.last_loop = began
                if is_leader() and self.cache.synced:
                    if not lists_frozen:
                        gc.freeze()
                        lists_frozen = True
                    try:
                        report = self.run_once()
                        log.debug(
                            "cycle %d: %.1f ms, %d bound, %d evicted",
                            report.number,
                            report.seconds * 1000,
                            len(report.bound),
                            len(report.evicted),
                        )
                    except Exception:
                        log.exception("scheduling cycle failed")
                    if max_cycles and self.cycles >= max_cycles:
                        return
                moment = time.monotonic()
                if moment - last_full >= GC_FULL_EVERY:
                    gc.unfreeze()
                    last_full = moment
                if moment - last_collect >= GC_EVERY or moment == last_full:
                    gc.collect()
                    gc.freeze()
                    last_collect = time.monotonic()
                self._stop.wait(max(0.0, self.period - (time.monotonic() - began)))
        finally:
            gc.unfreeze()
            if collecting:
                gc.enable()

    def stop(self) -> None:
        self._stop.set()
        if self.usage is not None:
            self.usage.close()

    def healthy(self, stuck_after: float = 60.0) -> bool:
        return time.monotonic() - self.last_loop < max(stuck_after, 10 * self.period)


def _describe(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name") or "<unnamed>"
    namespace = meta.get("namespace")
    return f"{obj.get('kind')} {namespace}/{name}" if namespace else f"{obj.get('kind')} {name}"


def _accepted(objects: list[dict[str, Any]], problems: list[Problem]) -> list[dict[str, Any]]:
    """The objects the builder kept: what the cycle decided on, and what `kai simulate` accepts."""
    if not problems:
        return objects
    rejected = {p.obj for p in problems}
    return [o for o in objects if _describe(o) not in rejected]
