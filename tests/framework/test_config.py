"""The scheduler configuration reader: every value KAI's configuration accepts is taken with KAI's
meaning (checked against KAI's own code), the merely
odd gets a warning naming the field, and a value of the wrong type is one error line naming the
field — never a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kai.cycle import known_actions
from kai.framework.config import DEFAULT_PLUGINS, KAI_PLUGINS, parse_config
from kai.framework.plugin import registered_plugins
from tests.actions.evict_helpers import gq, job
from tests.scenario import node, pod, queue, run, run_cli, write


def parse(raw: Any, built: set[str] | None = None) -> tuple[Any, list[str], list[str]]:
    config, problems, warnings = parse_config(raw, known_actions(), "config c.yaml", built)
    return config, [str(p) for p in problems], warnings


# -- durations --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (".5s", 0.5),
        ("1h2m3s", 3723.0),
        ("300ms", 0.3),
        ("1.5h", 5400.0),
        ("-1s", -1.0),
        ("0", 0.0),
        ("2us", 2e-6),
        ("2\u00b5s", 2e-6),  # micro sign
        ("2\u03bcs", 2e-6),  # Greek mu
        ("10ns", 1e-8),
        ("5.s", 5.0),
        ("+90s", 90.0),
        (59, 59.0),  # a YAML number: seconds
    ],
)
def test_staleness_grace_period_takes_any_go_duration(text: object, seconds: float) -> None:
    config, problems, _ = parse({"schedulerParams": {"globalDefaultStalenessGracePeriod": text}})
    assert problems == []
    assert config.params.staleness_grace_period == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5", "", "abc", "1x", ".s", "1e3s", None, True])
def test_a_duration_go_cannot_read_is_an_error_naming_the_field(text: object) -> None:
    _, problems, _ = parse({"schedulerParams": {"globalDefaultStalenessGracePeriod": text}})
    assert len(problems) == 1
    assert problems[0].startswith("config c.yaml: schedulerParams.globalDefaultStalenessGracePeriod: ")


def half_running_gang(stale_since: str) -> list[dict]:
    """Gang g (minMember 2): one pod runs on the only GPU, the other cannot fit; stale since `stale_since`
    (the snapshot's now is 2026-01-01T00:00:00Z)."""
    return [node("n1", gpus=1), gq("q", 4), *job("g", "q", size=2, nodes=["n1", None], stale_since=stale_since)]  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("grace", "evicted"),
    [(".5s", True), ("59.5s", True), ("1m0.5s", False), ("1.5h", False), ("-1s", False), ("0", True)],
)
def test_staleness_grace_period_decides_the_eviction(grace: str, evicted: bool) -> None:
    # Stale for 60 s: evicted once the grace period is at most 60 s; a negative one never evicts.
    out = run(
        half_running_gang("2025-12-31T23:59:00Z"),
        config={"schedulerParams": {"globalDefaultStalenessGracePeriod": grace}},
    )
    assert (out["pods"]["ns/g-0"]["status"] == "Pending") is evicted


@pytest.mark.parametrize(("text", "seconds"), [(".5s", 0.5), ("1h2m3s", 3723.0), ("-1s", 0.0), ("-5m", 0.0)])
def test_minruntime_arguments_take_go_durations_and_negative_means_zero(text: str, seconds: float) -> None:
    from kai.framework.plugin import plugin_factory

    raw = {
        "tiers": [
            {
                "plugins": [
                    {"name": "proportion"},
                    {
                        "name": "minruntime",
                        "arguments": {"defaultPreemptMinRuntime": text, "defaultReclaimMinRuntime": text},
                    },
                ]
            }
        ]
    }
    config, problems, _ = parse(raw)
    assert problems == []
    factory = plugin_factory("minruntime")
    assert factory is not None
    plugin: Any = factory(config.plugin_arguments("minruntime") or {})
    assert plugin.default_preempt == pytest.approx(seconds)
    assert plugin.default_reclaim == pytest.approx(seconds)


