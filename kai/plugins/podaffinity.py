"""Inter-pod affinity and anti-affinity, as kube-scheduler's InterPodAffinity defines them.

Required terms are filters, registered by the `predicates` plugin (KAI runs kube-scheduler's filter
there, so they hold even without `podaffinity` in the config):
- affinity: on every node, each term's topology domain must hold a pod matching *all* the pod's
  affinity terms, and the node must carry every term's topology label; except for the first pod of a
  self-affine group: when no pod anywhere matches the terms and the pod matches them itself, any node
  with the labels will do;
- anti-affinity: no pod matching a term in the node's domain of that term (a node without the label
  has no domain and passes);
- the symmetric rule: an existing pod's required anti-affinity term that matches the pod keeps it out
  of that pod's domain.
Preferred terms are the `podaffinity` plugin's score: per node, the sum of the weights of the
preferred affinity terms matched by pods in the node's domain, minus those of anti-affinity terms,
plus the same for the preferred terms of existing pods that match this pod. KAI adds this raw sum
(not normalised to 0-100, and without kube-scheduler's hardPodAffinityWeight for existing pods'
required terms) times 100,000 to a node's score.

Counts are vectorised: per term, a count of matching pods per topology domain (numpy, built once and
then kept up to date as pods are placed, moved or removed in the session), and per topology key one
array mapping node rows to domains; a filter is a few array lookups per pod. Pods with no terms cost
nothing when no pod of the session has anti-affinity.
"""

from __future__ import annotations

from dataclasses import dataclass
from weakref import WeakKeyDictionary

import numpy as np

from kai.framework.plugin import register_plugin
from kai.framework.session import NamedFilter, PlacementContext, Session
from kai.model import PodAffinityTerm, PodInfo
from kai.plugins.placedpods import PlacedPods, placed_pods

SCORE_WEIGHT = 100_000.0

_STATES: WeakKeyDictionary[Session, PodAffinityState] = WeakKeyDictionary()


class Domains:
    """The topology domains of one node label: `of_node[row]` is the node's domain (-1: no label)."""

    def __init__(self, ssn: Session, key: str) -> None:
        ids: dict[str, int] = {}
        self.of_node = np.fromiter(
            (ids.setdefault(n.labels[key], len(ids)) if key in n.labels else -1 for n in ssn.nodes.infos),
            dtype=np.int64,
            count=len(ssn.nodes),
        )
        self.count = len(ids)
        self.labelled = self.of_node >= 0


class Counter:
    """Pods matching all of `terms`, counted per domain of `key`. The array has one extra slot at the
    end that stays 0, so that `counts[of_node]` gives 0 on nodes without the label."""

    def __init__(self, state: PodAffinityState, terms: tuple[PodAffinityTerm, ...], key: str) -> None:
        self.state = state
        self.terms = terms
        self.domains = state.domains(key)
        self.counts = np.zeros(self.domains.count + 1, dtype=np.int64)
        placed = state.placed
        for pid, row in placed.row.items():
            if self.matches(placed.pods[pid]):
                dom = self.domains.of_node[row]
                if dom >= 0:
                    self.counts[dom] += 1

    def matches(self, pod: PodInfo) -> bool:
        labels = self.state.namespace_labels(pod.namespace)
        return all(t.matches(pod.namespace, pod.labels, labels) for t in self.terms)

    def move(self, pod: PodInfo, old: int, new: int) -> None:
        if not self.matches(pod):
            return
        of_node = self.domains.of_node
        if old >= 0 and of_node[old] >= 0:
            self.counts[of_node[old]] -= 1
        if new >= 0 and of_node[new] >= 0:
            self.counts[of_node[new]] += 1

    def for_pod(self, pod: PodInfo) -> np.ndarray:
        """The counts without the pod itself (a releasing pod placed again is not its own peer)."""
        row = self.state.placed.row.get(id(pod), -1)
        if row < 0 or self.domains.of_node[row] < 0 or not self.matches(pod):
            return self.counts
        counts = self.counts.copy()
        counts[self.domains.of_node[row]] -= 1
        return counts

    def per_node(self, pod: PodInfo) -> np.ndarray:
        return self.for_pod(pod)[self.domains.of_node]


