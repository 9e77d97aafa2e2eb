"""dynamicresources: pods with Dynamic Resource Allocation claims (`spec.resourceClaims`).

A pod's claims are satisfied by devices its node can use (kai.model.dra), as Kubernetes' structured
allocator does it:
- a device fits a request when it passes every CEL selector of the request's DeviceClass and of the
  request (kai.plugins.dracel); `ExactCount` takes that many free devices, `All` takes every matching
  device the node can use (all of them free, at least one); `matchAttribute` constraints make the devices
  of a claim agree on an attribute; the choice backtracks over devices in ResourceSlice order;
- a claim already allocated pins its pods to the nodes of its allocation, and its devices are taken;
- a claim is shared by the pods that use it (at most 256 consumers); its devices are freed when its last
  pod in the session is evicted (and taken again, the same ones, when the eviction is undone).
Before placement, as KAI's plugin does: a claim (or template) that does not exist, is being deleted or has
256 consumers, a shared GPU claim whose queue label is missing or names another queue, a missing device
class, a selector that does not compile, and a claim asking for more devices than any node has, keep the
pod pending with a message naming the claim; no eviction helps.

The devices each bound pod gets are in its `Binding.claims` (the BindRequest carries them).
KAI books a claim's GPUs in queue usage (kai.model.dra.DeviceRequest.gpu_count, read into the pod's
`GpuRequest.dra` by the snapshot builder) and counts the devices of GPU drivers' ResourceSlices in the
fair-share total (NodeInfo.dra_gpus, read by proportion).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

import numpy as np

from kai.api import keys
from kai.framework.plugin import register_plugin
from kai.framework.session import NamedFilter, NamedFit, Session
from kai.framework.status import SUCCESS, Status, unresolvable
from kai.model import (
    HOLDS_NODE,
    AllocatedDevice,
    ClaimAllocation,
    Device,
    DeviceRequest,
    PodInfo,
    PodStatus,
    ResourceClaimInfo,
)
from kai.model.dra import ALL, EXACT_COUNT, RESERVED_FOR_MAX
from kai.plugins.dracel import Selectors

REASON = "DynamicResources"
NOW, LATER, ANY = "now", "later", "any"
MAX_STEPS = 20_000  # backtracking steps per allocation try (a pathological claim fails, never hangs)
_DRIVER_IS = re.compile(r"""^\s*device\.driver\s*==\s*(?:"([^"\\]*)"|'([^'\\]*)')\s*$""")


@dataclass(slots=True)
class Allocation:
    devices: tuple[AllocatedDevice, ...]
    mask: np.ndarray | None  # nodes its pods may run on (None: any)
    node: str = ""  # where the session allocated it ("" when it came allocated)


