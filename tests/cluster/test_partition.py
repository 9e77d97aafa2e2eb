"""Which objects one node pool's scheduler sees (KAI's SchedulingShard selection)."""

from __future__ import annotations

from typing import Any

from kai.cluster.partition import Unlabelled, select

KEY = "kai.scheduler/node-pool"


def obj(kind: str, name: str, pool: str | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {KEY: pool} if pool else {}}
    if kind in ("Pod", "PodGroup"):
        meta["namespace"] = "ns"
    if "group" in extra:
        meta["annotations"] = {"pod-group-name": extra.pop("group")}
    return {"kind": kind, "metadata": meta, **extra}


CLUSTER = [
    obj("Node", "n-a", "a"),
    obj("Node", "n-default"),
    obj("Queue", "q-a", "a"),
    obj("Queue", "q-default"),
    obj("PodGroup", "pg-a", "a"),
    obj("PodGroup", "pg-default"),
    obj("Pod", "p-a", group="pg-a"),
    obj("Pod", "p-default", group="pg-default"),
    obj("Pod", "orphan", group="no-such-group"),
    obj("Pod", "orphan-a", "a", group="no-such-group"),
    obj("Pod", "bound-on-a", group="pg-default", spec={"nodeName": "n-a"}),
    obj("PriorityClass", "shared"),
]


def seen(value: str) -> set[str]:
    return {o["metadata"]["name"] for o in select(CLUSTER, KEY, value)}


def test_the_default_shard_sees_what_carries_no_pool_label_and_pods_whose_group_exists_nowhere() -> None:
    assert seen("") == {"n-default", "q-default", "pg-default", "p-default", "orphan", "shared"}


def test_a_pool_s_shard_sees_its_pool_and_the_pods_bound_to_its_nodes() -> None:
    assert seen("a") == {"n-a", "q-a", "pg-a", "p-a", "orphan-a", "bound-on-a", "shared"}


def test_without_a_label_key_nothing_is_filtered() -> None:
    assert select(CLUSTER, "", "a") == CLUSTER


def test_the_default_shard_with_a_memo_of_unlabelled_objects_follows_each_change() -> None:
    memo = Unlabelled()
    plain = [obj("Node", "n1"), obj("Queue", "q"), obj("Pod", "p", group="pg")]
    assert select(plain, KEY, "", memo) is plain  # nothing carries the label: the very list
    again = [*plain, obj("Pod", "p2", group="pg")]
    assert select(again, KEY, "", memo) is again
    labelled = [*plain[:1], obj("Node", "n2", "a"), *plain[1:]]  # a node of pool "a" comes
    # (p names a PodGroup that exists nowhere: its own label, none, puts it in the default shard)
    assert [o["metadata"]["name"] for o in select(labelled, KEY, "", memo)] == ["n1", "q", "p"]
    relabelled = [plain[0], obj("Node", "n2"), *plain[1:]]  # the same node, now without the label
    assert select(relabelled, KEY, "", memo) is relabelled
