"""The KAI-format example manifests (examples/kai/) run unchanged through `kai simulate` and schedule
as examples/kai/README.md says. Workload kinds (Job, PyTorchJob, RayJob) are ignored offline with a
warning; the pods their controllers create, grouped by the podgrouper, are scheduled from a snapshot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kai.podgrouper import OwnerChain, group_pod
from tests.podgrouper.podgrouper_fixtures import KAI_EXAMPLES, admitted, kai_example, workload_pods
from tests.scenario import NOW, node, run_cli, write

NODES = KAI_EXAMPLES / "nodes.yaml"  # two nodes of 8 GPUs, 81920 MiB each
QUEUES = KAI_EXAMPLES / "quickstart" / "default-queues.yaml"


def simulate(*files: Path, rounds: int = 1) -> tuple[dict[str, Any], str]:
    args = ["simulate", "--now", NOW, "--rounds", str(rounds), "-o", "json"]
    for f in files:
        args += ["-f", str(f)]
    done = run_cli(args)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout), done.stderr


def statuses(result: dict[str, Any]) -> dict[str, str]:
    return {key: pod["status"] for key, pod in result["pods"].items()}


def test_the_readme_describes_every_example() -> None:
    readme = (KAI_EXAMPLES / "README.md").read_text()
    files = sorted(str(p.relative_to(KAI_EXAMPLES)) for p in KAI_EXAMPLES.rglob("*.yaml"))
    assert len(files) >= 19
    for name in files:
        assert Path(name).name in readme, f"examples/kai/README.md does not describe {name}"


def companions(example: str) -> list[Path]:
    """What `example` is applied together with: its cluster, and the queues its pods name."""
    if example.startswith("time-based-fairshare/"):
        folder = KAI_EXAMPLES / "time-based-fairshare"
        return [folder / "node.yaml", folder / "queues.yaml"]
    if example.startswith("priority/"):
        return [NODES, KAI_EXAMPLES / "priority/limited-queue.yaml"]
    return [NODES, QUEUES]


@pytest.mark.parametrize("example", sorted(str(p.relative_to(KAI_EXAMPLES)) for p in KAI_EXAMPLES.rglob("*.yaml")))
def test_every_example_is_accepted(example: str) -> None:
    files = list(dict.fromkeys([*companions(example), KAI_EXAMPLES / example]))
    result, warnings = simulate(*files)
    assert all(line.startswith("warning: ignored") for line in warnings.splitlines()), warnings
    assert set(statuses(result).values()) <= {"Running", "Pending"}


def test_quickstart_pods_run() -> None:
    result, _ = simulate(
        NODES, QUEUES, KAI_EXAMPLES / "quickstart/gpu-pod.yaml", KAI_EXAMPLES / "quickstart/cpu-pod.yaml"
    )
    assert statuses(result) == {"default/first-gpu-pod": "Running", "default/first-cpu-pod": "Running"}
    assert result["pods"]["default/first-gpu-pod"]["gpuGroups"] == []  # a whole GPU, no shared group
    assert result["podGroups"]["default/pg-first-gpu-pod"]["queue"] == "default-queue"


@pytest.mark.parametrize(
    ("example", "pod"),
    [
        ("gpu-sharing/gpu-fraction.yaml", "half-gpu"),
        ("gpu-sharing/gpu-memory.yaml", "four-gib-of-gpu"),
        ("gpu-sharing/gpu-fraction-init-container.yaml", "warm-up-on-a-quarter"),
        ("gpu-sharing/gpu-fraction-named-container.yaml", "fraction-for-the-second-container"),
        ("gpu-sharing/gpu-fraction-mps.yaml", "half-gpu-over-mps"),
    ],
)
def test_gpu_sharing_examples_run_on_a_shared_gpu(example: str, pod: str) -> None:
    result, _ = simulate(NODES, QUEUES, KAI_EXAMPLES / example)
    placed = result["pods"][f"default/{pod}"]
    assert placed["status"] == "Running"
    assert len(placed["gpuGroups"]) == 1
    assert result["rounds"][0]["bound"] == [
        {"pod": f"default/{pod}", "node": placed["node"], "gpuGroups": placed["gpuGroups"]}
    ]


def test_two_half_gpu_pods_share_one_gpu(tmp_path: Path) -> None:
    (half,) = kai_example("gpu-sharing/gpu-fraction.yaml")
    other = {**half, "metadata": {**half["metadata"], "name": "other-half"}}
    result, _ = simulate(NODES, QUEUES, KAI_EXAMPLES / "gpu-sharing/gpu-fraction.yaml", write([other], tmp_path))
    first, second = result["pods"]["default/half-gpu"], result["pods"]["default/other-half"]
    assert first["status"] == second["status"] == "Running"
    assert (first["node"], first["gpuGroups"]) == (second["node"], second["gpuGroups"])  # gpupack: the same GPU
    assert result["queues"]["default-queue"]["allocated"]["gpu"] == 0  # as the round opened: nothing ran yet


def test_gpu_memory_counts_as_its_fraction_of_the_gpu(tmp_path: Path) -> None:
    (pod,) = kai_example("gpu-sharing/gpu-memory.yaml")
    pod["spec"]["nodeName"] = "a100-node-1"
    pod["status"] = {"phase": "Running"}
    result, _ = simulate(NODES, QUEUES, write([pod], tmp_path))
    # 4096 MiB of an 81920 MiB GPU: 0.05 of a GPU in the queue's allocation, rounded up to the next
    # hundredth as KAI does (never a whole GPU).
    share = result["queues"]["default-queue"]["allocated"]["gpu"]
    assert 4096 / 81920 <= share <= 4096 / 81920 + 0.01


def test_limited_queue_runs_one_pod_and_says_why_the_second_waits() -> None:
    result, _ = simulate(
        NODES,
        KAI_EXAMPLES / "priority/limited-queue.yaml",
        KAI_EXAMPLES / "priority/train-pod.yaml",
        KAI_EXAMPLES / "priority/build-pod.yaml",
    )
    # Queue team's limit is 1 GPU: the build pod (priority 100) goes first, the train pod (50) waits.
    assert statuses(result) == {"default/notebook": "Running", "default/trainer": "Pending"}
    assert "limit of 1 GPUs" in result["podGroups"]["default/pg-trainer"]["message"]


def test_build_pod_preempts_the_running_train_pod_in_its_limited_queue(tmp_path: Path) -> None:
    (trainer,) = kai_example("priority/train-pod.yaml")
    trainer["metadata"]["creationTimestamp"] = "2025-12-31T23:00:00Z"
    trainer["spec"]["nodeName"] = "a100-node-1"
    trainer["status"] = {"phase": "Running"}
    result, _ = simulate(
        NODES,
        KAI_EXAMPLES / "priority/limited-queue.yaml",
        write([trainer], tmp_path),
        KAI_EXAMPLES / "priority/build-pod.yaml",
        rounds=2,
    )
    evicted = result["rounds"][0]["evicted"]
    assert evicted == [
        {"pod": "default/trainer", "node": "a100-node-1", "action": "preempt", "by": "default/pg-notebook"}
    ]
    assert statuses(result) == {"default/notebook": "Running", "default/trainer": "Pending"}


def test_time_based_fairshare_example_runs_one_team_at_a_time() -> None:
    folder = KAI_EXAMPLES / "time-based-fairshare"
    result, _ = simulate(folder / "node.yaml", folder / "queues.yaml", folder / "jobs.yaml")
    # Each job asks for all 16 GPUs of the one node: exactly one runs; the other waits, saying why.
    assert sorted(statuses(result).values()) == ["Pending", "Running"]
    (waiting,) = [pg for pg in result["podGroups"].values() if pg["status"] == "Pending"]
    assert waiting["message"]


def grouped(example: str, directory: Path) -> Path:
    """A snapshot of the pods `example`'s controller creates, grouped by the podgrouper."""
    (workload,) = kai_example(example)
    workload = admitted(workload, "7c4d6e87-0000-4000-8000-000000000001")
    podgroups: dict[str, dict[str, Any]] = {}
    pods = []
    for pod, owners in workload_pods(workload, "7c4d6e87-0000-4000-8000-0000000001"):
        metadata = group_pod(OwnerChain(pod, owners))
        podgroups[metadata.name] = metadata.to_manifest()
        patch = metadata.pod_patch()["metadata"]
        pod["metadata"]["annotations"].update(patch["annotations"])
        pod["metadata"]["labels"].update(patch.get("labels", {}))
        pods.append(pod)
    return write([*podgroups.values(), *pods], directory)


