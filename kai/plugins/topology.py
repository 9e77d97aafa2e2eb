"""topology: topology-aware scheduling (KAI's TAS plugin).

A Topology object lists node labels from the highest level (block, zone) to the lowest (rack, host).
Each session turns every topology a job refers to into per-level domain index arrays over the nodes
(domain IDs are the dot-joined label values from the top level down; a node lacking any level label
is outside the topology). The plugin answers the framework's SubsetNodes question for every job and
sub-group set that carries a constraint:

1. Candidate nodes: those of the parent's chosen set that belong to the topology, are usable and pass
   the predicates of at least one of the set's tasks. With a required level and pods of the set
   already active, only the required-level domains holding those pods stay.
2. Free room per domain is idle + releasing, summed per domain with `np.bincount` on the level's index
   array. Identical tasks are counted as whole pods per node (copies of the task that fit each node);
   different tasks compare the domain's free sum with the batch's total request.
3. Relevant levels, lowest first: from the preferred level up through the required level; only a
   required level: just that level; only a preferred level: up to the root. Every domain of those
   levels with room for the whole batch is a candidate, tried in the domain order: the tree sorted
   from the top, the children of each domain fullest first (largest max-over-resources of request /
   free, the free room of all the domain's nodes, usable by the pods or not: bin-packing of domains),
   ties by domain ID; so a rack of the fullest block comes before a fuller rack of a roomier block. A
   domain holding exactly the nodes of a lower candidate is not repeated.
4. A candidate above the preferred level carries node scores: every preferred-level domain inside the
   lowest domain holding the parent's set (the whole topology for a job) ranked in the domain order,
   node score floor(10 * (i + 1) / N) * 10,000 for N such domains, so that the roomiest preferred
   domain is filled first and the gang spans as few of them as possible. Sub-groups without their own
   ranking inherit the parent's.
5. No candidate: a failed status naming the topology, the level and the roomiest domain.

Steps 2-4 depend only on the candidate nodes, the free room of the topology's nodes in the batch's
resources, the lowest domain of the parent's set and the batch, so the session keeps their answers under
those: the victim trials of the evicting actions ask the same question again whenever a trial frees none
of the batch's resources in the topology.

For the evicting actions the plugin also answers the PlacementPossible question (a pre-check before a
victim trial is simulated): steps 2-3 over every usable node of the topology with the free room the
trial's evictions would leave, for the job and each constrained sub-group set. No fitting domain there
means no candidate in step 3 either (fewer nodes, less room), so the trial is skipped unsimulated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter

import numpy as np

from kai.framework.causes import Cause
from kai.framework.placement import filter_nodes
from kai.framework.plugin import register_plugin
from kai.framework.session import EPS, NodeSubset, Session, SubsetRequest
from kai.framework.status import Code, Status
from kai.model import ACTIVE, PODS, PodGroupInfo, PodInfo, TopologyConstraint, TopologyInfo

ROOT = -1  # depth of the implicit root domain, which holds every node of the topology
ROOT_NAME = "root"
SCORE_STEP = 10_000.0
MISSING_RATIO = 1000.0  # the domain order's request / free for a resource a domain has none of
REASON = "PodSchedulingErrors"
ANSWER_BYTES_KEPT = 16 << 20  # about how much memory the session's kept SubsetNodes answers may take


@dataclass(slots=True)
class DomainTree:
    """One topology over the session's nodes: for each level (highest first) a domain index per node."""

    name: str
    levels: tuple[str, ...]
    member: np.ndarray  # bool per node: has every level label
    ids: list[np.ndarray] = field(default_factory=list)  # per level: domain index per node, -1 outside
    names: list[list[str]] = field(default_factory=list)  # per level: domain IDs by index
    ranks: list[np.ndarray] = field(default_factory=list)  # per level: each domain's place in name order
    parents: list[np.ndarray] = field(default_factory=list)  # per level: each domain's parent (level above)
    root_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # 0 on members, else -1

    @staticmethod
    def build(info: TopologyInfo, labels: list[dict[str, str]]) -> DomainTree:
        count = len(labels)
        member = np.fromiter((all(lvl in lb for lvl in info.levels) for lb in labels), dtype=bool, count=count)
        tree = DomainTree(info.name, info.levels, member)
        rows = np.flatnonzero(member)
        keys = [""] * count
        for depth, level in enumerate(info.levels):
            index: dict[str, int] = {}
            ids = np.full(count, -1, dtype=np.int64)
            for row in rows:
                value = labels[row][level]
                keys[row] = f"{keys[row]}.{value}" if depth else value
                ids[row] = index.setdefault(keys[row], len(index))
            parents = np.zeros(len(index), dtype=np.int64)
            if depth:
                parents[ids[rows]] = tree.ids[-1][rows]
            tree.ids.append(ids)
            tree.parents.append(parents)
            tree.names.append(list(index))
            ranks = np.empty(len(index), dtype=np.int64)
            ranks[sorted(range(len(index)), key=tree.names[-1].__getitem__)] = np.arange(len(index))
            tree.ranks.append(ranks)
        tree.root_ids = np.where(member, 0, -1)
        return tree

    def depth(self, level: str) -> int | None:
        try:
            return self.levels.index(level)
        except ValueError:
            return None

    def domain_ids(self, depth: int) -> np.ndarray:
        """Domain index per node at a depth; the root is domain 0 for every member node."""
        return self.root_ids if depth == ROOT else self.ids[depth]

    def domain_name(self, depth: int, index: int) -> str:
        return ROOT_NAME if depth == ROOT else self.names[depth][index]

    def domain_count(self, depth: int) -> int:
        return 1 if depth == ROOT else len(self.names[depth])


