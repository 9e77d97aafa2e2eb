"""LeaderWorkerSet: one PodGroup per replica group, leader/workers sub-groups, segments, LeaderReady."""

from __future__ import annotations

from typing import Any

import pytest
from podgrouper_fixtures import chain_for, load

from kai.podgrouper import GroupingError, group_pod

GROUP_1 = "pg-vllm-405b-f3a4b5c6-0001-4d5e-8f60-000000000001-group-1"


def lws_objects(size: int = 4, **spec_changes: Any) -> list[dict[str, Any]]:
    """The manifests, with the LWS's group size and spec fields changed, and every pod labelled for that size."""
    objects = load("leaderworkerset")
    lws = objects[0]
    lws["spec"]["leaderWorkerTemplate"]["size"] = size
    for key, value in spec_changes.items():
        if key == "subGroupPolicy":
            lws["spec"]["leaderWorkerTemplate"]["subGroupPolicy"] = value
        else:
            lws["spec"][key] = value
    for obj in objects:
        if obj["kind"] == "Pod":
            obj["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/size"] = str(size)
    return objects


def with_worker(objects: list[dict[str, Any]], index: int) -> list[dict[str, Any]]:
    """Add worker pod `index` of group 1 (a copy of worker 1 renamed)."""
    template = next(o for o in objects if o["kind"] == "Pod" and o["metadata"]["name"] == "vllm-405b-1-1")
    pod = {**template, "metadata": {**template["metadata"], "name": f"vllm-405b-1-{index}", "uid": f"w-{index}"}}
    pod["metadata"]["labels"] = {
        **template["metadata"]["labels"],
        "leaderworkerset.sigs.k8s.io/worker-index": str(index),
    }
    return [*objects, pod]


@pytest.mark.parametrize(("pod_name", "subgroup"), [("vllm-405b-1", "leader"), ("vllm-405b-1-2", "workers")])
def test_each_replica_group_is_a_gang_of_leader_and_workers(pod_name: str, subgroup: str) -> None:
    metadata = group_pod(chain_for(load("leaderworkerset"), pod_name))

    assert metadata.to_manifest()["metadata"]["name"] == GROUP_1
    assert metadata.owner.kind == "LeaderWorkerSet"
    assert metadata.to_manifest()["spec"] == {
        "minMember": 4,
        "queue": "inference",
        "priorityClassName": "train",
        "topologyConstraint": {"topology": "dc-topology"},
        "subGroups": [{"name": "leader", "minMember": 1}, {"name": "workers", "minMember": 3}],
    }
    assert metadata.pod_patch()["metadata"]["labels"] == {"kai.scheduler/subgroup-name": subgroup}


def test_leader_ready_startup_makes_an_unscheduled_leader_a_gang_of_one() -> None:
    objects = lws_objects(startupPolicy="LeaderReady")

    leader_alone = group_pod(chain_for(objects, "vllm-405b-1"))
    assert (leader_alone.name, leader_alone.min_member) == (GROUP_1, 1)
    assert [sg.to_manifest() for sg in leader_alone.sub_groups] == [{"name": "leader", "minMember": 1}]

    next(o for o in objects if o["metadata"]["name"] == "vllm-405b-1" and o["kind"] == "Pod")["spec"]["nodeName"] = "n1"
    leader_running = group_pod(chain_for(objects, "vllm-405b-1"))
    assert leader_running.min_member == 4
    assert group_pod(chain_for(objects, "vllm-405b-1-3")).min_member == 4


@pytest.mark.parametrize(
    ("pod_name", "subgroup"),
    [
        ("vllm-405b-1", "segment-0"),
        ("vllm-405b-1-2", "segment-0"),
        ("vllm-405b-1-3", "segment-1"),
        ("vllm-405b-1-4", "segment-1"),
    ],
)
def test_segments_keep_the_leader_in_the_first_one(pod_name: str, subgroup: str) -> None:
    # size 5, segments of 2: size - 1 is divisible, so LWS puts the leader on top of the first segment.
    objects = with_worker(lws_objects(5, subGroupPolicy={"subGroupSize": 2}), 4)

    metadata = group_pod(chain_for(objects, pod_name))

    segment_topology = {"topology": "dc-topology", "requiredTopologyLevel": "nvidia.com/gpu.clique"}
    assert metadata.min_member == 5
    assert [sg.to_manifest() for sg in metadata.sub_groups] == [
        {"name": "segment-0", "minMember": 3, "topologyConstraint": segment_topology},
        {"name": "segment-1", "minMember": 2, "topologyConstraint": segment_topology},
    ]
    assert metadata.pod_subgroup == subgroup


def test_segments_when_size_minus_one_is_not_divisible() -> None:
    # size 4, segments of 2: workers 0 (leader) and 1 form segment-0, workers 2 and 3 segment-1.
    objects = lws_objects(4, subGroupPolicy={"subGroupSize": 2})

    metadata = group_pod(chain_for(objects, "vllm-405b-1-1"))

    assert [(sg.name, sg.min_member) for sg in metadata.sub_groups] == [("segment-0", 2), ("segment-1", 2)]
    assert metadata.pod_subgroup == "segment-0"
    assert group_pod(chain_for(objects, "vllm-405b-1-2")).pod_subgroup == "segment-1"


def test_leader_excluded_segments_put_the_leader_in_its_own_leaf() -> None:
    objects = with_worker(lws_objects(5, subGroupPolicy={"subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"}), 4)

    metadata = group_pod(chain_for(objects, "vllm-405b-1-2"))

    segment_topology = {"topology": "dc-topology", "requiredTopologyLevel": "nvidia.com/gpu.clique"}
    assert [sg.to_manifest() for sg in metadata.sub_groups] == [
        {"name": "leader", "minMember": 1},
        {"name": "segment-0", "minMember": 2, "topologyConstraint": segment_topology},
        {"name": "segment-1", "minMember": 2, "topologyConstraint": segment_topology},
    ]
    assert metadata.pod_subgroup == "segment-0"
    assert group_pod(chain_for(objects, "vllm-405b-1")).pod_subgroup == "leader"


def test_leader_excluded_needs_divisible_workers() -> None:
    objects = lws_objects(4, subGroupPolicy={"subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"})

    with pytest.raises(GroupingError) as error:
        group_pod(chain_for(objects, "vllm-405b-1-1"))
    assert (error.value.kind, error.value.field) == ("LeaderWorkerSet", "spec.leaderWorkerTemplate.subGroupPolicy")


def test_segment_size_annotation_on_the_lws() -> None:
    objects = lws_objects(4)
    objects[0]["metadata"]["annotations"]["kai.scheduler/segment-size"] = "3"

    metadata = group_pod(chain_for(objects, "vllm-405b-1-3"))

    assert [(sg.name, sg.min_member) for sg in metadata.sub_groups] == [("segment-0", 4)]
    assert metadata.pod_subgroup == "segment-0"
