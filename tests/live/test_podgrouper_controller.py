"""How the podgrouper controller behaves on a real API server, beyond computing PodGroups.

* an update keeps what a user set by hand (queue, markUnschedulable, schedulingBackoff,
  node-pool and queue labels, labels and annotations of its own) and changes only what
  the workload decides;
* a workload that cannot be grouped, or an owner that does not exist, becomes a
  `PodGrouperWarning` event on the pod naming the object and field, and the controller
  goes on with the next pod;
* a deleted PodGroup is made again; a bare pod that names its own PodGroup and pods of
  other schedulers are left alone;
* namespace and pod label selectors limit which pods it handles;
* end to end: a PyTorchJob's pods, grouped by the controller, are placed as one gang by
  the live scheduler (`kai run`'s in-process twin).
"""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from podgrouper_support import (
    create_tree,
    grouped_pod,
    load_manifests,
    operator_pod,
    pod,
    podgroup,
    prepared_kube,
    running_controller,
    wait_for,
    warnings_on,
    workload,
)

from kai.api import keys
from kai.cluster.kube import NAMESPACES, PODGROUPS, PODS, ApiError, Kube
from kai.devcluster.live import LiveCluster
from kai.podgrouper import GroupingOptions
from kai.podgrouper.controller import ControllerConfig, PodGrouperController, ResourceMapper
from tests.live.scheduler_helpers import bound, cleanup, create, fresh_nodes, queue, scheduler, unique_scheduler_name

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def kube(live_cluster: LiveCluster) -> Kube:
    return prepared_kube(live_cluster)


@pytest.fixture(scope="module")
def controller(kube: Kube) -> Iterator[PodGrouperController]:
    with running_controller(kube, ControllerConfig(workers=2)) as controller:
        yield controller


def job_with_pod(namespace: str, name: str, **job_meta: Any) -> list[dict[str, Any]]:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "uid": f"job-{name}", **job_meta},
        "spec": {
            "template": {
                "spec": {
                    "schedulerName": "kai-scheduler",
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
                }
            }
        },
    }
    return [job, operator_pod(job, job["spec"]["template"], f"{name}-0", {"job-name": name})]


def test_an_update_keeps_what_a_user_set_by_hand(kube: Kube, controller: PodGrouperController, namespace: str) -> None:
    created = create_tree(kube, job_with_pod(namespace, "sweep", labels={"kai.scheduler/queue": "research"}), namespace)
    job_uid = created["Job/sweep"]["metadata"]["uid"]
    name = f"pg-sweep-{job_uid}"
    grouped_pod(kube, namespace, "sweep-0")
    path = PODGROUPS.path(namespace, name)
    assert wait_for("the PodGroup", lambda: podgroup(kube, namespace, name))["spec"]["minMember"] == 1
    kube.patch(
        path,
        {
            "metadata": {
                "labels": {"kai.scheduler/node-pool": "pool-a", "kai.scheduler/queue": "by-hand", "team": "vision"},
                "annotations": {keys.LAST_START_TIMESTAMP_ANNOTATION: "2026-01-01T00:00:00Z"},
            },
            "spec": {"queue": "by-hand", "markUnschedulable": False, "schedulingBackoff": 1, "minMember": 7},
        },
    )
    # The workload changes: a gang of 3 and a different priority class; any pod update re-handles it.
    kube.patch(
        f"/apis/batch/v1/namespaces/{namespace}/jobs/sweep",
        {
            "metadata": {
                "annotations": {keys.BATCH_MIN_MEMBER_ANNOTATION: "3"},
                "labels": {"priorityClassName": "inference"},
            }
        },
    )
    kube.patch(PODS.path(namespace, "sweep-0"), {"metadata": {"labels": {"touched": "yes"}}})

    group = wait_for(
        "minMember 3", lambda: (g := podgroup(kube, namespace, name)) and g["spec"]["minMember"] == 3 and g
    )
    assert group["spec"] == {
        "minMember": 3,
        "priorityClassName": "inference",  # the workload's
        "queue": "by-hand",
        "markUnschedulable": False,
        "schedulingBackoff": 1,  # the user's
    }
    labels = group["metadata"]["labels"]
    assert (labels["kai.scheduler/node-pool"], labels["kai.scheduler/queue"], labels["team"]) == (
        "pool-a",
        "by-hand",
        "vision",
    )
    assert labels["priorityClassName"] == "inference"
    assert group["metadata"]["annotations"][keys.LAST_START_TIMESTAMP_ANNOTATION] == "2026-01-01T00:00:00Z"