@dataclass(slots=True)
class _Room:
    """Free room of one level's domains for one batch."""

    nodes: np.ndarray  # candidate nodes per domain
    pods: np.ndarray  # whole pods of the batch each domain can hold (an upper bound for mixed batches)
    fits: np.ndarray  # bool: the domain can hold the whole batch


class TopologyPlugin:
    name = "topology"

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.trees: dict[str, DomainTree | None] = {}
        self.member_levels: dict[tuple[str, str, str], _MemberLevels | None] = {}
        self.shapes: dict[tuple[int, ...], _Shape] = {}
        self.stacked: dict[tuple[str | int, ...], np.ndarray] = {}
        self.answers: dict[tuple[object, ...], list[tuple[np.ndarray, np.ndarray | None, str]] | dict[int, _Room]] = {}
        self.answer_bytes = 0  # roughly (all are dropped when the next would pass ANSWER_BYTES_KEPT)
        self.pods_column = ssn.space.index(PODS)
        if ssn.table.job_flag("topology", _constrained_jobs).any():
            ssn.hooks.subset_nodes.append(self.subset_nodes)
            ssn.hooks.placement_possible.append(self.placement_possible)

    # -- domains --------------------------------------------------------------------------------
    def tree(self, name: str) -> DomainTree | None:
        if name not in self.trees:
            info = self.ssn.snapshot.topologies.get(name)
            labels = [n.labels for n in self.ssn.nodes.infos]
            self.trees[name] = None if info is None else DomainTree.build(info, labels)
        return self.trees[name]

    # -- the SubsetNodes hook ---------------------------------------------------------------------
    def subset_nodes(self, request: SubsetRequest) -> list[NodeSubset] | Status | None:
        job, group, tasks = request.job, request.group, request.tasks
        constraint = job.topology if group is None else group.topology
        if constraint is None or not constraint.topology or not tasks:
            return None
        who = f"job {job.key}" + (f", subgroup {group.name}" if group is not None else "")
        tree = self.tree(constraint.topology)
        if tree is None:
            message = f"Requested topology {constraint.topology} does not exist ({who})."
            return Status(Code.UNRESOLVABLE, REASON, message)
        levels = self._relevant_depths(tree, constraint, who)
        if isinstance(levels, Status):
            return levels
        base = self._candidate_nodes(tree, request, constraint)
        nodes = self.ssn.nodes
        everywhere = nodes.idle + nodes.releasing
        free = everywhere[base]
        shape = self._shape(tasks)
        scope = tree.member if request.allowed is None else tree.member & request.allowed.mask
        # As KAI: the search starts from the lowest domain holding the set, never below the preferred level
        # (with none, as low as the set goes); domains above it have no room counted.
        preferred = tree.depth(constraint.preferred_level) if constraint.preferred_level else None
        top = _common_domain(tree, scope, len(tree.levels) - 1 if preferred is None else preferred)
        members = everywhere[tree.member][:, shape.columns]
        # The answer depends only on these (the domains are ordered by the free room of all their nodes, which
        # determines the candidates' room): trials that free none of the batch's resources in the topology
        # ask the same question again.
        room = members.tobytes()
        key = (tree.name, *levels, constraint.preferred_level, id(shape), base.tobytes(), room, top)
        found = self.answers.get(key)
        if found is None:
            found = self._answer(tree, constraint, levels, base, free, shape, members, top)
            size = len(room) + base.size + _answer_bytes(found)
            if self.answer_bytes + size > ANSWER_BYTES_KEPT:
                self.answers.clear()
                self.answer_bytes = 0
            self.answers[key] = found
            self.answer_bytes += size
        if isinstance(found, dict):  # no candidate: the rooms, for the message
            return self._failure(tree, constraint, levels, found, base, who, len(tasks), top)
        return [NodeSubset(mask, scores, name) for mask, scores, name in found]

    def _answer(
        self, tree: DomainTree, constraint: TopologyConstraint, levels: list[int], base: np.ndarray,
        free: np.ndarray, shape: _Shape, members: np.ndarray, top: tuple[int, int],
    ) -> list[tuple[np.ndarray, np.ndarray | None, str]] | dict[int, _Room]:
        """Steps 2-4 for candidate nodes `base` with free room `free` (their rows): the candidates (mask,
        scores, name; read-only arrays, as they are kept), or when there is none the rooms per level.
        `members`: the free room of every node of the topology in the batch's columns (the domain order);
        `top`: the lowest domain holding the parent's set (the preferred-level ranking's scope)."""
        batch = _Batch(free, shape.total, shape.columns, _copies(free, shape), shape.mixed, shape.count)
        rooms = _rooms(tree, levels, self._stacked_ids(tree, levels), base, batch)
        order = _domain_order(tree, max(levels), members, shape, self.pods_column)
        candidates = self._candidates(tree, levels, rooms, base, order, top)
        if not candidates:
            return rooms
        preferred = tree.depth(constraint.preferred_level) if constraint.preferred_level else None
        scores = None
        if preferred is not None and any(depth < preferred for depth, _, _ in candidates):
            scores = _preferred_scores(tree, preferred, order[preferred], top)
            scores.flags.writeable = False
        out = []
        for depth, index, mask in candidates:
            mask.flags.writeable = False
            kept = scores if preferred is not None and depth < preferred else None
            out.append((mask, kept, f"topology domain {tree.domain_name(depth, index)}"))
        return out

    # -- the PlacementPossible hook ----------------------------------------------------------------
    def placement_possible(self, job: PodGroupInfo, tasks: list[PodInfo], free: np.ndarray) -> bool:
        """A necessary condition of `subset_nodes`, vectorised over domains: every (sub-)group set with
        a constraint needs a domain of its relevant levels with room for its tasks in `free`, counted
        over every usable node of the topology. The hook's own candidate nodes are a subset of those
        (it also applies the predicates, the parent's set and the domains of active pods) and its free
        room is at most `free`, and room only grows with nodes and free resources: when no domain has
        room here, `subset_nodes` finds no candidate for the set, and the placement fails."""
        if not tasks or not _constrained(job):
            return True
        sets = [(job.topology, tasks)]
        if len(job.subgroups) > 1:
            chains = {leaf: _ancestry(job, leaf) for leaf in {t.subgroup for t in tasks}}
            for sub in job.subgroups.values():
                if sub.topology is not None and sub.topology.topology:
                    sets.append((sub.topology, [t for t in tasks if sub.name in chains[t.subgroup]]))
        for constraint, mine in sets:
            if constraint is None or not constraint.topology or not mine:
                continue
            levels = self._levels_over_members(constraint)
            if levels is not None and not _room_somewhere(levels, self._shape(mine), free):
                return False
        return True

    def _stacked_ids(self, tree: DomainTree, depths: list[int]) -> np.ndarray:
        """The domain index per node of each level, levels one after the other, each level's indices
        after those of the levels before it (cached; a (levels x nodes) array)."""
        key = (tree.name, *depths)
        stacked = self.stacked.get(key)
        if stacked is None:
            offset, rows = 0, []
            for depth in depths:
                ids = tree.domain_ids(depth)
                rows.append(np.where(ids >= 0, ids + offset, -1))
                offset += tree.domain_count(depth)
            stacked = self.stacked[key] = np.array(rows)
        return stacked

    def _shape(self, tasks: list[PodInfo]) -> _Shape:
        """The batch's `_Shape` (cached by the tasks' request vectors, which the session caches)."""
        vectors = [self.ssn.vector(t) for t in tasks]
        key = tuple(map(id, vectors))
        shape = self.shapes.get(key)
        if shape is None:
            shape = self.shapes[key] = _Shape.of(vectors)
        return shape

    def _levels_over_members(self, constraint: TopologyConstraint) -> _MemberLevels | None:
        """The constraint's relevant levels as domain indices over the usable member nodes (cached;
        None when the placement itself reports the constraint as broken)."""
        key = (constraint.topology, constraint.required_level, constraint.preferred_level)
        if key not in self.member_levels:
            tree = self.tree(constraint.topology)
            depths = None if tree is None else self._relevant_depths(tree, constraint, "")
            if tree is None or isinstance(depths, Status):
                self.member_levels[key] = None
            else:
                base = tree.member & self.ssn.nodes.usable
                rows = None if base.all() else np.flatnonzero(base)
                stacked = self._stacked_ids(tree, depths)
                ids = (stacked if rows is None else stacked[:, rows]).ravel()
                size = sum(tree.domain_count(d) for d in depths)
                self.member_levels[key] = _MemberLevels(rows, ids, len(depths), size)
        return self.member_levels[key]

    def _relevant_depths(self, tree: DomainTree, constraint: TopologyConstraint, who: str) -> list[int] | Status:
        """Levels whose domains may be candidates, lowest first."""
        required, preferred = constraint.required_level, constraint.preferred_level
        if not required and not preferred:
            return Status(
                Code.UNRESOLVABLE,
                REASON,
                f"Topology constraint of {who} names topology {tree.name} but neither a required nor a "
                "preferred level.",
            )
        for level in (required, preferred):
            if level and tree.depth(level) is None:
                return Status(
                    Code.UNRESOLVABLE,
                    REASON,
                    f"Topology {tree.name} has no level {level} (levels: {', '.join(tree.levels)}), as {who} asks.",
                )
        req = tree.depth(required) if required else None
        pref = tree.depth(preferred) if preferred else None
        if pref is None or (req is not None and req >= pref):
            # Only a required level, or a preferred level no finer than the required one (which decides).
            assert req is not None
            return [req]
        stop = req if req is not None else ROOT
        return list(range(pref, stop - 1, -1))

    def _candidate_nodes(self, tree: DomainTree, request: SubsetRequest, constraint: TopologyConstraint) -> np.ndarray:
        """Usable member nodes of the parent's set where some task of the batch passes the predicates,
        kept to the required-level domains of already active pods."""
        nodes = self.ssn.nodes
        base = tree.member & nodes.usable
        if request.allowed is not None:
            base = base & request.allowed.mask
        usable_by_some = np.zeros(len(nodes), dtype=bool)
        for task in {t.placement_signature: t for t in request.tasks}.values():
            usable_by_some |= filter_nodes(self.ssn, task)
        base &= usable_by_some
        if constraint.required_level:
            depth = tree.depth(constraint.required_level)
            assert depth is not None
            rows = [nodes.index[p.node] for p in _set_pods(request) if p.status in ACTIVE and p.node in nodes.index]
            if rows:
                ids = tree.ids[depth]
                kept = np.zeros(tree.domain_count(depth) + 1, dtype=bool)  # the last entry: outside (-1)
                kept[ids[rows]] = True
                kept[-1] = False
                base &= kept[ids]
        return base

    def _candidates(
        self, tree: DomainTree, depths: list[int], rooms: dict[int, _Room], base: np.ndarray,
        order: dict[int, np.ndarray], top: tuple[int, int],
    ) -> list[tuple[int, int, np.ndarray]]:
        out: list[tuple[int, int, np.ndarray]] = []
        added: dict[int, list[int]] = {}  # node count of a candidate -> a node row of each such candidate
        for depth in depths:
            if depth < top[0]:
                continue  # above the lowest domain holding the parent's set: KAI counts no room there
            room = rooms[depth]
            fitting = np.flatnonzero(room.fits)
            if fitting.size == 0:
                continue
            # In the domain order: fullest parent first, then fullest first inside it (`_domain_order`).
            ranked = fitting[np.argsort(order[depth][fitting], kind="stable")]
            ids = tree.domain_ids(depth)
            masks = (ids == ranked[:, None]) & base  # one row per domain, in order
            firsts = np.argmax(masks, axis=1).tolist()
            # Domains of this level holding a lower candidate's first node, by that candidate's node count
            # (two domains of one level never share a node).
            lower = {(count, int(ids[row])) for count, rows in added.items() for row in rows}
            counts = room.nodes.tolist()
            for i, index in enumerate(ranked.tolist()):
                count = int(counts[index])
                if (count, index) in lower:
                    continue  # the same nodes as a lower candidate
                out.append((depth, index, masks[i]))
                added.setdefault(count, []).append(firsts[i])
        return out

    def _failure(
        self,
        tree: DomainTree,
        constraint: TopologyConstraint,
        depths: list[int],
        rooms: dict[int, _Room],
        base: np.ndarray,
        who: str,
        count: int,
        top: tuple[int, int],
    ) -> Status:
        level = constraint.required_level or constraint.preferred_level
        scope = _enclosing_domain(tree, base)
        head = f"topology {tree.name}, requirement {level} couldn't be satisfied for {who}"
        if top[0] >= 0 and any(d < top[0] and bool(rooms[d].fits.any()) for d in depths):
            inside = tree.domain_name(*top)
            message = (
                f"{head}: every node the pods may be placed on is in {inside}, below level {level}; as "
                f"KAI, the search starts from {inside}, so no domain of level {level} is considered."
            )
            cause = Cause(
                "Topology", message, f"Topology {tree.name}",
                f"starts when the nodes the pods may be placed on span more than {inside}, or with a preferred level",
                {"level": level, "within": inside, "pods": count},
            )
            return Status(Code.UNSCHEDULABLE, REASON, message, cause)
        if not base.any():
            return Status(
                Code.UNSCHEDULABLE,
                REASON,
                f"{head}: no node of the topology is available to the pods (usable, with the level labels, "
                "passing the pods' predicates).",
            )
        top = depths[-1]
        room = rooms[top]
        best = int(np.argmax(np.where(room.nodes > 0, room.pods, -1.0)))
        level_name = ROOT_NAME if top == ROOT else tree.levels[top]
        message = (
            f"{head}: not enough resources in {scope} to allocate the job. No domain of level {level_name} has "
            f"room for the {count} pods; node-group {tree.domain_name(top, best)} can allocate only "
            f"{int(room.pods[best])} of {count} required pods."
        )
        cause = Cause(
            "Topology",
            message,
            f"Topology {tree.name}",
            f"starts when one {level_name} domain has room for all {count} pods, or with a higher required level",
            {
                "level": level_name,
                "bestDomain": tree.domain_name(top, best),
                "podsThatFit": int(room.pods[best]),
                "pods": count,
            },
        )
        return Status(Code.UNSCHEDULABLE, REASON, message, cause)


