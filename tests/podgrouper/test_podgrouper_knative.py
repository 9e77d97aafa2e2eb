"""Knative Service: one gang PodGroup per Revision, or per pod without gang scheduling."""

from __future__ import annotations

import copy

import pytest
from podgrouper_fixtures import chain_for, find, load

from kai.podgrouper import GroupingError, GroupingOptions, OwnerChain, RelatedObjects, group_pod

KNATIVE = load("knative")
POD_1 = "hello-00001-deployment-6d9f8b7c5-7q2xk"
POD_2 = "hello-00001-deployment-6d9f8b7c5-r8m4p"
REVISION_PG = "pg-hello-00001-b5c6d7e8-0003-4f70-8a81-000000000003"


@pytest.mark.parametrize("pod_name", [POD_1, POD_2])
def test_revision_pods_form_one_gang_of_min_scale(pod_name: str) -> None:
    manifest = group_pod(chain_for(KNATIVE, pod_name)).to_manifest()

    assert manifest["metadata"]["name"] == REVISION_PG
    assert manifest["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "serving.knative.dev/v1",
            "kind": "Revision",
            "name": "hello-00001",
            "uid": "b5c6d7e8-0003-4f70-8a81-000000000003",
        }
    ]
    assert manifest["metadata"]["annotations"]["kai.scheduler/top-owner-metadata"] == (
        "name: hello-00001\nuid: b5c6d7e8-0003-4f70-8a81-000000000003\ngroup: serving.knative.dev\n"
        "version: v1\nkind: Revision\n"
    )
    assert manifest["spec"] == {"minMember": 2, "queue": "inference", "priorityClassName": "inference"}


def test_without_gang_scheduling_each_pod_is_its_own_podgroup() -> None:
    metadata = group_pod(chain_for(KNATIVE, POD_1), GroupingOptions(gang_schedule_knative=False))

    assert metadata.name == f"pg-{POD_1}-b5c6d7e8-0006-4f70-8a81-000000000006"
    assert (metadata.owner.kind, metadata.min_member, metadata.priority_class_name) == ("Pod", 1, "inference")


def test_revision_already_grouped_per_pod_stays_per_pod() -> None:
    siblings = [copy.deepcopy(find(KNATIVE, "Pod", name)) for name in (POD_1, POD_2)]
    for pod in siblings:
        pod["metadata"]["annotations"]["pod-group-name"] = f"pg-{pod['metadata']['name']}-{pod['metadata']['uid']}"
    chain = chain_for(KNATIVE, POD_1, related=RelatedObjects(knative_revision_pods=siblings))

    assert group_pod(chain).name == f"pg-{POD_1}-b5c6d7e8-0006-4f70-8a81-000000000006"


def test_revision_whose_pods_share_a_podgroup_stays_a_gang() -> None:
    siblings = [copy.deepcopy(find(KNATIVE, "Pod", name)) for name in (POD_1, POD_2)]
    for pod in siblings:
        pod["metadata"]["annotations"]["pod-group-name"] = REVISION_PG
    chain = chain_for(KNATIVE, POD_1, related=RelatedObjects(knative_revision_pods=siblings))

    assert group_pod(chain).name == REVISION_PG


def test_revision_can_be_given_when_the_chain_stops_below_it() -> None:
    pod = find(KNATIVE, "Pod", POD_1)
    service = find(KNATIVE, "Service", "hello")
    # Only the Service is known as top owner (e.g. the walk could not read the middle objects).
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "serving.knative.dev/v1", "kind": "Service", "name": "hello", "uid": service["metadata"]["uid"]}
    ]
    revision = find(KNATIVE, "Revision", "hello-00001")

    assert group_pod(OwnerChain(pod, [service], related=RelatedObjects(knative_revision=revision))).name == REVISION_PG
    with pytest.raises(GroupingError) as error:
        group_pod(OwnerChain(pod, [service]))
    assert error.value.field == "metadata.labels[serving.knative.dev/revision]"
