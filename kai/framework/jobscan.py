"""One pass over every job's pod counts, shared by stale-gang eviction and the session's close.

Both need to look at every job of the cluster, nearly all of which are plainly running and need
nothing: stale-gang eviction looks for jobs below their minMember, close gives every job its outcome.
The pass stale-gang eviction makes also notes the jobs that are plainly running (one sub-group, every
pod running or just allocated, at least minMember of them: job_outcome's "Running" without a word of
explanation) with their outcome, and when the session closes, only the other jobs and those whose pods
a statement moved since then (kai.framework.statement.moved_pods) need looking at again.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, is_not

import numpy as np

from kai.framework.decisions import JobOutcome
from kai.framework.podtable import SEVERAL_LEAVES, status_mask, used_numbers
from kai.framework.session import Session
from kai.framework.statement import moved_pods
from kai.model import ACTIVE, PodGroupInfo, PodStatus

_PLACED = frozenset({PodStatus.RUNNING, PodStatus.ALLOCATED})
_PLACED_CODES = status_mask(_PLACED)
_ACTIVE_CODES = status_mask(ACTIVE)
_STALE_SINCE = attrgetter("stale_since")
_JOB_KEY = attrgetter("job_key")


@dataclass(slots=True)
class JobScan:
    moves: int  # how many moves the session's log held at the pass
    # Per job, in job order: the outcome of a plainly running job (job_outcome's, one object per queue),
    # None for any other job.
    outcomes: list[JobOutcome | None]
    running: dict[str, JobOutcome]  # those outcomes, per queue
    others: list[str]  # the jobs that are not plainly running (in job order)
    to_check: list[str]  # jobs that carry a stale instant or may be stale (in job order)


def plainly_running(job: PodGroupInfo) -> bool:
    """One sub-group whose pods are all running or allocated, at least minMember of them (and some)."""
    leaves = job.leaves
    if len(leaves) != 1:
        return False
    sub = leaves[0]
    total = 0
    for status, n in sub.counts().items():
        if n and status not in _PLACED:
            return False
        total += n
    return total > 0 and total >= sub.min_member


def _maybe_stale(job: PodGroupInfo) -> bool:
    """Some sub-group has active pods, fewer than its minMember (a job that may be stale), or the job
    has several sub-groups (stale-gang eviction then asks its own rule)."""
    leaves = job.leaves
    if len(leaves) != 1:
        return True
    sub = leaves[0]
    active = sub.count(ACTIVE)
    return bool(active) and active < sub.min_member


def _as_now(job: PodGroupInfo) -> tuple[bool, bool]:
    """(plainly_running(job), _maybe_stale(job)), from one look at the counts of a job of one sub-group."""
    leaves = job.leaves
    if len(leaves) != 1:
        return False, True
    sub = leaves[0]
    total = active = 0
    placed = True
    for status, n in sub.counts().items():
        if n:
            total += n
            if status not in _PLACED:
                placed = False
            if status in ACTIVE:
                active += n
    minimum = sub.min_member
    return placed and total > 0 and total >= minimum, bool(active) and active < minimum


def _stale_instant(jobs: list[PodGroupInfo]) -> np.ndarray:
    """Per job: whether it carries a stale instant."""
    instants = list(map(_STALE_SINCE, jobs))
    if instants.count(None) == len(instants):  # the common answer, counted in C
        return np.zeros(len(jobs), dtype=bool)
    return np.fromiter(map(is_not, instants, repeat(None)), dtype=bool, count=len(jobs))


def scan_jobs(ssn: Session) -> JobScan:
    """The pass over every job of the session, remembered for `last_scan`: what `_scan_plain` finds job by
    job, read for the jobs no statement changed a pod of from the session's pod table (the pods' statuses
    as the session opened, a column per job at once), and job by job only for the others."""
    table = ssn.table
    jobs = ssn.jobs
    if len(table.jobs) != len(jobs) or table.keys != list(jobs):
        return _scan_plain(ssn)  # not the jobs the session opened with
    status, starts = table.columns.status, table.starts

    def per_job(mask: np.ndarray) -> np.ndarray:
        """How many of each job's pods the mask holds."""
        total = np.zeros(len(mask) + 1, dtype=np.intp)
        np.cumsum(mask, out=total[1:])
        return total[starts[1:]] - total[starts[:-1]]

    size = np.diff(starts)
    placed, active = per_job(_PLACED_CODES[status]), per_job(_ACTIVE_CODES[status])
    minimum = table.leaf_minimum()
    one = minimum != SEVERAL_LEAVES
    running = one & (size > 0) & (placed == size) & (size >= minimum)  # plainly_running, as the session opened
    maybe_stale = ~one | ((active > 0) & (active < minimum))  # _maybe_stale, likewise
    moved = moved_pods(ssn)
    if moved:  # the jobs a statement changed since: as they are now
        jobs = table.jobs
        for i in map(ssn.job_position, set(map(_JOB_KEY, moved))):
            if i is not None:
                running[i], maybe_stale[i] = _as_now(jobs[i])
    check = table.job_flag("stale instant", _stale_instant) | (~running & maybe_stale)
    # One outcome per queue with a plainly running job, each such job's taken by its queue's number.
    names, queue_of = table.queue_numbers()
    choices = np.full(len(names) + 1, None, dtype=object)  # the last: None, for the other jobs
    by_queue: dict[str, JobOutcome] = {}
    for i in used_numbers(queue_of[running], len(names)).tolist():
        choices[i] = by_queue[names[i]] = JobOutcome(names[i], "Running", "", "")
    outcomes = choices[np.where(running, queue_of, len(names))].tolist()
    keys = table.keys
    others = [keys[i] for i in np.flatnonzero(~running).tolist()]
    to_check = [keys[i] for i in np.flatnonzero(check).tolist()]
    scan = ssn.state["job scan"] = JobScan(len(moved), outcomes, by_queue, others, to_check)
    return scan


