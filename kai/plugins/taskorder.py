"""Task order within a job: launcher/master and Ray head pods first, then `kai.scheduler/task-priority`."""

from __future__ import annotations

from dataclasses import dataclass

from kai.api.keys import TASK_PRIORITY_LABEL
from kai.framework.plugin import register_plugin
from kai.framework.session import Session
from kai.model import PodInfo

KUBEFLOW_ROLE_LABEL = "training.kubeflow.org/job-role"
RAY_NODE_TYPE_LABEL = "ray.io/node-type"


def kubeflow_key(task: PodInfo) -> int:
    return 0 if task.labels.get(KUBEFLOW_ROLE_LABEL) in ("master", "launcher") else 1


def ray_key(task: PodInfo) -> int:
    return 0 if task.labels.get(RAY_NODE_TYPE_LABEL) == "head" else 1


def task_priority_key(task: PodInfo) -> tuple[int, int]:
    """Labelled pods first, higher priority first; a label that is not a number still ranks a pod before
    the unlabelled ones, but after every pod whose label is a number (as KAI's comparator does)."""
    if task.task_priority is not None:
        return (0, -task.task_priority)
    return (1, 0) if TASK_PRIORITY_LABEL in task.labels else (2, 0)


@dataclass
class TaskOrderPlugin:
    name: str
    key: object

    def on_session_open(self, ssn: Session) -> None:
        ssn.hooks.task_order.append(self.key)  # type: ignore[arg-type]


register_plugin("kubeflow")(lambda args: TaskOrderPlugin("kubeflow", kubeflow_key))
register_plugin("ray")(lambda args: TaskOrderPlugin("ray", ray_key))
register_plugin("taskorder")(lambda args: TaskOrderPlugin("taskorder", task_priority_key))