@dataclass
class DynamicResourcesPlugin:
    name: str = "dynamicresources"
    claims: dict[str, ResourceClaimInfo] = field(default_factory=dict)

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        if not ssn.any_pod("resource_claims"):
            return
        snap = ssn.snapshot
        self.claims = snap.resource_claims
        self.infos = ssn.nodes.infos
        self.selectors = Selectors()
        self.devices: dict[str, Device] = {d.key: d for d in snap.devices}
        self.order = {d.key: i for i, d in enumerate(snap.devices)}
        self.used: dict[str, str] = {}  # device key -> claim key
        self.releasing: set[str] = set()  # devices freed by an eviction of this session (pipelining only)
        self.alloc: dict[str, Allocation] = {}
        self.users: dict[str, set[str]] = {}
        self.remembered: dict[str, Allocation] = {}
        self.row_version = np.zeros(len(self.infos), dtype=np.int64)  # bumped when a node's device changes hands
        self.shared_version = 0  # the same for devices of several nodes
        self._static: dict[tuple[object, ...], np.ndarray] = {}
        # per claim signature: (shared version, per-node stamp, fits now, fits later)
        self._fits: dict[tuple[object, ...], tuple[int, np.ndarray, np.ndarray, np.ndarray]] = {}
        self._candidates: dict[tuple[str, tuple[str, ...]], tuple[list[Device], str]] = {}
        self._groups: dict[tuple[str, tuple[str, ...]], tuple[dict[str, list[Device]], list[Device]]] = {}
        for claim in self.claims.values():
            if claim.allocated:
                self.alloc[claim.key] = Allocation(claim.devices, self._terms_mask(claim))
                for device in claim.devices:
                    self.used[device.key] = claim.key
            self.users[claim.key] = set(claim.reserved_for)
        # Pods that already run: their claims are theirs (allocated on their node if the snapshot did not say).
        for pod in [*snap.foreign_pods, *ssn.pods]:
            if pod.resource_claims and pod.status in HOLDS_NODE and pod.node in ssn.nodes.index:
                self._take(pod)
        hooks = ssn.hooks
        hooks.pre_predicates.append(self.pre_predicate)
        self.pinned = NamedFilter("dynamicresources-allocated", "", self._pinned_filter)
        self.enough = NamedFilter("dynamicresources", "", self._devices_filter)
        self.free = NamedFit("dynamicresources-free", "", self._devices_fit)
        hooks.node_filters.append(self.pinned)
        hooks.node_filters.append(self.enough)
        hooks.node_fits.append(self.free)
        hooks.on_allocate.append(self._take)
        hooks.on_deallocate.append(self._give_back)
        hooks.on_close.append(self._report)

    # -- helpers ------------------------------------------------------------------------------
    def _terms_mask(self, claim: ResourceClaimInfo) -> np.ndarray | None:
        if not claim.node_terms:
            return None
        return np.fromiter(
            (any(t.matches(n.name, n.labels) for t in claim.node_terms) for n in self.infos),
            dtype=bool,
            count=len(self.infos),
        )

    def _claims_of(self, task: PodInfo) -> list[ResourceClaimInfo]:
        return [self.claims[c.claim] for c in task.resource_claims if c.claim in self.claims]

    def _matching(self, request: DeviceRequest) -> tuple[list[Device], str]:
        """Devices (any node) that pass the class's and the request's selectors; an error, if any."""
        key = (request.device_class, request.selectors)
        found = self._candidates.get(key)
        if found is not None:
            return found
        klass = self.ssn.snapshot.device_classes.get(request.device_class)
        if klass is None:
            found = ([], f"device class {request.device_class} does not exist")
            self._candidates[key] = found
            return found
        expressions = (*klass.selectors, *request.selectors)
        for expr in expressions:
            error = self.selectors.compile(expr) if not _DRIVER_IS.match(expr) else ""
            if error:
                found = ([], error)
                self._candidates[key] = found
                return found
        devices = list(self.ssn.snapshot.devices)
        for expr in expressions:
            quick = _DRIVER_IS.match(expr)
            if quick:
                driver = quick.group(1) if quick.group(1) is not None else quick.group(2)
                devices = [d for d in devices if d.driver == driver]
            else:
                devices = [d for d in devices if self.selectors.matches(expr, d)]
        found = (devices, "")
        self._candidates[key] = found
        return found

    def _grouped(self, request: DeviceRequest) -> tuple[dict[str, list[Device]], list[Device]]:
        """The matching devices of one node by node name, and those usable on several nodes."""
        key = (request.device_class, request.selectors)
        found = self._groups.get(key)
        if found is None:
            devices, _ = self._matching(request)
            local: dict[str, list[Device]] = {}
            shared: list[Device] = []
            for d in devices:
                if d.node:
                    local.setdefault(d.node, []).append(d)
                else:
                    shared.append(d)
            found = self._groups[key] = (local, shared)
        return found

    def _most_on_a_node(self, request: DeviceRequest) -> int:
        local, shared = self._grouped(request)
        return max((len(v) for v in local.values()), default=0) + len(shared)  # shared: an upper bound

    def _usable(self, request: DeviceRequest, row: int) -> list[Device]:
        node = self.infos[row]
        local, shared = self._grouped(request)
        mine = local.get(node.name, [])
        if not shared:
            return mine
        extra = [d for d in shared if d.usable_on(node.name, node.labels)]
        return sorted([*mine, *extra], key=lambda d: self.order[d.key]) if mine else extra

    def _rows(self, claims: list[ResourceClaimInfo]) -> list[int]:
        """Nodes that have a matching device for every request of the claims (the only ones worth a try)."""
        index = self.ssn.nodes.index
        rows: set[int] | None = None
        for claim in claims:
            for request in claim.requests:
                if request.mode not in (EXACT_COUNT, ALL):
                    return []
                local, shared = self._grouped(request)
                if shared:
                    continue
                mine = {index[n] for n in local if n in index}
                rows = mine if rows is None else rows & mine
        return sorted(rows) if rows is not None else list(range(len(self.infos)))

    # -- allocation -----------------------------------------------------------------------------
    def _solve(
        self, claims: list[ResourceClaimInfo], row: int, use: str = NOW
    ) -> dict[str, tuple[AllocatedDevice, ...]] | None:
        """Devices for every request of the claims on one node, or None. `use`: NOW takes free devices,
        LATER also those an eviction of this session is releasing, ANY every device (capacity only)."""
        items: list[tuple[ResourceClaimInfo, DeviceRequest, list[Device], int]] = []
        for claim in claims:
            for request in claim.requests:
                if request.mode not in (EXACT_COUNT, ALL) or self._matching(request)[1]:
                    return None
                usable = self._usable(request, row)
                if use == ANY:
                    free = usable
                elif use == LATER:
                    free = [d for d in usable if d.key not in self.used]
                else:
                    free = [d for d in usable if d.key not in self.used and d.key not in self.releasing]
                if request.mode == ALL:
                    if not usable or len(free) < len(usable):
                        return None
                    items.append((claim, request, free, len(free)))
                elif request.mode == EXACT_COUNT:
                    if len(free) < request.count:
                        return None
                    items.append((claim, request, free, request.count))
                else:
                    return None
        chosen: list[tuple[ResourceClaimInfo, DeviceRequest, Device]] = []
        taken: set[str] = set()
        steps = [0]

        def agrees(claim: ResourceClaimInfo, request: DeviceRequest, device: Device) -> bool:
            for constraint in claim.constraints:
                if constraint.requests and request.name not in constraint.requests:
                    continue
                value = device.attributes.get(constraint.attribute)
                if value is None:
                    return False
                for c, r, d in chosen:
                    same = c is claim and (not constraint.requests or r.name in constraint.requests)
                    if same and d.attributes.get(constraint.attribute) != value:
                        return False
            return True

        def place(i: int, start: int, need: int) -> bool:
            if i == len(items):
                return True
            claim, request, free, _ = items[i]
            if need == 0:
                return place(i + 1, 0, items[i + 1][3]) if i + 1 < len(items) else True
            for j in range(start, len(free)):
                steps[0] += 1
                if steps[0] > MAX_STEPS:
                    return False
                device = free[j]
                if device.key in taken or not agrees(claim, request, device):
                    if request.mode == ALL:
                        return False  # every device is needed
                    continue
                taken.add(device.key)
                chosen.append((claim, request, device))
                if place(i, j + 1, need - 1):
                    return True
                chosen.pop()
                taken.discard(device.key)
                if request.mode == ALL:
                    return False
            return False

        if items and not place(0, 0, items[0][3]):
            return None
        out: dict[str, list[AllocatedDevice]] = {c.key: [] for c in claims}
        for claim, request, device in chosen:
            out[claim.key].append(AllocatedDevice(request.name, device.driver, device.pool, device.name))
        return {k: tuple(v) for k, v in out.items()}

    def _mask_of(self, devices: tuple[AllocatedDevice, ...]) -> np.ndarray | None:
        known = [self.devices[d.key] for d in devices if d.key in self.devices]
        if not known or all(d.all_nodes for d in known):
            return None
        nodes = {d.node for d in known}
        if len(nodes) == 1 and "" not in nodes:  # the usual case: devices of one node
            mask = np.zeros(len(self.infos), dtype=bool)
            row = self.ssn.nodes.index.get(nodes.pop())
            if row is not None:
                mask[row] = True
            return mask
        return np.fromiter(
            (all(d.usable_on(n.name, n.labels) for d in known) for n in self.infos), dtype=bool, count=len(self.infos)
        )

    def _take(self, task: PodInfo) -> None:
        """The task is placed on its node (or already runs there): its claims are allocated and reserved."""
        if not task.resource_claims:
            return
        row = self.ssn.nodes.index.get(task.node)
        claims = self._claims_of(task)
        missing = [c for c in claims if c.key not in self.alloc]
        if missing and row is not None:
            reuse = [c for c in missing if self._can_reuse(c, task.node)]
            for claim in reuse:
                self._record(claim, self.remembered.pop(claim.key))
            rest = [c for c in missing if c not in reuse]
            # Free devices first; a pipelined task may take those this session's evictions release.
            solved = (self._solve(rest, row, NOW) or self._solve(rest, row, LATER)) if rest else {}
            for claim in rest:
                if solved is None:
                    continue
                devices = solved[claim.key]
                self._record(claim, Allocation(devices, self._mask_of(devices), task.node))
        for claim in claims:
            self.users.setdefault(claim.key, set()).add(task.key)

    def _can_reuse(self, claim: ResourceClaimInfo, node: str) -> bool:
        previous = self.remembered.get(claim.key)
        if previous is None:
            return False
        row = self.ssn.nodes.index[node]
        return (previous.mask is None or bool(previous.mask[row])) and all(
            d.key not in self.used for d in previous.devices
        )

    def _record(self, claim: ResourceClaimInfo, allocation: Allocation) -> None:
        self.alloc[claim.key] = allocation
        for device in allocation.devices:
            self.used[device.key] = claim.key
            self.releasing.discard(device.key)
        self._touched(allocation.devices)

    def _touched(self, devices: tuple[AllocatedDevice, ...]) -> None:
        index = self.ssn.nodes.index
        for d in devices:
            known = self.devices.get(d.key)
            if known is not None and known.node in index:
                self.row_version[index[known.node]] += 1
            else:
                self.shared_version += 1

    def _give_back(self, task: PodInfo) -> None:
        """The task leaves its node (evicted, or its placement undone): a claim no pod uses any more is freed."""
        if not task.resource_claims:
            return
        for claim in self._claims_of(task):
            users = self.users.setdefault(claim.key, set())
            users.discard(task.key)
            if users or claim.key not in self.alloc:
                continue
            allocation = self.alloc.pop(claim.key)
            for device in allocation.devices:
                self.used.pop(device.key, None)
                if task.status is PodStatus.RELEASING:  # evicted: its devices are free once it is gone
                    self.releasing.add(device.key)
            self.remembered[claim.key] = allocation
            self._touched(allocation.devices)

    # -- checks ---------------------------------------------------------------------------------
    def pre_predicate(self, task: PodInfo) -> Status:
        if not task.resource_claims:
            return SUCCESS
        job = self.ssn.jobs.get(task.job_key)
        for entry in task.resource_claims:
            if not entry.claim:
                if entry.template:
                    return unresolvable(
                        REASON, f'pod claim "{entry.name}": resourceclaimtemplate "{entry.template}" not found'
                    )
                return unresolvable(REASON, f'pod claim "{entry.name}" names no resource claim or template')
            claim = self.claims.get(entry.claim)
            name = entry.claim.split("/", 1)[1]
            if claim is None:
                return unresolvable(REASON, f'resourceclaim "{name}" not found')
            if claim.deleting:
                return unresolvable(REASON, f'resourceclaim "{name}" is being deleted')
            users = self.users.get(claim.key, set())
            if len(users) >= RESERVED_FOR_MAX and task.key not in users:
                return unresolvable(
                    REASON,
                    f"resource claim {claim.key} has reached its maximum number of consumers ({RESERVED_FOR_MAX})",
                )
            if not entry.template and claim.is_gpu and job is not None:
                if not claim.queue:
                    return unresolvable(
                        REASON,
                        f"DRA claim {name} is a shared GPU claim but does not have a queue label ({keys.QUEUE_LABEL})",
                    )
                if claim.queue != job.queue:
                    return unresolvable(
                        REASON,
                        f"DRA claim {name} is a shared GPU claim with wrong queue label (expected queue: {job.queue}, "
                        f"claim queue label: {claim.queue})",
                    )
            if claim.key in self.alloc:
                continue
            for request in claim.requests:
                if request.mode not in (EXACT_COUNT, ALL):
                    return unresolvable(
                        REASON,
                        f"resource claim {claim.key} request {request.name}: requests with alternatives "
                        "(firstAvailable) are not built in kai yet",
                    )
                _, error = self._matching(request)
                if error:
                    return unresolvable(REASON, f"resource claim {claim.key} {request.name}: {error}")
                most = self._most_on_a_node(request)
                need = request.count if request.mode == EXACT_COUNT else 1
                if most < need:
                    last = f" ({self.selectors.last_error})" if most == 0 and self.selectors.last_error else ""
                    return unresolvable(
                        REASON,
                        f"resource claim {claim.key} {request.describe()}; no node has that many "
                        f"(the most any node has is {most}){last}",
                    )
        return SUCCESS

    def _pinned_filter(self, task: PodInfo) -> np.ndarray | None:
        mask: np.ndarray | None = None
        names = []
        for claim in self._claims_of(task):
            allocation = self.alloc.get(claim.key)
            if allocation is None or allocation.mask is None:
                continue
            names.append(claim.key)
            mask = allocation.mask.copy() if mask is None else mask & allocation.mask
        if names:
            self.pinned.reason = f"are not where resource claim {', '.join(names)} is allocated"
        return mask

    def _unallocated(self, task: PodInfo) -> list[ResourceClaimInfo]:
        return [c for c in self._claims_of(task) if c.key not in self.alloc]

    @staticmethod
    def _what(claims: list[ResourceClaimInfo]) -> str:
        return "; ".join(f"{c.key}: " + ", ".join(r.describe() for r in c.requests) for c in claims)

    @staticmethod
    def _signature(claims: list[ResourceClaimInfo]) -> tuple[object, ...]:
        """What decides where claims fit: their requests and constraints (pods of one template share it)."""
        return tuple((c.requests, c.constraints) for c in claims)

    def _devices_filter(self, task: PodInfo) -> np.ndarray | None:
        """Nodes with enough matching devices for the claims not yet allocated, whoever uses them now."""
        claims = self._unallocated(task)
        if not claims:
            return None
        key = (ANY, self._signature(claims))
        found = self._static.get(key)
        if found is None:
            mask = np.zeros(len(self.infos), dtype=bool)
            for row in self._rows(claims):
                mask[row] = self._solve(claims, row, ANY) is not None
            found = self._static[key] = mask
        self.enough.reason = (
            f"cannot allocate all claims (too few matching devices for resource claim {self._what(claims)})"
        )
        return found

    def _devices_fit(self, task: PodInfo) -> tuple[np.ndarray, np.ndarray] | None:
        """Nodes where the claims get free devices now, and once this session's evictions are done (each
        node's answer is kept until a device of that node is taken or freed)."""
        claims = self._unallocated(task)
        if not claims:
            return None
        signature = self._signature(claims)
        possible = self._devices_filter(task)
        assert possible is not None
        found = self._fits.get(signature)
        if found is None or found[0] != self.shared_version:
            count = len(self.infos)
            found = (self.shared_version, np.full(count, -1), np.zeros(count, dtype=bool), np.zeros(count, dtype=bool))
            self._fits[signature] = found
        _, stamps, now, later = found
        for row in np.flatnonzero(possible & (stamps != self.row_version)):  # nodes changed since last asked
            fits_later = self._solve(claims, int(row), LATER) is not None
            now[row] = fits_later and (not self.releasing or self._solve(claims, int(row), NOW) is not None)
            later[row] = fits_later
            stamps[row] = self.row_version[row]
        self.free.reason = f"cannot allocate all claims (no free devices for resource claim {self._what(claims)})"
        return now.copy(), later.copy()

    # -- close --------------------------------------------------------------------------------
    def _report(self, ssn: Session) -> None:
        """Each bound pod's binding carries the devices of its claims."""
        pods = {p.key: p for job in ssn.jobs.values() for p in job.pods}
        bindings = ssn.decisions.bindings
        for i, binding in enumerate(bindings):
            pod = pods.get(binding.pod)
            if pod is None or not pod.resource_claims:
                continue
            out = []
            for entry in pod.resource_claims:
                allocation = self.alloc.get(entry.claim)
                if allocation is not None:
                    out.append(ClaimAllocation(entry.name, entry.claim, binding.node, allocation.devices))
            bindings[i] = dataclasses.replace(binding, claims=tuple(out))


register_plugin("dynamicresources")(lambda args: DynamicResourcesPlugin())
