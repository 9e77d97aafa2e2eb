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
from kai.framework.session import Session
from kai.model import ClusterSnapshot, PodGroupInfo, PodStatus

del kai.actions  # imported for its registrations


class ConfigError(Exception):
    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(map(str, problems)))


def known_actions() -> set[str]:
    return registered_actions()


def open_session(
    snapshot: ClusterSnapshot, config: SchedulerConfig, plugin_step: ActionRunner | None = None
) -> tuple[Session, list[str]]:
    """The session with the configured plugins open; plugins kai lacks are skipped (the configuration
    reader warned about those a file names), and returned as warnings for the caller.
    `plugin_step(name, step)`, when given, wraps each plugin's OnSessionOpen (to time it)."""
    ssn = Session(snapshot, config)
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
    ssn: Session, job: PodGroupInfo, evicted: list[Cause] | None = None, cache: dict[Any, Any] | None = None
) -> JobOutcome:
    fit = ssn.fit_errors.get(job.key)
    message, reason = (fit.message, fit.reason) if fit else ("", "")
    status = job.phase()
    if status in ("Pending", "Gated") and not message:
        pods = list(job.pods)
        if any(p.status is PodStatus.PIPELINED for p in pods):
            message, reason = "Pipelined: waits for resources that are being released.", "Pipelined"
        elif not pods:
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
    return outcome


def close_session(ssn: Session) -> Decisions:
    for fn in ssn.hooks.on_close:
        fn(ssn)
    evicted = eviction_causes(ssn)
    cache: dict[Any, Any] = {}
    for key, job in ssn.jobs.items():
        ssn.decisions.jobs[key] = job_outcome(ssn, job, evicted.get(key), cache)
    return ssn.decisions


ActionRunner = Callable[[str, Callable[[], None]], None]


def _run_directly(name: str, step: Callable[[], None]) -> None:
    step()


def run_cycle(
    snapshot: ClusterSnapshot,
    config: SchedulerConfig,
    run_step: ActionRunner = _run_directly,
    plugin_step: ActionRunner | None = None,
) -> Decisions:
    """Run one cycle. `run_step(name, step)` wraps each phase, and `plugin_step(plugin, step)` each
    plugin's session opening, so that adapters can time them (the core reads no clock)."""
    # The cycle allocates hundreds of thousands of short-lived, acyclic objects over a large live heap;
    # the cyclic collector would rescan that heap again and again (half the cycle at 50,000 pods).
    # Pause it for the cycle; the few cycles a session leaves are collected once it is re-enabled.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _run_cycle(snapshot, config, run_step, plugin_step)
    finally:
        if collecting:
            gc.enable()


def _run_cycle(
    snapshot: ClusterSnapshot, config: SchedulerConfig, run_step: ActionRunner, plugin_step: ActionRunner | None
) -> Decisions:
    box: dict[str, Session] = {}

    def open_step() -> None:
        box["ssn"] = open_session(snapshot, config, plugin_step)[0]

    run_step("open_session", open_step)
    ssn = box["ssn"]
    for name in config.actions:
        run = action(name)
        if run is not None:
            run_step(name, lambda run=run: run(ssn))
    decisions: list[Decisions] = []
    run_step("close_session", lambda: decisions.append(close_session(ssn)))
    return decisions[0]
