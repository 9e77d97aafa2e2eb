"""predicates: which nodes may host a pod at all — node selector, required node affinity, taints and
tolerations, host ports (kai.plugins.nodeports), required pod affinity and anti-affinity
(kai.plugins.podaffinity), volumes (kai.plugins.volumes) — plus the pre-check that the pod fits on the
largest node of the cluster.

Free resources, pod slots and node usability are checked by the placement core;
this plugin owns the label- and taint-based rules. Masks are cached per
placement signature, since most pods of a cluster share a handful of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import numpy as np

from kai.framework.causes import Cause
from kai.framework.plugin import register_plugin
from kai.framework.session import NamedFilter, Session
from kai.framework.status import SUCCESS, Code, Status, unresolvable
from kai.model import CPU, GPU, MEMORY, NodeInfo, PodInfo
from kai.plugins import nodeports, podaffinity, volumes

HARD_EFFECTS = ("NoSchedule", "NoExecute")


def matches_selector(task: PodInfo, node: NodeInfo) -> bool:
    return all(node.labels.get(k) == v for k, v in task.node_selector)


def matches_affinity(task: PodInfo, node: NodeInfo) -> bool:
    return not task.required_affinity or any(t.matches(node.name, node.labels) for t in task.required_affinity)


def tolerates(task: PodInfo, node: NodeInfo) -> bool:
    return all(
        any(t.tolerates(taint) for t in task.tolerations) for taint in node.taints if taint.effect in HARD_EFFECTS
    )


_TAINTS = attrgetter("taints")


def _describe(name: str, amount: float) -> str:
    if name == CPU:
        return f"{amount / 1000:g} CPU cores"
    if name == MEMORY:
        return f"{amount / 1e9:.3g} GB of memory"
    if name == GPU:
        return f"{amount:g} GPUs"
    return f"{amount:g} {name}"


@dataclass
class PredicatesPlugin:
    name: str = "predicates"
    cache: dict[tuple[str, Any], np.ndarray | None] = field(default_factory=dict)

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.max_node = ssn.nodes.allocatable.max(axis=0) if len(ssn.nodes) else None
        self._fits_largest: dict[int, bool] = {}
        hooks = ssn.hooks
        hooks.pre_predicates.append(self.fits_largest_node)
        hooks.node_filters.append(
            NamedFilter(
                "nodeselector",
                "didn't match the pod's node selector",
                self._filter("selector", matches_selector, lambda t: t.node_selector),
                static=True,
            )
        )
        hooks.node_filters.append(
            NamedFilter(
                "nodeaffinity",
                "didn't match the pod's required node affinity",
                self._filter("affinity", matches_affinity, lambda t: t.required_affinity),
                static=True,
            )
        )
        hooks.node_filters.append(
            NamedFilter(
                "tainttoleration",
                "had taints that the pod didn't tolerate",
                self._filter("taints", tolerates, lambda t: t.tolerations, always=True),
                static=True,
            )
        )
        # kube-scheduler's filters that depend on other pods and on volumes, in its order.
        nodeports.register_filter(ssn)
        podaffinity.register_filters(ssn)
        volumes.register(ssn)

    def _filter(self, kind: str, predicate: Any, signature: Any, always: bool = False) -> Any:
        infos = self.ssn.nodes.infos
        any_taints = any(map(_TAINTS, infos))

        def run(task: PodInfo) -> np.ndarray | None:
            sig = signature(task)
            if not sig and not (always and any_taints):
                return None
            key = (kind, sig)
            if key not in self.cache:
                mask = np.fromiter((predicate(task, n) for n in infos), dtype=bool, count=len(infos))
                self.cache[key] = None if mask.all() else mask
            return self.cache[key]

        return run

    def fits_largest_node(self, task: PodInfo) -> Status:
        if self.max_node is None:
            return unresolvable("NoNodes", "the cluster has no nodes")
        vec = self.ssn.vector(task)
        fits = self._fits_largest.get(id(vec))
        if fits is None:  # the session's vectors live as long as the session: their ids stay theirs
            fits = self._fits_largest[id(vec)] = not bool((vec > self.max_node + 1e-9).any())
        if fits:
            return SUCCESS
        over = np.flatnonzero(vec > self.max_node + 1e-9)
        name = self.ssn.space.names[int(over[0])]
        top = float(self.max_node[over[0]])
        if top <= 0:
            return unresolvable(
                "MaxNodeResources", f"pod {task.key} requests {_describe(name, vec[over[0]])}, and no node has {name}"
            )
        message = (
            f"pod {task.key} requests {_describe(name, vec[over[0]])}, "
            f"more than any single node has (the largest has {_describe(name, top)})"
        )
        cause = Cause(
            "LargerThanCluster",
            message[0].upper() + message[1:] + ".",
            f"PodGroup {task.job_key}",
            f"ask for at most {_describe(name, top)} per pod, or add a larger node",
            {"resource": name, "requested": float(vec[over[0]]), "largestNode": top},
        )
        return Status(Code.UNRESOLVABLE, "MaxNodeResources", message, cause)


register_plugin("predicates")(lambda args: PredicatesPlugin())
