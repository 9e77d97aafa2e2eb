"""The one error a grouping rule raises: it names the object and the field at fault.

The podgrouper controller turns it into a `PodGrouperWarning` event on the pod
(see `kai.api.keys.PODGROUPER_WARNING_REASON`); the message is written for the
user who owns the workload.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class GroupingError(Exception):
    """A workload whose PodGroup cannot be computed, e.g. a TFJob with 0 replicas.

    `kind`, `namespace` and `name` identify the object at fault (the owner, or
    the pod itself), `field` is the path inside it (`spec.tfReplicaSpecs.Worker.replicas`,
    `metadata.labels[ray.io/group]`), and `problem` says what is wrong.
    """

    def __init__(self, obj: Mapping[str, Any], field: str, problem: str) -> None:
        metadata = obj.get("metadata") or {}
        self.kind: str = str(obj.get("kind") or "object")
        self.namespace: str = str(metadata.get("namespace") or "")
        self.name: str = str(metadata.get("name") or "")
        self.field = field
        self.problem = problem
        super().__init__(str(self))

    @property
    def object_ref(self) -> str:
        """`Kind namespace/name` (or `Kind name` for a cluster-scoped object)."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"

    def __str__(self) -> str:
        if self.field:
            return f"{self.object_ref}: {self.field}: {self.problem}"
        return f"{self.object_ref}: {self.problem}"
