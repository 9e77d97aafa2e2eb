"""predicates and the placement core: which nodes a pod may use at all."""

from __future__ import annotations

from tests.scenario import bound, node, pod, podgroup, queue, run


def solo(name: str, **kw: object) -> list[dict]:
    return [podgroup(name, "q"), pod(name, group=name, **kw)]


def test_node_selector() -> None:
    objects = [
        node("a", labels={"pool": "x"}),
        node("b", labels={"pool": "y"}),
        queue("q"),
        *solo("p", gpus=1, node_selector={"pool": "y"}),
        *solo("nowhere", gpus=1, node_selector={"pool": "z"}),
    ]
    result = run(objects)
    assert bound(result)["ns/p"] == "b"
    assert "2 node(s) didn't match the pod's node selector" in result["podGroups"]["ns/nowhere"]["message"]


def test_required_node_affinity_terms_are_ored_and_expressions_anded() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "gpu", "operator": "In", "values": ["h100"]},
                            {"key": "zone", "operator": "NotIn", "values": ["z1"]},
                        ]
                    },
                    {"matchExpressions": [{"key": "special", "operator": "Exists"}]},
                ]
            }
        }
    }
    objects = [
        node("a", labels={"gpu": "h100", "zone": "z1"}),
        node("b", labels={"gpu": "a100", "zone": "z2"}),
        node("c", labels={"gpu": "h100", "zone": "z2"}),
        queue("q"),
        *solo("p", gpus=8, affinity=affinity),
        *solo("p2", gpus=8, affinity=affinity),
    ]
    result = run(objects)
    assert bound(result) == {"ns/p": "c"}
    assert "didn't match the pod's required node affinity" in result["podGroups"]["ns/p2"]["message"]


def test_match_fields_on_node_name() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}]
            }
        }
    }
    objects = [node("a"), node("b"), queue("q"), *solo("p", gpus=1, affinity=affinity)]
    assert bound(run(objects)) == {"ns/p": "b"}


def test_taints_need_tolerations() -> None:
    taint = [{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}]
    objects = [
        node("a", taints=taint),
        node("b", gpus=1),
        queue("q"),
        *solo("plain", gpus=2),
        *solo(
            "tolerant",
            gpus=2,
            tolerations=[{"key": "dedicated", "operator": "Equal", "value": "infer", "effect": "NoSchedule"}],
        ),
    ]
    result = run(objects)
    assert bound(result) == {"ns/tolerant": "a"}
    assert "1 node(s) had taints that the pod didn't tolerate" in result["podGroups"]["ns/plain"]["message"]


def test_prefer_no_schedule_taint_does_not_block() -> None:
    objects = [node("a", taints=[{"key": "x", "effect": "PreferNoSchedule"}]), queue("q"), *solo("p", gpus=1)]
    assert bound(run(objects)) == {"ns/p": "a"}


def test_unschedulable_and_not_ready_nodes_are_skipped() -> None:
    objects = [
        node("a", unschedulable=True),
        node("b", ready=False),
        node("c", gpus=1),
        queue("q"),
        *solo("p", gpus=1),
        *solo("q2", gpus=1),
    ]
    result = run(objects)
    assert bound(result) == {"ns/p": "c"}
    assert "2 node(s) were unschedulable or not ready" in result["podGroups"]["ns/q2"]["message"]


def test_pressure_condition_makes_a_node_unusable() -> None:
    sick = node("a")
    sick["status"]["conditions"].append({"type": "MemoryPressure", "status": "True"})
    assert bound(run([sick, node("b"), queue("q"), *solo("p", gpus=1)])) == {"ns/p": "b"}


def test_max_pods_per_node() -> None:
    objects = [
        node("a", pods=1),
        node("b", gpus=0),
        queue("q"),
        podgroup("r", "q"),
        pod("r", group="r", node="a"),
        *solo("p", gpus=1),
    ]
    result = run(objects, config={"actions": "allocate"})  # (consolidation would move 'r' to 'b')
    assert bound(result) == {}
    message = result["podGroups"]["ns/p"]["message"]
    assert "insufficient pod slots" in message and "insufficient nvidia.com/gpu" in message


def test_pods_of_other_schedulers_count_as_load() -> None:
    objects = [
        node("a", gpus=8),
        node("b", gpus=8),
        queue("q"),
        pod("foreign", gpus=6, node="a", scheduler="default-scheduler"),
        *solo("p", gpus=4),
    ]
    result = run(objects)
    assert bound(result) == {"ns/p": "b"}
    assert result["queues"]["q"]["fairShare"]["gpu"] == 4  # the cluster has 10 GPUs for kai, q asks 4
    assert "ns/foreign" not in result["pods"]


def test_larger_than_any_node_is_unresolvable_with_the_numbers() -> None:
    objects = [node("a", gpus=8, cpu="16"), queue("q"), *solo("huge", gpus=16), *solo("cpu", cpu="32")]
    result = run(objects)
    assert "16 GPUs" in result["podGroups"]["ns/huge"]["message"]
    assert "the largest has 8 GPUs" in result["podGroups"]["ns/huge"]["message"]
    assert "32 CPU cores" in result["podGroups"]["ns/cpu"]["message"]


def test_extended_resources_and_memory_fit() -> None:
    objects = [
        node("a", extra={"example.com/fpga": "1"}, memory="8Gi"),
        node("b", memory="64Gi"),
        queue("q"),
        *solo("fpga", extra={"example.com/fpga": "1"}),
        *solo("mem", memory="32Gi"),
    ]
    assert bound(run(objects)) == {"ns/fpga": "a", "ns/mem": "b"}


def test_init_containers_take_the_max_not_the_sum() -> None:
    p = pod("p", group="p", cpu="2")
    p["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "3"}}}]
    result = run([node("a", gpus=0, cpu="3"), queue("q"), podgroup("p", "q"), p], rounds=2)
    assert result["pods"]["ns/p"]["status"] == "Running"
    assert result["queues"]["q"]["allocated"]["cpu"] == 3000