@dataclass
class _Masks:
    version: int
    affinity: np.ndarray | None
    anti: np.ndarray | None
    existing: np.ndarray | None


class PodAffinityState:
    """The session's pod-affinity bookkeeping: domains per key, counters per term set, the pods whose
    own terms act on others (required anti-affinity; preferred terms), and per-pod filter masks."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.size = len(ssn.nodes)
        self.namespaces = ssn.snapshot.namespaces
        self.placed: PlacedPods = placed_pods(ssn)
        self._domains: dict[str, Domains] = {}
        self._counters: dict[tuple[tuple[PodAffinityTerm, ...], str], Counter] = {}
        self._masks: dict[int, _Masks] = {}
        pods = [p for job in ssn.jobs.values() for p in job.pods] + list(ssn.snapshot.foreign_pods)
        with_terms = [p.pod_affinity for p in pods if p.pod_affinity is not None]
        self.any_anti = any(a.anti_required for a in with_terms)  # some pod may impose the symmetric rule
        self.any_preferred = any(a.has_preferred for a in with_terms)
        placed = self.placed
        # placed pods whose own terms act on other pods (the symmetric rule, existing pods' preferences)
        self._with_terms: dict[int, PodInfo] = {pid: p for pid, p in placed.pods.items() if p.pod_affinity is not None}
        placed.watch(self._move)

    # -- lookups ----------------------------------------------------------------------------------
    def namespace_labels(self, namespace: str) -> dict[str, str] | None:
        return self.namespaces.get(namespace)

    def domains(self, key: str) -> Domains:
        found = self._domains.get(key)
        if found is None:
            found = self._domains[key] = Domains(self.ssn, key)
        return found

    def counter(self, terms: tuple[PodAffinityTerm, ...], key: str) -> Counter:
        found = self._counters.get((terms, key))
        if found is None:
            found = self._counters[(terms, key)] = Counter(self, terms, key)
        return found

    def _move(self, pod: PodInfo, old: int, new: int) -> None:
        for counter in self._counters.values():
            counter.move(pod, old, new)
        if pod.pod_affinity is not None:
            if new >= 0:
                self._with_terms[id(pod)] = pod
            else:
                self._with_terms.pop(id(pod), None)

    def _others_with_terms(self, pod: PodInfo) -> list[tuple[PodInfo, int]]:
        row = self.placed.row
        return [(other, row[pid]) for pid, other in self._with_terms.items() if other is not pod]

    # -- filters ----------------------------------------------------------------------------------
    def masks(self, pod: PodInfo) -> _Masks:
        self.placed.flush()
        cached = self._masks.get(id(pod))
        if cached is not None and cached.version == self.placed.version:
            return cached
        masks = _Masks(self.placed.version, self._affinity(pod), self._anti(pod), self._existing_anti(pod))
        self._masks[id(pod)] = masks
        return masks

    def _affinity(self, pod: PodInfo) -> np.ndarray | None:
        terms = pod.pod_affinity.required if pod.pod_affinity is not None else ()
        if not terms:
            return None
        labelled = np.ones(self.size, dtype=bool)
        present = np.ones(self.size, dtype=bool)
        total = 0
        for term in terms:
            counter = self.counter(terms, term.topology_key)
            counts = counter.for_pod(pod)
            labelled &= counter.domains.labelled
            present &= counts[counter.domains.of_node] > 0
            total += int(counts.sum())
        if total == 0:
            labels = self.namespace_labels(pod.namespace)
            if all(t.matches(pod.namespace, pod.labels, labels) for t in terms):
                return labelled  # the first pod of a group that is affine to itself
        return labelled & present

    def _anti(self, pod: PodInfo) -> np.ndarray | None:
        terms = pod.pod_affinity.anti_required if pod.pod_affinity is not None else ()
        if not terms:
            return None
        blocked = np.zeros(self.size, dtype=bool)
        for term in terms:
            blocked |= self.counter((term,), term.topology_key).per_node(pod) > 0
        return ~blocked

    def _existing_anti(self, pod: PodInfo) -> np.ndarray | None:
        if not self.any_anti:
            return None
        labels = self.namespace_labels(pod.namespace)
        forbidden: dict[str, np.ndarray] = {}
        for other, row in self._others_with_terms(pod):
            assert other.pod_affinity is not None
            for term in other.pod_affinity.anti_required:
                if not term.matches(pod.namespace, pod.labels, labels):
                    continue
                domains = self.domains(term.topology_key)
                dom = domains.of_node[row]
                if dom >= 0:
                    if term.topology_key not in forbidden:
                        forbidden[term.topology_key] = np.zeros(domains.count + 1, dtype=bool)
                    forbidden[term.topology_key][dom] = True
        if not forbidden:
            return None
        blocked = np.zeros(self.size, dtype=bool)
        for key, doms in forbidden.items():
            blocked |= doms[self.domains(key).of_node]
        return ~blocked

    # -- score ------------------------------------------------------------------------------------
    def score(self, pod: PodInfo) -> np.ndarray | None:
        """The raw preferred-term score per node row (None: no term applies)."""
        own = pod.pod_affinity if pod.pod_affinity is not None and pod.pod_affinity.has_preferred else None
        if own is None and not self.any_preferred:
            return None
        self.placed.flush()
        total = np.zeros(self.size)
        touched = False
        if own is not None:
            for sign, weighted in ((1, own.preferred), (-1, own.anti_preferred)):
                for wt in weighted:
                    counts = self.counter((wt.term,), wt.term.topology_key).per_node(pod)
                    total += sign * wt.weight * counts
                    touched = True
        if self.any_preferred:
            labels = self.namespace_labels(pod.namespace)
            per_key: dict[str, np.ndarray] = {}
            for other, row in self._others_with_terms(pod):
                assert other.pod_affinity is not None
                for sign, weighted in ((1, other.pod_affinity.preferred), (-1, other.pod_affinity.anti_preferred)):
                    for wt in weighted:
                        if not wt.term.matches(pod.namespace, pod.labels, labels):
                            continue
                        domains = self.domains(wt.term.topology_key)
                        dom = domains.of_node[row]
                        if dom < 0:
                            continue
                        if wt.term.topology_key not in per_key:
                            per_key[wt.term.topology_key] = np.zeros(domains.count + 1)
                        per_key[wt.term.topology_key][dom] += sign * wt.weight
            for key, doms in per_key.items():
                total += doms[self.domains(key).of_node]
                touched = True
        return total if touched else None


def affinity_state(ssn: Session) -> PodAffinityState | None:
    """The session's state, or None when no pod of the session has pod-affinity terms."""
    state = _STATES.get(ssn)
    if state is None:
        if not any(p.pod_affinity is not None for job in ssn.jobs.values() for p in job.pods) and not any(
            p.pod_affinity is not None for p in ssn.snapshot.foreign_pods
        ):
            return None
        state = _STATES[ssn] = PodAffinityState(ssn)
    return state


