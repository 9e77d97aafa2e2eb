"""Two shortcuts of the allocate path give what the plain computation gives: a sub-group's pending pods
(all of them, in order, when its counters say every pod waits) are the pods whose status is Pending, and
proportion's sum of pods' queue vectors (the vector of a pod written as the one before it taken again)
is the vectors added pod by pod, to the bit. On random clusters (whole, fractional and gpu-memory pods,
running, pending and finished), as the session opens and after statements moved pods."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from kai.api import keys
from kai.api.timeutil import parse_time
from kai.cycle import open_session
from kai.framework.action import action
from kai.framework.config import SchedulerConfig
from kai.framework.statement import Statement
from kai.model import PodStatus
from kai.snapshot.builder import build_snapshot
from tests.scenario import NOW, node, pod, podgroup, queue


def random_cluster(rng: random.Random) -> list[dict[str, Any]]:
    memory = ["81920", "40960", "81920"]  # a placed gpu-memory pod counts as its share of its node's GPUs
    objects: list[dict[str, Any]] = [
        node(f"n{i}", gpus=8, labels={keys.GPU_MEMORY_NODE_LABEL: m}) for i, m in enumerate(memory)
    ] + [queue("q")]
    for j in range(rng.randint(1, 12)):
        objects.append(podgroup(f"job{j}", "q", min_member=rng.randint(1, 3)))
        kind = rng.choice(["whole", "whole", "fraction", "memory", "mixed"])
        for k in range(rng.randint(0, 5)):
            annotations = None
            this = rng.choice(["whole", "fraction", "memory"]) if kind == "mixed" else kind
            if this == "fraction":
                annotations = {keys.GPU_FRACTION_ANNOTATION: rng.choice(["0.5", "0.25"])}
            elif this == "memory":
                annotations = {keys.GPU_MEMORY_ANNOTATION: rng.choice(["2000", "40960"])}
            how = rng.choice(["run", "pending", "pending", "pending", "done"])
            objects.append(
                pod(
                    f"job{j}-{k}",
                    group=f"job{j}",
                    gpus=1 if this == "whole" else 0,
                    cpu=rng.choice(["1", "1", "2"]),
                    annotations=annotations,
                    node=f"n{rng.randrange(3)}" if how == "run" else None,
                    phase="Succeeded" if how == "done" else None,
                )
            )
    return objects


def check(ssn: Any) -> None:
    proportion = ssn.accounting
    for job in ssn.jobs.values():
        for sub in job.leaves:
            got = sub.pending()
            want = [p for p in sub.pods if p.status is PodStatus.PENDING]
            assert len(got) == len(want) and all(a is b for a, b in zip(got, want, strict=True))
        pods = list(job.pods)
        plain = np.zeros(3)
        for p in pods:
            plain = plain + proportion.queue_vector(p)
        assert proportion._sum(pods).tobytes() == plain.tobytes()


@pytest.mark.parametrize("seed", range(30))
def test_pending_pods_and_queue_sums_are_the_plain_ones(seed: int) -> None:
    rng = random.Random(seed)
    result = build_snapshot(random_cluster(rng), parse_time(NOW))
    assert result.problems == []
    for group in result.snapshot.podgroups.values():  # gpu-memory pods sharing one request object
        by_memory = [p for p in group.pods if p.gpu.memory_mib]
        for p in by_memory[1:]:
            p.gpu = by_memory[0].gpu
    ssn, _ = open_session(result.snapshot, SchedulerConfig())
    try:
        check(ssn)
        run = action("allocate")
        assert run is not None
        run(ssn)
        check(ssn)
        waiting = [p for p in ssn.pods if p.status is PodStatus.PENDING]
        if waiting:
            stmt = Statement(ssn)
            stmt.pipeline_row(rng.choice(waiting), 0)
            check(ssn)
            stmt.discard()
        check(ssn)
    finally:
        ssn.restore()
