"""GPU sharing: fractions, GPU memory, multi-device fractions, GPU groups, gpupack / gpuspread, MIG."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.scenario import bound, node, pod, podgroup, queue, run

ALLOCATE_ONLY = {"actions": "allocate"}


def frac(
    name: str, fraction: str | None = None, memory: str | None = None, devices: int | None = None, **kw: object
) -> list[dict]:
    annotations = {}
    if fraction:
        annotations["gpu-fraction"] = fraction
    if memory:
        annotations["gpu-memory"] = memory
    if devices:
        annotations["gpu-fraction-num-devices"] = str(devices)
    # A job's priority is its PodGroup's priorityClassName (the pod's only matters without a PodGroup).
    group_class = kw.get("priority_class")
    return [podgroup(name, "q", priority_class=group_class), pod(name, group=name, annotations=annotations, **kw)]


def gpu_node(name: str, gpus: int = 2, memory_mib: str = "40960", **kw: object) -> dict:
    return node(name, gpus=gpus, labels={"nvidia.com/gpu.memory": memory_mib}, **kw)


def groups_of(result: dict) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for key, p in result["pods"].items():
        for group in p["gpuGroups"]:
            out[group].append(key)
    return dict(out)


def test_eight_eighths_share_one_gpu_and_the_ninth_opens_a_second() -> None:
    objects = [gpu_node("n1"), queue("q")]
    for i in range(9):
        objects += frac(f"f{i}", "0.125")
    result = run(objects)
    assert len(bound(result)) == 9
    sizes = sorted(len(pods) for pods in groups_of(result).values())
    assert sizes == [1, 8]
    assert result["queues"]["q"]["fairShare"]["gpu"] == 1.125


def test_running_fractions_are_placed_in_their_labelled_group() -> None:
    running = frac("old", "0.5", node="n1", labels={"runai-gpu-group": "g-1"})
    objects = [gpu_node("n1", gpus=1), queue("q"), *running, *frac("new", "0.5"), *frac("late", "0.5")]
    result = run(objects, config=ALLOCATE_ONLY)
    assert bound(result) == {"ns/late": "n1"}  # same age: 'late' < 'new' by name
    assert result["pods"]["ns/late"]["gpuGroups"] == ["g-1"]
    assert result["podGroups"]["ns/new"]["status"] == "Pending"
    assert "no GPU with room for the shared request" in result["podGroups"]["ns/new"]["message"]


def test_gpupack_fills_the_most_used_gpu_and_gpuspread_prefers_an_empty_one() -> None:
    objects = [
        gpu_node("n1", gpus=2),
        queue("q"),
        *frac("old", "0.5", node="n1", labels={"runai-gpu-group": "g-1"}),
        *frac("new", "0.25"),
    ]
    packed = run(objects, config=ALLOCATE_ONLY)
    assert packed["pods"]["ns/new"]["gpuGroups"] == ["g-1"]
    spread_config = {
        "actions": "allocate",
        "tiers": [
            {
                "plugins": [
                    {"name": n} for n in ("predicates", "proportion", "priority", "nodeavailability", "gpuspread")
                ]
            }
        ],
    }
    spread = run(objects, config=spread_config)
    assert spread["pods"]["ns/new"]["node"] == "n1"
    assert spread["pods"]["ns/new"]["gpuGroups"] not in (["g-1"], [])


def test_gpu_memory_becomes_a_fraction_of_each_node_gpu() -> None:
    # Node GPU memory is floored to 100 MiB: 40960 -> 40900, 81920 -> 81900.
    # 'big' (50000 MiB) fits only the H100: ceil(50000 / 81900 * 100) / 100 = 0.62 of it.
    # 'half' (20480 MiB) would be 0.51 of the A100 or 0.26 of the H100; it joins the H100's shared GPU
    # (gpusharingorder), which then holds 0.88.
    objects = [
        gpu_node("a100", gpus=1, memory_mib="40960"),
        gpu_node("h100", gpus=1, memory_mib="81920"),
        queue("q"),
        *frac("big", memory="50000"),
        *frac("half", memory="20480"),
    ]
    result = run(objects, rounds=2, config=ALLOCATE_ONLY)
    assert result["pods"]["ns/big"]["node"] == "h100"
    assert result["pods"]["ns/half"]["node"] == "h100"
    assert result["pods"]["ns/half"]["gpuGroups"] == result["pods"]["ns/big"]["gpuGroups"]
    assert result["queues"]["q"]["allocated"]["gpu"] == 0.88
    alone = run(
        [gpu_node("a100", gpus=1, memory_mib="40960"), queue("q"), *frac("half", memory="20480")],
        rounds=2,
        config=ALLOCATE_ONLY,
    )
    assert alone["queues"]["q"]["allocated"]["gpu"] == 0.51


def test_pending_gpu_memory_counts_against_the_smallest_gpu() -> None:
    objects = [
        gpu_node("a100", gpus=1, memory_mib="40960"),
        gpu_node("h100", gpus=1, memory_mib="81920"),
        queue("q", gpu={"quota": 0, "overQuotaWeight": 1, "limit": 0}),
        *frac("m", memory="20480"),
    ]
    result = run(objects)
    assert result["queues"]["q"]["requested"]["gpu"] == 0.5  # 20480 / 40960, the smallest GPU
    assert "limit of 0 GPUs" in result["podGroups"]["ns/m"]["message"]


def test_gpu_memory_larger_than_any_gpu_says_so() -> None:
    result = run([gpu_node("a100", gpus=1, memory_mib="40960"), queue("q"), *frac("huge", memory="100000")])
    message = result["podGroups"]["ns/huge"]["message"]
    assert "100000 MiB" in message and "largest GPU has 40900 MiB" in message


def test_multi_device_fraction_takes_the_same_portion_on_n_gpus() -> None:
    objects = [gpu_node("n1", gpus=4), queue("q"), *frac("multi", "0.5", devices=3)]
    result = run(objects, rounds=2)
    groups = result["pods"]["ns/multi"]["gpuGroups"]
    assert len(set(groups)) == 3
    assert result["queues"]["q"]["allocated"]["gpu"] == 1.5


def test_fraction_that_fits_only_on_a_releasing_portion_is_pipelined() -> None:
    objects = [
        gpu_node("n1", gpus=1),
        queue("q"),
        *frac("stay", "0.5", node="n1", labels={"runai-gpu-group": "g"}),
        *frac("going", "0.5", node="n1", labels={"runai-gpu-group": "g"}, deleting=True),
        *frac("new", "0.5"),
    ]
    result = run(objects, config=ALLOCATE_ONLY)
    assert result["rounds"][0]["pipelined"] == [{"pod": "ns/new", "node": "n1"}]
    assert bound(result) == {}


def test_whole_gpu_pods_and_fractions_do_not_share_a_device() -> None:
    objects = [gpu_node("n1", gpus=2), queue("q"), *frac("f", "0.5"), podgroup("w", "q"), pod("w", group="w", gpus=2)]
    result = run(objects, config=ALLOCATE_ONLY)
    assert len(bound(result)) == 1  # the fraction holds one GPU: two whole GPUs are no longer free


def test_preempting_a_fractional_victim_frees_only_its_portion() -> None:
    objects = [
        gpu_node("n1", gpus=1),
        queue("q"),
        *frac("low-a", "0.5", node="n1", labels={"runai-gpu-group": "g"}, priority_class="train"),
        *frac("low-b", "0.5", node="n1", labels={"runai-gpu-group": "g"}, priority_class="train"),
        *frac("high", "0.5", priority_class="build-preemptible"),
    ]
    result = run(objects, config={"actions": "allocate, preempt"})
    evicted = result["rounds"][0]["evicted"]
    assert len(evicted) == 1 and evicted[0]["action"] == "preempt"
    assert result["rounds"][0]["pipelined"] == [{"pod": "ns/high", "node": "n1"}]


def test_fair_share_with_fractional_demand() -> None:
    objects = [gpu_node("n1", gpus=1), queue("a"), queue("b")]
    for q, fractions in (("a", ["0.25", "0.5"]), ("b", ["0.5"])):
        for i, f in enumerate(fractions):
            objects += [podgroup(f"{q}{i}", q), pod(f"{q}{i}", group=f"{q}{i}", annotations={"gpu-fraction": f})]
    share = {n: q["fairShare"]["gpu"] for n, q in run(objects)["queues"].items()}
    # 1 GPU: each queue's slice is 0.5; 'b' wants exactly 0.5, 'a' wants 0.75 and gets the 0.5 + nothing left.
    assert share == {"a": 0.5, "b": 0.5}


def test_mig_slices_count_by_compute_size_and_fractions_avoid_mig_nodes() -> None:
    mig = node(
        "mig",
        gpus=0,
        extra={"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.40gb": "2"},
        labels={"nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.memory": "81920"},
    )
    objects = [
        mig,
        queue("q"),
        podgroup("small", "q"),
        pod("small", group="small", extra={"nvidia.com/mig-1g.10gb": "2"}),
        podgroup("big", "q"),
        pod("big", group="big", extra={"nvidia.com/mig-3g.40gb": "1"}),
        *frac("f", "0.5"),
    ]
    result = run(objects, rounds=2)
    assert result["pods"]["ns/small"]["node"] == "mig" and result["pods"]["ns/big"]["node"] == "mig"
    assert result["queues"]["q"]["allocated"]["gpu"] == 2 + 3
    assert result["pods"]["ns/f"]["status"] == "Pending"


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["0.1", "0.25", "0.3", "0.5", "0.75"]), st.integers(1, 2)), min_size=1, max_size=24
    ),
    st.sampled_from(["gpupack", "gpuspread"]),
)
def test_no_gpu_is_ever_allocated_more_than_its_whole(requests: list[tuple[str, int]], order: str) -> None:
    objects = [gpu_node("n1", gpus=2), gpu_node("n2", gpus=2), queue("q")]
    for i, (fraction, devices) in enumerate(requests):
        objects += frac(f"p{i}", fraction, devices=devices)
    objects += [podgroup("w", "q"), pod("w", group="w", gpus=1)]
    config = {
        "actions": "allocate",
        "tiers": [
            {
                "plugins": [
                    {"name": n}
                    for n in (
                        "predicates",
                        "proportion",
                        "priority",
                        "nodeavailability",
                        order,
                        "gpusharingorder",
                        "nodeplacement",
                    )
                ]
            }
        ],
    }
    result = run(objects, rounds=2, config=config)
    portions = {f"p{i}": float(f) for i, (f, _) in enumerate(requests)}
    used: dict[str, float] = defaultdict(float)
    per_node: dict[str, set[str]] = defaultdict(set)
    for key, p in result["pods"].items():
        name = key.split("/")[1]
        for group in p["gpuGroups"]:
            used[group] += portions[name]
            per_node[p["node"]].add(group)
        assert len(set(p["gpuGroups"])) == len(p["gpuGroups"])  # N distinct GPUs
    assert all(total <= 1 + 1e-9 for total in used.values())
    whole = {p["node"]: 1 for k, p in result["pods"].items() if k == "ns/w" and p["status"] == "Running"}
    for node_name, groups in per_node.items():
        assert len(groups) + whole.get(node_name, 0) <= 2


def test_mig_mixed_nodes_serve_only_mig_slices_and_single_ones_only_whole_gpus() -> None:
    mixed = node("mixed", gpus=4, extra={"nvidia.com/mig-1g.10gb": "7"}, labels={"nvidia.com/mig.strategy": "mixed"})
    single = node("single", gpus=7, labels={"nvidia.com/mig.strategy": "single", "nvidia.com/gpu.memory": "81920"})
    objects = [mixed, single, queue("q"), podgroup("w", "q"), pod("w", group="w", gpus=5), *frac("f", "0.5")]
    result = run(objects)
    assert result["pods"]["ns/w"]["node"] == "single"
    assert result["pods"]["ns/f"]["status"] == "Pending"
