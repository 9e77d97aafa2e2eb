"""Workload files for the simulator over time: the cluster, the queues, the scheduler configuration,
and the jobs (explicit, job classes repeated `count` times, or a synthetic trace).

```yaml
name: two-queue-oscillation
start: 2026-01-01T00:00:00Z        # the instant virtual time starts at
simulation:
  cyclePeriod: 10s                 # a scheduling cycle every 10 virtual seconds
  idleCycleInterval: 60s           # with nothing new, still run a cycle after this long while jobs wait,
  maxIdleCycleInterval: 10m        #   doubling after each such cycle that decides nothing, up to this
  until: 7d                        # stop here (offset from start); default: when nothing can change
  checkpointInterval: 0s           # default for jobs: evicted jobs lose all progress
  restartDelay: 30s                # an interrupted job's pods are pending again this long after the eviction
cluster:
  nodes:
  - {name: dgx, count: 2, gpus: 8, cpu: "128", memory: 1Ti, gpuMemory: 81920, labels: {}}
queues:                            # KAI Queue fields (gpu devices, cpu millicores, memory MB)
- {name: dept, resources: {gpu: {quota: 0, overQuotaWeight: 1, limit: -1}}}
- {name: team-a, parentQueue: dept, priority: 100, resources: {gpu: {quota: 8}}}
scheduler: {}                      # optional: the scheduler config file's content (see --config)
jobs:
- name: train                      # with count N: train-1 ... train-N
  queue: team-a
  count: 10
  submit: 0s                       # offset of the first copy
  every: 5m                        # spacing between copies
  pods: 4
  gangSize: 4                      # minMember (default: pods)
  gpusPerPod: 8
  cpuPerPod: "4"
  memoryPerPod: 32Gi
  priorityClassName: train         # or `priority: 80`; preemptibility: preemptible|non-preemptible
  duration: 2h
  checkpointInterval: 30m
synthetic: {...}                   # a generated trace, see kai.sim.generate
```
A queue may also be written as a KAI Queue object (`metadata.name` and `spec`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kai.api import keys
from kai.api.errors import InvalidInput, Problem
from kai.api.quantity import QuantityError, as_float, cpu_millis
from kai.api.timeutil import parse_duration, parse_time
from kai.framework.config import SchedulerConfig
from kai.model import (
    CPU,
    DEFAULT_SUBGROUP,
    GPU,
    MEMORY,
    PODS,
    ClusterSnapshot,
    GpuRequest,
    NodeInfo,
    PodGroupInfo,
    PodInfo,
    QueueInfo,
    QueueResource,
    Resources,
    SubGroupInfo,
)
from kai.sim.trace import SimJob, TraceParams, TraceResult, TraceSimulator

DEFAULT_START = "2026-01-01T00:00:00Z"
MB = 1e6
_DAYS = re.compile(r"^(\d+(?:\.\d+)?)(d|w)$")


def parse_span(value: Any) -> float:
    """Seconds of a duration: a Go duration (`90s`, `1h30m`), whole days or weeks (`7d`, `1w`), or a number."""
    if isinstance(value, str):
        match = _DAYS.match(value.strip())
        if match:
            return float(match.group(1)) * (86400.0 if match.group(2) == "d" else 604800.0)
    return parse_duration(value)


@dataclass(frozen=True, slots=True)
class NodeClass:
    name: str
    count: int
    gpus: int
    cpu: float  # millicores
    memory: float  # bytes
    gpu_memory_mib: int = 0
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job of the workload (a job class is expanded into these)."""

    name: str
    queue: str
    submit: float  # seconds after the workload's start
    pods: int
    gpus_per_pod: int
    duration: float  # seconds of running it needs
    gang: int = 0  # minMember; 0 = every pod
    priority_class: str = "train"
    priority: int = 50
    preemptible: bool = True
    cpu_per_pod: float = 1000.0  # millicores
    memory_per_pod: float = 4 * 2**30  # bytes
    checkpoint_interval: float = 0.0  # 0: an eviction loses all progress

    @property
    def min_member(self) -> int:
        return self.gang or self.pods

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod


@dataclass(frozen=True, slots=True)
class SimulationParams:
    cycle_period: float = 10.0
    idle_cycle_interval: float = 60.0
    max_idle_cycle_interval: float = 600.0
    until: float | None = None  # seconds after start
    checkpoint_interval: float = 0.0
    namespace: str = "workloads"
    restart_delay: float = 30.0