def _answer_bytes(found: list[tuple[np.ndarray, np.ndarray | None, str]] | dict[int, _Room]) -> int:
    """The memory the arrays of a kept SubsetNodes answer take (about)."""
    if isinstance(found, dict):
        return sum(r.nodes.nbytes + r.pods.nbytes + r.fits.nbytes for r in found.values())
    return sum(mask.nbytes + (0 if scores is None else scores.nbytes) for mask, scores, _ in found)


def _constrained_jobs(jobs: list[PodGroupInfo]) -> np.ndarray:
    """Per job, whether it (or a sub-group) names a topology: a look at every constraint first (in C, the
    sub-groups of every job in one chained pass), and the precise check only when there is one."""
    if not any(map(_TOPOLOGY, jobs)) and not any(
        map(_TOPOLOGY, chain.from_iterable(map(dict.values, map(_SUBGROUPS, jobs))))
    ):
        return np.zeros(len(jobs), dtype=bool)
    return np.fromiter(map(_constrained, jobs), dtype=bool, count=len(jobs))


_SUBGROUPS = attrgetter("subgroups")
_TOPOLOGY = attrgetter("topology")


def _constrained(job: PodGroupInfo) -> bool:
    if job.topology is not None and job.topology.topology:
        return True
    return any(s.topology is not None and s.topology.topology for s in job.subgroups.values())


