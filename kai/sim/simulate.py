"""`kai simulate`: run scheduling rounds on a snapshot and apply each outcome as if the cluster
reacted at once (bound pods run, evicted and pipelined pods wait again, releasing pods stay)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from kai.cycle import CycleRunner
from kai.framework.config import SchedulerConfig
from kai.framework.decisions import Decisions
from kai.model import ClusterSnapshot, NodeSelectorTerm, PodInfo, PodStatus, ResourceClaimInfo, SelectorRequirement


@dataclass
class RoundResult:
    number: int
    decisions: Decisions


@dataclass
class SimulationResult:
    rounds: list[RoundResult] = field(default_factory=list)
    final: ClusterSnapshot | None = None
    last: Decisions | None = None  # the last round's decisions (queue report, pod group outcomes)


def pod_owners(snapshot: ClusterSnapshot) -> dict[str, str]:
    """Pod key -> the key of its pod group."""
    return {p.key: key for key, pg in snapshot.podgroups.items() for p in pg.pods}


def apply_decisions(
    snapshot: ClusterSnapshot, decisions: Decisions, owners: dict[str, str] | None = None
) -> ClusterSnapshot:
    """The cluster after it carried out the decisions. Only the pod groups the decisions name are copied
    (and changed); the others are shared with `snapshot`, which is left as it is. `owners` (pod key ->
    pod group key, see `pod_owners`) spares looking the pods up again in every round."""
    if owners is None:
        owners = pod_owners(snapshot)
    touched = set(decisions.last_start) | set(decisions.stale_since)
    for pod_key in [b.pod for b in decisions.bindings] + [e.pod for e in decisions.evictions]:
        job_key = owners.get(pod_key)
        if job_key is not None:
            touched.add(job_key)
    podgroups = dict(snapshot.podgroups)
    for key in touched & podgroups.keys():
        podgroups[key] = podgroups[key].clone()
    pods = {p.key: p for key in touched & podgroups.keys() for p in podgroups[key].pods}
    for binding in decisions.bindings:
        pod = pods[binding.pod]
        pod.status, pod.node, pod.gpu_groups = PodStatus.RUNNING, binding.node, binding.gpu_groups
    for eviction in decisions.evictions:
        pod = pods[eviction.pod]
        if pod.status is not PodStatus.RELEASING:
            pod.status, pod.node, pod.gpu_groups = PodStatus.PENDING, "", ()
    for key, moment in decisions.last_start.items():
        podgroups[key].last_start = moment
    for key, moment in decisions.stale_since.items():
        podgroups[key].stale_since = moment
    return dataclasses.replace(snapshot, podgroups=podgroups, resource_claims=_claims_after(snapshot, decisions, pods))


def _claims_after(
    snapshot: ClusterSnapshot, decisions: Decisions, pods: dict[str, PodInfo]
) -> dict[str, ResourceClaimInfo]:
    """Resource claims once the binder allocated those of bound pods and evicted pods let theirs go."""
    if not snapshot.resource_claims:
        return snapshot.resource_claims
    claims = {key: dataclasses.replace(c) for key, c in snapshot.resource_claims.items()}
    local = {d.key for d in snapshot.devices if d.node}
    for binding in decisions.bindings:
        for allocation in binding.claims:
            claim = claims.get(allocation.claim)
            if claim is None:
                continue
            if not claim.allocated:
                claim.allocated, claim.devices = True, allocation.devices
                if any(d.key in local for d in allocation.devices):
                    pin = SelectorRequirement("metadata.name", "In", (allocation.node,))
                    claim.node_terms = (NodeSelectorTerm(match_fields=(pin,)),)
            if binding.pod not in claim.reserved_for:
                claim.reserved_for = (*claim.reserved_for, binding.pod)
    for eviction in decisions.evictions:
        pod = pods[eviction.pod]
        if pod.status is PodStatus.RELEASING:
            continue
        for entry in pod.resource_claims:
            claim = claims.get(entry.claim)
            if claim is None:
                continue
            claim.reserved_for = tuple(p for p in claim.reserved_for if p != eviction.pod)
            if not claim.reserved_for:
                claim.allocated, claim.devices, claim.node_terms = False, (), ()
    return claims


def simulate(
    snapshot: ClusterSnapshot, config: SchedulerConfig, rounds: int = 1, reuse: bool = True
) -> SimulationResult:
    """Run the rounds. `reuse`: each round's session starts from the last one's, reading again only the
    pod groups the last decisions changed (the result is the same without it)."""
    result = SimulationResult()
    state = snapshot
    owners = pod_owners(snapshot)  # rounds move pods between statuses, never between pod groups
    # Between rounds only the decisions change the cluster: a round after one that changed nothing
    # decides the same (the runner answers it without running the cycle again).
    runner = CycleRunner(config, reuse=reuse)
    for number in range(1, rounds + 1):
        decisions = runner.run(state, changed=False)
        result.rounds.append(RoundResult(number, decisions))
        result.last = decisions
        state = apply_decisions(state, decisions, owners)
    result.final = state
    return result


def _round(value: float) -> float:
    return round(value, 6)


def to_json_dict(result: SimulationResult) -> dict[str, Any]:
    """The contract's output object; every list is sorted so equal input gives equal bytes."""
    assert result.final is not None and result.last is not None
    rounds = []
    for rnd in result.rounds:
        rounds.append({"round": rnd.number, **rnd.decisions.placements()})
    pods: dict[str, Any] = {}
    for pg in result.final.podgroups.values():
        for pod in pg.pods:
            status = pod.status.value
            pods[pod.key] = {
                "podGroup": pg.key,
                "status": status,
                "node": pod.node or None,
                "gpuGroups": sorted(pod.gpu_groups),
            }
    podgroups = {}
    for key, pg in result.final.podgroups.items():
        outcome = result.last.jobs.get(key)
        status = pg.phase()  # as the pod group stands once the last round's decisions are applied
        message = outcome.message if outcome and (status in ("Pending", "Gated") or pg.has_pending()) else ""
        podgroups[key] = {"queue": pg.queue, "status": status, "message": message}
    queues = {
        name: {
            "fairShare": {k: _round(v) for k, v in q.fair_share.items()},
            "allocated": {k: _round(v) for k, v in q.allocated.items()},
            "deserved": {k: _round(v) for k, v in q.deserved.items()},
            "requested": {k: _round(v) for k, v in q.requested.items()},
        }
        for name, q in result.last.queues.items()
    }
    return {
        "rounds": rounds,
        "pods": dict(sorted(pods.items())),
        "podGroups": dict(sorted(podgroups.items())),
        "queues": dict(sorted(queues.items())),
    }
