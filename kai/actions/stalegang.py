"""stalegangeviction: a running job below its minMember for longer than the grace period is evicted
whole. The time comes from the snapshot (`ssn.now`) and the
PodGroup's `kai.scheduler/stale-podgroup-timestamp` annotation, never from a clock."""

from __future__ import annotations

from kai.framework.action import register_action
from kai.framework.jobscan import scan_jobs
from kai.framework.session import Session
from kai.framework.statement import Statement
from kai.framework.status import Code, Status
from kai.model import ACTIVE, PodGroupInfo, PodStatus

# Pods that count as "the job is running" for staleness (pods on their way out do not).
_PRESENT = ACTIVE


def _short_leaf(job: PodGroupInfo) -> tuple[str, int, int] | None:
    """(sub-group, active pods, minMember) of a leaf below its minMember, if any."""
    for sub in job.leaves:
        active = sub.active()
        if active < sub.min_member:
            return sub.name, active, sub.min_member
    return None


def is_stale(job: PodGroupInfo) -> bool:
    version = job.version
    cached = job.memo.get("stale")
    if cached is not None and cached[0] == version:
        return bool(cached[1])
    stale = _is_stale(job)
    job.memo["stale"] = (version, stale)
    return stale


def _is_stale(job: PodGroupInfo) -> bool:
    counts = job.status_counts()
    if counts.get(PodStatus.SUCCEEDED, 0) or not any(n for status, n in counts.items() if status in _PRESENT):
        return False
    return _short_leaf(job) is not None


@register_action("stalegangeviction")
def stale_gang_eviction(ssn: Session) -> None:
    grace = ssn.config.params.staleness_grace_period
    # Only a job that is stale or carries a stale instant has anything to do here: those, in key order.
    jobs = ssn.jobs
    for key in sorted(scan_jobs(ssn).to_check):
        job = jobs[key]
        if not is_stale(job):
            if job.stale_since is not None:
                ssn.decisions.stale_since[key] = None
            continue
        since = job.stale_since
        if since is None:
            since = ssn.now
            ssn.decisions.stale_since[key] = since
        if grace < 0 or ssn.now - since < grace:
            continue
        short = _short_leaf(job)
        assert short is not None
        name, active, minimum = short
        where = f"sub-group {name} " if len(job.leaves) > 1 else ""
        why = (
            f"Job has been below its minimum for {ssn.now - since:g}s (grace period {grace:g}s): "
            f"{where}has {active} active pods, minMember is {minimum}"
        )
        victims = [p for p in job.pods if p.status in ACTIVE]
        if not victims:
            continue
        stmt = Statement(ssn)
        for pod in sorted(victims, key=lambda p: p.key):
            stmt.evict(pod, "stalegangeviction", "", f"{why}; evicting remaining pod {pod.key}.")
        stmt.commit()
        ssn.decisions.stale_since[key] = None
        ssn.record_fit_error(job, Status(Code.UNSCHEDULABLE, "StaleJob", f"{why}; its remaining pods were evicted."))