def _ancestry(job: PodGroupInfo, leaf: str) -> set[str]:
    """The names of a leaf sub-group and of every sub-group above it."""
    names: set[str] = set()
    current = job.subgroups.get(leaf)
    while current is not None and current.name not in names:
        names.add(current.name)
        current = job.subgroups.get(current.parent) if current.parent else None
    return names


def _set_pods(request: SubsetRequest) -> list[PodInfo]:
    """Pods of the (sub-)group set's subtree (the whole job for the root)."""
    job, group = request.job, request.group
    if group is None:
        return list(job.pods)
    out: list[PodInfo] = []
    stack = [group.name]
    while stack:
        sub = job.subgroups[stack.pop()]
        out.extend(sub.pods)
        stack.extend(sub.children)
    return out


@dataclass(slots=True)
class _Batch:
    """What the domains are measured against: free room per node and the batch's requests."""

    free: np.ndarray  # idle + releasing per candidate node (the rows of `base`, in node order) and resource
    total: np.ndarray  # the batch's summed request
    columns: np.ndarray  # resources the batch requests
    per_node: np.ndarray  # pods of the batch each candidate node can hold (the rows of `free`)
    mixed: bool  # the batch's tasks request different amounts
    count: int


def _rooms(
    tree: DomainTree, depths: list[int], stacked: np.ndarray, base: np.ndarray, batch: _Batch
) -> dict[int, _Room]:
    """`_room` of every level at once: one bincount per measure over the levels' stacked domain
    indices (each domain's bin still sums its own nodes in node order)."""
    if len(depths) == 1:
        return {depths[0]: _room(tree, depths[0], base, batch)}
    sizes = [tree.domain_count(d) for d in depths]
    size = sum(sizes)
    ids = stacked[:, base].ravel()
    nodes = np.bincount(ids, minlength=size)
    pods = np.bincount(ids, weights=np.tile(batch.per_node, len(depths)), minlength=size)
    fits = (pods >= batch.count) & (nodes > 0)
    columns = batch.columns
    if batch.mixed and columns.size:
        width = columns.size
        flat = (ids[:, None] * width + np.arange(width)).ravel()
        weights = np.tile(batch.free[:, columns], (len(depths), 1)).ravel()
        dom_free = np.bincount(flat, weights=weights, minlength=size * width).reshape(size, width)
        fits &= (dom_free >= batch.total[columns] - EPS).all(axis=1)
    out: dict[int, _Room] = {}
    start = 0
    for depth, count in zip(depths, sizes, strict=True):
        end = start + count
        out[depth] = _Room(nodes[start:end], pods[start:end], fits[start:end])
        start = end
    return out


