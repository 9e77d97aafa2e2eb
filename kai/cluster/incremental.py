"""The live scheduler's snapshot, patched from the last one where only pods, pod groups and nodes changed.

A cycle's snapshot is what ``kai.snapshot.builder.build_snapshot`` makes of the cache's view. Built
from scratch it costs a pass over every object of the cluster (with the builder's
:class:`~kai.snapshot.builder.ConversionMemo`, each object is converted once per change, but every pod
is still attached to a fresh pod group each build). Most cycles of a busy cluster see a few pods change
(bound, started, finished), a few PodGroups (their status) and a few Nodes (their heartbeats), so
:class:`IncrementalSnapshot` builds only the *affected* pod groups — those whose PodGroup changed
(other than in its status, which the builder does not read), or that a changed pod leaves or joins —
with the builder itself, from every object that is neither a Pod nor a PodGroup plus those groups and
all their pods (in the cache's order), and keeps every other pod group of the last snapshot as it is
(the session puts back every pod it changes, so a snapshot's pod groups come out of a cycle as they
went in; the loop already reuses a whole snapshot when nothing changed). What the builder makes of the
rest (queues, classes, storage) comes from that small build, converted objects being shared through the
memo. The last snapshot's node list is kept but for the Nodes that are other objects now, which the
small build converts again (with the nodes its pods name, and no other); a node that reads as before
(a heartbeat) keeps its NodeInfo, and a list whose nodes all do is kept itself.

The patched snapshot equals a build from scratch of the same objects; where that is not certain, the
snapshot is built from scratch instead: the first view, a view that is not the successor of the last
one built, a change of PriorityClasses, Topologies, DRA or storage objects, or of Queues that the
builder reads differently (a Queue's status is not read), a node added or
removed, a partition that leaves objects out, any problem, warning or feature kai has not built (in the
last build or the small one), a pod of another scheduler among the changed ones, DRA objects at all,
and every ``FULL_EVERY`` builds (which also lets the memo forget replaced objects).
``tests/cluster/test_incremental_snapshot.py`` checks the equality after series of watch events.

A patch also tells whether the snapshot reads the same as the last one (``unchanged``): the nodes
and queues read the same (a heartbeat changes nothing the builder reads), and every affected pod
group was built again equal to the one it replaces in everything but its pods' objects as read
(``PodInfo.raw``, which the core never reads). That is what a busy cluster's cycles mostly see while
the binder works: a pod the last snapshot had Binding (its BindRequest's node) is now bound to that
node, its BindRequest succeeded, our own status writes came back. The scheduler then tells the cycle
runner that nothing changed (``kai.cycle.CycleRunner``: the last cycle's decisions stand when they
changed nothing and the time changes nothing).
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any

from kai.api import keys
from kai.cluster.cache import CacheView
from kai.cluster.kube import BIND_REQUESTS, DRA_KINDS, NODES, PODGROUPS, PODS, QUEUES
from kai.cluster.reflector import Store
from kai.model import ClusterSnapshot, NodeInfo, PodGroupInfo, PodInfo, SubGroupInfo
from kai.snapshot.builder import BuildResult, ConversionMemo, build_snapshot

FULL_EVERY = 60  # builds: at least one from scratch in so many
FOREIGN = "\0foreign"  # the "group" of a pod of another scheduler
# Kinds a patch may follow (a Queue's change only while the queues convert to the same: checked below;
# our own status writes change Queues every cycle the allocation does).
PATCHED_KINDS = {NODES.kind, PODS.kind, PODGROUPS.kind, BIND_REQUESTS.kind, QUEUES.kind}
DRA_KIND_NAMES = {r.kind for r in DRA_KINDS}


class PartialMemo(ConversionMemo):
    """A ConversionMemo that, after a partial build (``partial`` set), keeps what that build did not
    see: the objects of the pod groups kept from the last snapshot are converted already."""

    partial = False

    def finish(self) -> None:
        if self.partial:
            self._kept.update(self._seen)
            self._seen = {}
        else:
            super().finish()


class IncrementalSnapshot:
    """Builds a cycle's snapshot from the cache's view: patched from the last build, or from scratch."""

    def __init__(self, memo: PartialMemo, stores: dict[str, Store]) -> None:
        self.memo = memo
        self.stores = stores  # the cache's, by kind (in the order of a view's signature)
        self.kinds = list(stores)
        self.last: tuple[CacheView, BuildResult] | None = None
        self.home: dict[str, str] = {}  # pod key -> its pod group's key in the last snapshot (or FOREIGN)
        self.members: dict[str, set[str]] = {}  # pod group key -> keys of its pods in the last snapshot
        self.since_full = 0
        self.patched = 0  # builds patched, and from scratch (for tests and the bench)
        self.full = 0
        self.reasons: dict[str, int] = {}  # why a build was from scratch: how often
        self.unchanged = False  # the last build reads as the one before it (see the module's docstring)
        self._node_index: tuple[list[NodeInfo] | None, dict[str, int]] = (None, {})  # a node list, name -> place

    def build(self, view: CacheView, objects: list[dict[str, Any]], now: float, **options: Any) -> BuildResult:
        """The snapshot of `objects` (the view's, after a partition's selection) at `now`; `options`
        are build_snapshot's keywords (the memo aside)."""
        self.unchanged = False
        result = self._patch(view, objects, now, options) if self._patchable(view, objects) else None
        if result is None:
            result = self._full(objects, now, options)
        self.last = (view, result)
        return result

    # -- from scratch -----------------------------------------------------------------------------
    def _full(self, objects: list[dict[str, Any]], now: float, options: dict[str, Any]) -> BuildResult:
        self.memo.partial = False
        result = build_snapshot(objects, now, memo=self.memo, **options)
        self.full += 1
        self.since_full = 0
        home: dict[str, str] = {}
        members: dict[str, set[str]] = {}
        for key, pg in result.snapshot.podgroups.items():
            keys_ = {p.key for p in pg.pods}
            members[key] = keys_
            home.update(dict.fromkeys(keys_, key))
        home.update(dict.fromkeys((p.key for p in result.snapshot.foreign_pods), FOREIGN))
        self.home, self.members = home, members
        return result

    # -- patched ----------------------------------------------------------------------------------
    def _patchable(self, view: CacheView, objects: list[dict[str, Any]]) -> bool:
        last = self.last
        if last is None or self.since_full + 1 >= FULL_EVERY or objects is not view.objects:
            return self._scratch("first build, due, or a partition")
        before, built = last
        if view.serial != before.serial + 1 or view.changed_pods is None:
            return self._scratch("not the next view")
        snapshot = built.snapshot
        if built.problems or snapshot.warnings or snapshot.unsupported or snapshot.devices:
            return self._scratch("problems or warnings")
        if snapshot.resource_claims or snapshot.device_classes:
            return self._scratch("DRA")
        # Every other kind unchanged from the start of the last view's reading to the end of this one's.
        counts = zip(
            self.kinds, before.signature[0], before.versions_after, view.signature[0], view.versions_after, strict=True
        )
        for kind, *versions in counts:
            if kind not in PATCHED_KINDS and len(set(versions)) > 1:
                return self._scratch(f"{kind} changed")
        if any(len(self.stores[kind]) for kind in DRA_KIND_NAMES if kind in self.stores):
            return self._scratch("DRA")
        return view.nodes.keys() == before.nodes.keys() or self._scratch("nodes came or went")

    def _scratch(self, why: str) -> bool:
        self.reasons[why] = self.reasons.get(why, 0) + 1
        return False

    def _patch(
        self, view: CacheView, objects: list[dict[str, Any]], now: float, options: dict[str, Any]
    ) -> BuildResult | None:
        before, built = self.last  # type: ignore[misc]
        last = built.snapshot
        changed = view.changed_pods or set()
        home = self.home
        old_groups = before.podgroups
        affected = {
            k for k, pg in view.podgroups.items() if (old := old_groups.get(k)) is not pg and not _status_only(old, pg)
        }
        affected.update(k for k in old_groups if k not in view.podgroups)
        for key in changed:
            old = home.get(key)
            if old == FOREIGN:
                return self._none("a pod of another scheduler changed")
            if old is not None:
                affected.add(old)
            raw = view.pods.get(key)
            if raw is not None:
                meta = raw.get("metadata") or {}
                group = (meta.get("annotations") or {}).get(keys.POD_GROUP_ANNOTATION)
                if group:
                    affected.add(f"{meta.get('namespace')}/{group}")
        if not affected and any(k in view.pods for k in changed):
            return self._none("a pod of no group changed")
        # (With no group affected, the small build is of the nodes, queues and the rest alone: they may
        # have changed.)
        # The affected groups' pods (those that stay and those that come), in the cache's order.
        wanted = set(changed)
        for group in affected:
            wanted.update(self.members.get(group, ()))
        wanted.intersection_update(view.pods)
        picked = [view.podgroups[k] for k in affected if k in view.podgroups]
        if wanted:
            order = view.pod_order or {k: i for i, k in enumerate(view.pods)}
            picked.extend(view.copies.get(k) or view.pods[k] for k in sorted(wanted, key=order.__getitem__))
        # The nodes are the last snapshot's but for the Nodes that are other objects now (the same names:
        # see _patchable), converted again. The small build sees those and the nodes its pods name (the
        # builder reads the others for nothing but the snapshot's node list).
        nodes, were = view.nodes, before.nodes
        renewed = [name for name, obj in nodes.items() if were.get(name) is not obj]
        names = {(p.get("spec") or {}).get("nodeName") for p in picked if p.get("kind") == PODS.kind}
        names.update(renewed)
        fixed = [nodes[n] for n in sorted(n for n in names if n in nodes)]
        fixed.extend(view.fixed[len(nodes) :])
        self.memo.partial = True
        try:
            small = build_snapshot([*fixed, *picked], now, memo=self.memo, **options)
        finally:
            self.memo.partial = False
        part = small.snapshot
        patched_nodes = self._patched_nodes(last.nodes, part.nodes, renewed)
        if patched_nodes is None:
            return self._none("a changed node left out")
        part.nodes = patched_nodes
        if small.problems or part.warnings or part.unsupported or part.foreign_pods:
            return self._none("problems, warnings or foreign pods in the changes")
        if part.queues != last.queues:  # e.g. KAI's default queues, added for a group in them
            return self._none("queues differ")
        groups = {k: pg for k, pg in last.podgroups.items() if k not in affected}
        for key, pg in part.podgroups.items():
            if key in groups:  # a group the small build made that is not an affected one
                return self._none("an unexpected group")
            groups[key] = pg
        snapshot = _replace(part, now)
        snapshot.podgroups = {k: groups[k] for k in sorted(groups)}
        snapshot.foreign_pods = last.foreign_pods
        # Where each pod lives now: the affected groups' pods moved, the changed pods that are gone left.
        for group in affected:
            for key in self.members.pop(group, ()):
                if home.get(key) == group:
                    del home[key]
        for key, pg in part.podgroups.items():
            keys_ = {p.key for p in pg.pods}
            self.members[key] = keys_
            home.update(dict.fromkeys(keys_, key))
        attached = wanted & home.keys()
        if len(attached) != len(wanted):  # a pod the small build left out without a word: not expected
            return self._none("a pod left out")
        for key in changed:
            if key not in view.pods:
                home.pop(key, None)
        self.patched += 1
        self.since_full += 1
        old_groups_built = last.podgroups
        self.unchanged = part.nodes is last.nodes and all(
            _same_job(part.podgroups.get(k), old_groups_built.get(k)) for k in affected
        )
        return BuildResult(snapshot, [])

    def _patched_nodes(self, kept: list[NodeInfo], built: list[NodeInfo], renewed: list[str]) -> list[NodeInfo] | None:
        """The last snapshot's node list with the `renewed` nodes as `built` now: the very list while each
        reads as before (a heartbeat changes nothing the builder reads), so that what is kept per node
        list (the scheduler's capacity) stays; None when one of them was not built."""
        if not renewed:
            return kept
        if self._node_index[0] is not kept:
            self._node_index = (kept, {n.name: i for i, n in enumerate(kept)})
        at_of = self._node_index[1]
        fresh = {n.name: n for n in built}
        out: list[NodeInfo] | None = None
        for name in renewed:
            node, at = fresh.get(name), at_of.get(name)
            if node is None or at is None:
                return None
            if node != kept[at]:
                if out is None:
                    out = list(kept)
                out[at] = node
        return kept if out is None else out

    def _none(self, why: str) -> None:
        self._scratch(why)
        return None