def test_nothing_is_written_when_nothing_changed(kube: Kube, controller: PodGrouperController, namespace: str) -> None:
    create_tree(kube, job_with_pod(namespace, "steady"), namespace)
    grouped = grouped_pod(kube, namespace, "steady-0")
    name = grouped["metadata"]["annotations"][keys.POD_GROUP_ANNOTATION]
    before = wait_for("the PodGroup", lambda: podgroup(kube, namespace, name))["metadata"]["resourceVersion"]
    pod_before = grouped["metadata"]["resourceVersion"]
    kube.patch(PODS.path(namespace, "steady-0"), {"metadata": {"labels": {"nudge": "1"}}})
    time.sleep(0.5)
    assert podgroup(kube, namespace, name)["metadata"]["resourceVersion"] == before  # type: ignore[index]
    after = pod(kube, namespace, "steady-0")
    assert int(after["metadata"]["resourceVersion"]) > int(pod_before)  # only our nudge
    assert after["metadata"]["annotations"][keys.POD_GROUP_ANNOTATION] == name


def test_a_workload_that_cannot_be_grouped_becomes_an_event(
    kube: Kube, controller: PodGrouperController, namespace: str
) -> None:
    mpi = workload(load_manifests("kubeflow"), "MPIJob", "horovod-broken")[0]
    broken = operator_pod(mpi, mpi["spec"]["mpiReplicaSpecs"]["Worker"]["template"], "horovod-broken-worker-0")
    create_tree(kube, [mpi, broken], namespace)

    messages = wait_for("a PodGrouperWarning", lambda: warnings_on(kube, namespace, "horovod-broken-worker-0"))
    assert len(messages) == 1
    assert f"MPIJob {namespace}/horovod-broken: spec.mpiReplicaSpecs.Launcher: is required" in messages[0]
    assert keys.POD_GROUP_ANNOTATION not in (
        pod(kube, namespace, "horovod-broken-worker-0")["metadata"].get("annotations") or {}
    )
    # The controller goes on: the next workload is grouped, and the event is not repeated on retries.
    create_tree(kube, job_with_pod(namespace, "after"), namespace)
    grouped_pod(kube, namespace, "after-0")
    time.sleep(0.3)
    assert len(warnings_on(kube, namespace, "horovod-broken-worker-0")) == 1


def test_an_owner_that_does_not_exist_becomes_an_event(
    kube: Kube, controller: PodGrouperController, namespace: str
) -> None:
    orphan = job_with_pod(namespace, "ghost")[1]
    orphan["metadata"]["ownerReferences"][0]["uid"] = str(uuid.uuid4())  # a Job that was never created
    kube.post(PODS.path(namespace), {**orphan, "metadata": {k: v for k, v in orphan["metadata"].items() if k != "uid"}})
    messages = wait_for("a PodGrouperWarning", lambda: warnings_on(kube, namespace, "ghost-0"))
    assert f"Pod {namespace}/ghost-0: Job ghost (in batch/v1) does not exist" in messages[0]


def test_a_deleted_podgroup_is_made_again(kube: Kube, controller: PodGrouperController, namespace: str) -> None:
    created = create_tree(kube, job_with_pod(namespace, "again"), namespace)
    name = f"pg-again-{created['Job/again']['metadata']['uid']}"
    wait_for("the PodGroup", lambda: podgroup(kube, namespace, name))
    kube.delete(PODGROUPS.path(namespace, name))
    wait_for("the PodGroup again", lambda: podgroup(kube, namespace, name))


def test_bare_pods_and_other_schedulers(kube: Kube, controller: PodGrouperController, namespace: str) -> None:
    base = {
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
        },
    }
    kube.post(PODS.path(namespace), {**base, "metadata": {"name": "own", "annotations": {"pod-group-name": "mine"}}})
    kube.post(
        PODS.path(namespace),
        {**base, "metadata": {"name": "theirs"}, "spec": {**base["spec"], "schedulerName": "default-scheduler"}},
    )
    bare = kube.post(PODS.path(namespace), {**base, "metadata": {"name": "bare"}})

    grouped = grouped_pod(kube, namespace, "bare")
    name = f"pg-bare-{bare['metadata']['uid']}"
    assert grouped["metadata"]["annotations"][keys.POD_GROUP_ANNOTATION] == name
    assert podgroup(kube, namespace, name)["metadata"]["ownerReferences"][0]["kind"] == "Pod"  # type: ignore[index]
    time.sleep(0.3)
    assert pod(kube, namespace, "own")["metadata"]["annotations"] == {"pod-group-name": "mine"}
    assert podgroup(kube, namespace, "mine") is None
    assert keys.POD_GROUP_ANNOTATION not in (pod(kube, namespace, "theirs")["metadata"].get("annotations") or {})
    assert [pg["metadata"]["name"] for pg in kube.get(PODGROUPS.path(namespace))["items"]] == [name]