# -- consolidation preemptees -----------------------------------------------------------------------
def fragmented() -> list[dict]:
    """Two 8-GPU nodes, each half used by 1-GPU pods of one queue; an 8-GPU pod of the same queue waits.
    Only consolidation can help (moving the four pods of one node onto the other)."""
    objects = [node("n1", gpus=8), node("n2", gpus=8), queue("team")]
    objects += [pod(f"r{i}", queue="team", gpus=1, node="n1" if i < 4 else "n2") for i in range(8)]
    return [*objects, pod("big", queue="team", gpus=8)]


@pytest.mark.parametrize(("value", "consolidates"), [(None, True), (-1, True), ("-1", True), (0, False), (2, False)])
def test_max_consolidation_preemptees(value: object, consolidates: bool) -> None:
    # -1 is KAI's "no restriction" (what its own test harness uses); 0 turns consolidation off;
    # 2 is too few for the four pods to move.
    config = None if value is None else {"schedulerParams": {"maxNumberConsolidationPreemptees": value}}
    out = run(fragmented(), config=config)
    moved = [e for e in out["rounds"][0]["evicted"] if e["action"] == "consolidation"]
    assert bool(moved) is consolidates
    assert ("ns/big" in {p["pod"] for p in out["rounds"][0]["pipelined"]}) is consolidates


def test_preemptees_below_minus_one_warn_and_consolidation_is_off() -> None:
    config, problems, warnings = parse({"schedulerParams": {"maxNumberConsolidationPreemptees": -5}})
    assert problems == [] and config.params.max_consolidation_preemptees == -5
    assert any("maxNumberConsolidationPreemptees" in w and "consolidation is off" in w for w in warnings)
    out = run(fragmented(), config={"schedulerParams": {"maxNumberConsolidationPreemptees": -5}})
    assert out["rounds"][0]["evicted"] == []


# -- queueDepthPerAction ----------------------------------------------------------------------------
def two_queues_three_jobs_each() -> list[dict]:
    objects = [node("n1", gpus=8), queue("dept"), queue("a", parent="dept"), queue("b", parent="dept")]
    objects += [pod(f"a{i}", queue="a", gpus=1) for i in range(3)]
    return objects + [pod(f"b{i}", queue="b", gpus=1) for i in range(3)]


@pytest.mark.parametrize(
    ("depth", "bound"),
    [
        (None, {"a0", "a1", "a2", "b0", "b1", "b2"}),
        (-1, {"a0", "a1", "a2", "b0", "b1", "b2"}),  # -1: no limit, as in KAI
        (1, {"a0", "b0"}),  # each leaf queue's best job
        (2, {"a0", "a1", "b0", "b1"}),
        (0, set()),  # KAI crashes here; kai considers no job
        (-3, set()),
    ],
)
def test_queue_depth_per_action(depth: int | None, bound: set[str]) -> None:
    config = None if depth is None else {"queueDepthPerAction": {"allocate": depth}}
    out = run(two_queues_three_jobs_each(), config=config)
    assert {b["pod"].split("/")[1] for b in out["rounds"][0]["bound"]} == bound


@pytest.mark.parametrize("depth", [0, -3])
def test_a_depth_kai_crashes_on_is_a_warning(depth: int) -> None:
    config, problems, warnings = parse({"queueDepthPerAction": {"reclaim": depth}})
    assert problems == [] and config.queue_depth_per_action == {"reclaim": 0}
    assert any("queueDepthPerAction.reclaim" in w and "crashes" in w for w in warnings)


def test_a_depth_for_an_action_that_is_not_enabled_is_a_warning() -> None:
    config, problems, warnings = parse({"actions": "allocate", "queueDepthPerAction": {"reclaim": 3, "dance": 1}})
    assert problems == [] and config.queue_depth_per_action == {}
    assert any("queueDepthPerAction.reclaim" in w and "not enabled" in w for w in warnings)
    assert any("queueDepthPerAction.dance" in w and "not an action" in w for w in warnings)


# -- actions and plugins ----------------------------------------------------------------------------
def test_empty_actions_and_empty_tiers_fall_back_to_the_defaults_with_a_warning() -> None:
    config, problems, warnings = parse({"actions": " ", "tiers": []})
    assert problems == []
    assert config.actions == ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")
    assert [p.name for p in config.plugins] == list(DEFAULT_PLUGINS)
    assert any(w.startswith("config c.yaml: actions:") for w in warnings)
    assert any(w.startswith("config c.yaml: tiers:") and "default plugins" in w for w in warnings)