def _scan_plain(ssn: Session) -> JobScan:
    """The pass, job by job over the jobs' pod counts as they are now."""
    running: dict[str, JobOutcome] = {}  # per queue
    outcomes: list[JobOutcome | None] = []
    others: list[str] = []
    to_check: list[str] = []
    verdict, other, check = outcomes.append, others.append, to_check.append
    run, allocated = PodStatus.RUNNING, PodStatus.ALLOCATED
    for key, job in ssn.jobs.items():
        leaves = job.leaves
        if len(leaves) == 1:
            sub = leaves[0]
            counts = sub.counts()
            if len(counts) == 1:  # the common case at once: every pod running (or every pod allocated)
                n = counts.get(run) or counts.get(allocated)
                if n and n >= sub.min_member:
                    outcome = running.get(job.queue)
                    if outcome is None:
                        outcome = running[job.queue] = JobOutcome(job.queue, "Running", "", "")
                    verdict(outcome)
                    if job.stale_since is not None:
                        check(key)
                    continue
        if plainly_running(job):
            outcome = running.get(job.queue)
            if outcome is None:
                outcome = running[job.queue] = JobOutcome(job.queue, "Running", "", "")
            verdict(outcome)
        else:
            verdict(None)
            other(key)
        if job.stale_since is not None or _maybe_stale(job):
            check(key)
    scan = ssn.state["job scan"] = JobScan(len(moved_pods(ssn)), outcomes, running, others, to_check)
    return scan


def last_scan(ssn: Session) -> tuple[JobScan, set[str]] | None:
    """The session's last pass, and the jobs whose pods a statement moved since (None: no pass)."""
    scan: JobScan | None = ssn.state.get("job scan")
    if scan is None:
        return None
    return scan, set(map(_JOB_KEY, moved_pods(ssn)[scan.moves :]))
