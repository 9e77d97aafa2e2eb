"""One scheduling cycle: open a session on a snapshot, run the configured actions, close it.

The only place that knows both the plugins and the actions; the live scheduler,
`kai simulate` and the benchmarks all call `run_cycle`.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import kai.actions
import kai.plugins
from kai.api.errors import Problem
from kai.framework.action import action, registered_actions
from kai.framework.causes import Cause, eviction_causes, explain_job
from kai.framework.config import KAI_PLUGINS, SchedulerConfig
from kai.framework.decisions import Decisions, JobOutcome
from kai.framework.placement import gang_not_ready_message
from kai.framework.plugin import plugin_factory
from kai.framework.session import Opened, Session
from kai.model import ClusterSnapshot, PodGroupInfo, PodStatus

del kai.actions  # imported for its registrations


class ConfigError(Exception):
    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(map(str, problems)))


def known_actions() -> set[str]:
    return registered_actions()


class SessionReuse:
    """What the last cycle's session read from its snapshot (kai.framework.session.Opened), for the next
    cycle on the same cluster to start from, kept by whoever runs cycle after cycle (CycleRunner, the
    live loop). The next session copies what holds still (the rows of every pod group that is the same
    object, the node arrays when the nodes are the same objects) and reads the rest; it is the same
    session as one opened from scratch.

    `changed`: keys of pod groups whose pods the caller changed in place since the last cycle (a pod
    group replaced by another object, as `kai simulate`'s apply step and the live snapshot do, needs no
    mention); emptied by each cycle."""

    def __init__(self) -> None:
        self.last: Opened | None = None
        self.changed: set[str] = set()
        self.opened = 0  # sessions opened, and how many of them from the last one
        self.reused = 0

    def forget(self) -> None:
        """Read everything from the snapshot in the next cycle."""
        self.last = None


def open_session(
    snapshot: ClusterSnapshot,
    config: SchedulerConfig,
    plugin_step: ActionRunner | None = None,
    reuse: SessionReuse | None = None,
) -> tuple[Session, list[str]]:
    """The session with the configured plugins open; plugins kai lacks are skipped (the configuration
    reader warned about those a file names), and returned as warnings for the caller.
    `plugin_step(name, step)`, when given, wraps each plugin's OnSessionOpen (to time it). `reuse`: start
    from the last session it kept, and keep this one's."""
    if reuse is None:
        ssn = Session(snapshot, config)
    else:
        previous, changed = reuse.last, reuse.changed
        reuse.last, reuse.changed = None, set()
        ssn = Session(snapshot, config, previous, changed)
        reuse.last = ssn.opened
        reuse.opened += 1
        reuse.reused += previous is not None and ssn.table.reused > 0
    warnings = []
    for option in config.plugins:
        factory = plugin_factory(option.name)
        if factory is None:
            what = "is not built in kai yet" if option.name in KAI_PLUGINS else "is not a KAI plugin"
            warnings.append(f"plugin {option.name!r} {what}: skipped")
            continue
        try:
            plugin = factory(option.arguments)
        except ValueError as err:
            raise ConfigError(
                [Problem("scheduler config", f"tiers.plugins[{option.name}].arguments", str(err))]
            ) from err
        if plugin_step is None:
            plugin.on_session_open(ssn)
        else:
            plugin_step(option.name, lambda plugin=plugin: plugin.on_session_open(ssn))
    return ssn, warnings


