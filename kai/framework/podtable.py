"""The session's pods as columns: one row per pod, job by job, in the snapshot's pod group order.

Opening a session needs, for every pod, its status, the node row it sits on and what it requests
(node resources, GPUs), and for every job its queue and whether it is preemptible. Read into numpy
columns with one C-level pass per attribute, the sums a session starts from (each node's idle and
releasing resources, each queue's allocation and request) are a few vectorised updates instead of
a loop over the pods in each consumer.

A table can also be made from the table of an earlier session on the same nodes: the rows of every
pod group that is the same object as then (and that the caller does not name as changed in place)
are copied from it, and only the other pod groups' pods are read. The rows copied are what reading
those pods again would give (a pod group the session used comes out of it as it went in: the
session puts back every pod it changed), so everything computed from the table is the same.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from functools import reduce
from itertools import repeat
from operator import attrgetter, iadd, is_, itemgetter
from typing import Any

import numpy as np

from kai.model import NodeInfo, PodGroupInfo, PodInfo, PodStatus

STATUSES: tuple[PodStatus, ...] = tuple(PodStatus)
JobFlags = Callable[[list[PodGroupInfo]], np.ndarray]  # a value per job of the list (a bool, or a number)
CODE: dict[PodStatus, int] = {s: i for i, s in enumerate(STATUSES)}

_LEAVES = attrgetter("leaves")
_PODS = attrgetter("pods")
_STATUS = attrgetter("status")
_NODE = attrgetter("node")
_REQUESTS = attrgetter("requests")
_GPU = attrgetter("gpu")
_QUEUE = attrgetter("queue")
_PREEMPTIBLE = attrgetter("preemptible")
_MIN_MEMBER = attrgetter("min_member")
_GIVEN_LEAVES, _FIRST = attrgetter("_leaves"), itemgetter(0)
SEVERAL_LEAVES = int(np.iinfo(np.int64).min)  # leaf_minimum of a job without exactly one leaf


def leaf_minimum(jobs: list[PodGroupInfo]) -> np.ndarray:
    """Per job: its one leaf's minMember (SEVERAL_LEAVES for a job without exactly one leaf)."""
    leaves = list(map(_GIVEN_LEAVES, jobs))  # as worked out (or given) already, mostly: read in C
    if None in leaves:
        leaves = list(map(_LEAVES, jobs))
    one = np.fromiter(map(len, leaves), dtype=np.intp, count=len(jobs)) == 1
    if one.all():  # the common case, read in C
        return np.fromiter(map(_MIN_MEMBER, map(_FIRST, leaves)), dtype=np.int64, count=len(jobs))
    out = np.full(len(jobs), SEVERAL_LEAVES, dtype=np.int64)
    out[one] = [leaves[i][0].min_member for i in np.flatnonzero(one).tolist()]
    return out


def used_numbers(numbers: np.ndarray, size: int) -> np.ndarray:
    """`np.unique(numbers)` for numbers in range(size) (sorted, each once), by counting: much cheaper than
    the hashing or sorting np.unique does on a long column of few distinct numbers."""
    return np.flatnonzero(np.bincount(numbers, minlength=size))


def status_mask(statuses: Iterable[PodStatus]) -> np.ndarray:
    """A lookup over status codes: `status_mask(S)[columns.status]` is True for the pods whose status is in S."""
    mask = np.zeros(len(STATUSES), dtype=bool)
    for status in statuses:
        mask[CODE[status]] = True
    return mask


class Interned:
    """Objects (a pod's Resources, GpuRequest) by identity: each distinct object once, numbered as first
    met. The list keeps them alive, so that their ids stay theirs while a table that numbers them lives."""

    __slots__ = ("items", "slot")

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.slot: dict[int, int] = {}

    def numbers(self, objects: list[Any]) -> np.ndarray:
        """The number of each object (numbering those not met before)."""
        if not objects:
            return np.zeros(0, dtype=np.intp)
        ids = np.fromiter(map(id, objects), dtype=np.int64, count=len(objects))
        distinct, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
        slot, items = self.slot, self.items
        numbers = np.empty(len(distinct), dtype=np.intp)
        for k, (key, at) in enumerate(zip(distinct.tolist(), first.tolist(), strict=True)):
            number = slot.get(key)
            if number is None:
                number = slot[key] = len(items)
                items.append(objects[at])
            numbers[k] = number
        return numbers[inverse.reshape(-1)]