def _room(tree: DomainTree, depth: int, base: np.ndarray, batch: _Batch) -> _Room:
    """Per-domain sums of one level over the candidate nodes."""
    ids = tree.domain_ids(depth)[base]
    size = tree.domain_count(depth)
    nodes = np.bincount(ids, minlength=size)
    pods = np.bincount(ids, weights=batch.per_node, minlength=size)
    fits = (pods >= batch.count) & (nodes > 0)
    columns = batch.columns
    if batch.mixed and columns.size:
        # Free room per domain and requested resource, all columns in one bincount (sums in node order).
        width = columns.size
        flat = (ids[:, None] * width + np.arange(width)).ravel()
        dom_free = np.bincount(flat, weights=batch.free[:, columns].ravel(), minlength=size * width)
        fits &= (dom_free.reshape(size, width) >= batch.total[columns] - EPS).all(axis=1)
    return _Room(nodes, pods, fits)


@dataclass(slots=True)
class _Shape:
    """What a batch asks for: the summed request and its columns, whether its tasks differ, and the unit
    counted per node with the unit's columns: the task, or for a mixed batch the element-wise smallest
    task (an upper bound, so that no domain that could hold the batch is dropped; mixed batches are also
    checked by free sums per domain, and the placement itself decides)."""

    total: np.ndarray
    columns: np.ndarray
    mixed: bool
    unit: np.ndarray
    unit_columns: np.ndarray  # the unit's requested columns
    unit_amounts: np.ndarray  # the unit's request in those columns
    count: int

    @staticmethod
    def of(vectors: list[np.ndarray]) -> _Shape:
        count = len(vectors)
        first = vectors[0]
        mixed = False
        if count > 1 and any(v is not first for v in vectors):
            mixed = not bool((np.array(vectors) == first).all())
        total = np.sum(vectors, axis=0)
        columns = np.flatnonzero(total > EPS)
        unit = np.min(vectors, axis=0) if mixed else first
        unit_columns = columns[unit[columns] > EPS]
        return _Shape(total, columns, mixed, unit, unit_columns, unit[unit_columns], count)


