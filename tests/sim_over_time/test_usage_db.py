"""Queue usage from a Prometheus usage DB, as KAI reads it: the PromQL asked (window, resolution,
half-life decay, metric names from extraParams) and the usage made of the answers, checked by hand;
and the usageDBConfig fields that configure it."""

from __future__ import annotations

from typing import Any

import pytest

from kai.cycle import known_actions
from kai.framework.config import UsageParams, parse_config
from kai.model import CPU, GPU, MEMORY
from kai.usage import UsageAnswerError, UsageQuery, prometheus_queries, usage_from_answers

WEEK = 7 * 86400


def promql(queries: list[UsageQuery]) -> dict[tuple[str, str], str]:
    return {(q.resource, q.kind): q.promql for q in queries}


def vector(*samples: tuple[dict[str, str], float]) -> dict[str, Any]:
    result = [{"metric": labels, "value": [1000.0, str(value)]} for labels, value in samples]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def test_a_sliding_week_sums_allocation_and_capacity_at_one_minute() -> None:
    asked = promql(prometheus_queries(10_000_000.0, UsageParams()))
    assert asked[(GPU, "allocation")] == f"sum_over_time((kai_queue_allocated_gpus)[{WEEK}s:60s])"
    assert asked[(CPU, "allocation")] == f"sum_over_time((kai_queue_allocated_cpu_cores)[{WEEK}s:60s])"
    assert asked[(MEMORY, "allocation")] == f"sum_over_time((kai_queue_allocated_memory_bytes)[{WEEK}s:60s])"
    assert asked[(GPU, "capacity")] == (
        f'sum_over_time((sum(kube_node_status_capacity{{resource="nvidia_com_gpu"}}))[{WEEK}s:60s])'
    )
    assert asked[(CPU, "capacity")] == f'sum_over_time((sum(kube_node_status_capacity{{resource="cpu"}}))[{WEEK}s:60s])'
    assert len(asked) == 6


def test_a_half_life_multiplies_every_sample_by_its_decay_from_now() -> None:
    asked = promql(prometheus_queries(5000.7, UsageParams(window_size=3600.0, half_life_period=1800.0)))
    assert asked[(GPU, "allocation")] == (
        "sum_over_time(((kai_queue_allocated_gpus) * (0.5^((5000 - time()) / 1800)))[3600s:60s])"
    )


def test_extra_params_name_the_metrics_and_the_resolution() -> None:
    params = UsageParams(
        window_size=600.0,
        extra_params=(
            ("gpuAllocationMetric", "my_gpus"),
            ("gpuCapacityMetric", 'max(cap{r="gpu"})'),
            ("queryResolution", "15s"),
        ),
    )
    asked = promql(prometheus_queries(1e6, params))
    assert asked[(GPU, "allocation")] == "sum_over_time((my_gpus)[600s:15s])"
    assert asked[(GPU, "capacity")] == 'sum_over_time((max(cap{r="gpu"}))[600s:15s])'
    assert asked[(CPU, "allocation")] == "sum_over_time((kai_queue_allocated_cpu_cores)[600s:15s])"


def test_an_unreadable_resolution_falls_back_to_one_minute() -> None:
    asked = promql(prometheus_queries(1e6, UsageParams(window_size=600.0, extra_params=(("queryResolution", "x"),))))
    assert asked[(GPU, "allocation")].endswith("[600s:60s])")


def test_the_metrics_namespace_prefixes_the_queue_metrics() -> None:
    asked = promql(prometheus_queries(1e6, UsageParams(window_size=600.0), metrics_namespace="acme"))
    assert asked[(GPU, "allocation")] == "sum_over_time((acme_queue_allocated_gpus)[600s:60s])"


def test_a_tumbling_window_reaches_back_to_its_last_reset() -> None:
    # windows of 600 s from t=0: at t=1500 the window began at 1200
    params = UsageParams(window_size=600.0, window_type="tumbling", tumbling_window_start_time=0.0)
    asked = promql(prometheus_queries(1500.0, params))
    assert asked[(GPU, "allocation")] == "sum_over_time((kai_queue_allocated_gpus)[300s:60s])"