@dataclass(slots=True)
class Workload:
    name: str
    start: float  # epoch seconds
    nodes: list[NodeClass]
    queues: dict[str, QueueInfo]
    jobs: list[JobSpec]
    simulation: SimulationParams = field(default_factory=SimulationParams)
    scheduler: dict[str, Any] | None = None  # raw scheduler config, parsed by the caller
    synthetic: dict[str, Any] | None = None  # the generator's parameters, as written

    @property
    def total_gpus(self) -> int:
        return sum(n.count * n.gpus for n in self.nodes)

    @property
    def max_node_gpus(self) -> int:
        return max((n.gpus for n in self.nodes), default=0)


# -- parsing ---------------------------------------------------------------------------------------


class _Reader:
    """Collects every problem of a workload file, each naming the object and the field."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.problems: list[Problem] = []

    def problem(self, obj: str, fld: str, message: str) -> None:
        self.problems.append(Problem(f"{self.where}: {obj}" if obj else self.where, fld, message))

    def span(self, obj: str, fld: str, value: Any, default: float, positive: bool = False) -> float:
        if value is None:
            return default
        try:
            seconds = parse_span(value)
        except ValueError as err:
            self.problem(obj, fld, str(err))
            return default
        if seconds < 0 or (positive and seconds == 0):
            self.problem(obj, fld, f"must be {'positive' if positive else 'zero or more'}, got {value!r}")
            return default
        return seconds

    def integer(self, obj: str, fld: str, value: Any, default: int, minimum: int = 0) -> int:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.problem(obj, fld, f"must be a whole number >= {minimum}, got {value!r}")
            return default
        return value

    def quantity(self, obj: str, fld: str, value: Any, default: float, cpu: bool = False) -> float:
        if value is None:
            return default
        try:
            amount = cpu_millis(value) if cpu else as_float(value)
        except QuantityError as err:
            self.problem(obj, fld, str(err))
            return default
        if amount < 0:
            self.problem(obj, fld, f"must not be negative, got {value!r}")
            return default
        return amount

    def mapping(self, obj: str, fld: str, value: Any) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.problem(obj, fld, "must be a mapping")
            return {}
        return value

    def listing(self, obj: str, fld: str, value: Any) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.problem(obj, fld, "must be a list")
            return []
        return value


def parse_workload(raw: Any, where: str = "workload") -> Workload:
    """The workload in a parsed YAML document; raises InvalidInput naming every problem."""
    r = _Reader(where)
    if not isinstance(raw, dict):
        raise InvalidInput([Problem(where, "", "must be a mapping with cluster, queues and jobs")])
    start = parse_time(DEFAULT_START)
    if raw.get("start") is not None:
        try:
            start = parse_time(raw["start"])
        except ValueError:
            r.problem("", "start", f"is not an RFC 3339 time such as {DEFAULT_START}: {raw['start']!r}")
    sim_raw = r.mapping("", "simulation", raw.get("simulation"))
    until = None
    if sim_raw.get("until") is not None:
        until = r.span("simulation", "until", sim_raw["until"], 0.0, positive=True) or None
    simulation = SimulationParams(
        cycle_period=r.span("simulation", "cyclePeriod", sim_raw.get("cyclePeriod"), 10.0, positive=True),
        idle_cycle_interval=r.span(
            "simulation", "idleCycleInterval", sim_raw.get("idleCycleInterval"), 60.0, positive=True
        ),
        max_idle_cycle_interval=r.span(
            "simulation", "maxIdleCycleInterval", sim_raw.get("maxIdleCycleInterval"), 600.0, positive=True
        ),
        until=until,
        checkpoint_interval=r.span("simulation", "checkpointInterval", sim_raw.get("checkpointInterval"), 0.0),
        namespace=str(sim_raw.get("namespace") or "workloads"),
        restart_delay=r.span("simulation", "restartDelay", sim_raw.get("restartDelay"), 30.0),
    )
    nodes = _nodes(r, r.mapping("", "cluster", raw.get("cluster")))
    queues = _queues(r, r.listing("", "queues", raw.get("queues")))
    jobs = _jobs(r, r.listing("", "jobs", raw.get("jobs")), queues, simulation)
    scheduler = raw.get("scheduler")
    if scheduler is not None and not isinstance(scheduler, dict):
        r.problem("", "scheduler", "must be a mapping (the scheduler config file's content)")
        scheduler = None
    synthetic = r.mapping("", "synthetic", raw.get("synthetic")) or None
    name = str(raw.get("name") or "workload")
    workload = Workload(name, start, nodes, queues, jobs, simulation, scheduler, synthetic)
    if synthetic is not None and not r.problems:
        from kai.sim.generate import generate_jobs  # the generator validates its own section

        try:
            workload.jobs = sorted(workload.jobs + generate_jobs(workload, synthetic), key=_job_order)
        except InvalidInput as err:
            r.problems.extend(err.problems)
    if not r.problems and not workload.jobs:
        r.problem("", "jobs", "the workload has no jobs (give jobs or a synthetic section)")
    if r.problems:
        raise InvalidInput(r.problems)
    return workload


def _job_order(job: JobSpec) -> tuple[float, str]:
    return (job.submit, job.name)


def _nodes(r: _Reader, cluster: dict[str, Any]) -> list[NodeClass]:
    classes: list[NodeClass] = []
    entries = r.listing("cluster", "nodes", cluster.get("nodes"))
    if not entries:
        r.problem("cluster", "nodes", "must list at least one node class, e.g. {count: 2, gpus: 8}")
    names: set[str] = set()
    for index, entry in enumerate(entries):
        fld = f"nodes[{index}]"
        if not isinstance(entry, dict):
            r.problem("cluster", fld, "must be a mapping such as {count: 2, gpus: 8}")
            continue
        name = str(entry.get("name") or ("node" if len(entries) == 1 else f"node{index}"))
        if name in names:
            r.problem("cluster", f"{fld}.name", f"{name!r} is used twice")
        names.add(name)
        gpus = r.integer("cluster", f"{fld}.gpus", entry.get("gpus"), 0)
        labels = r.mapping("cluster", f"{fld}.labels", entry.get("labels"))
        classes.append(
            NodeClass(
                name=name,
                count=r.integer("cluster", f"{fld}.count", entry.get("count"), 1, minimum=1),
                gpus=gpus,
                cpu=r.quantity("cluster", f"{fld}.cpu", entry.get("cpu"), max(gpus, 1) * 16_000.0, cpu=True),
                memory=r.quantity("cluster", f"{fld}.memory", entry.get("memory"), max(gpus, 1) * 128 * 2.0**30),
                gpu_memory_mib=r.integer("cluster", f"{fld}.gpuMemory", entry.get("gpuMemory"), 0),
                labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
            )
        )
    return classes


def _queues(r: _Reader, entries: list[Any]) -> dict[str, QueueInfo]:
    queues: dict[str, QueueInfo] = {}
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            r.problem("", f"queues[{index}]", "must be a mapping with name and resources")
            continue
        if "spec" in entry or "metadata" in entry:  # a KAI Queue object
            spec = entry.get("spec") or {}
            name = str((entry.get("metadata") or {}).get("name") or "")
        else:
            spec, name = entry, str(entry.get("name") or "")
        if not name:
            r.problem("", f"queues[{index}].name", "is required")
            continue
        obj = f"queue {name}"
        if name in queues:
            r.problem(obj, "name", "is defined twice")
            continue
        priority = r.integer(obj, "priority", spec.get("priority"), 100)
        resources: dict[str, QueueResource] = {}
        res_raw = r.mapping(obj, "resources", spec.get("resources"))
        for key, resource, scale in (("gpu", GPU, 1.0), ("cpu", CPU, 1.0), ("memory", MEMORY, MB)):
            section = r.mapping(obj, f"resources.{key}", res_raw.get(key))
            values: dict[str, float] = {}
            for fld, default in (("quota", 0.0), ("overQuotaWeight", 1.0), ("limit", -1.0)):
                value = section.get(fld, default)
                if isinstance(value, bool) or not isinstance(value, int | float):
                    r.problem(obj, f"resources.{key}.{fld}", f"must be a number, got {value!r}")
                    value = default
                elif fld == "overQuotaWeight" and value < 0:
                    r.problem(obj, f"resources.{key}.{fld}", f"must not be negative, got {value}")
                    value = default
                elif value < 0 and value != -1:
                    r.problem(obj, f"resources.{key}.{fld}", f"must be -1 (unlimited) or at least 0, got {value}")
                    value = default
                values[fld] = float(value)
            resources[resource] = QueueResource(
                quota=values["quota"] * scale if values["quota"] != -1 else -1.0,
                over_quota_weight=values["overQuotaWeight"],
                limit=values["limit"] * scale if values["limit"] != -1 else -1.0,
            )
        queues[name] = QueueInfo(
            name=name,
            parent=str(spec.get("parentQueue") or spec.get("parent") or ""),
            priority=priority,
            resources=resources,
            creation=float(index),  # the order they are written in, as creation timestamps would be
            display_name=str(spec.get("displayName") or ""),
        )
    for name, queue in queues.items():
        if queue.parent:
            if queue.parent not in queues:
                r.problem(f"queue {name}", "parentQueue", f"names queue {queue.parent!r}, which is not defined")
            else:
                queues[queue.parent].children.append(name)
    for name in queues:
        seen, current = [name], queues[name].parent
        while current and current in queues:
            if current in seen:
                r.problem(f"queue {name}", "parentQueue", "makes a cycle: " + " -> ".join([*seen, current]))
                break
            seen.append(current)
            current = queues[current].parent
    if not queues:
        r.problem("", "queues", "must list at least one queue")
    return queues


def _jobs(r: _Reader, entries: list[Any], queues: dict[str, QueueInfo], sim: SimulationParams) -> list[JobSpec]:
    jobs: list[JobSpec] = []
    names: set[str] = set()
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            r.problem("", f"jobs[{index}]", "must be a mapping with name, queue, gpusPerPod and duration")
            continue
        name = str(entry.get("name") or f"job-{index + 1}")
        obj = f"job {name}"
        parsed = parse_job_entry(r, obj, entry, queues, sim)
        if parsed is None:
            continue
        count = r.integer(obj, "count", entry.get("count"), 1, minimum=1)
        every = r.span(obj, "every", entry.get("every"), 0.0)
        for copy in range(count):
            job_name = name if count == 1 else f"{name}-{copy + 1}"
            if job_name in names:
                r.problem(obj, "name", f"job {job_name!r} is defined twice")
                break
            names.add(job_name)
            jobs.append(_replace(parsed, name=job_name, submit=parsed.submit + copy * every))
    return sorted(jobs, key=_job_order)


def _replace(job: JobSpec, **changes: Any) -> JobSpec:
    values = {f: getattr(job, f) for f in JobSpec.__slots__}  # type: ignore[attr-defined]
    values.update(changes)
    return JobSpec(**values)


def parse_job_entry(
    r: _Reader, obj: str, entry: dict[str, Any], queues: dict[str, QueueInfo], sim: SimulationParams
) -> JobSpec | None:
    """One job (or job class) mapping; None if it has problems (they are recorded)."""
    before = len(r.problems)
    queue = str(entry.get("queue") or "")
    if not queue:
        r.problem(obj, "queue", "is required")
    elif queue not in queues:
        r.problem(obj, "queue", f"names queue {queue!r}, which is not defined")
    elif queues[queue].children:
        r.problem(obj, "queue", f"names queue {queue!r}, which is not a leaf queue")
    pods = r.integer(obj, "pods", entry.get("pods"), 1, minimum=1)
    gang = r.integer(obj, "gangSize", entry.get("gangSize"), pods, minimum=1)
    if gang > pods:
        r.problem(obj, "gangSize", f"({gang}) is larger than pods ({pods})")
    raw_gpus = entry.get("gpusPerPod", 0)
    if isinstance(raw_gpus, bool) or not isinstance(raw_gpus, int | float) or raw_gpus < 0 or raw_gpus % 1:
        r.problem(obj, "gpusPerPod", f"must be a whole number of GPUs >= 0, got {raw_gpus!r}")
        raw_gpus = 0
    if entry.get("duration") is None:
        r.problem(obj, "duration", "is required (how long the job runs, e.g. 2h)")
    duration = r.span(obj, "duration", entry.get("duration"), 0.0, positive=True)
    class_name = str(entry.get("priorityClassName") or keys.TRAIN_PRIORITY_CLASS)
    if entry.get("priority") is not None:
        priority = r.integer(obj, "priority", entry.get("priority"), keys.DEFAULT_PRIORITY, minimum=-(2**31))
    elif class_name in keys.DEFAULT_PRIORITY_CLASSES:
        priority = keys.DEFAULT_PRIORITY_CLASSES[class_name]
    else:
        r.problem(obj, "priorityClassName", f"{class_name!r} is not one of {', '.join(keys.DEFAULT_PRIORITY_CLASSES)}")
        priority = keys.DEFAULT_PRIORITY
    preemptibility = str(entry.get("preemptibility") or "")
    if preemptibility not in ("", keys.PREEMPTIBLE, keys.NON_PREEMPTIBLE):
        r.problem(obj, "preemptibility", f"must be preemptible or non-preemptible, got {preemptibility!r}")
    preemptible = (
        preemptibility == keys.PREEMPTIBLE if preemptibility else priority < keys.NON_PREEMPTIBLE_PRIORITY_THRESHOLD
    )
    job = JobSpec(
        name=obj.split(" ", 1)[-1],
        queue=queue,
        submit=r.span(obj, "submit", entry.get("submit"), 0.0),
        pods=pods,
        gpus_per_pod=int(raw_gpus),
        duration=duration,
        gang=gang,
        priority_class=class_name,
        priority=priority,
        preemptible=preemptible,
        cpu_per_pod=r.quantity(obj, "cpuPerPod", entry.get("cpuPerPod"), 1000.0, cpu=True),
        memory_per_pod=r.quantity(obj, "memoryPerPod", entry.get("memoryPerPod"), 4 * 2.0**30),
        checkpoint_interval=r.span(obj, "checkpointInterval", entry.get("checkpointInterval"), sim.checkpoint_interval),
    )
    return job if len(r.problems) == before else None


# -- model objects ---------------------------------------------------------------------------------


def node_infos(workload: Workload) -> list[NodeInfo]:
    """The cluster's nodes as the scheduler sees them, sorted by name."""
    nodes: list[NodeInfo] = []
    for cls in workload.nodes:
        digits = max(len(str(cls.count)), 3)
        for i in range(cls.count):
            amounts = {CPU: cls.cpu, MEMORY: cls.memory, PODS: 110.0}
            if cls.gpus:
                amounts[GPU] = float(cls.gpus)
            labels = dict(cls.labels)
            if cls.gpu_memory_mib:
                labels[keys.GPU_MEMORY_NODE_LABEL] = str(cls.gpu_memory_mib)
            nodes.append(
                NodeInfo(
                    name=f"{cls.name}-{i:0{digits}d}",
                    allocatable=Resources(amounts),
                    labels=labels,
                    gpu_memory_mib=cls.gpu_memory_mib,
                )
            )
    return sorted(nodes, key=lambda n: n.name)


