"""Persistent volumes, as kube-scheduler's VolumeBinding decides where a pod may run (registered by the
predicates plugin; nothing is checked when the snapshot's source does not list claims):
- a claim that does not exist, or is being deleted, keeps the pod pending (no eviction helps);
- an unbound claim whose storage class binds Immediately (or that has no class) waits for the volume
  controller: the pod stays pending; a WaitForFirstConsumer claim is provisioned where the pod lands
  (KAI with its default `schedule-csi-storage: false` does not check storage capacity);
- a bound claim restricts the pod to the nodes its volume's node affinity allows.
"""

from __future__ import annotations

import numpy as np

from kai.framework.session import NamedFilter, Session
from kai.framework.status import SUCCESS, Status, unresolvable
from kai.model import IMMEDIATE, PodInfo

REASON = "VolumeBinding"


class Volumes:
    def __init__(self, ssn: Session) -> None:
        snap = ssn.snapshot
        self.claims, self.volumes, self.classes = snap.claims, snap.volumes, snap.storage_classes
        self.infos = ssn.nodes.infos
        self._masks: dict[tuple[str, tuple[str, ...]], np.ndarray | None] = {}

    def pre_predicate(self, task: PodInfo) -> Status:
        if not task.claims:
            return SUCCESS
        for name in task.claims:
            claim = self.claims.get(f"{task.namespace}/{name}")
            if claim is None:
                return unresolvable(REASON, f'persistentvolumeclaim "{name}" not found')
            if claim.deleting:
                return unresolvable(REASON, f'persistentvolumeclaim "{name}" is being deleted')
            if claim.volume:
                continue
            if claim.storage_class and claim.storage_class not in self.classes:
                return unresolvable(
                    REASON,
                    f'persistentvolumeclaim "{name}" names storageclass.storage.k8s.io "{claim.storage_class}", '
                    "which is not found",
                )
            if not claim.storage_class or self.classes[claim.storage_class].binding_mode == IMMEDIATE:
                return unresolvable(
                    REASON,
                    f'pod has unbound immediate PersistentVolumeClaims ("{name}" waits for its volume to be bound)',
                )
        return SUCCESS

    def _bound(self, task: PodInfo) -> list[str]:
        names = []
        for name in task.claims:
            claim = self.claims.get(f"{task.namespace}/{name}")
            if claim is not None and claim.volume:
                names.append(claim.volume)
        return names

    def volume_missing(self, task: PodInfo) -> np.ndarray | None:
        if not task.claims or all(v in self.volumes for v in self._bound(task)):
            return None
        return np.zeros(len(self.infos), dtype=bool)

    def node_affinity(self, task: PodInfo) -> np.ndarray | None:
        if not task.claims:
            return None
        key = (task.namespace, task.claims)
        if key not in self._masks:
            volumes = [self.volumes[v] for v in self._bound(task) if v in self.volumes]
            volumes = [v for v in volumes if v.node_affinity]
            mask = None
            if volumes:
                mask = np.fromiter(
                    (all(v.allows(n.name, n.labels) for v in volumes) for n in self.infos),
                    dtype=bool,
                    count=len(self.infos),
                )
            self._masks[key] = mask
        return self._masks[key]


def register(ssn: Session) -> None:
    if not ssn.snapshot.storage_listed:
        return
    if not ssn.any_pod("claims"):
        return
    volumes = Volumes(ssn)
    ssn.hooks.pre_predicates.append(volumes.pre_predicate)
    ssn.hooks.node_filters.append(
        NamedFilter(
            "volumebinding",
            "unavailable due to one or more pvc(s) bound to non-existent pv(s)",
            volumes.volume_missing,
        )
    )
    ssn.hooks.node_filters.append(
        NamedFilter("volumenodeaffinity", "had volume node affinity conflict", volumes.node_affinity)
    )
