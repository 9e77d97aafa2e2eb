"""The podgrouper's ClusterRole reads exactly the kinds it groups (no wildcard), and the two copies
(deploy/rbac and the Helm chart's) are the same."""

from __future__ import annotations

from pathlib import Path

import yaml

from kai.podgrouper.registry import default_registry

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "deploy" / "rbac" / "kai-podgrouper-clusterrole.yaml"
CHART_ROLE = REPO / "deploy" / "helm" / "kai-scheduler" / "files" / "clusterroles" / "kai-podgrouper-clusterrole.yaml"


def readable() -> set[tuple[str, str]]:
    role = yaml.safe_load(ROLE.read_text())
    out = set()
    for rule in role["rules"]:
        if "get" in rule["verbs"]:
            out |= {(g, r) for g in rule["apiGroups"] for r in rule["resources"]}
    return out


def test_every_kind_the_podgrouper_groups_is_readable_and_nothing_is_a_wildcard() -> None:
    can_read = readable()
    assert not [r for _, r in can_read if "*" in r]
    for gvk in default_registry().registered():
        plural = gvk.kind.lower() + "s"
        assert (gvk.group, plural) in can_read, f"{gvk.group}/{plural}"


def test_the_chart_carries_the_same_role() -> None:
    assert CHART_ROLE.read_text() == ROLE.read_text()
