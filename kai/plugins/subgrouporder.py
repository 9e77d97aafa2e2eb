"""subgrouporder: leaf sub-groups below their minMember first, then the least allocated relative to it."""

from __future__ import annotations

from dataclasses import dataclass

from kai.framework.plugin import register_plugin
from kai.framework.session import Session
from kai.model import SubGroupInfo


def subgroup_key(sub: SubGroupInfo) -> tuple[int, float]:
    active = sub.active()
    return (0 if active < sub.min_member else 1, active / max(sub.min_member, 1))


@dataclass
class SubGroupOrderPlugin:
    name: str = "subgrouporder"

    def on_session_open(self, ssn: Session) -> None:
        ssn.hooks.subgroup_order.append(subgroup_key)


register_plugin("subgrouporder")(lambda args: SubGroupOrderPlugin())
