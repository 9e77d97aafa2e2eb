"""proportion's eviction policy (reclaim and preempt): who may reclaim, which queues may lose pods,
the two reclaim strategies compared where the two queues' paths diverge, the saturation-ratio rule,
and the queue checks every evicting action's scenario must pass afterwards.

Registered by the proportion plugin on the session's eviction hooks; actions never import it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from kai.framework.session import Session, VictimQueueOrder
from kai.framework.status import SUCCESS, Status, unschedulable
from kai.model import PodGroupInfo, PodInfo, PodStatus, QueueInfo
from kai.plugins.proportion.fairshare import UNLIMITED

if TYPE_CHECKING:
    from kai.framework.victims import Scenario
    from kai.plugins.proportion.plugin import ProportionPlugin

EPS = 1e-9
NAMES = ("GPUs", "CPU", "memory")

# A queue's victim order key as a function of (removed, next), its constants bound (see queue_keyer).
QueueKey = Callable[[list[float], tuple[float, ...]], tuple[Any, ...]]


def _ratio(allocated: float, share: float) -> float:
    """allocated / fair share; a zero share is infinitely saturated once anything is allocated."""
    if share < 0:
        return 0.0
    if share <= EPS:
        return float("inf") if allocated > EPS else 0.0
    return allocated / share


class ReclaimRules:
    # Whether the victim queue key takes its short path when every share is above 0 (a switch only so
    # that tests can compare it with the general formula).
    divide_shortcut = True
    # Whether a queue's key reads the queue's allocation as floats kept until it changes, instead of
    # converting it at every key (a switch only so that tests can compare the two; read as divide_shortcut).
    keep_floats = True

    def __init__(self, plugin: ProportionPlugin, multiplier: float, ssn: Session) -> None:
        self.p = plugin
        self.multiplier = multiplier
        self.ssn = ssn
        self._keyers: dict[str, QueueKey] = {}  # per queue: its victim order key (see queue_keyer)
        self._ranks: dict[str, int] | None = None  # queue name -> place by name, last first
        self._triples: dict[int, tuple[PodInfo, str, tuple[float, float, float]]] = {}
        params = ssn.config.params
        self.keep_share = params.reclaim_keeps_victim_share  # opt-in: the after-the-chunk checks
        # Opt-in: queues not above their deserved quota in any resource when the session opened are
        # kept whole this cycle, even if allocate gives them more before reclaim runs.
        self.guaranteed = {
            name: bool(np.all((a.deserved == UNLIMITED) | (a.allocated <= a.deserved + EPS)))
            for name, a in plugin.attrs.items()
            if params.reclaim_spares_queues_within_quota
        }
        self.filter_queues = self.keep_share or params.reclaim_spares_queues_within_quota
        self.consolidating = params.allow_consolidating_reclaim

    def register(self) -> None:
        hooks = self.ssn.hooks
        hooks.preemptor_checks.append(self.check_preemptor)
        hooks.victim_queue_filters.append(self.victim_queue_filter)
        hooks.scenario_validators.append(self.validate)
        hooks.victim_queue_order.append(VictimQueueOrder(self._triple, self.victim_queue_key, self.queue_keyer))

    # -- helpers -------------------------------------------------------------------------------------
    def _request(self, tasks: list[PodInfo]) -> np.ndarray:
        return sum((self.p.queue_vector(t) for t in tasks), np.zeros(3))

    def _triple(self, pod: PodInfo) -> tuple[float, float, float]:
        """The pod's queue vector as three floats (cached per pod and node: victims do not move while
        they are ordered). A pipelined pod (moved earlier in the cycle) counts for nothing: KAI's victim
        queue order takes away what a victim job has allocated, and pipelined pods are not part of it."""
        if pod.status is PodStatus.PIPELINED:
            return (0.0, 0.0, 0.0)
        found = self._triples.get(id(pod))
        if found is not None and found[0] is pod and found[1] == pod.node:
            return found[2]
        triple: tuple[float, float, float] = tuple(self.p.queue_vector(pod).tolist())  # type: ignore[assignment]
        self._triples[id(pod)] = (pod, pod.node, triple)
        return triple

    def _path(self, queue: str) -> list[str]:
        return [q.name for q in self.ssn.queue_path(queue)]

    def divergence(self, reclaimer: str, victim: str) -> tuple[str, str]:
        """The two sibling queues under the lowest common ancestor (top-level queues if none)."""
        r_path, v_path = self._path(reclaimer), self._path(victim)
        on_r = {name: i for i, name in enumerate(r_path)}
        for i, name in enumerate(v_path):
            if name in on_r:
                j = on_r[name]
                return r_path[j - 1] if j else r_path[0], v_path[i - 1] if i else v_path[0]
        return r_path[-1], v_path[-1]

    # -- who may evict -------------------------------------------------------------------------------
    def check_preemptor(self, action: str, job: PodGroupInfo, tasks: list[PodInfo]) -> Status:
        attrs = self.p.attrs.get(job.queue)
        if attrs is None:
            return unschedulable("UnknownQueue", f"queue {job.queue} is unknown")
        request = self._request(tasks)
        if action == "consolidation":
            return self.p.check_capacity(job, tasks)
        if action == "reclaim" and np.any(attrs.allocated + request > attrs.fair_share + EPS):
            return unschedulable(
                "CannotReclaim",
                f"queue {job.queue} would go over its fair share ({attrs.fair_share[0]:g} GPUs) with this job",
            )
        if not job.preemptible:
            for name in self._path(job.queue):
                a = self.p.attrs[name]
                over = (a.deserved != UNLIMITED) & (request > 0) & (a.allocated_np + request > a.deserved + EPS)
                if over.any():
                    return unschedulable(
                        "NonPreemptibleOverQuota",
                        f"non-preemptible job would take queue {name} over its quota",
                    )
        return SUCCESS

    # -- which victims ------------------------------------------------------------------------------
    def _strategy_holds(
        self,
        r_side: str,
        v_side: str,
        r_allocated: np.ndarray,
        request: np.ndarray,
        v_remaining: np.ndarray,
        chunk: np.ndarray | None = None,
    ) -> bool:
        total = self.p.total
        r, v = self.p.attrs[r_side], self.p.attrs[v_side]
        # MaintainFairShare: the victim side is above its allocatable share in some resource, before the
        # chunk. With the opt-in reclaimKeepsVictimShare it must also stay at or above that share after
        # the chunk, in a resource the chunk gives up.
        share = v.allocatable(total)
        above = v_remaining > share + EPS
        if chunk is not None and self.keep_share:
            above &= (chunk > EPS) & (v_remaining - chunk >= share - EPS)
        if np.any(above):
            return True
        # GuaranteeDeservedQuota: the reclaimer side stays within deserved, the victim side is above its own.
        within = np.all((r.deserved == UNLIMITED) | (r_allocated + request <= r.deserved + EPS))
        above = np.any((v.deserved != UNLIMITED) & (v_remaining > v.deserved + EPS))
        return bool(within and above)

    def victim_queue_filter(self, action: str, preemptor: PodGroupInfo, queue: str) -> bool:
        """Reclaim, with one of kai's opt-in protections on: skip queues that could not lose anything
        under either strategy (KAI itself pops every candidate and lets the validator judge)."""
        if not self.filter_queues:
            return True
        if action != "reclaim" or queue not in self.p.attrs or preemptor.queue not in self.p.attrs:
            return True
        r_side, v_side = self.divergence(preemptor.queue, queue)
        for name in self._path(queue):
            if self.guaranteed.get(name, False):
                return False
            if name == v_side:
                break
        request = self.p.job_request(preemptor)
        return self._strategy_holds(
            r_side, v_side, self.p.attrs[r_side].allocated, request, self.p.attrs[v_side].allocated
        )

    def _name_rank(self, name: str) -> int:
        """The queue's place among the session's queues by name, last name first: compares as
        Descending(name) does, but as a number (queues of equal share tie up to it often)."""
        if self._ranks is None:
            self._ranks = {q: i for i, q in enumerate(sorted(self.p.attrs, reverse=True))}
        return self._ranks[name]

    def victim_queue_key(self, queue: QueueInfo, removed: list[float], next_sum: tuple[float, ...]) -> tuple[Any, ...]:
        """Which queue gives up a victim first: the reverse of the allocation queue order, the queue judged
        with the victims already picked from its subtree removed (`removed`: their summed queue vectors,
        kept running by the victim picker; empty when none). Over its fair share in every resource first;
        then not within its deserved quota (on its allocation as the session has it, the picked victims
        not removed); lower queue priority; using a resource its allocatable share
        is 0 for; higher dominant resource share once its next victim (`next_sum`) is gone too, then
        without it; larger allocatable share; newest."""
        return self.queue_keyer(queue)(removed, next_sum)

    def queue_keyer(self, queue: QueueInfo) -> QueueKey:
        """`victim_queue_key` for this queue alone, as a function of (removed, next): the queue's constants
        bound once per session (the victim picker asks once per queue, then calls it at every pop). Two
        queues' keys never tie: each ends with the queue's place by name."""
        keyer = self._keyers.get(queue.name)
        if keyer is None:
            keyer = self._keyers[queue.name] = self._make_keyer(queue)
        return keyer

    def _make_keyer(self, queue: QueueInfo) -> QueueKey:
        attrs = self.p.attrs.get(queue.name)
        if attrs is None:  # a queue the plugin does not know gives up victims first (by name among such)
            unknown = (-1, queue.name)
            return lambda removed, next_sum: unknown
        share = attrs.allocatable(self.p.total).tolist()
        sg, sc, sm = share
        # over its fair share above these (every resource)
        fg, fc, fm = (f + EPS for f in attrs.fair_share.tolist())
        # within its deserved quota up to these (unlimited: always within)
        dg, dc, dm = (float("inf") if d == UNLIMITED else d + EPS for d in attrs.deserved.tolist())
        # dominant resource share: divide by the share, or multiply by 1000 where it is 0
        pg_, pc_, pm_ = (s > EPS for s in share)
        priority = queue.priority * 2
        t0, t1, t2 = tuple(-c for c in share), -queue.creation, self._name_rank(queue.name)
        first = priority + 1

        def divide(removed: list[float], next_sum: tuple[float, ...]) -> tuple[Any, ...]:
            """Every share above 0: no zero share in use, every ratio a division."""
            # The queue's allocation as floats, kept until it changes (the plugin drops it then): between
            # the solver's trials every pop reads the same.
            floats = attrs.floats
            if floats is None:
                floats = attrs.floats = attrs.allocated.tolist()
            wg, wc, wm = ag, ac, am = floats
            if removed:
                pg, pc, pm = removed
                ag, ac, am = ag - pg, ac - pc, am - pm
            # (not over its share, within its quota) as one number. As KAI, whether the queue is within its
            # quota is judged on its allocation as the session has it: the victims already picked from it
            # count only in the dominant shares below.
            head = (0 if ag > fg and ac > fc and am > fm else 2) + (1 if wg <= dg and wc <= dc and wm <= dm else 0)
            drs = ag / sg
            x = ac / sc
            if x > drs:
                drs = x
            x = am / sm
            if x > drs:
                drs = x
            if not next_sum:
                return (head, first, -drs, -drs, t0, t1, t2)
            vg, vc, vm = next_sum
            after = (ag - vg) / sg
            x = (ac - vc) / sc
            if x > after:
                after = x
            x = (am - vm) / sm
            if x > after:
                after = x
            return (head, first, -after, -drs, t0, t1, t2)

        def general(removed: list[float], next_sum: tuple[float, ...]) -> tuple[Any, ...]:
            floats = attrs.floats
            if floats is None:
                floats = attrs.floats = attrs.allocated.tolist()
            wg, wc, wm = ag, ac, am = floats
            if removed:
                pg, pc, pm = removed
                ag, ac, am = ag - pg, ac - pc, am - pm
            head = (0 if ag > fg and ac > fc and am > fm else 2) + (1 if wg <= dg and wc <= dc and wm <= dm else 0)
            zero_share = sg <= 0 < ag or sc <= 0 < ac or sm <= 0 < am
            # max() of the three, spelt out (the first of equal values, as max)
            drs = ag / sg if pg_ else ag * 1000.0
            x = ac / sc if pc_ else ac * 1000.0
            if x > drs:
                drs = x
            x = am / sm if pm_ else am * 1000.0
            if x > drs:
                drs = x
            after = drs
            if next_sum:
                vg, vc, vm = next_sum
                vg, vc, vm = ag - vg, ac - vc, am - vm
                after = vg / sg if pg_ else vg * 1000.0
                x = vc / sc if pc_ else vc * 1000.0
                if x > after:
                    after = x
                x = vm / sm if pm_ else vm * 1000.0
                if x > after:
                    after = x
            return (head, priority + (0 if zero_share else 1), -after, -drs, t0, t1, t2)

        keyer = divide if self.divide_shortcut and pg_ and pc_ and pm_ else general
        if self.keep_floats:
            return keyer

        def afresh(removed: list[float], next_sum: tuple[float, ...]) -> tuple[Any, ...]:
            attrs.floats = None  # the plain path: the allocation converted at every key
            return keyer(removed, next_sum)

        return afresh

    # -- scenarios ----------------------------------------------------------------------------------
    def validate(self, action: str, scenario: Scenario) -> Status:
        job = scenario.preemptor
        if job.queue not in self.p.attrs:
            return SUCCESS
        request = self._request(scenario.tasks)
        status = self._queue_limits(job, request)
        if not status.ok or action != "reclaim":
            return status
        return self._reclaimable(scenario, request)

    def _queue_limits(self, job: PodGroupInfo, request: np.ndarray) -> Status:
        """After the scenario, the preemptor's queues are within their limits (and, for non-preemptible
        work, within deserved quota) at every level."""
        for name in self._path(job.queue):
            a = self.p.attrs[name]
            over = (a.limit != UNLIMITED) & (request > 0) & (a.allocated > a.limit + EPS)
            if over.any():
                col = int(np.flatnonzero(over)[0])
                return unschedulable(
                    "OverLimit", f"queue {name} would exceed its limit of {a.limit[col]:g} {NAMES[col]}"
                )
            if not job.preemptible:
                over = (a.deserved != UNLIMITED) & (request > 0) & (a.allocated_np > a.deserved + EPS)
                if over.any():
                    return unschedulable(
                        "NonPreemptibleOverQuota", f"non-preemptible job would take queue {name} over its quota"
                    )
        return SUCCESS

    def _reclaimable(self, scenario: Scenario, request: np.ndarray) -> Status:
        p = self.p
        reclaimer = scenario.preemptor.queue
        # Only victims that really leave count: with consolidating reclaim, those placed again elsewhere
        # are ignored too.
        lost = {t.key for t in scenario.lost()}
        counted = lost if self.consolidating else {t.key for t in scenario.moved()}
        # The allocation before the scenario: undo the preemptor's placement and the lost victims.
        before = {name: a.allocated.copy() for name, a in p.attrs.items()}
        for name in self._path(reclaimer):
            before[name] -= request
        chunks: list[tuple[str, np.ndarray]] = []
        for chunk in scenario.chunks:
            gone = sum((p.queue_vector(t) for t in chunk.tasks if t.key in lost), np.zeros(3))
            for name in self._path(chunk.job.queue):
                before[name] += gone
            vec = sum((p.queue_vector(t) for t in chunk.tasks if t.key in counted), np.zeros(3))
            if vec.any():
                chunks.append((chunk.job.queue, vec))
        remaining = {name: vec.copy() for name, vec in before.items()}
        taken: dict[tuple[str, str], np.ndarray] = {}
        for victim_queue, vec in chunks:
            r_side, v_side = self.divergence(reclaimer, victim_queue)
            if not self._strategy_holds(r_side, v_side, before[r_side], request, remaining[v_side], vec):
                v = p.attrs[v_side]
                return unschedulable(
                    "ReclaimUnfair",
                    f"queue {v_side} cannot give up more: it would have {remaining[v_side][0]:g} GPUs, "
                    f"within its fair share of {v.fair_share[0]:g} and deserved quota of {v.deserved[0]:g}",
                )
            for name in self._path(victim_queue):
                remaining[name] -= vec
            # Opt-in reclaimKeepsVictimShare: a chunk may not take the victim side below its deserved
            # quota (KAI only checks before the chunk, so one big gang can).
            v = p.attrs[v_side]
            under = (v.deserved != UNLIMITED) & (vec > EPS) & (remaining[v_side] < v.deserved - EPS)
            if self.keep_share and under.any():
                col = int(np.flatnonzero(under)[0])
                return unschedulable(
                    "ReclaimBelowQuota",
                    f"queue {v_side} would drop to {remaining[v_side][col]:g} {NAMES[col]}, "
                    f"below its deserved quota of {v.deserved[col]:g}",
                )
            taken[(r_side, v_side)] = taken.get((r_side, v_side), np.zeros(3)) + vec
        # Saturation: a reclaimer side above its fair share may not end more saturated than its sibling.
        for (r_side, v_side), vec in taken.items():
            r_share, v_share = p.attrs[r_side].fair_share, p.attrs[v_side].fair_share
            for col in range(3):
                if request[col] <= EPS and vec[col] <= EPS:
                    continue
                if r_share[col] < 0 and v_share[col] < 0:
                    continue
                r_ratio = _ratio(before[r_side][col] + request[col], r_share[col])
                v_ratio = _ratio(remaining[v_side][col], v_share[col])
                if r_ratio > 1 + EPS and v_share[col] > EPS and r_ratio * self.multiplier >= v_ratio - EPS:
                    return unschedulable(
                        "ReclaimSaturation",
                        f"queue {r_side} would be {r_ratio:.2f}x its fair share of {NAMES[col]}, "
                        f"not less saturated than queue {v_side} ({v_ratio:.2f}x)",
                    )
        return SUCCESS
