"""Bad snapshots: a non-zero exit and one line per problem naming the object and the field; never a
traceback. Run through the real `kai simulate` command."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scenario import node, pod, podgroup, queue, run_cli, write


def simulate_error(tmp_path: Path, objects: list[dict] | None = None, text: str | None = None, *extra: str) -> str:
    path = tmp_path / "snap.yaml"
    if text is not None:
        path.write_text(text)
    else:
        write(objects or [], tmp_path, "snap.yaml")
    done = run_cli(["simulate", "-f", str(path), "--now", "2026-01-01T00:00:00Z", *extra])
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout
    assert done.stdout == ""
    return done.stderr


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    err = simulate_error(tmp_path, text="apiVersion: v1\nkind: Node\nmetadata: {name: [unclosed\n")
    assert "snap.yaml" in err and "line" in err and "not valid YAML" in err


def test_negative_request(tmp_path: Path) -> None:
    err = simulate_error(tmp_path, [node("n"), queue("q"), pod("p", queue="q", cpu="-1")])
    assert "Pod ns/p: spec.containers[0].resources.requests.cpu: must not be negative" in err


def test_unparsable_quantity(tmp_path: Path) -> None:
    bad = node("n", memory="lots")
    err = simulate_error(tmp_path, [bad])
    assert "Node n: status.allocatable.memory: is not a quantity: 'lots'" in err


def test_pod_naming_a_missing_queue(tmp_path: Path) -> None:
    err = simulate_error(tmp_path, [node("n"), queue("q"), pod("p", queue="nope", gpus=1)])
    assert "Pod ns/p: metadata.labels[kai.scheduler/queue]: names queue 'nope', which does not exist" in err


def test_podgroup_naming_a_missing_queue(tmp_path: Path) -> None:
    err = simulate_error(tmp_path, [node("n"), queue("q"), podgroup("g", "nope")])
    assert "PodGroup ns/g: spec.queue: names queue 'nope'" in err


def test_pod_naming_a_missing_podgroup(tmp_path: Path) -> None:
    err = simulate_error(tmp_path, [node("n"), queue("q"), pod("p", group="ghost")])
    assert "Pod ns/p: metadata.annotations[pod-group-name]: names PodGroup 'ghost'" in err


def test_queue_cycle(tmp_path: Path) -> None:
    err = simulate_error(tmp_path, [queue("a", "b"), queue("b", "a")])
    assert "Queue a: spec.parentQueue: makes a cycle: a -> b -> a" in err


def test_queue_with_missing_parent(tmp_path: Path) -> None:
    err = simulate_error(tmp_path, [queue("a", "ghost")])
    assert "Queue a: spec.parentQueue: names queue 'ghost', which does not exist" in err


def test_duplicate_names(tmp_path: Path) -> None:
    err = simulate_error(
        tmp_path, [node("n"), node("n"), queue("q"), queue("q"), pod("p", queue="q"), pod("p", queue="q")]
    )
    for line in (
        "Node n: metadata.name: is defined twice",
        "Queue q: metadata.name: is defined twice",
        "Pod ns/p: metadata.name: is defined twice",
    ):
        assert line in err


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("limit", "ten", "spec.resources.gpu.limit: must be a number, got 'ten'"),
        ("quota", True, "spec.resources.gpu.quota: must be a number, got True"),
        ("quota", float("nan"), "spec.resources.gpu.quota: must be a finite number below 2^63, got nan"),
        (
            "overQuotaWeight",
            float("inf"),
            "spec.resources.gpu.overQuotaWeight: must be a finite number below 2^63, got inf",
        ),
    ],
)
def test_bad_queue_numbers(tmp_path: Path, field: str, value: object, expected: str) -> None:
    """The CRD says `type: number`: a string or a boolean is what the API server rejects, and NaN or
    infinity cannot even be sent as JSON."""
    gpu: dict = {"quota": 1, "overQuotaWeight": 1, "limit": 4}
    gpu[field] = value
    err = simulate_error(tmp_path, [queue("q", gpu=gpu)])
    assert f"Queue q: {expected}" in err


def test_job_in_a_non_leaf_queue(tmp_path: Path) -> None:
    err = simulate_error(tmp_path, [queue("dept"), queue("team", "dept"), pod("p", queue="dept")])
    assert "names queue 'dept', which has child queues" in err


def test_fractional_whole_gpus(tmp_path: Path) -> None:
    p = pod("p", queue="q")
    p["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1.5"}
    err = simulate_error(tmp_path, [queue("q"), p])
    assert "Pod ns/p" in err and "must be a whole number of GPUs" in err


def test_bad_gpu_fraction(tmp_path: Path) -> None:
    err = simulate_error(tmp_path, [queue("q"), pod("p", queue="q", annotations={"gpu-fraction": "1.5"})])
    assert "Pod ns/p: metadata.annotations[gpu-fraction]: must be a number between 0 and 1" in err


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    err = simulate_error(
        tmp_path, [node("n", cpu="-4"), queue("q"), pod("p", queue="nope"), pod("r", queue="q", memory="x")]
    )
    assert len([line for line in err.splitlines() if line.startswith("error:")]) == 3


def test_missing_file_and_bad_flags(tmp_path: Path) -> None:
    done = run_cli(["simulate", "-f", str(tmp_path / "absent.yaml")])
    assert done.returncode != 0 and "cannot be read" in done.stderr and "Traceback" not in done.stderr
    write([node("n")], tmp_path)
    done = run_cli(["simulate", "-f", str(tmp_path / "snapshot.yaml"), "--now", "yesterday"])
    assert done.returncode != 0 and "--now" in done.stderr and "Traceback" not in done.stderr


def test_bad_config(tmp_path: Path) -> None:
    write([node("n")], tmp_path)
    (tmp_path / "config.yaml").write_text('actions: "allocate, dance"\n')
    done = run_cli(["simulate", "-f", str(tmp_path / "snapshot.yaml"), "--config", str(tmp_path / "config.yaml")])
    assert done.returncode != 0 and "unknown action 'dance'" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("annotations", "gpus", "field", "words"),
    [
        ({"gpu-fraction": "0.5"}, 1, "gpu-fraction", "cannot be combined with a whole-GPU request"),
        ({"gpu-memory": "1000"}, 1, "gpu-memory", "cannot be combined with a whole-GPU request"),
        ({"gpu-memory": "1000", "gpu-fraction": "0.5"}, 0, "gpu-memory", "cannot be combined with gpu-fraction"),
        ({"gpu-fraction-num-devices": "2"}, 0, "gpu-fraction-num-devices", "needs gpu-fraction or gpu-memory"),
        ({"gpu-fraction": "0"}, 0, "gpu-fraction", "between 0 and 1"),
        ({"gpu-fraction": "1"}, 0, "gpu-fraction", "between 0 and 1"),
        ({"gpu-fraction": "half"}, 0, "gpu-fraction", "between 0 and 1"),
        ({"gpu-memory": "-5"}, 0, "gpu-memory", "positive integer (MiB)"),
        ({"gpu-memory": "1.5"}, 0, "gpu-memory", "positive integer (MiB)"),
        ({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"}, 0, "gpu-fraction-num-devices", "positive"),
        ({"mps": "true"}, 0, "mps", "MPS is only for shared GPUs"),
    ],
)
def test_contradictory_gpu_sharing_requests(
    tmp_path: Path, annotations: dict[str, str], gpus: int, field: str, words: str
) -> None:
    err = simulate_error(tmp_path, [queue("q"), pod("p", queue="q", gpus=gpus, annotations=annotations)])
    assert f"Pod ns/p: metadata.annotations[{field}]: " in err and words in err