def test_namespace_and_pod_selectors_limit_what_is_grouped(kube: Kube, namespace: str) -> None:
    name = unique_scheduler_name()
    marker = uuid.uuid4().hex[:6]
    config = ControllerConfig(
        options=GroupingOptions(scheduler_name=name),
        workers=2,
        namespace_selector=f"kai-test/podgrouper={marker}",
        pod_selector="team in (ml,vision)",
    )

    def bare(pod_name: str, team: str) -> None:
        kube.post(
            PODS.path(namespace),
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": pod_name, "labels": {"team": team}},
                "spec": {
                    "schedulerName": name,
                    "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
                },
            },
        )

    with running_controller(kube, config):
        bare("ml-0", "ml")
        bare("web-0", "web")
        time.sleep(0.5)  # the namespace is not selected yet
        assert keys.POD_GROUP_ANNOTATION not in (pod(kube, namespace, "ml-0")["metadata"].get("annotations") or {})
        kube.patch(NAMESPACES.path(None, namespace), {"metadata": {"labels": {"kai-test/podgrouper": marker}}})
        grouped_pod(kube, namespace, "ml-0")  # selected now: grouped without any change to the pod
        bare("vision-0", "vision")
        grouped_pod(kube, namespace, "vision-0")
        time.sleep(0.3)
        assert keys.POD_GROUP_ANNOTATION not in (pod(kube, namespace, "web-0")["metadata"].get("annotations") or {})


def test_a_pytorchjob_is_grouped_and_placed_as_one_gang(live_cluster: LiveCluster, kube: Kube, namespace: str) -> None:
    name = unique_scheduler_name()
    queue_name = f"q-{name}"
    create(kube, queue(queue_name))
    nodes = fresh_nodes(live_cluster, 2, gpus=4)
    template = {
        "spec": {
            "schedulerName": name,
            "containers": [
                {
                    "name": "pytorch",
                    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "2"}},
                }
            ],
        }
    }
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": "bert",
            "namespace": namespace,
            "uid": "job-bert",
            "labels": {"kai.scheduler/queue": queue_name},
        },
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template},
                "Worker": {"replicas": 3, "restartPolicy": "OnFailure", "template": template},
            }
        },
    }
    labels = {"training.kubeflow.org/job-name": "bert"}
    pods = [
        operator_pod(
            job,
            template,
            "bert-master-0",
            {**labels, "training.kubeflow.org/replica-type": "master", "training.kubeflow.org/replica-index": "0"},
        )
    ]
    pods += [
        operator_pod(
            job,
            template,
            f"bert-worker-{i}",
            {**labels, "training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": str(i)},
        )
        for i in range(3)
    ]
    config = ControllerConfig(options=GroupingOptions(scheduler_name=name), workers=2)
    try:
        with running_controller(kube, config), scheduler(kube, name):
            created = create_tree(kube, [job, *pods], namespace)
            placed = wait_for(
                "the gang to be bound", lambda: len(bound(kube, namespace)) == 4 and bound(kube, namespace), timeout=30
            )
        assert set(placed.values()) <= set(nodes)
        group = kube.get(PODGROUPS.path(namespace, f"pg-bert-{created['PyTorchJob/bert']['metadata']['uid']}"))
        assert group["spec"]["minMember"] == 4 and group["spec"]["queue"] == queue_name
        assert [(g["name"], g["minMember"]) for g in group["spec"]["subGroups"]] == [("master", 1), ("worker", 3)]
        assert {p["metadata"]["labels"][keys.SUBGROUP_LABEL] for p in kube.get(PODS.path(namespace))["items"]} == {
            "master",
            "worker",
        }
    finally:
        cleanup(kube, namespace, [queue_name])
        live_cluster.delete_nodes(nodes)