def _copies(free: np.ndarray, shape: _Shape) -> np.ndarray:
    """Copies of the batch's unit that each row of `free` holds, capped at the batch size."""
    cols = shape.unit_columns
    if cols.size == 0:
        return np.full(free.shape[0], float(shape.count))
    per = np.floor(np.min((free[:, cols] + EPS) / shape.unit_amounts, axis=1))
    np.maximum(per, 0.0, out=per)
    return np.minimum(per, float(shape.count), out=per)


@dataclass(slots=True)
class _MemberLevels:
    """A constraint's relevant levels over the usable nodes of its topology (the pre-check's domains)."""

    rows: np.ndarray | None  # the node rows (None: every node)
    ids: np.ndarray  # domain index of each of those nodes, level after level, each level's indices after
    # those of the levels before it (one bincount measures every level's domains)
    levels: int  # how many levels `ids` holds
    size: int  # domains of all those levels


def _room_somewhere(levels: _MemberLevels, shape: _Shape, free: np.ndarray) -> bool:
    """Whether some domain of some level has room for the batch in `free`, counted as `_room` counts
    (whole pods per node; for a mixed batch also the free sum of each requested resource)."""
    room = free if levels.rows is None else free[levels.rows]
    per = _copies(room, shape)
    if levels.levels > 1:
        per = np.tile(per, levels.levels)
    fits = np.bincount(levels.ids, weights=per, minlength=levels.size) >= shape.count
    if shape.mixed and fits.any():
        need = shape.total[shape.columns] - EPS
        sums = room[:, shape.columns]
        if levels.levels > 1:
            sums = np.tile(sums, (levels.levels, 1))
        for j in range(need.size):
            fits &= np.bincount(levels.ids, weights=sums[:, j], minlength=levels.size) >= need[j]
    return bool(fits.any())