def job_outcome(
    ssn: Session,
    job: PodGroupInfo,
    evicted: list[Cause] | None = None,
    cache: dict[Any, Any] | None = None,
    key: str | None = None,
) -> JobOutcome:
    """The job's outcome at the end of the cycle. `key`: the job's key, when the caller has it."""
    fit = ssn.fit_errors.get(job.key if key is None else key) if ssn.fit_errors else None
    # Without a fit error or an eviction, an outcome that needs no explanation (a running job) depends on
    # the pods' statuses only: it is remembered on the job while they stay as they are.
    plain = fit is None and not evicted
    if plain and len(job.leaves) == 1:
        # The common case at once: one sub-group, every pod running, at least minMember of them.
        sub = job.leaves[0]
        counts = sub.counts()
        running = counts.get(PodStatus.RUNNING, 0)
        if running and running >= sub.min_member and running == sum(counts.values()):
            return JobOutcome(job.queue, "Running", "", "")
    version = job.version if plain else None
    if plain:
        memo = job.memo.get("outcome")
        if memo is not None and memo[0] == version:
            return JobOutcome(job.queue, *memo[1])  # type: ignore[misc]
    message, reason = (fit.message, fit.reason) if fit else ("", "")
    status = job.phase()
    if status in ("Pending", "Gated") and not message:
        counts = job.status_counts()
        if counts.get(PodStatus.PIPELINED, 0):
            message, reason = "Pipelined: waits for resources that are being released.", "Pipelined"
        elif not any(counts.values()):
            message, reason = "The pod group has no pods yet.", "NotReady"
            if job.last_start is not None:
                message = (
                    "The pod group has no pods: it ran before, and its pods are gone (evicted or deleted); "
                    "it waits for its workload to create them again."
                )
        elif not job.is_ready():
            message, reason = gang_not_ready_message(job), "NotReady"
    outcome = JobOutcome(job.queue, status, message, reason)
    if evicted or message or (status in ("Pending", "Gated") and job.has_pending()):
        outcome.causes = [*(evicted or []), *explain_job(ssn, job, fit, reason, message, cache)]
    elif plain:
        job.memo["outcome"] = (version, (status, message, reason))
    return outcome


def close_session(ssn: Session) -> Decisions:
    for fn in ssn.hooks.on_close:
        fn(ssn)
    evicted = eviction_causes(ssn)
    cache: dict[Any, Any] = {}
    outcomes = ssn.decisions.jobs
    for key, job in ssn.jobs.items():
        outcomes[key] = job_outcome(ssn, job, evicted.get(key) if evicted else None, cache, key)
    return ssn.decisions


ActionRunner = Callable[[str, Callable[[], None]], None]


def _run_directly(name: str, step: Callable[[], None]) -> None:
    step()


def run_cycle(
    snapshot: ClusterSnapshot,
    config: SchedulerConfig,
    run_step: ActionRunner = _run_directly,
    plugin_step: ActionRunner | None = None,
    reuse: SessionReuse | None = None,
) -> Decisions:
    """Run one cycle. `run_step(name, step)` wraps each phase, and `plugin_step(plugin, step)` each
    plugin's session opening, so that adapters can time them (the core reads no clock). `reuse`: the
    session starts from what the last one read (see SessionReuse), and is kept there for the next."""
    # The cycle allocates hundreds of thousands of short-lived, acyclic objects over a large live heap;
    # the cyclic collector would rescan that heap again and again (half the cycle at 50,000 pods).
    # Pause it for the cycle; the few cycles a session leaves are collected once it is re-enabled.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _run_cycle(snapshot, config, run_step, plugin_step, reuse)
    finally:
        if collecting:
            gc.enable()


def _run_cycle(
    snapshot: ClusterSnapshot,
    config: SchedulerConfig,
    run_step: ActionRunner,
    plugin_step: ActionRunner | None,
    reuse: SessionReuse | None,
) -> Decisions:
    box: dict[str, Session] = {}

    def open_step() -> None:
        box["ssn"] = open_session(snapshot, config, plugin_step, reuse)[0]

    try:
        run_step("open_session", open_step)
        ssn = box["ssn"]
        for name in config.actions:
            run = action(name)
            if run is not None:
                run_step(name, lambda run=run: run(ssn))
        decisions: list[Decisions] = []
        run_step("close_session", lambda: decisions.append(close_session(ssn)))
        return decisions[0]
    finally:
        if "ssn" in box:  # the session changed the snapshot's pods in place: put them back
            box["ssn"].restore()


CycleFn = Callable[[ClusterSnapshot, SchedulerConfig], Decisions]


def _inert(decisions: Decisions) -> bool:
    """Carrying out these decisions leaves the cluster as it was: nothing bound, nothing evicted, no
    PodGroup annotation to write (pipelined pods stay pending until resources are released)."""
    return not (decisions.bindings or decisions.evictions or decisions.last_start or decisions.stale_since)