@dataclass(slots=True)
class PodColumns:
    """Per pod: status code (see CODE), node row (-1: not one of the session's nodes), and the numbers of
    its Resources and GpuRequest objects (`requests.items[req[i]]`, `gpus.items[gpu[i]]`)."""

    pods: list[PodInfo]
    status: np.ndarray  # int8
    row: np.ndarray  # intp
    req: np.ndarray  # intp
    gpu: np.ndarray  # intp


def read_pods(pods: list[PodInfo], node_index: dict[str, int], requests: Interned, gpus: Interned) -> PodColumns:
    """The columns of these pods, read from the objects."""
    count = len(pods)
    rows = defaultdict(repeat(-1).__next__, node_index)  # -1 for "" and unknown nodes, looked up in C
    return PodColumns(
        pods,
        _small_column(lambda: map(CODE.__getitem__, map(_STATUS, pods)), np.int8, count),
        np.fromiter(map(rows.__getitem__, map(_NODE, pods)), dtype=np.intp, count=count),
        requests.numbers(list(map(_REQUESTS, pods))),
        gpus.numbers(list(map(_GPU, pods))),
    )


class PodTable:
    """The columns of every pod of a session's jobs (job by job, each job's leaves in order), and per
    job: its pods' first row (`starts`, with one more entry at the end), queue and preemptibility."""

    def __init__(self, nodes: list[NodeInfo]) -> None:
        self.nodes = nodes
        self.jobs: list[PodGroupInfo] = []
        self.keys: list[str] = []
        self.starts = np.zeros(1, dtype=np.intp)
        self.columns = PodColumns([], *(np.zeros(0, dtype=t) for t in (np.int8, np.intp, np.intp, np.intp)))
        self.queue: list[str] = []
        self.preemptible = np.zeros(0, dtype=bool)
        self.requests = Interned()
        self.gpus = Interned()
        self.reused = 0  # jobs whose rows were copied from an earlier table
        self._job_of: np.ndarray | None = None
        self._position: dict[str, int] | None = None
        self._queue_numbers: tuple[list[str], np.ndarray] | None = None
        self._minima: np.ndarray | None = None  # leaf_minimum of the jobs last read, if read on the way
        self._pod_flags: dict[str, np.ndarray] = {}
        self._job_flags: dict[str, tuple[JobFlags, np.ndarray]] = {}

    @property
    def pods(self) -> list[PodInfo]:
        return self.columns.pods

    @property
    def position(self) -> dict[str, int]:
        """Per job key, the job's position in `jobs`."""
        if self._position is None:
            self._position = dict(zip(self.keys, range(len(self.keys)), strict=True))
        return self._position

    def queue_numbers(self) -> tuple[list[str], np.ndarray]:
        """The jobs' queues, each once in job order, and per job the number of its queue in that list
        (worked out once per table: the session's queue sums and job scans share it)."""
        if self._queue_numbers is None:
            names = list(dict.fromkeys(self.queue))
            number = dict(zip(names, range(len(names)), strict=True))
            self._queue_numbers = (
                names,
                np.fromiter(map(number.__getitem__, self.queue), dtype=np.intp, count=len(self.queue)),
            )
        return self._queue_numbers

    @property
    def job_of(self) -> np.ndarray:
        """Per pod, the position of its job in `jobs`."""
        if self._job_of is None:
            self._job_of = np.repeat(np.arange(len(self.jobs), dtype=np.intp), np.diff(self.starts))
        return self._job_of

    def pod_flag(self, attribute: str) -> np.ndarray:
        """Per pod, whether its `attribute` is truthy (e.g. `host_ports`): read once per table, and for a
        table made from an earlier one, only for the pods it read."""
        flag = self._pod_flags.get(attribute)
        if flag is None:
            flag = self._pod_flags[attribute] = _truthy(self.pods, attribute)
        return flag

    def leaf_minimum(self) -> np.ndarray:
        """Per job, its one leaf's minMember (see `leaf_minimum`), kept as a job flag."""
        return self.job_flag("leaf minMember", leaf_minimum)

    def job_flag(self, name: str, compute: JobFlags) -> np.ndarray:
        """Per job, `compute(jobs)` (a value per job of a list, a bool or a number, from the jobs' own fields
        alone, e.g. whether a job names a topology), kept under `name`: computed once per table, and for a
        table made from an earlier one that had it, only for the jobs it read."""
        found = self._job_flags.get(name)
        if found is None:
            found = self._job_flags[name] = (compute, compute(self.jobs))
        return found[1]

    # -- building -----------------------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        podgroups: dict[str, PodGroupInfo],
        nodes: list[NodeInfo],
        node_index: dict[str, int],
        previous: PodTable | None = None,
        changed: Collection[str] = (),
    ) -> PodTable:
        """The table of `podgroups` on `nodes`. With `previous` (the table of an earlier session), when
        it was made on the same node objects, the rows of every pod group that is the same object as
        there and whose key is not in `changed` (pod groups whose pods the caller changed in place) are
        copied from it."""
        table = cls(nodes)
        table.jobs, table.keys = list(podgroups.values()), list(podgroups)
        if previous is not None and _same_nodes(previous.nodes, nodes) and _compact(previous):
            table.requests, table.gpus = previous.requests, previous.gpus
            table._splice(previous, node_index, changed)
        else:
            table.starts, table.columns, table.queue, table.preemptible = table._read(table.jobs, node_index)
            if table._minima is not None:  # read on the way: what leaf_minimum gives
                table._job_flags["leaf minMember"] = (leaf_minimum, table._minima)
        return table

    def _read(
        self, jobs: list[PodGroupInfo], node_index: dict[str, int]
    ) -> tuple[np.ndarray, PodColumns, list[str], np.ndarray]:
        """The rows of these jobs' pods, read from the objects."""
        leaves = list(map(_GIVEN_LEAVES, jobs))  # as given by whoever made the jobs, mostly: read in C
        if None in leaves:
            leaves = list(map(_LEAVES, jobs))
        flat = _joined(leaves)
        pod_lists = list(map(_PODS, flat))
        sizes = np.fromiter(map(len, pod_lists), dtype=np.intp, count=len(flat))
        if len(flat) != len(jobs) or [] in leaves:  # some job has no leaf, so another has several
            per_job = np.fromiter(map(len, leaves), dtype=np.intp, count=len(jobs))
            owner = np.repeat(np.arange(len(jobs), dtype=np.intp), per_job)
            sizes = np.bincount(owner, weights=sizes, minlength=len(jobs)).astype(np.intp)
            self._minima = None
        else:  # one leaf per job: each job's leaf minMember at once
            self._minima = np.fromiter(map(_MIN_MEMBER, flat), dtype=np.int64, count=len(flat))
        starts = np.zeros(len(jobs) + 1, dtype=np.intp)
        np.cumsum(sizes, out=starts[1:])
        pods = _joined(pod_lists)
        columns = read_pods(pods, node_index, self.requests, self.gpus)
        queue = list(map(_QUEUE, jobs))
        preemptible = _small_column(lambda: map(_PREEMPTIBLE, jobs), np.bool_, len(jobs))
        return starts, columns, queue, preemptible

    def _splice(self, previous: PodTable, node_index: dict[str, int], changed: Collection[str]) -> None:
        jobs, count = self.jobs, len(self.jobs)
        if self.keys == previous.keys:
            at = np.arange(count, dtype=np.intp)
            same = np.fromiter(map(is_, jobs, previous.jobs), dtype=bool, count=count)
        else:
            position = {key: i for i, key in enumerate(previous.keys)}
            at = np.fromiter(map(position.get, self.keys, repeat(-1)), dtype=np.intp, count=count)
            old = previous.jobs
            same = np.fromiter(
                (i >= 0 and old[i] is job for i, job in zip(at.tolist(), jobs, strict=True)), dtype=bool, count=count
            )
        if changed:
            mine = {key: i for i, key in enumerate(self.keys)} if len(changed) > 8 else None
            for key in changed:
                i = mine.get(key) if mine is not None else _position(self.keys, key)
                if i is not None:
                    same[i] = False
        fresh = np.flatnonzero(~same)
        kept = np.flatnonzero(same)
        self.reused = len(kept)
        new_starts, new, new_queue, new_preemptible = self._read([jobs[i] for i in fresh.tolist()], node_index)
        # Where each job's rows come from: its rows in the previous table, or in the rows just read
        # (which follow the previous table's in the concatenated columns).
        old_count = len(previous.pods)
        size = np.empty(count, dtype=np.intp)
        source = np.empty(count, dtype=np.intp)
        size[kept] = np.diff(previous.starts)[at[kept]]
        source[kept] = previous.starts[at[kept]]
        size[fresh] = np.diff(new_starts)
        source[fresh] = new_starts[:-1] + old_count
        starts = np.zeros(count + 1, dtype=np.intp)
        np.cumsum(size, out=starts[1:])
        gather = np.repeat(source - starts[:-1], size) + np.arange(int(starts[-1]), dtype=np.intp)
        self.starts = starts
        old = previous.columns
        everyone = np.empty(old_count + len(new.pods), dtype=object)
        everyone[:old_count] = old.pods
        everyone[old_count:] = new.pods
        self.columns = PodColumns(
            everyone[gather].tolist(),
            *(np.concatenate((getattr(old, f), getattr(new, f)))[gather] for f in ("status", "row", "req", "gpu")),
        )
        for attribute, flag in previous._pod_flags.items():
            self._pod_flags[attribute] = np.concatenate((flag, _truthy(new.pods, attribute)))[gather]
        fresh_jobs = [jobs[i] for i in fresh.tolist()]
        for name, (compute, values) in previous._job_flags.items():
            out = np.empty(count, dtype=values.dtype)
            out[kept] = values[at[kept]]
            out[fresh] = compute(fresh_jobs)
            self._job_flags[name] = (compute, out)
        queues = np.empty(count, dtype=object)
        queues[kept] = np.array(previous.queue, dtype=object)[at[kept]]
        queues[fresh] = new_queue
        self.queue = queues.tolist()
        flags = np.empty(count, dtype=bool)
        flags[kept] = previous.preemptible[at[kept]]
        flags[fresh] = new_preemptible
        self.preemptible = flags