def _enclosing_domain(tree: DomainTree, base: np.ndarray) -> str:
    """The lowest domain that holds every candidate node."""
    name = ROOT_NAME
    if not base.any():
        return name
    for depth in range(len(tree.levels)):
        ids = tree.ids[depth][base]
        first = int(ids[0])
        if first < 0 or not (ids == first).all():
            break
        name = tree.names[depth][first]
    return name


def _preferred_scores(tree: DomainTree, depth: int, order: np.ndarray, top: tuple[int, int]) -> np.ndarray:
    """Node scores for candidates above the preferred level: every preferred-level domain inside `top` (the
    lowest domain holding the parent's set, whether or not a candidate holds it) ranked in the domain order,
    fullest first, the roomiest scoring highest: floor(10 * (i + 1) / N) steps of 10,000 for N domains."""
    ids = tree.ids[depth]
    inside = tree.member if top[0] == ROOT else tree.member & (tree.ids[top[0]] == top[1])
    present = np.unique(ids[inside])
    ranked = present[np.argsort(order[present], kind="stable")]
    rank = np.zeros(len(tree.names[depth]))
    total = len(ranked)
    rank[ranked] = np.floor(10.0 * np.arange(1, total + 1) / total) * SCORE_STEP
    return np.where(ids >= 0, rank[np.maximum(ids, 0)], 0.0)