def _status_only(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Whether a PodGroup changed in its status alone (and resourceVersion): the builder reads neither, so
    the group built from the old object stands (the status updater's own writes come back so)."""
    if old is None:
        return False
    meta, was = new.get("metadata") or {}, old.get("metadata") or {}
    return _same_but(old, new, ("status", "metadata")) and _same_but(was, meta, ("resourceVersion",))


def _same_but(old: dict[str, Any], new: dict[str, Any], ignored: tuple[str, ...]) -> bool:
    """The same keys, with equal values, but the `ignored` ones."""
    if old.keys() - ignored != new.keys() - ignored:
        return False
    return all(old[k] == v for k, v in new.items() if k not in ignored)


def _compared(cls: type, *left_out: str) -> operator.attrgetter[Any]:
    """The fields of a model class that its equality compares, but `left_out`, as one getter."""
    names = [f.name for f in dataclasses.fields(cls) if f.compare and f.name not in left_out]
    return operator.attrgetter(*names)


_POD_READ = _compared(PodInfo, "raw")
_SUBGROUP_READ = _compared(SubGroupInfo, "pods")
_GROUP_READ = _compared(PodGroupInfo, "subgroups")


def _same_job(new: PodGroupInfo | None, old: PodGroupInfo | None) -> bool:
    """Whether two builds of a pod group are equal in everything but their pods' objects as read."""
    if new is None or old is None:
        return new is old
    if _GROUP_READ(new) != _GROUP_READ(old) or list(new.subgroups) != list(old.subgroups):
        return False
    for name, sub in new.subgroups.items():
        was = old.subgroups[name]
        if _SUBGROUP_READ(sub) != _SUBGROUP_READ(was) or len(sub.pods) != len(was.pods):
            return False
        if any(_POD_READ(a) != _POD_READ(b) for a, b in zip(sub.pods, was.pods, strict=True)):
            return False
    return True


def _replace(snapshot: ClusterSnapshot, now: float) -> ClusterSnapshot:
    """A shallow copy at `now` (every other field shared)."""
    return dataclasses.replace(snapshot, now=now)