def _small_column(values: Callable[[], Iterable[Any]], dtype: type[np.generic], count: int) -> np.ndarray:
    """The column of `values()`, numbers in range(256) (status codes, bools), packed by `bytearray` in C:
    about half of what `np.fromiter` spends per number (and by `np.fromiter` for other values)."""
    try:
        return np.frombuffer(bytearray(values()), dtype=dtype)
    except (TypeError, ValueError):
        return np.fromiter(values(), dtype=dtype, count=count)


def _truthy(pods: list[PodInfo], attribute: str) -> np.ndarray:
    if not any(map(attrgetter(attribute), pods)):  # the common answer, found by one pass in C
        return np.zeros(len(pods), dtype=bool)
    return np.fromiter(map(bool, map(attrgetter(attribute), pods)), dtype=bool, count=len(pods))


def _joined(lists: list[list[Any]]) -> list[Any]:
    """The lists one after the other (extending one list in C: much faster than chain for many short lists)."""
    return reduce(iadd, lists, [])


def _position(keys: list[str], key: str) -> int | None:
    try:
        return keys.index(key)
    except ValueError:
        return None


def _same_nodes(a: list[NodeInfo], b: list[NodeInfo]) -> bool:
    return a is b or (len(a) == len(b) and all(map(is_, a, b)))


def _compact(table: PodTable) -> bool:
    """Whether the objects the table numbers are mostly still in use (the numbering grows as pod groups
    come and go; past twice what the rows use, the next table starts a new one)."""
    used = max(len(table.requests.items), len(table.gpus.items))
    return used <= 64 or used <= 2 * max(
        len(np.unique(table.columns.req)), len(np.unique(table.columns.gpu))
    )
