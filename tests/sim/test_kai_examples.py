"""KAI's own example manifests run unchanged through `kai simulate`, on a small GPU cluster with KAI's
default queues (kinds the offline mode does not read are ignored with a warning)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scenario import NOW, node, run_cli, write

EXAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "kai-examples"
MANIFESTS = sorted(p for p in EXAMPLES.glob("*.yaml") if "simulation-config" not in p.name)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Path:
    nodes = [node(f"gpu-{i}", gpus=8, labels={"nvidia.com/gpu.memory": "81920"}) for i in range(2)]
    return write(nodes, tmp_path_factory.mktemp("cluster"), "nodes.yaml")


def simulate(*files: Path) -> dict:
    import json

    args = ["simulate", "--now", NOW, "-o", "json"]
    for f in files:
        args += ["-f", str(f)]
    done = run_cli(args)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)


@pytest.mark.skipif(not MANIFESTS, reason="the shared KAI examples are not beside the repository")
@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_every_example_is_accepted(cluster: Path, manifest: Path) -> None:
    queues = EXAMPLES / "docs__quickstart__default-queues.yaml"
    extra = (
        [EXAMPLES / "examples__time-based-fairshare__two-queue-oscillation__queues.yaml"]
        if "two-queue-oscillation__jobs" in manifest.name
        else []
    )
    files = [cluster, queues, *extra] if manifest != queues else [cluster]
    simulate(*files, manifest)


@pytest.mark.skipif(not MANIFESTS, reason="the shared KAI examples are not beside the repository")
def test_quickstart_pods_are_scheduled(cluster: Path) -> None:
    result = simulate(
        cluster,
        EXAMPLES / "docs__quickstart__default-queues.yaml",
        EXAMPLES / "docs__quickstart__pods__gpu-pod.yaml",
        EXAMPLES / "docs__quickstart__pods__cpu-only-pod.yaml",
    )
    statuses = {k: v["status"] for k, v in result["pods"].items()}
    assert statuses == {"default/gpu-pod": "Running", "default/cpu-only-pod": "Running"}


@pytest.mark.skipif(not MANIFESTS, reason="the shared KAI examples are not beside the repository")
def test_limited_queue_example(cluster: Path, tmp_path: Path) -> None:
    pods = []
    for i in range(3):
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p{i}", "namespace": "default", "labels": {"kai.scheduler/queue": "test"}},
                "spec": {
                    "schedulerName": "kai-scheduler",
                    "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                },
            }
        )
    result = simulate(cluster, EXAMPLES / "docs__priority__example__limited-queue.yaml", write(pods, tmp_path))
    running = [k for k, v in result["pods"].items() if v["status"] == "Running"]
    assert len(running) == 1  # queue 'test' has a limit of 1 GPU
    waiting = [v for k, v in result["podGroups"].items() if v["status"] == "Pending"]
    assert all("limit of 1 GPUs" in v["message"] for v in waiting) and len(waiting) == 2
