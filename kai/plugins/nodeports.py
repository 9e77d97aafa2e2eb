"""Host ports, as kube-scheduler's NodePorts filter defines them: a pod that binds a host port may not
go to a node where a pod already binds the same port and protocol on the same host IP (0.0.0.0, the
default, overlaps every IP). Pods placed, moved or evicted earlier in the session are followed (an
evicted pod keeps its ports until it is gone, as KAI counts it). Registered by the predicates plugin.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from kai.framework.session import NamedFilter, Session
from kai.model import HostPort, PodInfo
from kai.plugins.placedpods import placed_pods

REASON = "didn't have free ports for the requested pod ports"


class UsedPorts:
    """Per node row, the host ports of the pods placed there."""

    def __init__(self, ssn: Session) -> None:
        self.size = len(ssn.nodes)
        self.placed = placed_pods(ssn)
        self.by_row: dict[int, dict[int, tuple[HostPort, ...]]] = defaultdict(dict)  # row -> id(pod) -> ports
        for pid, row in self.placed.row.items():
            pod = self.placed.pods[pid]
            if pod.host_ports:
                self.by_row[row][pid] = pod.host_ports
        self.placed.watch(self._move)

    def _move(self, pod: PodInfo, old: int, new: int) -> None:
        if not pod.host_ports:
            return
        if old >= 0:
            self.by_row[old].pop(id(pod), None)
        if new >= 0:
            self.by_row[new][id(pod)] = pod.host_ports

    def free(self, pod: PodInfo) -> np.ndarray | None:
        if not pod.host_ports:
            return None
        self.placed.flush()
        mask = np.ones(self.size, dtype=bool)
        for row, users in self.by_row.items():
            if any(
                mine.conflicts(theirs)
                for pid, ports in users.items()
                if pid != id(pod)
                for theirs in ports
                for mine in pod.host_ports
            ):
                mask[row] = False
        return None if mask.all() else mask


def register_filter(ssn: Session) -> None:
    if not ssn.any_pod("host_ports"):
        return  # no pod to place binds a host port
    used = UsedPorts(ssn)
    ssn.hooks.node_filters.append(NamedFilter("nodeports", REASON, used.free))
