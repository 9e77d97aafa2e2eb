"""allocate: gangs whole or not at all, elastic growth, pipelining, fair order between queues."""

from __future__ import annotations

from tests.scenario import bound, node, pod, podgroup, queue, run, running_on

UNLIMITED_GPU = {"quota": 0, "overQuotaWeight": 1, "limit": -1}


def gang(name: str, q: str, size: int, gpus: int, min_member: int | None = None, **kw: object) -> list[dict]:
    objects = [podgroup(name, q, min_member if min_member is not None else size, **kw)]
    objects += [pod(f"{name}-{i}", group=name, gpus=gpus) for i in range(size)]
    return objects


def test_gang_that_fits_only_partly_gets_nothing_and_says_why() -> None:
    # Two nodes of 4 GPUs; a gang of three 3-GPU pods: two fit, the third does not -> no pod is bound.
    result = run([node("n1", gpus=4), node("n2", gpus=4), queue("q"), *gang("train", "q", 3, 3)])
    assert result["rounds"][0]["bound"] == []
    pg = result["podGroups"]["ns/train"]
    assert pg["status"] == "Pending"
    assert "2 of the 3 pods" in pg["message"]
    assert "2 node(s) had insufficient nvidia.com/gpu" in pg["message"]


def test_gang_placed_whole_and_bin_packed() -> None:
    # Three 2-GPU pods on two 4-GPU nodes: bin-packing fills n1 first.
    result = run([node("n1", gpus=4), node("n2", gpus=4), queue("q"), *gang("train", "q", 3, 2)])
    placed = bound(result)
    assert sorted(placed) == ["ns/train-0", "ns/train-1", "ns/train-2"]
    assert sorted(placed.values()) == ["n1", "n1", "n2"]
    assert result["podGroups"]["ns/train"]["status"] == "Running"


def test_gang_is_all_or_nothing_across_leaf_subgroups() -> None:
    # Leaves 'master' (1 x 4 GPUs) and 'worker' (min 2 x 4 GPUs) on 8 GPUs: 12 needed, nothing starts.
    subgroups = [{"name": "master", "minMember": 1}, {"name": "worker", "minMember": 2}]
    objects = [
        node("n1", gpus=4),
        node("n2", gpus=4),
        queue("q"),
        podgroup("pt", "q", subgroups=subgroups),
        pod("pt-master", group="pt", gpus=4, labels={"kai.scheduler/subgroup-name": "master"}),
    ]
    objects += [
        pod(f"pt-worker-{i}", group="pt", gpus=4, labels={"kai.scheduler/subgroup-name": "worker"}) for i in range(2)
    ]
    result = run(objects)
    assert result["rounds"][0]["bound"] == []
    assert result["podGroups"]["ns/pt"]["status"] == "Pending"


def test_subgroups_each_reach_their_minimum_then_elastic_extras() -> None:
    subgroups = [{"name": "master", "minMember": 1}, {"name": "worker", "minMember": 1}]
    objects = [
        node("n1", gpus=8),
        queue("q"),
        podgroup("pt", "q", subgroups=subgroups),
        pod("pt-master", group="pt", gpus=2, labels={"kai.scheduler/subgroup-name": "master"}),
    ]
    objects += [
        pod(f"pt-worker-{i}", group="pt", gpus=2, labels={"kai.scheduler/subgroup-name": "worker"}) for i in range(4)
    ]
    # 8 GPUs: master + 3 workers fit (8), the 4th worker waits.
    result = run(objects)
    assert len(bound(result)) == 4
    assert "ns/pt-master" in bound(result)
    assert result["podGroups"]["ns/pt"]["status"] == "Running"
    assert "pt-worker-3" in result["podGroups"]["ns/pt"]["message"]


def test_elastic_job_grows_one_pod_at_a_time_after_its_minimum() -> None:
    # minMember 2 of 5 pods x 2 GPUs on 6 GPUs: the minimum plus one extra pod.
    result = run([node("n1", gpus=6), queue("q"), *gang("el", "q", 5, 2, min_member=2)])
    assert len(bound(result)) == 3
    assert result["podGroups"]["ns/el"]["status"] == "Running"


def test_pod_that_fits_only_on_releasing_resources_is_pipelined() -> None:
    objects = [
        node("n1", gpus=4),
        queue("q"),
        podgroup("old", "q"),
        pod("old", group="old", gpus=4, node="n1", deleting=True),
        podgroup("new", "q"),
        pod("new", group="new", gpus=4),
    ]
    result = run(objects, rounds=2)
    for rnd in result["rounds"]:
        assert rnd["bound"] == []
        assert rnd["pipelined"] == [{"pod": "ns/new", "node": "n1"}]
    assert result["pods"]["ns/new"]["status"] == "Pending"
    assert result["pods"]["ns/old"] == {"podGroup": "ns/old", "status": "Releasing", "node": "n1", "gpuGroups": []}
    assert "released" in result["podGroups"]["ns/new"]["message"]


def test_gang_that_cannot_truly_start_is_pipelined_whole() -> None:
    # One pod of the gang fits idle GPUs on n2, the other only the releasing GPUs on n1: nothing is bound.
    objects = [
        node("n1", gpus=4),
        node("n2", gpus=4),
        queue("q"),
        podgroup("old", "q"),
        pod("old", group="old", gpus=4, node="n1", deleting=True),
        *gang("g", "q", 2, 4),
    ]
    result = run(objects)
    assert result["rounds"][0]["bound"] == []
    assert sorted(p["pod"] for p in result["rounds"][0]["pipelined"]) == ["ns/g-0", "ns/g-1"]


