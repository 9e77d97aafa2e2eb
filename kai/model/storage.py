"""Volumes as the scheduler sees them: claims, the volumes they are bound to, storage classes.

Only what decides where a pod may run: a claim exists (or the pod waits), a bound volume's node
affinity, and an unbound claim's binding mode (Immediate: the volume controller binds it first;
WaitForFirstConsumer: it is provisioned where the pod lands).
"""

from __future__ import annotations

from dataclasses import dataclass

from kai.model.pod import NodeSelectorTerm

IMMEDIATE = "Immediate"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


@dataclass(frozen=True, slots=True)
class ClaimInfo:
    """A PersistentVolumeClaim: `volume` is spec.volumeName (empty: not bound yet)."""

    namespace: str
    name: str
    volume: str = ""
    storage_class: str = ""
    deleting: bool = False


@dataclass(frozen=True, slots=True)
class VolumeInfo:
    """A PersistentVolume: its required node affinity (an OR of terms; empty: any node)."""

    name: str
    node_affinity: tuple[NodeSelectorTerm, ...] = ()

    def allows(self, node: str, labels: dict[str, str]) -> bool:
        return not self.node_affinity or any(t.matches(node, labels) for t in self.node_affinity)


@dataclass(frozen=True, slots=True)
class StorageClassInfo:
    name: str
    binding_mode: str = IMMEDIATE
    default: bool = False  # annotation storageclass.kubernetes.io/is-default-class