def answers(gpu_capacity: dict[str, Any], gpu_allocation: dict[str, Any]) -> list[tuple[UsageQuery, Any]]:
    queries = prometheus_queries(1e6, UsageParams(window_size=600.0))
    canned = {
        (GPU, "capacity"): gpu_capacity,
        (GPU, "allocation"): gpu_allocation,
        (CPU, "capacity"): vector(({}, 640.0)),
        (CPU, "allocation"): vector(({"queue_name": "a"}, 160.0)),
        (MEMORY, "capacity"): vector(({}, 0.0)),
        (MEMORY, "allocation"): vector(({"queue_name": "a"}, 5.0)),
    }
    return [(q, canned[(q.resource, q.kind)]) for q in queries]


def test_usage_is_each_queues_allocation_over_the_capacity() -> None:
    # 10 samples of 8 GPUs = 80 GPU-samples; a held 60 of them, b 20
    gpu_alloc = vector(({"queue_name": "a", "instance": "x"}, 60.0), ({"queue_name": "b"}, 20.0))
    usage, empty = usage_from_answers(answers(vector(({}, 80.0)), gpu_alloc))
    assert empty == []
    assert usage["a"][GPU] == pytest.approx(0.75)
    assert usage["b"][GPU] == pytest.approx(0.25)
    assert usage["a"][CPU] == pytest.approx(0.25)  # 160 / 640
    assert usage["b"][CPU] == 0.0  # no allocation sample for b: none used
    assert usage["a"][MEMORY] == 0.0  # a capacity of 0 gives no usage, not a division by zero


def test_no_capacity_sample_means_no_history_of_that_resource() -> None:
    usage, empty = usage_from_answers(answers(vector(), vector(({"queue_name": "a"}, 1.0))))
    assert usage["a"][GPU] == 0.0
    assert usage["a"][CPU] == pytest.approx(0.25)
    assert empty == ['sum_over_time((sum(kube_node_status_capacity{resource="nvidia_com_gpu"}))[600s:60s])']


def test_an_error_answer_names_the_query_and_the_error() -> None:
    bad = {"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}
    with pytest.raises(UsageAnswerError, match="parse error at char 3"):
        usage_from_answers(answers(vector(({}, 8.0)), bad))
    matrix = {"status": "success", "data": {"resultType": "matrix", "result": []}}
    with pytest.raises(UsageAnswerError, match="expected a vector"):
        usage_from_answers(answers(vector(({}, 8.0)), matrix))


def test_usage_db_config_reads_kais_connection_and_extra_fields() -> None:
    raw = {
        "usageDBConfig": {
            "clientType": "prometheus",
            "connectionStringEnvVar": "PROMETHEUS_URL",
            "usageParams": {
                "waitTimeout": "30s",
                "extraParams": {
                    "queryResolution": "10s", "gpuAllocationMetric": "g", "usageQueryTimeout": "5s", "n": 7
                },
            },
        }
    }
    config, problems, warnings = parse_config(raw, known_actions())
    assert not problems and not warnings
    assert config.usage_db is not None
    assert config.usage_db.connection_string_env_var == "PROMETHEUS_URL"
    params = config.usage_db.params
    assert params.wait_timeout == 30.0
    assert params.extra("queryResolution") == "10s"
    assert params.extra("gpuAllocationMetric") == "g"
    assert params.extra("usageQueryTimeout") == "5s"
    assert params.extra("n") == "7"  # KAI holds strings: a number is the text it stands for
    assert params.extra("cpuAllocationMetric", "default") == "default"


def test_bad_extra_params_name_the_field() -> None:
    _, problems, _ = parse_config({"usageDBConfig": {"usageParams": {"extraParams": ["a"]}}}, known_actions())
    assert [p.field for p in problems] == ["usageDBConfig.usageParams.extraParams"]
    _, problems, warnings = parse_config(
        {"usageDBConfig": {"usageParams": {"extraParams": {"queryResolution": "soon"}}}}, known_actions()
    )
    assert not problems
    assert any("usageDBConfig.usageParams.extraParams.queryResolution" in w and "soon" in w for w in warnings)