def test_releasing_pod_stays_on_its_node_in_every_round() -> None:
    objects = [
        node("n1", gpus=4),
        queue("q"),
        podgroup("old", "q"),
        pod("old", group="old", gpus=2, node="n1", deleting=True),
    ]
    result = run(objects, rounds=3)
    assert result["pods"]["ns/old"]["status"] == "Releasing"
    assert result["pods"]["ns/old"]["node"] == "n1"


def test_queue_order_follows_deserved_quota_then_dominant_share() -> None:
    # 4 GPUs; queue a deserves 3, b deserves 1; both ask for 4 single-GPU pods.
    objects = [
        node("n1", gpus=4),
        queue("a", gpu={"quota": 3, "overQuotaWeight": 1, "limit": -1}),
        queue("b", gpu={"quota": 1, "overQuotaWeight": 1, "limit": -1}),
    ]
    for q in ("b", "a"):
        for i in range(4):
            objects += [podgroup(f"{q}{i}", q), pod(f"{q}{i}", group=f"{q}{i}", gpus=1)]
    result = run(objects)
    got = sorted(k.split("/")[1][0] for k in running_on(result))
    assert got == ["a", "a", "a", "b"]


def test_higher_priority_job_first_within_a_queue_then_older_first() -> None:
    # (build is non-preemptible, so the queue gets a quota for it to run within)
    objects = [
        node("n1", gpus=2),
        queue("q", gpu={"quota": 2, "overQuotaWeight": 1, "limit": -1}),
        podgroup("old-train", "q", priority_class="train", created="2026-01-01T00:00:00Z"),
        pod("old-train", group="old-train", gpus=2),
        podgroup("new-build", "q", priority_class="build", created="2026-01-01T00:00:05Z"),
        pod("new-build", group="new-build", gpus=2),
        podgroup("new-train", "q", priority_class="train", created="2026-01-01T00:00:09Z"),
        pod("new-train", group="new-train", gpus=2),
    ]
    assert list(bound(run(objects))) == ["ns/new-build"]
    objects = [o for o in objects if "new-build" not in o["metadata"]["name"]]
    assert list(bound(run(objects))) == ["ns/old-train"]


def test_over_limit_job_waits_with_the_queue_numbers() -> None:
    objects = [
        node("n1", gpus=8),
        queue("q", gpu={"quota": 2, "overQuotaWeight": 1, "limit": 3}),
        podgroup("running", "q"),
        pod("running", group="running", gpus=2, node="n1"),
        podgroup("big", "q"),
        pod("big", group="big", gpus=2),
    ]
    result = run(objects)
    assert bound(result) == {}
    message = result["podGroups"]["ns/big"]["message"]
    assert "q" in message and "limit of 3 GPUs" in message and "2 GPUs in use" in message
    assert "2 GPUs more" in message


def test_limit_applies_at_every_ancestor() -> None:
    objects = [
        node("n1", gpus=8),
        queue("dept", gpu={"quota": 0, "overQuotaWeight": 1, "limit": 2}),
        queue("team", "dept", gpu=UNLIMITED_GPU),
        podgroup("j", "team"),
        pod("j", group="j", gpus=3),
    ]
    message = run(objects)["podGroups"]["ns/j"]["message"]
    assert "dept" in message and "limit of 2 GPUs" in message


def test_non_preemptible_job_stays_within_deserved_quota() -> None:
    objects = [
        node("n1", gpus=8),
        queue("q", gpu={"quota": 2, "overQuotaWeight": 1, "limit": -1}),
        podgroup("inf", "q", priority_class="inference"),
        pod("inf", group="inf", gpus=3),
        podgroup("tr", "q", priority_class="train"),
        pod("tr", group="tr", gpus=3),
    ]
    result = run(objects)
    assert list(bound(result)) == ["ns/tr"]  # preemptible work may go over quota
    message = result["podGroups"]["ns/inf"]["message"]
    assert "Non-preemptible" in message and "quota of 2 GPUs" in message


def test_explicit_preemptibility_overrides_the_priority_default() -> None:
    objects = [
        node("n1", gpus=8),
        queue("q", gpu={"quota": 2, "overQuotaWeight": 1, "limit": -1}),
        podgroup("inf", "q", priority_class="inference", preemptibility="preemptible"),
        pod("inf", group="inf", gpus=3),
    ]
    assert list(bound(run(objects))) == ["ns/inf"]


def test_gated_pods_wait_and_say_so() -> None:
    objects = [
        node("n1", gpus=8),
        queue("q"),
        podgroup("g", "q", min_member=2),
        pod("g-0", group="g", gpus=1),
        pod("g-1", group="g", gpus=1, gated=True),
    ]
    result = run(objects)
    assert bound(result) == {}
    assert result["pods"]["ns/g-1"]["status"] == "Gated"
    assert "gated" in result["podGroups"]["ns/g"]["message"]


def test_pod_without_podgroup_is_its_own_group_in_its_labelled_queue() -> None:
    objects = [node("n1", gpus=1), queue("team"), pod("solo", queue="team", gpus=1)]
    result = run(objects)
    assert bound(result) == {"ns/solo": "n1"}
    group = result["pods"]["ns/solo"]["podGroup"]
    assert result["podGroups"][group]["queue"] == "team"


def test_bound_pods_run_in_the_next_round_and_count_for_their_queue() -> None:
    objects = [node("n1", gpus=4), queue("q"), *gang("g", "q", 2, 2)]
    result = run(objects, rounds=2)
    assert len(bound(result, 1)) == 2 and bound(result, 2) == {}
    assert result["queues"]["q"]["allocated"]["gpu"] == 4
    assert all(p["status"] == "Running" for p in result["pods"].values())
