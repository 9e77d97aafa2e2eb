"""The proportion plugin's queue sums as the session opens (allocated, non-preemptible allocated and
request per queue), which it adds with one bincount per depth of the queue tree: compared to the bit with
one pod at a time in pod order, on random clusters whose leaf queues sit at different depths and whose
pods ask for fractions that binary floats do not hold exactly (a parent queue's request is set from its
children's when fair share is divided: only the leaves' requests are compared)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from kai.api.timeutil import parse_time
from kai.cycle import open_session
from kai.framework.config import SchedulerConfig
from kai.model import ALLOCATED, PodStatus
from kai.plugins.proportion.plugin import ProportionPlugin
from kai.snapshot.builder import build_snapshot
from tests.scenario import NOW, node, pod, podgroup, queue

# Leaves at depth 1 (solo), 2 (a1, a2) and 3 (b1x): the sums of one depth must not mix with another's.
QUEUES = [("root-a", ""), ("a1", "root-a"), ("a2", "root-a"), ("b", "root-a"), ("b1x", "b"), ("solo", "")]
LEAVES = ["a1", "a2", "b1x", "solo", "unknown"]


def random_cluster(rng: random.Random) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [node(f"n{i}", gpus=8, cpu="64") for i in range(3)]
    objects += [queue(name, parent) for name, parent in QUEUES]
    for j in range(rng.randint(1, 30)):
        leaf = rng.choice(LEAVES)
        group = podgroup(f"j{j}", leaf)
        if rng.random() < 0.3:
            group["spec"]["preemptibility"] = "non-preemptible"
        objects.append(group)
        for k in range(rng.randint(0, 3)):
            placed = rng.random() < 0.6
            one = pod(
                f"j{j}-{k}",
                group=f"j{j}",
                cpu=rng.choice(["100m", "333m", "1", "1700m"]),
                memory=rng.choice(["100Mi", "1Gi"]),
                gpus=0 if rng.random() < 0.5 else rng.choice([1, 2]),
                node=f"n{rng.randrange(3)}" if placed else None,
                phase=rng.choice(["Running", "Running", "Succeeded"]) if placed else None,
            )
            if not one["spec"]["containers"][0]["resources"].get("limits") and rng.random() < 0.5:
                one["metadata"]["annotations"]["gpu-fraction"] = rng.choice(["0.1", "0.3", "0.7"])
            objects.append(one)
    return objects


def one_at_a_time(plugin: ProportionPlugin, ssn: Any) -> dict[str, dict[str, np.ndarray]]:
    sums = {name: {f: np.zeros(3) for f in ("allocated", "allocated_np", "request")} for name in plugin.attrs}
    for pod_ in ssn.table.pods:
        job = ssn.jobs[pod_.job_key]
        if job.queue not in plugin.attrs:
            continue
        placed = pod_.status in ALLOCATED
        if not placed and pod_.status is not PodStatus.PENDING:
            continue
        vec = plugin.queue_vector(pod_)
        for q in ssn.queue_path(job.queue):
            sums[q.name]["request"] += vec
            if placed:
                sums[q.name]["allocated"] += vec
                if not job.preemptible:
                    sums[q.name]["allocated_np"] += vec
    return sums


@pytest.mark.parametrize("seed", range(40))
def test_queue_sums_are_those_of_one_pod_at_a_time(seed: int) -> None:
    result = build_snapshot(random_cluster(random.Random(seed)), now=parse_time(NOW))
    ssn = open_session(result.snapshot, SchedulerConfig())[0]
    plugin = ssn.accounting
    assert isinstance(plugin, ProportionPlugin)
    expected = one_at_a_time(plugin, ssn)
    for name, attrs in plugin.attrs.items():
        for field_name, want in expected[name].items():
            if field_name == "request" and ssn.queues[name].children:
                continue  # a parent's request is its children's, once fair share is divided
            got = getattr(attrs, field_name)
            assert got.tobytes() == want.tobytes(), (seed, name, field_name, got, want)
    ssn.restore()