def _domain_order(
    tree: DomainTree, deepest: int, members: np.ndarray, shape: _Shape, pods_column: int
) -> dict[int, np.ndarray]:
    """Each domain's place in the order the candidates are tried in, per level down to `deepest`: the
    tree sorted from the top, the children of each domain fullest first (largest max over the batch's
    resources of request / free room, the free room of every node of the domain, usable by the pods
    or not; a resource the domain has none of counts as 1000), ties by domain ID. A domain's place
    within its level: its parent's place first, then its own. `members`: the free room of the
    topology's nodes (rows in node order) in the batch's columns."""
    order: dict[int, np.ndarray] = {ROOT: np.zeros(1, dtype=np.int64)}
    keep = shape.columns != pods_column
    columns = np.flatnonzero(keep)
    total = shape.total[shape.columns][keep]
    width = columns.size
    for depth in range(deepest + 1):
        ids = tree.ids[depth][tree.member]
        size = tree.domain_count(depth)
        if width:
            flat = (ids[:, None] * width + np.arange(width)).ravel()
            dom_free = np.bincount(flat, weights=members[:, columns].ravel(), minlength=size * width)
            dom_free = dom_free.reshape(size, width)
            ratio = np.where(dom_free > EPS, total / np.maximum(dom_free, EPS), MISSING_RATIO).max(axis=1)
        else:
            ratio = np.zeros(size)
        parent = order[depth - 1][tree.parents[depth]] if depth else np.zeros(size, dtype=np.int64)
        place = np.empty(size, dtype=np.int64)
        place[np.lexsort((tree.ranks[depth], -ratio, parent))] = np.arange(size)
        order[depth] = place
    return order


def _common_domain(tree: DomainTree, scope: np.ndarray, deepest: int) -> tuple[int, int]:
    """The lowest domain (depth, index) holding every node of `scope`, no deeper than `deepest`."""
    found = (ROOT, 0)
    if not scope.any():
        return found
    for depth in range(deepest + 1):
        ids = tree.ids[depth][scope]
        first = int(ids[0])
        if first < 0 or not (ids == first).all():
            break
        found = (depth, first)
    return found


register_plugin("topology")(lambda args: TopologyPlugin())
