"""A SchedulingShard's spec as the scheduler's configuration (KAI's operator rules), without a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer

from kai.cluster import cli
from kai.cluster.shard import shard_config
from kai.cycle import known_actions
from kai.framework.config import DEFAULT_ACTIONS, parse_config


def plugins(config: dict[str, Any]) -> list[str]:
    return [p["name"] for p in config["tiers"][0]["plugins"]]


def arguments(config: dict[str, Any], name: str) -> dict[str, str]:
    return next(p for p in config["tiers"][0]["plugins"] if p["name"] == name).get("arguments", {})


def test_the_default_shard_is_kai_s_default_configuration() -> None:
    config, problems, warnings = shard_config({"apiVersion": "kai.scheduler/v1", "kind": "SchedulingShard"})
    assert problems == [] and warnings == []
    parsed, parse_problems, _ = parse_config(config, known_actions())
    assert parse_problems == []
    assert parsed.actions == DEFAULT_ACTIONS
    assert plugins(config) == [
        "predicates",
        "proportion",
        "priority",
        "nodeavailability",
        "resourcetype",
        "podaffinity",
        "elastic",
        "kubeflow",
        "ray",
        "subgrouporder",
        "taskorder",
        "nominatednode",
        "dynamicresources",
        "minruntime",
        "topology",
        # "snapshot" (KAI's /get-snapshot endpoint) is not built in kai: left out, without a warning
        "gpupack",
        "nodeplacement",
        "gpusharingorder",
    ]
    assert arguments(config, "nodeplacement") == {"gpu": "binpack", "cpu": "binpack"}


def test_spread_drops_consolidation_and_packs_no_shared_gpu() -> None:
    config, problems, _ = shard_config({"placementStrategy": {"gpu": "spread"}})
    assert problems == []
    assert config["actions"] == "allocate, reclaim, preempt, stalegangeviction"
    names = plugins(config)
    assert "gpuspread" in names and "gpupack" not in names and "gpusharingorder" not in names
    assert names.index("gpuspread") == names.index("nodeplacement") - 1
    assert arguments(config, "nodeplacement") == {"gpu": "spread", "cpu": "binpack"}
    # Consolidation comes back when asked for by name.
    again, _, _ = shard_config(
        {"placementStrategy": {"cpu": "spread"}, "actions": {"consolidation": {"enabled": True}}}
    )
    assert again["actions"] == "allocate, consolidation, reclaim, preempt, stalegangeviction"


def test_overrides_merge_into_the_defaults_by_priority() -> None:
    config, problems, _ = shard_config(
        {
            "actions": {"stalegangeviction": {"enabled": False}, "preempt": {"priority": 600}},
            "plugins": {
                "predicates": {"priority": 50},  # after gpusharingorder (100)
                "elastic": {"enabled": False},
                "proportion": {"arguments": {"relcaimerSaturationMultiplier": 2}},  # replaces kValue below
                "mycustom": {"priority": 1050},  # between ray (1100) and subgrouporder (1000)
            },
            "kValue": 1.5,
            "minRuntime": {"preemptMinRuntime": "10m", "reclaimMinRuntime": "5m"},
            "queueDepthPerAction": {"allocate": 25},
        }
    )
    assert problems == []
    assert config["actions"] == "preempt, allocate, consolidation, reclaim"
    names = plugins(config)
    assert names[-1] == "predicates" and "elastic" not in names
    assert names[names.index("ray") + 1] == "mycustom" and names[names.index("mycustom") + 1] == "subgrouporder"
    assert arguments(config, "proportion") == {"relcaimerSaturationMultiplier": "2"}
    assert arguments(config, "minruntime") == {"defaultPreemptMinRuntime": "10m", "defaultReclaimMinRuntime": "5m"}
    assert config["queueDepthPerAction"] == {"allocate": 25}


def test_k_value_becomes_proportion_s_argument() -> None:
    config, _, _ = shard_config({"kValue": 2})
    assert arguments(config, "proportion") == {"kValue": "2"}


def test_wrong_types_are_problems_naming_the_field_and_go_settings_are_warned_about() -> None:
    _, problems, warnings = shard_config(
        {"placementStrategy": {"gpu": "pack"}, "kValue": "high", "plugins": {"elastic": {"enabled": "no"}}},
        "SchedulingShard gpu",
    )
    assert {p.field for p in problems} == {"spec.placementStrategy.gpu", "spec.kValue", "spec.plugins.elastic.enabled"}
    assert all(p.obj == "SchedulingShard gpu" for p in problems)
    _, problems, warnings = shard_config({"goMemLimitRatio": 0.8, "surprise": 1})
    assert problems == []
    assert len(warnings) == 2 and "goMemLimitRatio" in warnings[0] and "surprise" in warnings[1]


def test_kai_run_reads_a_shard_and_the_config_file_overrides_its_keys(tmp_path: Path) -> None:
    shard = tmp_path / "shard.yaml"
    shard.write_text(
        "apiVersion: kai.scheduler/v1\nkind: SchedulingShard\nmetadata: {name: gpu}\n"
        "spec: {partitionLabelValue: gpu, placementStrategy: {gpu: spread}, queueDepthPerAction: {allocate: 3}}\n"
    )
    config = cli._config(None, shard)
    assert config.actions == ("allocate", "reclaim", "preempt", "stalegangeviction")
    assert config.plugin_arguments("nodeplacement") == {"gpu": "spread", "cpu": "binpack"}
    assert config.queue_depth_per_action == {"allocate": 3}
    file = tmp_path / "config.yaml"
    file.write_text("actions: allocate\n")
    overridden = cli._config(file, shard)
    assert overridden.actions == ("allocate",)
    assert overridden.plugin_arguments("nodeplacement") == {"gpu": "spread", "cpu": "binpack"}
    shard.write_text("spec: {placementStrategy: {gpu: pack}}\n")
    with pytest.raises(typer.Exit):
        cli._config(None, shard)