def register_filters(ssn: Session) -> None:
    """The required-term filters (called by the predicates plugin), in kube-scheduler's order."""
    state = affinity_state(ssn)
    if state is None:
        return
    ssn.hooks.node_filters.append(
        NamedFilter(
            "podaffinity",
            "didn't match pod affinity rules",
            lambda task: (
                state.masks(task).affinity if task.pod_affinity is not None and task.pod_affinity.required else None
            ),
        )
    )
    ssn.hooks.node_filters.append(
        NamedFilter(
            "podantiaffinity",
            "didn't match pod anti-affinity rules",
            lambda task: (
                state.masks(task).anti if task.pod_affinity is not None and task.pod_affinity.anti_required else None
            ),
        )
    )
    if state.any_anti:
        ssn.hooks.node_filters.append(
            NamedFilter(
                "existingpodsantiaffinity",
                "didn't satisfy existing pods anti-affinity rules",
                lambda task: state.masks(task).existing,
            )
        )


@dataclass
class PodAffinityPlugin:
    """podaffinity: the preferred-term score."""

    name: str = "podaffinity"

    def on_session_open(self, ssn: Session) -> None:
        state = affinity_state(ssn)
        if state is None or not state.any_preferred:
            return

        def score(ctx: PlacementContext) -> np.ndarray | float:
            raw = state.score(ctx.task)
            return 0.0 if raw is None else raw[ctx.candidates] * SCORE_WEIGHT

        ssn.hooks.node_scorers.append(score)


register_plugin("podaffinity")(lambda args: PodAffinityPlugin())
