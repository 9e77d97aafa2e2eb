"""minruntime: a job that started less than its queue's minimum runtime ago is not preempted or
reclaimed.

The minimum runtime comes from the Queue: `preemptMinRuntime` for preempt, `reclaimMinRuntime` for
reclaim, inherited down the queue tree (the first value found walking up from the victim's queue),
else the plugin default. For reclaim, method `lca` (default) starts the walk one level below the
lowest common ancestor of the reclaimer's and the victim's queues, on the victim's side (the
victim's top-level queue if the two are in different trees); method `queue` starts at the victim's
own queue. Time is the session's `now` and the job's `last-start-timestamp` annotation.

A protected job that is not elastic is not a victim at all. A protected elastic job (more pods
running than its minMember) may lose its extra pods, never go below minMember.

Arguments: `defaultPreemptMinRuntime`, `defaultReclaimMinRuntime` (durations, default 0s) and
`reclaimResolveMethod` (`lca` or `queue`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kai.api.timeutil import parse_duration
from kai.framework.causes import protected_victim
from kai.framework.plugin import register_plugin
from kai.framework.session import Session
from kai.framework.status import SUCCESS, Status, unschedulable
from kai.model import ACTIVE, ClusterSnapshot, PodGroupInfo


@dataclass
class MinRuntimePlugin:
    default_preempt: float = 0.0
    default_reclaim: float = 0.0
    method: str = "lca"
    name: str = "minruntime"
    cache: dict[tuple[str, str, str], float] = field(default_factory=dict)

    def time_matters(self, snapshot: ClusterSnapshot) -> bool:
        """Whether some job may still be protected at the snapshot's `now` (with the longest minimum
        runtime the defaults or any queue set): its protection then ends as time passes."""
        longest = max(self.default_preempt, self.default_reclaim)
        for queue in snapshot.queues.values():
            for value in (queue.preempt_min_runtime, queue.reclaim_min_runtime):
                if value is not None:
                    longest = max(longest, float(value))
        now = snapshot.now
        return longest > 0 and any(
            pg.last_start is not None and now < pg.last_start + longest for pg in snapshot.podgroups.values()
        )

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.cache = {}
        ssn.hooks.victim_filters.append(self.victim_filter)
        ssn.hooks.scenario_validators.append(self.validate)

    # -- resolving the minimum runtime ------------------------------------------------------------
    def _walk(self, start: str, attr: str, default: float) -> float:
        for queue in self.ssn.queue_path(start):
            value = getattr(queue, attr)
            if value is not None:
                return float(value)
        return default

    def min_runtime(self, action: str, preemptor_queue: str, victim_queue: str) -> float:
        key = (action, preemptor_queue if action == "reclaim" and self.method == "lca" else "", victim_queue)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        if action == "preempt":
            value = self._walk(victim_queue, "preempt_min_runtime", self.default_preempt)
        elif self.method == "queue":
            value = self._walk(victim_queue, "reclaim_min_runtime", self.default_reclaim)
        else:
            r_path = [q.name for q in self.ssn.queue_path(preemptor_queue)]
            v_path = [q.name for q in self.ssn.queue_path(victim_queue)]
            start = ""
            on_r = set(r_path)
            for i, name in enumerate(v_path):
                if name in on_r:
                    start = v_path[i - 1] if i else v_path[0]
                    break
            if not start:  # different trees: the victim's top-level queue decides
                top = self.ssn.queues.get(v_path[-1]) if v_path else None
                value = self.default_reclaim
                if top is not None and top.reclaim_min_runtime is not None:
                    value = float(top.reclaim_min_runtime)
            else:
                value = self._walk(start, "reclaim_min_runtime", self.default_reclaim)
        self.cache[key] = value
        return value

    def protected(self, action: str, preemptor: PodGroupInfo, victim: PodGroupInfo) -> bool:
        if action not in ("preempt", "reclaim") or victim.last_start is None:
            return False
        runtime = self.min_runtime(action, preemptor.queue, victim.queue)
        return self.ssn.now < victim.last_start + runtime

    # -- hooks ------------------------------------------------------------------------------------
    def victim_filter(self, action: str, preemptor: PodGroupInfo, victim: PodGroupInfo) -> bool:
        if not self.protected(action, preemptor, victim):
            return True
        # Elastic jobs may still lose the pods above their minMember (checked per scenario).
        if any(sub.active() > sub.min_member for sub in victim.leaves):
            return True
        until = (victim.last_start or 0.0) + self.min_runtime(action, preemptor.queue, victim.queue)
        protected_victim(self.ssn, preemptor, victim, action, until)
        return False

    def validate(self, action: str, scenario: Any) -> Status:
        jobs = {chunk.job.key: chunk.job for chunk in scenario.chunks}
        for victim in jobs.values():
            if not self.protected(action, scenario.preemptor, victim):
                continue
            for sub in victim.leaves:
                if sum(1 for p in sub.pods if p.status in ACTIVE) < sub.min_member:
                    runtime = self.min_runtime(action, scenario.preemptor.queue, victim.queue)
                    return unschedulable(
                        "MinRuntime",
                        f"job {victim.key} started {self.ssn.now - (victim.last_start or 0):g}s ago and is "
                        f"protected for {runtime:g}s: only its pods above minMember may go",
                    )
        return SUCCESS


def _factory(args: dict[str, str]) -> MinRuntimePlugin:
    values = {}
    for key in ("defaultPreemptMinRuntime", "defaultReclaimMinRuntime"):
        raw = args.get(key, "0s")
        try:
            values[key] = max(0.0, parse_duration(raw))
        except ValueError as err:
            raise ValueError(f"minruntime: {key} must be a duration such as 10m, got {raw!r}") from err
    method = args.get("reclaimResolveMethod", "lca")
    if method not in ("lca", "queue"):
        raise ValueError(f"minruntime: reclaimResolveMethod must be lca or queue, got {method!r}")
    return MinRuntimePlugin(values["defaultPreemptMinRuntime"], values["defaultReclaimMinRuntime"], method)


register_plugin("minruntime")(_factory)