def test_empty_tiers_still_divide_fair_share_and_reclaim() -> None:
    """`tiers: []` is KAI's built-in plugin list, quotas included: b (quota 4) reclaims from a."""
    objects = [node("n1", gpus=8), queue("dept"), queue("a", parent="dept")]
    objects.append(queue("b", parent="dept", gpu={"quota": 4, "overQuotaWeight": 1, "limit": -1}))
    objects += [pod(f"a{i}", queue="a", gpus=1, node="n1") for i in range(8)]
    objects += [pod(f"b{i}", queue="b", gpus=1) for i in range(2)]
    out = run(objects, config={"tiers": []})
    assert out["queues"]["b"]["fairShare"]["gpu"] == 2
    assert sorted(e["action"] for e in out["rounds"][0]["evicted"]) == ["reclaim", "reclaim"]


def test_an_unknown_plugin_is_skipped_with_a_warning_naming_it() -> None:
    raw = {"tiers": [{"plugins": [{"name": "predicatez"}, {"name": "proportion"}]}]}
    config, problems, warnings = parse(raw)
    assert problems == [] and [p.name for p in config.plugins] == ["predicatez", "proportion"]
    assert warnings == [
        "config c.yaml: tiers[0].plugins[0]: plugin 'predicatez' is not a KAI plugin: skipped, as KAI does "
        "(did you mean 'predicates'?)"
    ]
    out = run([node("n1"), queue("q"), pod("p", queue="q", gpus=1)], config=raw)
    assert out["pods"]["ns/p"]["status"] == "Running"


def test_without_proportion_quotas_and_fair_share_are_off_with_a_warning() -> None:
    raw = {"tiers": [{"plugins": [{"name": "predicates"}]}]}
    _, problems, warnings = parse(raw)
    assert problems == []
    assert any("no proportion plugin" in w and "quotas" in w for w in warnings)
    # The queue limit of 1 GPU is not enforced: both pods run.
    limited = queue("q", gpu={"quota": 0, "overQuotaWeight": 1, "limit": 1})
    out = run([node("n1"), limited, pod("p1", queue="q", gpus=1), pod("p2", queue="q", gpus=1)], config=raw)
    assert {p: v["status"] for p, v in out["pods"].items()} == {"ns/p1": "Running", "ns/p2": "Running"}


def test_a_kai_plugin_that_kai_lacks_is_a_not_built_warning_derived_from_the_registry() -> None:
    built = set(registered_plugins()) - {"elastic"}
    raw = {"tiers": [{"plugins": [{"name": "proportion"}, {"name": "elastic"}]}]}
    config, problems, warnings = parse(raw, built)
    assert problems == [] and config.not_built == ("elastic",)
    assert warnings == [
        "config c.yaml: tiers[0].plugins[1]: plugin 'elastic' is not built in kai yet: skipped "
        "(in KAI: job order by minMember)"
    ]
    # Registered: no warning at all.
    config, _, warnings = parse(raw, built | {"elastic"})
    assert warnings == [] and config.not_built == ()


def test_naming_every_kai_plugin_warns_exactly_for_those_not_registered() -> None:
    raw = {"tiers": [{"plugins": [{"name": name} for name in KAI_PLUGINS]}]}
    config, problems, warnings = parse(raw)
    assert problems == []
    missing = set(KAI_PLUGINS) - set(registered_plugins())
    assert set(config.not_built) == missing
    assert len([w for w in warnings if "is not built in kai yet" in w]) == len(missing)
    assert not any("is not a KAI plugin" in w for w in warnings)


def test_kai_operator_defaults_are_kai_plugins() -> None:
    assert set(DEFAULT_PLUGINS) <= set(KAI_PLUGINS)


def test_a_plugin_name_is_taken_as_written() -> None:
    _, problems, warnings = parse({"tiers": [{"plugins": [{"name": "proportion"}, {"name": "predicates "}]}]})
    assert problems == []
    assert any("plugin 'predicates ' is not a KAI plugin" in w and "did you mean 'predicates'" in w for w in warnings)