@pytest.mark.parametrize(
    ("example", "running"),
    [
        ("batch/job.yaml", 3),  # 3 independent pods, one GPU each
        ("batch/pytorch-job.yaml", 4),  # master + 3 workers, one gang
        ("elastic/pytorch-elastic.yaml", 3),  # minReplicas 2, and the third fits too
        ("ray/ray-job.yaml", 4),  # head + 3 GPU workers
    ],
)
def test_workload_examples_run_once_their_pods_exist(tmp_path: Path, example: str, running: int) -> None:
    ignored, warnings = simulate(NODES, QUEUES, KAI_EXAMPLES / example)
    assert ignored["pods"] == {}
    assert f"kind {kai_example(example)[0]['kind']}" in warnings

    result, _ = simulate(NODES, QUEUES, grouped(example, tmp_path))
    assert sorted(statuses(result).values()) == ["Running"] * running
    (group,) = result["podGroups"].values()
    assert (group["queue"], group["status"]) == ("default-queue", "Running")


def test_pytorch_job_is_a_gang_all_or_nothing(tmp_path: Path) -> None:
    three_gpus = write([node("small", gpus=3)], tmp_path, "node.yaml")
    result, _ = simulate(three_gpus, QUEUES, grouped("batch/pytorch-job.yaml", tmp_path))
    assert set(statuses(result).values()) == {"Pending"}  # 3 GPUs for 4 one-GPU pods: none starts
    (group,) = result["podGroups"].values()
    assert "Resources were found for 3 of the 4 pods" in group["message"]


def test_elastic_job_starts_with_its_minimum_when_the_rest_does_not_fit(tmp_path: Path) -> None:
    two_workers = write([node("small", gpus=0, cpu="5")], tmp_path, "node.yaml")  # room for 2 of 3 (2 CPU each)
    result, _ = simulate(two_workers, QUEUES, grouped("elastic/pytorch-elastic.yaml", tmp_path))
    assert sorted(statuses(result).values()) == ["Pending", "Running", "Running"]
    assert (
        yaml.safe_load((KAI_EXAMPLES / "elastic/pytorch-elastic.yaml").read_text())["spec"]["elasticPolicy"][
            "minReplicas"
        ]
        == 2
    )
