"""The registry: GVK lookup (exact, then any version, then default), skipping, pods left alone, chain checks."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from podgrouper_fixtures import owner_ref

import kai.podgrouper
from kai.podgrouper import (
    SKIP_TOP_OWNER,
    Grouper,
    GrouperRegistry,
    GroupingContext,
    GroupingError,
    GroupVersionKind,
    OwnerChain,
    PodGroupMetadata,
    default_registry,
    group_pod,
)
from kai.podgrouper.common import default_metadata


def obj(
    api_version: str, kind: str, name: str, uid: str, owner: dict[str, Any] | None = None, **labels: str
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid, "labels": dict(labels)}
    if owner is not None:
        metadata["ownerReferences"] = [owner_ref(owner)]
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata}


def pod_of(owner: dict[str, Any] | None, scheduler: str = "kai-scheduler", **labels: str) -> dict[str, Any]:
    pod = obj("v1", "Pod", "p-0", "uid-pod", owner, **labels)
    pod["spec"] = {"schedulerName": scheduler}
    return pod


def named(name: str) -> Grouper:
    """A grouper that groups like the default one under a fixed name."""

    def grouper(ctx: GroupingContext) -> PodGroupMetadata:
        return replace(default_metadata(ctx), name=name)

    return grouper


def test_exact_version_wins_then_any_version_then_the_default() -> None:
    registry = GrouperRegistry(named("default"))
    registry.register("example.com", "v1", "Trainer", named("exact"))
    registry.register("example.com", "*", "Trainer", named("any-version"))

    def group(api_version: str) -> str:
        owner = obj(api_version, "Trainer", "t", "uid-t")
        return registry.group(OwnerChain(pod_of(owner), [owner])).name

    assert group("example.com/v1") == "exact"
    assert group("example.com/v2") == "any-version"
    assert group("other.com/v1") == "default"
    assert registry.lookup(GroupVersionKind("example.com", "v3", "Trainer")) is not registry.default


def test_skipped_kinds_hand_over_to_the_next_owner_down_recursively() -> None:
    registry = GrouperRegistry(named("default"))
    registry.register_skip("example.com", "*", "Wrapper")
    registry.register("example.com", "v1", "Trainer", named("trainer"))
    outer = obj("example.com/v1", "Wrapper", "outer", "uid-outer", None, team="x")
    inner = obj("example.com/v1", "Wrapper", "inner", "uid-inner", outer)
    trainer = obj("example.com/v1", "Trainer", "t", "uid-t", inner)

    assert registry.lookup(GroupVersionKind.of(outer)) is SKIP_TOP_OWNER
    metadata = registry.group(OwnerChain(pod_of(trainer), [trainer, inner, outer]))
    assert metadata.name == "trainer"
    assert metadata.labels == {"team": "x"}


def test_default_registry_knows_every_kind_of_the_table() -> None:
    registered = default_registry().registered()
    expected_groupers = {
        ("", "v1", "Pod"),
        ("batch", "v1", "Job"),
        ("batch", "v1", "CronJob"),
        ("apps", "v1", "Deployment"),
        ("apps", "v1", "StatefulSet"),
        ("apps", "v1", "ReplicaSet"),
        ("kubeflow.org", "v1", "PyTorchJob"),
        ("kubeflow.org", "v1", "TFJob"),
        ("kubeflow.org", "v1", "MPIJob"),
        ("kubeflow.org", "v2beta1", "MPIJob"),
        ("kubeflow.org", "v1", "XGBoostJob"),
        ("kubeflow.org", "v1", "JAXJob"),
        ("kubeflow.org", "v1beta1", "Notebook"),
        ("jobset.x-k8s.io", "v1alpha2", "JobSet"),
        ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet"),
        ("ray.io", "v1", "RayCluster"),
        ("ray.io", "v1alpha1", "RayJob"),
        ("ray.io", "v1", "RayService"),
        ("serving.knative.dev", "v1", "Service"),
        ("grove.io", "v1alpha1", "PodCliqueSet"),
        ("grove.io", "v1alpha1", "PodGangSet"),
        ("run.ai", "v1", "RunaiJob"),
        ("amlarc.azureml.com", "v1alpha1", "AmlJob"),
        ("egx.nvidia.io", "v1", "SPOTRequest"),
        ("tekton.dev", "v1", "PipelineRun"),
    }
    expected_skips = {
        ("argoproj.io", "v1alpha1", "Workflow"),
        ("trainer.kubeflow.org", "v1alpha1", "TrainJob"),
        ("nvidia.com", "*", "DynamoGraphDeployment"),
        ("run.ai", "*", "TrainingWorkload"),
        ("run.ai", "*", "InteractiveWorkload"),
        ("run.ai", "*", "DistributedWorkload"),
        ("run.ai", "*", "InferenceWorkload"),
        ("run.ai", "*", "DistributedInferenceWorkload"),
    }
    for key in expected_groupers:
        assert registered[GroupVersionKind(*key)] is not SKIP_TOP_OWNER, key
    for key in expected_skips:
        assert registered[GroupVersionKind(*key)] is SKIP_TOP_OWNER, key


def test_pods_of_other_schedulers_are_left_alone() -> None:
    assert group_pod(OwnerChain(pod_of(None, scheduler="default-scheduler"))) is None


def test_bare_pod_naming_its_own_podgroup_is_left_alone_but_an_owned_one_is_not() -> None:
    pod = pod_of(None)
    pod["metadata"]["annotations"] = {"pod-group-name": "my-own-group"}
    assert group_pod(OwnerChain(pod)) is None

    owner = obj("apps/v1", "StatefulSet", "s", "uid-s")
    owned = pod_of(owner)
    owned["metadata"]["annotations"] = {"pod-group-name": "stale"}
    assert group_pod(OwnerChain(owned, [owner])).name == "pg-s-uid-s"


def test_pod_without_api_version_and_kind_is_taken_as_a_v1_pod() -> None:
    pod = pod_of(None)
    del pod["apiVersion"], pod["kind"]

    metadata = group_pod(OwnerChain(pod))

    assert metadata.owner.to_manifest() == {"apiVersion": "v1", "kind": "Pod", "name": "p-0", "uid": "uid-pod"}


def test_owner_with_two_owners_is_an_error() -> None:
    a = obj("example.com/v1", "A", "a", "uid-a")
    b = obj("example.com/v1", "B", "b", "uid-b")
    replica_set = obj("apps/v1", "ReplicaSet", "rs", "uid-rs", a)
    replica_set["metadata"]["ownerReferences"].append(owner_ref(b))

    with pytest.raises(GroupingError) as error:
        group_pod(OwnerChain(pod_of(replica_set), [replica_set, a]))
    assert (error.value.kind, error.value.name, error.value.field) == ("ReplicaSet", "rs", "metadata.ownerReferences")


def test_owner_replaced_under_the_same_name_is_an_error() -> None:
    job = obj("batch/v1", "Job", "j", "uid-old")
    pod = pod_of(job)
    job["metadata"]["uid"] = "uid-new"

    with pytest.raises(GroupingError, match="uid-old"):
        group_pod(OwnerChain(pod, [job]))


def test_error_message_names_object_and_field() -> None:
    error = GroupingError({"kind": "TFJob", "metadata": {"name": "mnist", "namespace": "ml"}}, "spec.x", "is wrong")

    assert str(error) == "TFJob ml/mnist: spec.x: is wrong"
    assert error.object_ref == "TFJob ml/mnist"


def test_grouping_rules_import_only_the_standard_library_and_kai_api() -> None:
    allowed_stdlib = {"__future__", "collections", "dataclasses", "functools", "json", "re", "typing"}
    for path in Path(kai.podgrouper.__file__).parent.glob("*.py"):
        if path.name.startswith("controller"):  # the controller is the adapter: it may use kai.cluster
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module or ""]
            else:
                continue
            for module in modules:
                assert module.split(".")[0] in allowed_stdlib or module.startswith("kai.api"), (path.name, module)