def test_the_default_configuration_warns_about_nothing() -> None:
    config, problems, warnings = parse(None)
    assert problems == [] and warnings == [] and config.not_built == ()


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"kValue": "1.5"}, {"kValue": "1.5"}),
        ({"kValue": 1.5}, {"kValue": "1.5"}),
        ({"kValue": 2}, {"kValue": "2"}),
        (None, {}),
    ],
)
def test_plugin_arguments_are_strings_and_numbers_are_accepted(arguments: Any, expected: dict[str, str]) -> None:
    config, problems, _ = parse({"tiers": [{"plugins": [{"name": "proportion", "arguments": arguments}]}]})
    assert problems == [] and config.plugin_arguments("proportion") == expected


def test_string_flags_and_parameters_read_as_kai_reads_them() -> None:
    raw = {
        "schedulerParams": {
            "maxNumberConsolidationPreemptees": "3",  # KAI's parameters are command-line flags
            "fullHierarchyFairness": "false",
            "allowConsolidatingReclaim": "True",
            "useSchedulingSignatures": False,
            "schedulerName": "other",
        }
    }
    config, problems, warnings = parse(raw)
    assert problems == [] and warnings == []
    assert config.params.max_consolidation_preemptees == 3
    assert config.params.full_hierarchy_fairness is False
    assert config.params.allow_consolidating_reclaim is True
    assert config.params.use_scheduling_signatures is False
    assert config.params.scheduler_name == "other"


# -- wrong types: one line naming the field --------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"schedulerParams": {"schedulerName": None}}, "schedulerParams.schedulerName: must be a string, got null"),
        ({"schedulerParams": {"schedulerName": 5}}, "schedulerParams.schedulerName: must be a string, got 5"),
        ({"schedulerParams": {"schedulerName": ""}}, "schedulerParams.schedulerName: must not be empty"),
        (
            {"schedulerParams": {"maxNumberConsolidationPreemptees": 1.9}},
            "schedulerParams.maxNumberConsolidationPreemptees: must be a whole number, got 1.9",
        ),
        (
            {"schedulerParams": {"maxNumberConsolidationPreemptees": float("inf")}},
            "schedulerParams.maxNumberConsolidationPreemptees: must be a whole number, got inf",
        ),
        (
            {"schedulerParams": {"maxNumberConsolidationPreemptees": float("nan")}},
            "schedulerParams.maxNumberConsolidationPreemptees: must be a whole number, got nan",
        ),
        (
            {"schedulerParams": {"maxNumberConsolidationPreemptees": True}},
            "schedulerParams.maxNumberConsolidationPreemptees: must be a whole number, got the boolean true",
        ),
        (
            {"schedulerParams": {"fullHierarchyFairness": "yes"}},
            "schedulerParams.fullHierarchyFairness: must be true or false, got the string 'yes'",
        ),
        (
            {"schedulerParams": {"allowConsolidatingReclaim": 1}},
            "schedulerParams.allowConsolidatingReclaim: must be true or false, got 1",
        ),
        (
            {"schedulerParams": {"maxEvictedToRequestedGpuRatio": float("nan")}},
            "schedulerParams.maxEvictedToRequestedGpuRatio: must be a finite number, got nan",
        ),
        ({"schedulerParams": [1]}, "schedulerParams: must be a mapping of parameter names to values, got a list"),
        ({"tiers": ["x"]}, "tiers[0]: must be a mapping with a plugins list, got the string 'x'"),
        ({"tiers": "x"}, "tiers: must be a list of {plugins: [...]}, got the string 'x'"),
        ({"tiers": [{"plugins": 123}]}, "tiers[0].plugins: must be a list of {name: ..., arguments: {...}}, got 123"),
        (
            {"tiers": [{"plugins": ["proportion"]}]},
            "tiers[0].plugins[0]: must be a mapping with a name, got the string 'proportion'",
        ),
        ({"tiers": [{"plugins": [{"name": None}]}]}, "tiers[0].plugins[0].name: must be a string, got null"),
        ({"tiers": [{"plugins": [{"arguments": {}}]}]}, "tiers[0].plugins[0].name: is required"),
        (
            {"tiers": [{"plugins": [{"name": "proportion", "arguments": [1]}]}]},
            "tiers[0].plugins[0].arguments: must be a mapping of argument names to values, got a list",
        ),
        (
            {"tiers": [{"plugins": [{"name": "proportion", "arguments": {"kValue": float("nan")}}]}]},
            "tiers[0].plugins[0].arguments.kValue: must be a finite number, got nan",
        ),
        (
            {"tiers": [{"plugins": [{"name": "proportion", "arguments": {"kValue": None}}]}]},
            "tiers[0].plugins[0].arguments.kValue: must be a string (or a number), got null",
        ),
        (
            {"tiers": [{"plugins": [{"name": "proportion", "arguments": {"kValue": "lots"}}]}]},
            "tiers[0].plugins[0].arguments: proportion: kValue must be a number, got 'lots'",
        ),
        (
            {"tiers": [{"plugins": [{"name": "minruntime", "arguments": {"defaultPreemptMinRuntime": 300}}]}]},
            "tiers[0].plugins[0].arguments: minruntime: defaultPreemptMinRuntime must be a duration",
        ),
        (
            {"queueDepthPerAction": "x"},
            "queueDepthPerAction: must be a mapping of action names to numbers of jobs, got the string 'x'",
        ),
        ({"queueDepthPerAction": {"allocate": 1.9}}, "queueDepthPerAction.allocate: must be a whole number, got 1.9"),
        (
            {"queueDepthPerAction": {"allocate": "3"}},
            "queueDepthPerAction.allocate: must be a whole number, got the string '3'",
        ),
        ({"actions": ["allocate"]}, "actions: must be a string, got a list"),
        ({"actions": None}, "actions: must be a string, got null"),
        ({"actions": "allocate, dance"}, "actions: unknown action 'dance'"),
        ({"usageDBConfig": {"clientType": 5}}, "usageDBConfig.clientType: must be a string, got 5"),
        ([1, 2], "config c.yaml: top level: must be a mapping"),
    ],
)
def test_a_wrong_type_is_one_problem_naming_the_field(raw: Any, expected: str) -> None:
    _, problems, _ = parse(raw)
    assert len(problems) == 1, problems
    assert problems[0].startswith(expected if expected.startswith("config") else f"config c.yaml: {expected}")


