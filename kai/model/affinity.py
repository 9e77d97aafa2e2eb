"""Inter-pod affinity and host ports as kube-scheduler reads them from a pod spec.

A term names pods by a label selector, in a set of namespaces, and a topology key: the node label
whose values split nodes into domains (hostname: one node each, zone: a few). Matching a pod
against a term is pure; counting matching pods per domain is the session's (kai.plugins.podaffinity).
"""

from __future__ import annotations

from dataclasses import dataclass

from kai.model.pod import SelectorRequirement


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """`matchLabels` + `matchExpressions` (In, NotIn, Exists, DoesNotExist). `nothing`: a null selector,
    which matches no pod (an empty selector matches every pod)."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[SelectorRequirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: dict[str, str]) -> bool:
        if self.nothing:
            return False
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            r.matches(labels) for r in self.match_expressions
        )

    @property
    def empty(self) -> bool:
        return not self.nothing and not self.match_labels and not self.match_expressions


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """One term, with its namespaces already resolved against the pod that carries it: `namespaces`
    (the pod's own namespace when neither namespaces nor a namespace selector is given) or any
    namespace whose labels `namespace_selector` matches (None: no selector)."""

    selector: LabelSelector
    topology_key: str
    namespaces: frozenset[str] = frozenset()
    namespace_selector: LabelSelector | None = None

    def matches(self, namespace: str, labels: dict[str, str], namespace_labels: dict[str, str] | None) -> bool:
        """Does a pod in `namespace` with these labels match the term? `namespace_labels`: the labels of
        that namespace (None when the namespace is not known: only an empty selector matches it)."""
        if namespace not in self.namespaces:
            sel = self.namespace_selector
            if sel is None:
                return False
            if not sel.empty and (namespace_labels is None or not sel.matches(namespace_labels)):
                return False
        return self.selector.matches(labels)


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class InterPodAffinity:
    """A pod's `podAffinity` and `podAntiAffinity`, required and preferred."""

    required: tuple[PodAffinityTerm, ...] = ()
    anti_required: tuple[PodAffinityTerm, ...] = ()
    preferred: tuple[WeightedTerm, ...] = ()
    anti_preferred: tuple[WeightedTerm, ...] = ()

    @property
    def has_preferred(self) -> bool:
        return bool(self.preferred or self.anti_preferred)


@dataclass(frozen=True, slots=True)
class HostPort:
    """A container port bound on the node: (protocol, host IP, port). Host IP "0.0.0.0" is every address."""

    protocol: str
    host_ip: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return self.host_ip == other.host_ip or WILDCARD_IP in (self.host_ip, other.host_ip)


WILDCARD_IP = "0.0.0.0"