def initial_snapshot(workload: Workload) -> ClusterSnapshot:
    """The cluster at the start: nodes and queues, no jobs yet."""
    return ClusterSnapshot(now=workload.start, nodes=node_infos(workload), queues=workload.queues)


def job_podgroup(job: JobSpec, namespace: str, created: float) -> PodGroupInfo:
    """The job as a pod group with all its pods pending (as the podgrouper would make it)."""
    key = f"{namespace}/{job.name}"
    requests = Resources({CPU: job.cpu_per_pod, MEMORY: job.memory_per_pod, PODS: 1.0})
    if job.gpus_per_pod:
        requests.amounts[GPU] = float(job.gpus_per_pod)
    gpu = GpuRequest(whole=job.gpus_per_pod)
    labels = {keys.QUEUE_LABEL: job.queue}
    digits = max(len(str(job.pods - 1)), 1)
    pods = [
        PodInfo(
            namespace=namespace,
            name=f"{job.name}-{i:0{digits}d}" if job.pods > 1 else job.name,
            uid=f"{key}-{i}",
            creation=created,
            requests=requests,
            gpu=gpu,
            job_key=key,
            labels=labels,
            priority_class_name=job.priority_class,
        )
        for i in range(job.pods)
    ]
    return PodGroupInfo(
        namespace=namespace,
        name=job.name,
        uid=key,
        queue=job.queue,
        creation=created,
        priority=job.priority,
        priority_class_name=job.priority_class,
        preemptible=job.preemptible,
        min_member=job.min_member,
        subgroups={DEFAULT_SUBGROUP: SubGroupInfo(DEFAULT_SUBGROUP, min_member=job.min_member, pods=pods)},
    )


