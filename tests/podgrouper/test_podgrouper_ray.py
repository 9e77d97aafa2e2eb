"""KubeRay: RayCluster, RayJob and RayService (v1 and v1alpha1)."""

from __future__ import annotations

import pytest
from podgrouper_fixtures import chain_for, find, load

from kai.podgrouper import GroupingError, OwnerChain, RelatedObjects, group_pod

RAY = load("ray")
ANALYTICS = "pg-analytics-a4b5c6d7-0001-4e6f-9a70-000000000001"


@pytest.mark.parametrize(
    ("pod_name", "subgroup"), [("analytics-head-8hx2k", "headgroup"), ("analytics-large-worker-q7d5m", "large")]
)
def test_raycluster_gang_counts_head_and_min_workers_per_group(pod_name: str, subgroup: str) -> None:
    metadata = group_pod(chain_for(RAY, pod_name))

    # head 1 + small min 1 + large 3 replicas x 2 hosts; spare is suspended and burst is empty.
    assert metadata.name == ANALYTICS
    assert metadata.to_manifest()["spec"] == {
        "minMember": 8,
        "queue": "analytics",
        "priorityClassName": "train",
        "subGroups": [
            {"name": "headgroup", "minMember": 1},
            {"name": "small", "minMember": 1},
            {
                "name": "large",
                "minMember": 6,
                "topologyConstraint": {"topology": "dc-topology", "requiredTopologyLevel": "nvidia.com/gpu.clique"},
            },
        ],
    }
    assert metadata.pod_subgroup == subgroup


def test_rayservice_uses_its_active_cluster_and_the_ray_priority_label() -> None:
    metadata = group_pod(chain_for(RAY, "llm-serve-raycluster-7dkq2-gpu-worker-x2v9c"))

    assert metadata.name == "pg-llm-serve-a4b5c6d7-0010-4e6f-9a70-000000000010"
    assert metadata.owner.kind == "RayService"
    assert (metadata.min_member, metadata.queue, metadata.priority_class_name) == (3, "serving", "inference")
    assert [(sg.name, sg.min_member) for sg in metadata.sub_groups] == [("headgroup", 1), ("gpu", 2)]
    assert metadata.pod_subgroup == "gpu"


def test_rayjob_submitter_pod_finds_the_cluster_among_related_objects() -> None:
    # The submitter pod belongs to a Job the RayJob owns: the RayCluster is not in its owner chain.
    cluster = find(RAY, "RayCluster", "analytics")
    cluster["apiVersion"] = "ray.io/v1alpha1"
    ray_job = {
        "apiVersion": "ray.io/v1alpha1",
        "kind": "RayJob",
        "metadata": {"name": "etl", "namespace": "ray", "uid": "a4b5c6d7-0020-4e6f-9a70-000000000020"},
        "spec": {"entrypoint": "python etl.py", "clusterSelector": {}},
        "status": {"rayClusterName": "analytics"},
    }
    submitter_job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "etl",
            "namespace": "ray",
            "uid": "a4b5c6d7-0021-4e6f-9a70-000000000021",
            "ownerReferences": [
                {
                    "apiVersion": "ray.io/v1alpha1",
                    "kind": "RayJob",
                    "name": "etl",
                    "uid": "a4b5c6d7-0020-4e6f-9a70-000000000020",
                }
            ],
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "etl-k2x8d",
            "namespace": "ray",
            "uid": "a4b5c6d7-0022-4e6f-9a70-000000000022",
            "labels": {"job-name": "etl"},
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "etl", "uid": "a4b5c6d7-0021-4e6f-9a70-000000000021"}
            ],
        },
        "spec": {"schedulerName": "kai-scheduler"},
    }

    metadata = group_pod(OwnerChain(pod, [submitter_job, ray_job], related=RelatedObjects(ray_cluster=cluster)))

    assert metadata.name == "pg-etl-a4b5c6d7-0020-4e6f-9a70-000000000020"
    assert metadata.min_member == 8
    assert metadata.pod_subgroup is None  # not a Ray node: reported, as KAI does, not placed
    assert metadata.warnings


def test_rayjob_before_its_cluster_exists_is_an_error() -> None:
    ray_job = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "etl", "namespace": "ray", "uid": "u-rj"},
        "spec": {"entrypoint": "python etl.py"},
        "status": {},
    }
    pod = {
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ray",
            "uid": "u-p",
            "ownerReferences": [{"kind": "RayJob", "name": "etl", "uid": "u-rj"}],
        },
        "spec": {"schedulerName": "kai-scheduler"},
    }

    with pytest.raises(GroupingError) as error:
        group_pod(OwnerChain(pod, [ray_job]))
    assert (error.value.kind, error.value.field) == ("RayJob", "status.rayClusterName")


def test_existing_podgroup_without_subgroups_stays_flat() -> None:
    legacy = {ANALYTICS: {"kind": "PodGroup", "spec": {"minMember": 8, "queue": "analytics"}}}

    metadata = group_pod(chain_for(RAY, "analytics-large-worker-q7d5m", existing_podgroups=legacy))

    assert (metadata.min_member, metadata.sub_groups, metadata.pod_subgroup) == (8, (), None)


def test_worker_group_with_more_min_replicas_than_replicas_is_an_error() -> None:
    objects = load("ray")
    cluster = next(o for o in objects if o["metadata"]["name"] == "analytics" and o["kind"] == "RayCluster")
    cluster["spec"]["workerGroupSpecs"][0]["minReplicas"] = 3

    with pytest.raises(GroupingError) as error:
        group_pod(chain_for(objects, "analytics-head-8hx2k"))
    assert error.value.field == "spec.workerGroupSpecs[0].minReplicas"


def test_placement_annotation_without_topology_is_an_error() -> None:
    objects = load("ray")
    cluster = next(o for o in objects if o["metadata"]["name"] == "analytics" and o["kind"] == "RayCluster")
    del cluster["spec"]["workerGroupSpecs"][1]["template"]["metadata"]["annotations"]["kai.scheduler/topology"]

    with pytest.raises(GroupingError) as error:
        group_pod(chain_for(objects, "analytics-head-8hx2k"))
    assert error.value.field == "spec.workerGroupSpecs[1].template.metadata.annotations[kai.scheduler/topology]"


def test_pod_without_a_known_ray_group_is_reported() -> None:
    objects = load("ray")
    pod = next(o for o in objects if o["metadata"]["name"] == "analytics-head-8hx2k")
    del pod["metadata"]["labels"]["ray.io/group"]

    metadata = group_pod(chain_for(objects, "analytics-head-8hx2k"))

    assert metadata.pod_subgroup is None
    assert any("ray.io/group" in warning for warning in metadata.warnings)
