"""dynamicresources: pods with Dynamic Resource Allocation claims (`spec.resourceClaims`).

kai has not built DRA yet, so this plugin does what KAI's does when the DRA feature is off: a pod that
references resource claims is not scheduled (binding it to a node would give it no device), and its
why-pending message names the claims. The snapshot builder records such pods as uses of an unsupported
feature, which `kai simulate` warns about and the live scheduler counts and reports as events.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kai.framework.plugin import register_plugin
from kai.framework.session import Session
from kai.framework.status import SUCCESS, Status, unresolvable
from kai.model import DYNAMIC_RESOURCE_ALLOCATION, PodInfo


@dataclass
class DynamicResourcesPlugin:
    name: str = "dynamicresources"
    claims: dict[str, str] = field(default_factory=dict)  # pod key -> its claims, for messages

    def on_session_open(self, ssn: Session) -> None:
        self.claims = {
            use.name: use.detail
            for use in ssn.snapshot.unsupported
            if use.feature == DYNAMIC_RESOURCE_ALLOCATION and use.kind == "Pod"
        }
        if self.claims:
            ssn.hooks.pre_predicates.append(self.no_claims)

    def no_claims(self, task: PodInfo) -> Status:
        detail = self.claims.get(task.key)
        if detail is None:
            return SUCCESS
        return unresolvable(
            "DynamicResourceAllocation",
            f"it references resource claims {detail} (spec.resourceClaims), and Dynamic Resource Allocation "
            "is not built in kai yet",
        )


register_plugin("dynamicresources")(lambda args: DynamicResourcesPlugin())