# -- running a workload ----------------------------------------------------------------------------


def sim_jobs(workload: Workload) -> list[SimJob]:
    """The workload's jobs as the simulator tracks them (each pod group made at its submit time)."""
    namespace = workload.simulation.namespace
    jobs = []
    for spec in workload.jobs:
        submit = workload.start + spec.submit
        pg = job_podgroup(spec, namespace, submit)
        jobs.append(
            SimJob(
                key=pg.key,
                queue=spec.queue,
                submit=submit,
                duration=spec.duration,
                gpus=float(spec.gpus),
                checkpoint_interval=spec.checkpoint_interval,
                template=pg,
            )
        )
    return jobs


def simulate_workload(
    workload: Workload,
    config: SchedulerConfig,
    progress: Callable[[float], None] | None = None,
    exact: bool = False,
    until: float | None = None,
) -> TraceResult:
    """Run the workload through kai's scheduling cycle in virtual time. `until` is seconds after start."""
    sim = workload.simulation
    limit = until if until is not None else sim.until
    params = TraceParams(
        cycle_period=sim.cycle_period,
        idle_cycle_interval=sim.idle_cycle_interval,
        max_idle_cycle_interval=sim.max_idle_cycle_interval,
        restart_delay=sim.restart_delay,
        until=workload.start + limit if limit is not None else None,
        exact=exact,
    )
    return TraceSimulator(initial_snapshot(workload), sim_jobs(workload), config, params, progress).run()
