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


Signature = int  # what a term matches a pod by (its namespace and labels), as a small number
Holder = tuple[PodAffinityTerm, int]  # a term of a placed pod that acts on others, with its signed weight


class Counter:
    """Pods matching all of `terms`, counted per domain of `key`. The array has one extra slot at the
    end that stays 0, so that `counts[of_node]` gives 0 on nodes without the label."""

    def __init__(self, state: PodAffinityState, terms: tuple[PodAffinityTerm, ...], key: str) -> None:
        self.state = state
        self.terms = terms
        self.term_ids = tuple(state.term_id(t) for t in terms)
        self.domains = state.domains(key)
        self.counts = np.zeros(self.domains.count + 1, dtype=np.int64)
        for sig, members in state.by_signature.items():
            if members and self.matches(sig):
                doms = self.domains.of_node[np.fromiter(members.values(), dtype=np.int64, count=len(members))]
                np.add.at(self.counts, doms[doms >= 0], 1)

    def matches(self, sig: Signature) -> bool:
        match = self.state.id_matches
        return all(match(t, sig) for t in self.term_ids)

    def move(self, sig: Signature, old: int, new: int) -> None:
        if not self.matches(sig):
            return
        of_node = self.domains.of_node
        if old >= 0 and of_node[old] >= 0:
            self.counts[of_node[old]] -= 1
        if new >= 0 and of_node[new] >= 0:
            self.counts[of_node[new]] += 1

    def for_pod(self, pod: PodInfo) -> np.ndarray:
        """The counts without the pod itself (a releasing pod placed again is not its own peer)."""
        row = self.state.placed.row.get(id(pod), -1)
        if row < 0 or self.domains.of_node[row] < 0 or not self.matches(self.state.signature(pod)):
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
    """The session's pod-affinity bookkeeping: domains per key, counters per term set, placed pods
    grouped by what terms match them by (namespace and labels: most pods of a job share them), the
    terms of placed pods that act on other pods (required anti-affinity; preferred terms) with the
    rows of the pods holding them, and per-pod filter masks."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.size = len(ssn.nodes)
        self.namespaces = ssn.snapshot.namespaces
        self.placed: PlacedPods = placed_pods(ssn)
        self._domains: dict[str, Domains] = {}
        self._counters: dict[tuple[tuple[PodAffinityTerm, ...], str], Counter] = {}
        self._masks: dict[int, _Masks] = {}
        self._signatures: dict[int, Signature] = {}  # id(pod) -> signature
        self._signature_ids: dict[tuple[str, tuple[tuple[str, str], ...]], Signature] = {}
        self._signature_pods: list[PodInfo] = []  # a pod of each signature, for its namespace and labels
        self._term_ids: dict[int, int] = {}  # id(term) -> number of the (equal) term
        self._term_numbers: dict[PodAffinityTerm, int] = {}
        self._terms: list[PodAffinityTerm] = []
        self._matches: dict[int, bool] = {}  # term number << 32 | signature -> does the term match
        self.by_signature: dict[Signature, dict[int, int]] = {}  # placed pods: signature -> id(pod) -> row
        self.anti_holders: dict[PodAffinityTerm, dict[int, int]] = {}  # required anti term -> id(pod) -> row
        self.preferred_holders: dict[Holder, dict[int, int]] = {}
        # per signature, the held terms that match it (reset when a new term is held)
        self._anti_for: dict[Signature, list[tuple[PodAffinityTerm, dict[int, int]]]] = {}
        self._preferred_for: dict[Signature, list[tuple[Holder, dict[int, int]]]] = {}
        pods = [*ssn.pods, *ssn.snapshot.foreign_pods]
        with_terms = [p.pod_affinity for p in pods if p.pod_affinity is not None]
        self.any_anti = any(a.anti_required for a in with_terms)  # some pod may impose the symmetric rule
        self.any_preferred = any(a.has_preferred for a in with_terms)
        placed = self.placed
        for pid, row in placed.row.items():
            self._place(placed.pods[pid], row, 1)
        placed.watch(self._move)

    # -- lookups ----------------------------------------------------------------------------------
    def signature(self, pod: PodInfo) -> Signature:
        sig = self._signatures.get(id(pod))
        if sig is None:
            value = (pod.namespace, tuple(sorted(pod.labels.items())))
            sig = self._signature_ids.get(value)
            if sig is None:
                sig = self._signature_ids[value] = len(self._signature_pods)
                self._signature_pods.append(pod)
            self._signatures[id(pod)] = sig
        return sig

    def term_id(self, term: PodAffinityTerm) -> int:
        tid = self._term_ids.get(id(term))
        if tid is None:
            tid = self._term_numbers.get(term)
            if tid is None:
                tid = self._term_numbers[term] = len(self._terms)
                self._terms.append(term)
            self._term_ids[id(term)] = tid
        return tid

    def id_matches(self, tid: int, sig: Signature) -> bool:
        key = tid << 32 | sig
        found = self._matches.get(key)
        if found is None:
            pod = self._signature_pods[sig]
            found = self._matches[key] = self._terms[tid].matches(
                pod.namespace, pod.labels, self.namespaces.get(pod.namespace)
            )
        return found

    def term_matches(self, term: PodAffinityTerm, sig: Signature) -> bool:
        return self.id_matches(self.term_id(term), sig)

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

    # -- following placements ---------------------------------------------------------------------
    def _place(self, pod: PodInfo, row: int, sign: int) -> None:
        """Add (sign 1, at row) or remove (sign -1) a placed pod from the indexes."""
        pid = id(pod)
        members = self.by_signature.setdefault(self.signature(pod), {})
        if sign > 0:
            members[pid] = row
        else:
            members.pop(pid, None)
        terms = pod.pod_affinity
        if terms is None:
            return
        known = len(self.anti_holders), len(self.preferred_holders)
        holders: list[dict[int, int]] = [self.anti_holders.setdefault(t, {}) for t in terms.anti_required]
        holders += [self.preferred_holders.setdefault((w.term, w.weight), {}) for w in terms.preferred]
        holders += [self.preferred_holders.setdefault((w.term, -w.weight), {}) for w in terms.anti_preferred]
        if known != (len(self.anti_holders), len(self.preferred_holders)):
            self._anti_for.clear()
            self._preferred_for.clear()
        for held in holders:
            if sign > 0:
                held[pid] = row
            else:
                held.pop(pid, None)

    def _move(self, pod: PodInfo, old: int, new: int) -> None:
        if old >= 0:
            self._place(pod, old, -1)
        if new >= 0:
            self._place(pod, new, 1)
        sig = self.signature(pod)
        for counter in self._counters.values():
            counter.move(sig, old, new)

    @staticmethod
    def _rows(held: dict[int, int], pod: PodInfo) -> np.ndarray:
        """The rows of the pods holding a term, without the pod itself."""
        rows = [row for pid, row in held.items() if pid != id(pod)]
        return np.array(rows, dtype=np.int64)

    # -- filters ----------------------------------------------------------------------------------
    def _held_domains(
        self, term: PodAffinityTerm, held: dict[int, int], pod: PodInfo
    ) -> tuple[Domains, np.ndarray] | None:
        """The topology domains (of the term's key) of the nodes where pods holding `term` sit, one entry
        per holder; None when no holder sits on a node that has the key."""
        if not held:
            return None
        domains = self.domains(term.topology_key)
        doms = domains.of_node[self._rows(held, pod)]
        doms = doms[doms >= 0]
        return (domains, doms) if doms.size else None

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
        if total == 0 and all(self.term_matches(t, self.signature(pod)) for t in terms):
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
        sig = self.signature(pod)
        matching = self._anti_for.get(sig)
        if matching is None:
            matching = self._anti_for[sig] = [
                (term, held) for term, held in self.anti_holders.items() if self.term_matches(term, sig)
            ]
        blocked: np.ndarray | None = None
        for term, held in matching:
            found = self._held_domains(term, held, pod)
            if found is None:
                continue
            domains, doms = found
            forbidden = np.zeros(domains.count + 1, dtype=bool)
            forbidden[doms] = True
            hit = forbidden[domains.of_node]
            blocked = hit if blocked is None else blocked | hit
        return None if blocked is None else ~blocked

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
            sig = self.signature(pod)
            matching = self._preferred_for.get(sig)
            if matching is None:
                matching = self._preferred_for[sig] = [
                    (holder, held)
                    for holder, held in self.preferred_holders.items()
                    if self.term_matches(holder[0], sig)
                ]
            for (term, weight), held in matching:
                found = self._held_domains(term, held, pod)
                if found is None:
                    continue
                domains, doms = found
                per_domain = np.zeros(domains.count + 1)
                np.add.at(per_domain, doms, weight)
                total += per_domain[domains.of_node]
                touched = True
        return total if touched else None


def affinity_state(ssn: Session) -> PodAffinityState | None:
    """The session's state, or None when no pod of the session has pod-affinity terms."""
    state = _STATES.get(ssn)
    if state is None:
        if not ssn.any_pod("pod_affinity") and not any(
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
            return 0.0 if raw is None else raw * SCORE_WEIGHT

        ssn.hooks.node_scorers.append(score)


register_plugin("podaffinity")(lambda args: PodAffinityPlugin())