def time_matters(config: SchedulerConfig, snapshot: ClusterSnapshot) -> bool:
    """Whether a configured plugin says a cycle on this snapshot at a later `now` could decide otherwise
    because of time alone (its `time_matters`, for plugins that read the clock, e.g. minruntime)."""
    for option in config.plugins:
        factory = plugin_factory(option.name)
        plugin = factory(option.arguments) if factory is not None else None
        check = getattr(plugin, "time_matters", None)
        if check is not None and check(snapshot):
            return True
    return False


class CycleRunner:
    """Runs cycle after cycle on a cluster that its caller changes between them (`kai simulate
    --rounds`, the simulator over time, a live loop), and answers a cycle whose outcome is provably
    the previous one's without running it.

    The cycle is a function of the snapshot and the configuration alone. So when the caller changed
    nothing since the last cycle (`changed=False`: it only carried out the decisions this runner
    returned, and perhaps moved `now` on), and those decisions changed nothing either (nothing bound or
    evicted, no annotation written), the next cycle sees what the last one saw, and decides the same,
    unless `now` itself matters. Time enters a cycle in three places, each checked here:

    * min-runtime: a job started less than its minimum runtime ago is protected (and the messages say
      for how long). While any job may still be protected at the last cycle's `now`, only a cycle at
      that same instant is answered from the last one;
    * stale gangs: a job below its minMember since `stale_since` is evicted once `now - stale_since`
      reaches the grace period; a cycle at or past that instant for any such job runs;
    * time-based fair share: the snapshot's `queue_usage` (refreshed by the caller every
      `fetchInterval`) must be what the last cycle saw.

    Every other cycle runs in full. The Decisions returned for a skipped cycle is the last cycle's
    own object: callers must not change it.

    A cycle that runs opens its session from the last one's (`reuse`, a SessionReuse, unless
    `reuse=False`): only the pod groups that are new objects since are read again. A caller with its
    own `cycle` function passes `runner.reuse` to `run_cycle` itself."""

    def __init__(self, config: SchedulerConfig, cycle: CycleFn | None = None, reuse: bool = True) -> None:
        self.config = config
        self.reuse: SessionReuse | None = SessionReuse() if reuse else None
        self._cycle: CycleFn = cycle if cycle is not None else self._run
        self._last: Decisions | None = None
        self._now = 0.0
        self._usage: dict[str, dict[str, float]] = {}
        self._stale_since: list[float] = []
        self._protected = False
        self.skipped = 0  # cycles answered from the previous one
        self.ran = 0  # cycles run in full

    def run(self, snapshot: ClusterSnapshot, changed: bool = True) -> Decisions:
        """The decisions of a cycle on `snapshot`. `changed`: the caller changed the snapshot since the
        last call in some way other than carrying out the decisions returned then and moving `now`."""
        if not changed and self._reusable(snapshot):
            self.skipped += 1
            assert self._last is not None
            return self._last
        decisions = self._cycle(snapshot, self.config)
        self.ran += 1
        self._remember(snapshot, decisions)
        return decisions

    def _run(self, snapshot: ClusterSnapshot, config: SchedulerConfig) -> Decisions:
        return run_cycle(snapshot, config, reuse=self.reuse)

    def forget(self) -> None:
        """Run the next cycle in full whatever the caller says."""
        self._last = None

    def _remember(self, snapshot: ClusterSnapshot, decisions: Decisions) -> None:
        if not _inert(decisions):
            self._last = None
            return
        self._last = decisions
        self._now = snapshot.now
        self._usage = {queue: dict(usage) for queue, usage in snapshot.queue_usage.items()}
        # After a cycle that wrote no stale-since annotation, the jobs that carry one are the stale ones.
        self._stale_since = [pg.stale_since for pg in snapshot.podgroups.values() if pg.stale_since is not None]
        self._protected = time_matters(self.config, snapshot)

    def _reusable(self, snapshot: ClusterSnapshot) -> bool:
        if self._last is None or snapshot.queue_usage != self._usage:
            return False
        now = snapshot.now
        if now == self._now:
            return True
        if now < self._now or self._protected:
            return False
        grace = self.config.params.staleness_grace_period
        return grace < 0 or all(now - since < grace for since in self._stale_since)