def test_the_podgrouper_service_account_may_do_what_the_controller_does(
    live_cluster: LiveCluster, kube: Kube, namespace: str
) -> None:
    """The controller under deploy/rbac's kai-podgrouper identity (impersonated): least privilege suffices,
    and an owner of a kind it may not read ends the owner walk there instead of failing."""
    from kubernetes import client as k8s
    from kubernetes import utils

    rbac = REPO / "deploy" / "rbac"
    try:
        kube.post(NAMESPACES.path(), {"metadata": {"name": "kai-scheduler"}})
    except ApiError as err:
        assert err.status == 409
    for path in (rbac / "kai-podgrouper-clusterrole.yaml", rbac / "kai-podgrouper-serviceaccount.yaml"):
        try:
            utils.create_from_yaml(
                live_cluster.api, yaml_objects=list(yaml.safe_load_all(path.read_text())), namespace="kai-scheduler"
            )
        except utils.FailToCreateError as err:
            assert all(e.status == 409 for e in err.api_exceptions), err
    configuration = copy.copy(live_cluster.api.configuration)
    api = k8s.ApiClient(configuration)
    api.set_default_header("Impersonate-User", "system:serviceaccount:kai-scheduler:kai-podgrouper")
    as_podgrouper = Kube(api)
    with pytest.raises(ApiError) as denied:
        as_podgrouper.get("/api/v1/namespaces/kai-scheduler/secrets")
    assert denied.value.status == 403

    name = unique_scheduler_name()
    widget = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "gadget", "namespace": namespace, "uid": "w-1"},
        "spec": {},
    }
    install_widget_crd(live_cluster)
    jobset = workload(load_manifests("jobset"), "JobSet", "llm-train")
    for obj in jobset:
        if obj["kind"] in ("Pod", "Job"):
            spec = obj["spec"] if obj["kind"] == "Pod" else obj["spec"]["template"]["spec"]
            spec["schedulerName"] = name
    template = {"spec": {"schedulerName": name, "containers": [{"name": "main", "image": "x"}]}}
    with running_controller(as_podgrouper, ControllerConfig(options=GroupingOptions(scheduler_name=name))):
        created = create_tree(kube, [*jobset, widget, operator_pod(widget, template, "gadget-0")], namespace)
        jobset_pod = grouped_pod(kube, namespace, "llm-train-driver-0-0-m4q8z")
        widget_pod = grouped_pod(kube, namespace, "gadget-0")
    uid = created["JobSet/llm-train"]["metadata"]["uid"]
    assert jobset_pod["metadata"]["annotations"][keys.POD_GROUP_ANNOTATION] == f"pg-llm-train-{uid}"
    # example.com is not readable: the pod itself is the top owner.
    pod_uid = widget_pod["metadata"]["uid"]
    assert widget_pod["metadata"]["annotations"][keys.POD_GROUP_ANNOTATION] == f"pg-gadget-0-{pod_uid}"


def install_widget_crd(live_cluster: LiveCluster) -> None:
    from kubernetes import client as k8s

    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }
    try:
        k8s.ApiextensionsV1Api(live_cluster.api).create_custom_resource_definition(crd, _preload_content=False)
    except k8s.ApiException as exc:
        assert exc.status == 409
    kube = Kube(live_cluster.api)
    wait_for("widgets to be served", lambda: ResourceMapper(kube).resource("example.com/v1", "Widget"))


def test_the_default_priorities_configmap_applies_per_kind(kube: Kube, namespace: str) -> None:
    name = unique_scheduler_name()
    types = '[{"typeName": "Job", "group": "batch", "priorityName": "inference", "preemptibility": "non-preemptible"}]'
    kube.post(
        f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "kai-defaults"}, "data": {"types": types}}
    )
    config = ControllerConfig(
        options=GroupingOptions(scheduler_name=name),
        default_priorities_configmap="kai-defaults",
        default_priorities_namespace=namespace,
    )
    objects = job_with_pod(namespace, "served")
    objects[1]["spec"]["schedulerName"] = name
    with running_controller(kube, config):
        created = create_tree(kube, objects, namespace)
        grouped_pod(kube, namespace, "served-0")
    group = podgroup(kube, namespace, f"pg-served-{created['Job/served']['metadata']['uid']}")
    assert group is not None
    assert (group["spec"]["priorityClassName"], group["spec"]["preemptibility"]) == ("inference", "non-preemptible")


def test_with_leader_election_one_replica_writes_and_a_standby_takes_over(kube: Kube, namespace: str) -> None:
    name = unique_scheduler_name()

    def replica(identity: str) -> PodGrouperController:
        config = ControllerConfig(
            options=GroupingOptions(scheduler_name=name),
            workers=1,
            leader_elect=True,
            lease_namespace=namespace,
            lease_name="kai-podgrouper",
            event_instance=identity,
            lease_durations=(3.0, 2.0, 0.3),
        )
        return PodGrouperController(kube, config).start(sync_timeout=20)

    def bare(pod_name: str) -> None:
        kube.post(
            PODS.path(namespace),
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": pod_name},
                "spec": {"schedulerName": name, "containers": [{"name": "main", "image": "x"}]},
            },
        )

    first = replica("first")
    wait_for("the first replica to lead", lambda: first.leader is not None and first.leader.is_leader)
    second = replica("second")
    try:
        bare("one")
        grouped_pod(kube, namespace, "one")
        assert (first.podgroups_created, second.podgroups_created, second.reconciled) == (1, 0, 0)
        first.stop()  # releases the Lease
        wait_for("the standby to lead", lambda: second.leader is not None and second.leader.is_leader)
        bare("two")
        grouped_pod(kube, namespace, "two")
        assert second.podgroups_created == 1
    finally:
        first.stop()
        second.stop()