@pytest.mark.parametrize(
    "text",
    [
        "schedulerParams: {schedulerName: null}\n",
        "schedulerParams: {maxNumberConsolidationPreemptees: .inf}\n",
        "schedulerParams: {maxNumberConsolidationPreemptees: .nan}\n",
        "schedulerParams: {maxNumberConsolidationPreemptees: 1.9}\n",
        'tiers: ["x"]\n',
        "tiers: [{plugins: 123}]\n",
        "queueDepthPerAction: x\n",
        "tiers: [{plugins: [{name: proportion, arguments: {kValue: .nan}}]}]\n",
    ],
)
def test_bad_configs_through_the_cli_are_clean_errors(tmp_path: Path, text: str) -> None:
    write([node("n1"), queue("q"), pod("p", queue="q", gpus=1)], tmp_path)
    (tmp_path / "c.yaml").write_text(text)
    done = run_cli(["simulate", "-f", str(tmp_path / "snapshot.yaml"), "--config", str(tmp_path / "c.yaml")])
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert done.stderr.startswith(f"error: config {tmp_path / 'c.yaml'}: ")


def test_a_kai_operator_config_runs_with_warnings_for_what_kai_lacks(tmp_path: Path) -> None:
    """KAI's operator writes every default plugin; kai runs it, warning about each one it has not built."""
    config = {
        "actions": "allocate, consolidation, reclaim, preempt, stalegangeviction",
        "tiers": [{"plugins": [{"name": n} for n in DEFAULT_PLUGINS]}],
        "queueDepthPerAction": {"allocate": -1},
        "schedulerParams": {"maxNumberConsolidationPreemptees": -1, "globalDefaultStalenessGracePeriod": ".5s"},
    }
    write([node("n1"), queue("q"), pod("p", queue="q", gpus=1)], tmp_path)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    done = run_cli(["simulate", "-f", str(tmp_path / "snapshot.yaml"), "--config", str(tmp_path / "c.yaml")])
    assert done.returncode == 0, done.stderr
    for name in set(DEFAULT_PLUGINS) - set(registered_plugins()):
        assert f"plugin '{name}'" in done.stderr and "is not built in kai yet" in done.stderr
