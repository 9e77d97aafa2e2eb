"""The snapshot loader: KAI's kinds, units and defaults, as a user writes them."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.scenario import bound, cli_json, node, pod, podgroup, queue, run, run_cli, write


def test_v1_list_and_multi_document_files_and_unknown_kinds(tmp_path: Path) -> None:
    (tmp_path / "nodes.yaml").write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [node("n1"), node("n2")]})
    )
    extra = [
        queue("q"),
        podgroup("g", "q"),
        pod("p", group="g", gpus=8),
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}},
    ]
    write(extra, tmp_path, "rest.yaml")
    done = run_cli(
        [
            "simulate",
            "-f",
            str(tmp_path / "nodes.yaml"),
            "-f",
            str(tmp_path / "rest.yaml"),
            "--now",
            "2026-01-01T00:00:00Z",
        ]
    )
    assert done.returncode == 0
    assert "ignored 1 object(s) of kind Deployment" in done.stderr


def test_default_queue_is_assumed_when_the_snapshot_has_none() -> None:
    result = run([node("n1"), pod("p", gpus=1)])
    assert bound(result) == {"ns/p": "n1"}
    assert set(result["queues"]) == {"default-parent-queue", "default-queue"}


def test_default_priority_classes_and_custom_ones() -> None:
    custom = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "urgent"},
        "value": 1000,
    }
    objects = [
        node("n1", gpus=1),
        queue("q", gpu={"quota": 1, "overQuotaWeight": 1, "limit": -1}),
        custom,
        podgroup("a", "q", priority_class="inference"),
        pod("a", group="a", gpus=1),
        podgroup("b", "q", priority_class="urgent"),
        pod("b", group="b", gpus=1),
    ]
    assert bound(run(objects)) == {"ns/b": "n1"}


def test_unknown_priority_class_gets_fifty_and_is_preemptible() -> None:
    objects = [
        node("n1", gpus=4),
        queue("q", gpu={"quota": 0, "overQuotaWeight": 1, "limit": -1}),
        podgroup("a", "q", priority_class="no-such-class"),
        pod("a", group="a", gpus=1),
    ]
    assert bound(run(objects)) == {"ns/a": "n1"}  # preemptible: may run over a zero quota


def test_memory_quota_is_megabytes_and_cpu_millicores() -> None:
    objects = [
        node("n1", gpus=0, cpu="8", memory="16G"),
        queue(
            "q",
            gpu={"quota": 0, "overQuotaWeight": 1, "limit": -1},
            cpu={"quota": 0, "overQuotaWeight": 1, "limit": 1000},
            memory={"quota": 0, "overQuotaWeight": 1, "limit": 2000},
        ),
        podgroup("fits", "q"),
        pod("fits", group="fits", cpu="1", memory="2G"),
        podgroup("cpu", "q"),
        pod("cpu", group="cpu", cpu="1001m"),
        podgroup("mem", "q"),
        pod("mem", group="mem", memory="2001M"),
    ]
    result = run(objects)
    assert bound(result) == {"ns/fits": "n1"}
    assert "limit of 1 CPU cores" in result["podGroups"]["ns/cpu"]["message"]
    assert "limit of 2 GB of memory" in result["podGroups"]["ns/mem"]["message"]


def test_unset_limit_means_unlimited() -> None:
    # KAI reads an unset limit as 0 (nothing allowed); kai reads it as unlimited, as users expect.
    q = queue("q", gpu={"quota": 1})
    del q["spec"]["resources"]["cpu"]
    result = run([node("n1"), q, podgroup("g", "q"), pod("g", group="g", gpus=3, cpu="2")])
    assert bound(result) == {"ns/g": "n1"}


def test_other_schedulers_pending_pods_are_not_ours() -> None:
    result = run([node("n1"), queue("q"), pod("theirs", gpus=1, scheduler="default-scheduler")])
    assert result["pods"] == {} and result["rounds"][0]["bound"] == []


def test_finished_pods_hold_nothing() -> None:
    objects = [
        node("n1", gpus=1),
        queue("q"),
        podgroup("done", "q"),
        pod("done", group="done", gpus=1, node="n1", phase="Succeeded"),
        podgroup("next", "q"),
        pod("next", group="next", gpus=1),
    ]
    result = run(objects)
    assert bound(result) == {"ns/next": "n1"}
    assert result["pods"]["ns/done"]["status"] == "Succeeded"
    assert result["podGroups"]["ns/done"]["status"] == "Succeeded"


def test_identical_input_gives_byte_identical_output(tmp_path: Path) -> None:
    objects = [node(f"n{i}", gpus=8) for i in range(4)] + [queue("a"), queue("b")]
    for i in range(12):
        q = "a" if i % 2 else "b"
        objects += [
            podgroup(f"g{i}", q, min_member=2),
            pod(f"g{i}-0", group=f"g{i}", gpus=2),
            pod(f"g{i}-1", group=f"g{i}", gpus=2),
        ]
    path = write(objects, tmp_path)
    first = run_cli(["simulate", "-f", str(path), "--now", "2026-01-01T00:00:00Z", "-o", "json", "--rounds", "2"])
    second = run_cli(["simulate", "-f", str(path), "--now", "2026-01-01T00:00:00Z", "-o", "json", "--rounds", "2"])
    assert first.returncode == 0 and first.stdout == second.stdout
    assert cli_json([path])["rounds"][0]["bound"]
