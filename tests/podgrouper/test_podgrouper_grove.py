"""Grove PodCliqueSet (directly, and under NVIDIA Dynamo): the PodGroup comes from the PodGang."""

from __future__ import annotations

import pytest
from podgrouper_fixtures import chain_for, find, load

from kai.podgrouper import GroupingError, OwnerChain, RelatedObjects, group_pod

GROVE = load("grove")
PODGANG = find(GROVE, "PodGang", "llama-disagg-0")
WITH_GANG = {"related": RelatedObjects(pod_gang=PODGANG)}


@pytest.mark.parametrize(
    ("pod_name", "subgroup"),
    [
        ("llama-disagg-0-prefill-h7k2m", "llama-disagg-0-prefill"),
        ("llama-disagg-0-decode-0-decode-worker-f4b1r", "llama-disagg-0-decode-0-decode-worker"),
    ],
)
def test_dynamo_on_grove_is_grouped_by_its_podgang(pod_name: str, subgroup: str) -> None:
    metadata = group_pod(chain_for(GROVE, pod_name, **WITH_GANG))
    manifest = metadata.to_manifest()

    assert manifest["metadata"]["name"] == "pg-llama-disagg-0-c6d7e8f9-0003-4a81-9b92-000000000003"
    assert manifest["metadata"]["ownerReferences"][0]["kind"] == "PodGang"
    # The Dynamo deployment is skipped; its queue and preemptibility labels reach the PodGroup.
    assert manifest["metadata"]["labels"]["kai.scheduler/queue"] == "llm-serving"
    rack = {
        "topology": "grove-topology",
        "requiredTopologyLevel": "topology.kubernetes.io/rack",
        "preferredTopologyLevel": "kubernetes.io/hostname",
    }
    assert manifest["spec"] == {
        "minMember": 5,
        "queue": "llm-serving",
        "priorityClassName": "inference",
        "preemptibility": "non-preemptible",
        "topologyConstraint": {"topology": "grove-topology", "requiredTopologyLevel": "topology.kubernetes.io/zone"},
        "subGroups": [
            {"name": "llama-disagg-0-decode-0", "topologyConstraint": rack},
            {"name": "llama-disagg-0-prefill", "minMember": 2},
            {"name": "llama-disagg-0-decode-0-decode-leader", "minMember": 1, "parent": "llama-disagg-0-decode-0"},
            {
                "name": "llama-disagg-0-decode-0-decode-worker",
                "minMember": 2,
                "parent": "llama-disagg-0-decode-0",
                "topologyConstraint": {
                    "topology": "grove-topology",
                    "preferredTopologyLevel": "kubernetes.io/hostname",
                },
            },
        ],
    }
    assert metadata.pod_subgroup == subgroup


def test_podcliqueset_without_dynamo_uses_its_own_labels() -> None:
    pcs = find(GROVE, "PodCliqueSet", "llama-disagg")
    del pcs["metadata"]["ownerReferences"]
    pcs["metadata"]["labels"]["kai.scheduler/queue"] = "grove-team"
    pod = find(GROVE, "Pod", "llama-disagg-0-prefill-h7k2m")
    clique = find(GROVE, "PodClique", "llama-disagg-0-prefill")

    metadata = group_pod(OwnerChain(pod, [clique, pcs], **WITH_GANG))

    assert (metadata.queue, metadata.preemptibility, metadata.min_member) == ("grove-team", "", 5)


def test_grove_pod_needs_its_podgang() -> None:
    with pytest.raises(GroupingError) as error:
        group_pod(chain_for(GROVE, "llama-disagg-0-prefill-h7k2m"))
    assert error.value.field == "metadata.labels[grove.io/podgang]"
    assert "llama-disagg-0" in error.value.problem


def test_podgang_podgroup_with_zero_min_replicas_is_an_error() -> None:
    gang = find(GROVE, "PodGang", "llama-disagg-0")
    gang["spec"]["podgroups"][1]["minReplicas"] = 0

    with pytest.raises(GroupingError) as error:
        group_pod(chain_for(GROVE, "llama-disagg-0-prefill-h7k2m", related=RelatedObjects(pod_gang=gang)))
    assert (error.value.kind, error.value.field) == ("PodGang", "spec.podgroups[1].minReplicas")
