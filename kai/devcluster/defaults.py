"""What KAI's Helm chart installs for its users, created on the dev cluster so that KAI's examples run.

* KAI's four PriorityClasses, ``train`` 50, ``build-preemptible`` 75, ``build`` 100 and
  ``inference`` 125 (none globalDefault): the podgrouper's defaults name them, and a class that
  does not exist leaves a workload at priority 50;
* the default queues ``default-parent-queue`` and its child ``default-queue`` (quota 0, weight 1,
  no limit, per resource), which KAI's quick-start pods name;
* the RuntimeClass ``nvidia`` (handler ``nvidia``): kai's admission sets ``runtimeClassName:
  nvidia`` on GPU pods, as KAI's does, and the API server refuses a pod that names a missing
  RuntimeClass. On a real cluster the GPU operator creates it.

Creating what exists already is not an error (the object is left as it is).
"""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kai.api import keys

GPU_RUNTIME_CLASS = "nvidia"


def priority_classes() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            "globalDefault": False,
            "preemptionPolicy": "PreemptLowerPriority",
            "description": f"KAI Scheduler priority class {name} ({value}; below 100 means preemptible)",
        }
        for name, value in keys.DEFAULT_PRIORITY_CLASSES.items()
    ]


def default_queues() -> list[dict[str, Any]]:
    resources = {res: {"quota": 0, "overQuotaWeight": 1, "limit": -1} for res in ("cpu", "gpu", "memory")}
    parent = {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": keys.DEFAULT_PARENT_QUEUE},
        "spec": {"resources": resources},
    }
    child = {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": keys.DEFAULT_QUEUE},
        "spec": {"parentQueue": keys.DEFAULT_PARENT_QUEUE, "resources": resources},
    }
    return [parent, child]


def runtime_class() -> dict[str, Any]:
    return {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": GPU_RUNTIME_CLASS},
        "handler": GPU_RUNTIME_CLASS,
    }


def _created(create: Any, body: dict[str, Any]) -> bool:
    try:
        create(body, _preload_content=False)
    except ApiException as exc:
        if exc.status == 409:
            return False
        raise
    return True


def install_kai_defaults(api: k8s.ApiClient) -> list[str]:
    """Create the PriorityClasses, default queues and RuntimeClass; return ``kind/name`` of each one."""
    scheduling = k8s.SchedulingV1Api(api)
    custom = k8s.CustomObjectsApi(api)
    node = k8s.NodeV1Api(api)
    names = []
    for pc in priority_classes():
        _created(scheduling.create_priority_class, pc)
        names.append(f"PriorityClass/{pc['metadata']['name']}")

    def create_queue(body: dict[str, Any], **kw: Any) -> Any:
        return custom.create_cluster_custom_object("scheduling.run.ai", "v2", "queues", body, **kw)

    for queue in default_queues():
        _created(create_queue, queue)
        names.append(f"Queue/{queue['metadata']['name']}")
    rc = runtime_class()
    _created(node.create_runtime_class, rc)
    names.append(f"RuntimeClass/{rc['metadata']['name']}")
    return names
