"""`kai run` and `kai binder` take KAI's flags: the arguments KAI's operator renders parse and take effect."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kai.cli import app
from kai.cluster import cli as cluster_cli

# What KAI's operator renders for the default shard (scheduler) and for the binder, plus shard args.
SCHEDULER_ARGS = [
    "--scheduler-name=kai-scheduler",
    "--namespace=kai-scheduler",
    "--nodepool-label-key=example.com/pool",
    "--partition-label-value=",
    "--resource-reservation-app-label=kai-resource-reservation",
    "--queue-label-key=example.com/queue",
    "--listen-address=:8080",
    "--metrics-namespace=acme",
    "--full-hierarchy-fairness=false",
    "--default-staleness-grace-period=-1s",
    "--max-consolidation-preemptees=4",
    "--update-pod-eviction-condition=true",
    "--detailed-fit-errors=false",
    "--qps",
    "100",
    "--burst=200",
    "--v=4",
    "--leader-elect=true",
]
BINDER_ARGS = [
    "--scheduler-name",
    "kai-scheduler",
    "--resource-reservation-namespace",
    "kai-resource-reservation",
    "--resource-reservation-service-account",
    "kai-resource-reservation",
    "--resource-reservation-app-label",
    "kai-resource-reservation",
    "--resource-reservation-pod-image",
    "registry.example/resource-reservation:v1",
    "--scale-adjust-namespace",
    "kai-scale-adjust",
    "--health-probe-bind-address",
    ":8081",
    "--metrics-bind-address",
    ":8080",
    "--cdi-enabled=false",
    "--max-concurrent-reconciles=7",
    "--resource-reservation-allocation-timeout=25",
    "--volume-binding-timeout-seconds=120",
    "--fake-gpu-nodes",
    "--leader-elect",
    "--qps",
    "30",
    "--burst",
    "60",
]


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def fake_start(kubeconfig: str | None, options: Any, qps: float = -1, burst: int = 0) -> None:
        seen.update(options=options, qps=qps, burst=burst)

    monkeypatch.setattr(cluster_cli, "_start", fake_start)
    return seen


def invoke(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


def test_the_scheduler_takes_kai_s_chart_arguments(started: dict[str, Any], tmp_path: Path) -> None:
    conf = tmp_path / "config.yaml"
    conf.write_text("actions: allocate, reclaim\n")
    invoke("run", "--no-binder", f"--scheduler-conf={conf}", *SCHEDULER_ARGS)
    o = started["options"]
    assert o.config.actions == ("allocate", "reclaim")
    assert o.config.params.full_hierarchy_fairness is False
    assert o.config.params.staleness_grace_period == -1.0
    assert o.config.params.max_consolidation_preemptees == 4
    assert o.queue_label_key == "example.com/queue"
    assert o.nodepool_label_key == "example.com/pool"
    assert o.partition_label_value == ""
    assert o.metrics_namespace == "acme"
    assert o.update_pod_eviction_condition is True
    assert o.leader_elect is True
    assert o.lease_namespace == "kai-scheduler"
    assert o.listen == "0.0.0.0:8080"
    assert (started["qps"], started["burst"]) == (100, 200)


def test_kai_s_defaults(started: dict[str, Any]) -> None:
    invoke("run")
    o = started["options"]
    assert o.leader_elect is False  # KAI: the operator adds --leader-elect when replicas > 1
    assert o.queue_label_key == "kai.scheduler/queue"
    assert o.nodepool_label_key == "kai.scheduler/node-pool"
    assert o.metrics_namespace == "kai"
    assert o.config.params.staleness_grace_period == 60.0
    assert o.config.params.max_consolidation_preemptees == 16
    assert o.config.params.full_hierarchy_fairness is True
    assert o.update_pod_eviction_condition is False
    assert (started["qps"], started["burst"]) == (50, 300)
    assert o.listen == "0.0.0.0:8080"


def test_the_old_names_still_work(started: dict[str, Any], tmp_path: Path) -> None:
    conf = tmp_path / "config.yaml"
    conf.write_text("schedulerParams:\n  schedulerName: other\n")
    invoke("run", "--config", str(conf), "--no-leader-elect", "--listen-address", "127.0.0.1:9")
    assert started["options"].config.params.scheduler_name == "other"
    assert started["options"].listen == "127.0.0.1:9"
    invoke("binder", "--workers", "3", "--listen-address=127.0.0.1:7", "--fake-gpu-uuids")
    o = started["options"]
    assert (o.binder_workers, o.listen, o.metrics_listen, o.probe_listen) == (3, "127.0.0.1:7", "", "")


def test_the_binder_takes_kai_s_operator_arguments(started: dict[str, Any]) -> None:
    invoke("binder", *BINDER_ARGS)
    o = started["options"]
    assert (o.metrics_listen, o.probe_listen, o.listen) == ("0.0.0.0:8080", "0.0.0.0:8081", "")
    assert o.binder_workers == 7
    assert o.reservation_timeout == 25.0
    assert o.fake_gpu_uuids is True
    assert o.leader_elect is True
    assert o.binder_settings["reservation_image"] == "registry.example/resource-reservation:v1"
    assert o.binder_settings["reservation_service_account"] == "kai-resource-reservation"
    assert (started["qps"], started["burst"]) == (30, 60)


def test_go_booleans_and_bad_values() -> None:
    result = CliRunner().invoke(app, ["run", "--leader-elect=maybe"])
    assert result.exit_code != 0
    assert "not a boolean" in result.output
    result = CliRunner().invoke(app, ["binder", "--resource-reservation-pod-resources", "{nope"])
    assert result.exit_code == 1
    assert "not JSON" in result.output


def test_a_binder_flag_that_kai_does_not_build_is_refused_with_its_name() -> None:
    result = CliRunner().invoke(app, ["binder", "--resource-reservation-namespace=elsewhere"])
    assert result.exit_code == 1
    assert "--resource-reservation-namespace" in result.output
