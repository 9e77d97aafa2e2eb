"""Pod affinity and anti-affinity (required: predicates; preferred: the podaffinity score), as
kube-scheduler defines them and KAI applies them: topology domains over hostnames and zones,
namespaces and selectors, the symmetric rule, the first pod of a self-affine group, placements made
earlier in the same cycle, and evicting actions that must not put a pod beside its anti-affine peer."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from kai.snapshot.loader import load_snapshot
from tests.scenario import bound, node, pod, podgroup, queue, run, running_on, write

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def term(key: str, labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"labelSelector": {"matchLabels": labels or {}}, "topologyKey": key}
    out.update(extra)
    return out


def required(kind: str, *terms: dict[str, Any]) -> dict[str, Any]:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def preferred(kind: str, *weighted: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {
        kind: {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": w, "podAffinityTerm": t} for w, t in weighted
            ]
        }
    }


def nodes(count: int, gpus: int = 8, zones: list[str] | None = None) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        labels = {HOST: f"n{i}"}
        if zones:
            labels[ZONE] = zones[i]
        out.append(node(f"n{i}", gpus=gpus, labels=labels))
    return out


def solo(name: str, created: str | None = None, priority_class: str | None = None, **kw: Any) -> list[dict[str, Any]]:
    return [
        podgroup(name, "q", created=created, priority_class=priority_class),
        pod(name, group=name, created=created, priority_class=priority_class, **kw),
    ]


def message(result: dict[str, Any], group: str) -> str:
    return result["podGroups"][f"ns/{group}"]["message"]


QUOTA = {"quota": 8, "overQuotaWeight": 1, "limit": -1}
ANTI_A_HOST = required("podAntiAffinity", term(HOST, {"app": "a"}))


# -- required anti-affinity -----------------------------------------------------------------------


def test_anti_affinity_by_hostname_keeps_pods_apart_and_the_third_waits() -> None:
    objects = [*nodes(2), queue("q")]
    for i in range(3):
        objects += solo(f"p{i}", created=f"2026-01-01T00:00:0{i}Z", gpus=1, labels={"app": "a"}, affinity=ANTI_A_HOST)
    result = run(objects)
    placed = bound(result)
    assert set(placed) == {"ns/p0", "ns/p1"}  # the oldest two, one per node
    assert placed["ns/p0"] != placed["ns/p1"]
    assert "2 node(s) didn't match pod anti-affinity rules" in message(result, "p2")


def test_a_gang_with_mutual_anti_affinity_spreads_in_one_cycle_or_waits_whole() -> None:
    gang = [podgroup("g", "q", min_member=3)] + [
        pod(f"g{i}", group="g", gpus=1, labels={"app": "a"}, affinity=ANTI_A_HOST) for i in range(3)
    ]
    spread = run([*nodes(3), queue("q"), *gang])
    assert sorted(bound(spread).values()) == ["n0", "n1", "n2"]
    short = run([*nodes(2), queue("q"), *gang])
    assert bound(short) == {}
    assert "didn't match pod anti-affinity rules" in message(short, "g")


def test_anti_affinity_by_zone() -> None:
    objects = [*nodes(4, zones=["za", "za", "zb", "zb"]), queue("q")]
    anti_zone = required("podAntiAffinity", term(ZONE, {"app": "a"}))
    for i in range(3):
        objects += solo(f"p{i}", created=f"2026-01-01T00:00:0{i}Z", gpus=1, labels={"app": "a"}, affinity=anti_zone)
    result = run(objects)
    placed = bound(result)
    assert set(placed) == {"ns/p0", "ns/p1"}
    zone_of = {"n0": "za", "n1": "za", "n2": "zb", "n3": "zb"}
    assert {zone_of[placed["ns/p0"]], zone_of[placed["ns/p1"]]} == {"za", "zb"}
    assert "4 node(s) didn't match pod anti-affinity rules" in message(result, "p2")


def test_anti_affinity_ignores_nodes_without_the_topology_label() -> None:
    objects = [node("n0", gpus=2), node("n1", gpus=2), queue("q")]
    objects += solo("peer", gpus=1, labels={"app": "a"}, node="n0")
    objects += solo("p", gpus=1, affinity=required("podAntiAffinity", term(ZONE, {"app": "a"})))
    assert bound(run(objects)) == {"ns/p": "n0"}  # no zone label: no domain, nothing to avoid (binpack)


def test_symmetric_rule_an_existing_pods_anti_affinity_keeps_matching_pods_away() -> None:
    objects = [*nodes(4, zones=["za", "za", "zb", "zb"]), queue("q")]
    guard = required("podAntiAffinity", term(ZONE, {"app": "a"}))
    objects += solo("guard", gpus=1, labels={"app": "guard"}, node="n0", affinity=guard)
    objects += solo("other", gpus=8, node="n3")
    objects += solo("p", gpus=1, labels={"app": "a"})
    objects += solo("plain", gpus=1, labels={"app": "b"})
    placed = bound(run(objects))
    assert placed["ns/p"] == "n2"  # zone za is the guard's; n3 is full
    assert placed["ns/plain"] == "n0"  # not matched by the guard's term: binpack beside it


def test_symmetric_rule_is_named_when_it_leaves_a_pod_pending() -> None:
    objects = [*nodes(4, zones=["za", "za", "zb", "zb"]), queue("q")]
    guard = required("podAntiAffinity", term(ZONE, {"app": "a"}))
    objects += solo("guard", gpus=1, labels={"app": "guard"}, node="n0", affinity=guard)
    fixed = {"gpus": 8, "priority_class": "build"}  # non-preemptible: nothing moves them
    objects += solo("full2", node="n2", **fixed) + solo("full3", node="n3", **fixed)
    objects += solo("p", gpus=1, labels={"app": "a"})
    result = run(objects)
    assert bound(result) == {}
    why = message(result, "p")
    assert "2 node(s) didn't satisfy existing pods anti-affinity rules" in why
    assert "2 node(s) had insufficient nvidia.com/gpu" in why


# -- required affinity ----------------------------------------------------------------------------


def test_affinity_to_a_running_peers_zone() -> None:
    objects = [*nodes(4, zones=["za", "za", "zb", "zb"]), queue("q")]
    objects += solo("db", gpus=8, labels={"app": "db"}, node="n2")  # fills n2
    objects += solo("busy", gpus=4, node="n0")  # binpack alone would pick n0
    objects += solo("p", gpus=1, affinity=required("podAffinity", term(ZONE, {"app": "db"})))
    assert bound(run(objects)) == {"ns/p": "n3"}


def test_affinity_without_a_matching_pod_waits() -> None:
    objects = [*nodes(2, zones=["za", "zb"]), queue("q")]
    objects += solo("p", gpus=1, affinity=required("podAffinity", term(ZONE, {"app": "db"})))
    result = run(objects)
    assert bound(result) == {}
    assert "2 node(s) didn't match pod affinity rules" in message(result, "p")


def test_affinity_needs_the_topology_label_on_the_node() -> None:
    objects = [node("n0", gpus=2, labels={HOST: "n0"}), node("n1", gpus=2), queue("q")]
    objects += solo("db", gpus=1, labels={"app": "db"}, node="n0")
    objects += solo("busy", gpus=1, node="n1")
    objects += solo("p", gpus=1, affinity=required("podAffinity", term(HOST, {"app": "db"})))
    assert bound(run(objects)) == {"ns/p": "n0"}


def test_first_pod_of_a_self_affine_gang_goes_anywhere_and_the_rest_follow() -> None:
    self_affine = required("podAffinity", term(HOST, {"app": "a"}))
    gang = [podgroup("g", "q", min_member=3)] + [
        pod(f"g{i}", group="g", gpus=2, labels={"app": "a"}, affinity=self_affine) for i in range(3)
    ]
    result = run([*nodes(3), queue("q"), *gang])
    assert len(set(bound(result).values())) == 1 and len(bound(result)) == 3
    # A pod whose affinity does not match itself gets no such exception.
    other = solo("x", gpus=1, labels={"app": "b"}, affinity=self_affine)
    assert bound(run([*nodes(3), queue("q"), *other])) == {}


def test_affinity_terms_are_anded_over_one_matching_pod() -> None:
    both = required("podAffinity", term(ZONE, {"app": "db"}), term(ZONE, {"tier": "gold"}))
    objects = [*nodes(4, zones=["za", "za", "zb", "zb"]), queue("q")]
    objects += solo("db", gpus=1, labels={"app": "db"}, node="n0")  # matches only the first term
    objects += solo("gold", gpus=1, labels={"tier": "gold"}, node="n0")  # only the second
    objects += solo("both", gpus=1, labels={"app": "db", "tier": "gold"}, node="n3")
    objects += solo("p", gpus=1, affinity=both)
    assert bound(run(objects))["ns/p"] in ("n2", "n3")


# -- namespaces and selectors ---------------------------------------------------------------------


def namespace(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


@pytest.mark.parametrize(
    ("extra", "objects_extra", "expected"),
    [
        ({}, [], "n0"),  # a term without namespaces looks in the pod's own namespace only
        ({"namespaces": ["other"]}, [], "n1"),
        ({"namespaceSelector": {}}, [], "n1"),  # an empty namespace selector: every namespace
        ({"namespaceSelector": {"matchLabels": {"team": "x"}}}, [namespace("other", {"team": "x"})], "n1"),
        ({"namespaceSelector": {"matchLabels": {"team": "y"}}}, [namespace("other", {"team": "x"})], "n0"),
        ({"namespaceSelector": {"matchLabels": {"team": "x"}}}, [], "n0"),  # unknown namespace: no labels
        (
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "other"}}},
            [namespace("other", {})],
            "n1",
        ),
    ],
)
def test_namespaces_of_a_term(extra: dict[str, Any], objects_extra: list[dict[str, Any]], expected: str) -> None:
    objects = [*nodes(2, gpus=2), queue("q"), *objects_extra]
    objects += [
        podgroup("peer", "q", ns="other"),
        pod("peer", group="peer", ns="other", gpus=1, labels={"app": "a"}, node="n0"),
    ]
    objects += solo("p", gpus=1, affinity=required("podAntiAffinity", term(HOST, {"app": "a"}, **extra)))
    assert bound(run(objects)) == {"ns/p": expected}


@pytest.mark.parametrize(
    ("selector", "peer_labels", "avoided"),
    [
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]}, {"app": "a"}, True),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["b"]}]}, {"app": "a"}, True),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]}, {"app": "a"}, False),
        ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {"app": "a"}, True),
        ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {"x": "1"}, True),
        ({"matchLabels": {"app": "a"}, "matchExpressions": [{"key": "v", "operator": "Exists"}]}, {"app": "a"}, False),
        ({}, {"app": "a"}, True),  # an empty selector matches every pod
        (None, {"app": "a"}, False),  # no selector matches no pod
    ],
)
def test_label_selectors(selector: dict[str, Any] | None, peer_labels: dict[str, str], avoided: bool) -> None:
    anti = {"topologyKey": HOST}
    if selector is not None:
        anti["labelSelector"] = selector
    objects = [*nodes(2, gpus=2), queue("q")]
    objects += solo("peer", gpus=1, labels=peer_labels, node="n0")
    objects += solo("p", gpus=1, affinity=required("podAntiAffinity", anti))
    assert bound(run(objects)) == {"ns/p": "n1" if avoided else "n0"}


def test_match_label_keys_are_left_to_the_api_server() -> None:
    """The API server merges matchLabelKeys into labelSelector when it admits the pod; the scheduler
    (kube-scheduler and KAI) reads labelSelector only, so a term written with only matchLabelKeys
    merged by nobody still selects app=a of every version."""
    anti = term(HOST, {"app": "a"}, matchLabelKeys=["version"])
    objects = [*nodes(2, gpus=2), queue("q")]
    objects += solo("peer", gpus=1, labels={"app": "a", "version": "1"}, node="n0")
    objects += solo("p", gpus=1, labels={"app": "a", "version": "2"}, affinity=required("podAntiAffinity", anti))
    assert bound(run(objects)) == {"ns/p": "n1"}
    with tempfile.TemporaryDirectory() as tmp:
        snapshot = load_snapshot([write(objects, Path(tmp))], 0.0)
    assert any("matchLabelKeys ['version'] is not in labelSelector" in w for w in snapshot.warnings)


# -- preferred terms (the podaffinity score) ------------------------------------------------------


def test_preferred_anti_affinity_beats_bin_packing() -> None:
    objects = [*nodes(3), queue("q")]
    objects += solo("peer", gpus=4, labels={"app": "a"}, node="n0")  # binpack alone would pick n0
    objects += solo("p", gpus=1, affinity=preferred("podAntiAffinity", (1, term(HOST, {"app": "a"}))))
    assert bound(run(objects))["ns/p"] in ("n1", "n2")


def test_preferred_affinity_pulls_toward_the_peer() -> None:
    objects = [*nodes(4), queue("q")]
    objects += solo("busy", gpus=4, node="n0")
    objects += solo("peer", gpus=1, labels={"app": "b"}, node="n3")
    objects += solo("p", gpus=1, affinity=preferred("podAffinity", (1, term(HOST, {"app": "b"}))))
    assert bound(run(objects)) == {"ns/p": "n3"}


def test_preferred_terms_of_a_gang_follow_the_pods_placed_before_in_the_cycle() -> None:
    spread = preferred("podAntiAffinity", (10, term(HOST, {"app": "a"})))
    gang = [podgroup("g", "q", min_member=2)] + [
        pod(f"g{i}", group="g", gpus=1, labels={"app": "a"}, affinity=spread) for i in range(2)
    ]
    placed = bound(run([*nodes(3), queue("q"), *gang]))
    assert len(set(placed.values())) == 2


@pytest.mark.parametrize(("weight", "peers", "expected"), [(9, 1, "n0"), (11, 1, "n1"), (4, 2, "n0"), (6, 2, "n1")])
def test_preferred_score_is_the_raw_weight_sum_times_100000(weight: int, peers: int, expected: str) -> None:
    """KAI adds weight x matching pods x 100,000 (not a 0-100 normalised score): against the nominated
    node's 1,000,000, a sum of 10 ties (and binpack breaks the tie toward the fuller peer node)."""
    objects = [*nodes(3, gpus=4), queue("q")]
    for i in range(peers):
        objects += solo(f"peer{i}", gpus=1, labels={"app": "b"}, node="n1")
    objects += solo("p", gpus=1, affinity=preferred("podAffinity", (weight, term(HOST, {"app": "b"}))))
    objects[-1]["status"]["nominatedNodeName"] = "n0"
    assert bound(run(objects))["ns/p"] == expected


def test_an_existing_pods_preferred_anti_affinity_pushes_new_pods_away() -> None:
    objects = [*nodes(3, gpus=4), queue("q")]
    shy = preferred("podAntiAffinity", (5, term(HOST, {"app": "z"})))
    objects += solo("shy", gpus=3, labels={"app": "e"}, node="n0", affinity=shy)
    objects += solo("p", gpus=1, labels={"app": "z"})
    assert bound(run(objects))["ns/p"] in ("n1", "n2")


def test_an_existing_pods_required_affinity_adds_no_score() -> None:
    """kube-scheduler would add hardPodAffinityWeight (1) on the existing pod's node; KAI does not."""
    objects = [*nodes(3, gpus=4), queue("q")]
    objects += solo("busy", gpus=3, node="n0")
    objects += solo(
        "e", gpus=1, labels={"app": "e"}, node="n2", affinity=required("podAffinity", term(HOST, {"app": "z"}))
    )
    objects += solo("p", gpus=1, labels={"app": "z"})
    assert bound(run(objects)) == {"ns/p": "n0"}


def test_preferred_node_affinity_is_not_scored() -> None:
    """KAI's plugins score no preferred node affinity: binpack decides."""
    prefer_n1 = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": {"matchExpressions": [{"key": HOST, "operator": "In", "values": ["n1"]}]}}
            ]
        }
    }
    objects = [*nodes(2), queue("q"), *solo("busy", gpus=4, node="n0"), *solo("p", gpus=1, affinity=prefer_n1)]
    assert bound(run(objects)) == {"ns/p": "n0"}


# -- nominated node -------------------------------------------------------------------------------


def test_nominated_node_wins_over_bin_packing() -> None:
    objects = [*nodes(2, gpus=2), queue("q"), *solo("busy", gpus=1, node="n0"), *solo("p", gpus=1)]
    objects[-1]["status"]["nominatedNodeName"] = "n1"
    assert bound(run(objects)) == {"ns/p": "n1"}


# -- evictions --------------------------------------------------------------------------------------


@pytest.mark.parametrize("anti_affine", [True, False])
def test_a_releasing_pod_still_counts_so_evicting_the_peer_does_not_free_its_node(anti_affine: bool) -> None:
    """KAI keeps an evicted (releasing) pod on its node's pod list: preempting the only anti-affine
    peer does not make room for the preemptor in the same cycle, so nothing is evicted (without the
    anti-affinity, the same preemptor evicts the peer)."""
    objects = [node("n0", gpus=1, labels={HOST: "n0"}), queue("q", gpu=QUOTA)]
    objects += solo("low", gpus=1, labels={"app": "a"}, node="n0", priority_class="train")
    objects += solo("high", gpus=1, affinity=ANTI_A_HOST if anti_affine else None, priority_class="build")
    result = run(objects)
    evicted = [e["pod"] for e in result["rounds"][0]["evicted"]]
    assert evicted == ([] if anti_affine else ["ns/low"])
    if anti_affine:
        assert "1 node(s) didn't match pod anti-affinity rules" in message(result, "high")


def test_preempt_does_not_place_the_preemptor_beside_its_anti_affine_peer() -> None:
    objects = [*nodes(2, gpus=2), queue("q", gpu=QUOTA)]
    objects += solo("low", gpus=2, node="n0", priority_class="train")
    objects += solo("peer", gpus=1, labels={"app": "a"}, node="n1", priority_class="train")
    objects += solo("high", gpus=1, affinity=ANTI_A_HOST, priority_class="build")
    result = run(objects, rounds=2)
    first = result["rounds"][0]
    assert [e["pod"] for e in first["evicted"]] == ["ns/low"]  # n1's idle GPU is beside the peer
    assert first["pipelined"] == [{"pod": "ns/high", "node": "n0"}]
    assert running_on(result) == {"ns/high": "n0", "ns/peer": "n1"}


@pytest.mark.parametrize("anti_affine", [True, False])
def test_consolidation_does_not_move_an_anti_affine_peer_away_to_make_room(anti_affine: bool) -> None:
    """Moving the peer would free its node, but the peer counts there until it is gone: the
    anti-affine pod waits; without the anti-affinity, consolidation moves the peer."""
    objects = [*nodes(2, gpus=2), queue("q", gpu=QUOTA)]
    objects += solo("peer", gpus=1, labels={"app": "a"}, node="n0")
    objects += solo("fixed", gpus=1, node="n1", priority_class="build")  # non-preemptible: stays
    objects += solo("p", gpus=2, affinity=ANTI_A_HOST if anti_affine else None, created="2026-01-01T00:00:05Z")
    first = run(objects)["rounds"][0]
    if anti_affine:
        assert first["evicted"] == [] and first["pipelined"] == []
    else:
        assert [(e["pod"], e["action"]) for e in first["evicted"]] == [("ns/peer", "consolidation")]
        assert {p["pod"]: p["node"] for p in first["pipelined"]} == {"ns/p": "n0", "ns/peer": "n1"}


def test_reclaim_picks_a_victim_whose_node_the_reclaimer_may_use() -> None:
    dept = {"quota": 4, "overQuotaWeight": 1, "limit": -1}
    objects = [
        *nodes(2, gpus=2),
        queue("dept", gpu=dept),
        queue("q1", parent="dept", gpu={"quota": 2, "overQuotaWeight": 1, "limit": -1}),
        queue("q2", parent="dept", gpu={"quota": 1, "overQuotaWeight": 1, "limit": -1}),
    ]

    def in_queue(name: str, q: str, created: str, **kw: Any) -> list[dict[str, Any]]:
        return [podgroup(name, q, created=created), pod(name, group=name, created=created, **kw)]

    objects += in_queue("v0", "q2", "2026-01-01T00:00:01Z", gpus=2, node="n0")
    objects += in_queue("peer", "q2", "2026-01-01T00:00:00Z", gpus=1, labels={"app": "a"}, node="n1")
    objects += in_queue("v1", "q2", "2026-01-01T00:00:05Z", gpus=1, node="n1")  # the newest: first victim
    objects += in_queue("r", "q1", "2026-01-01T00:00:06Z", gpus=1, affinity=ANTI_A_HOST)
    first = run(objects)["rounds"][0]
    # Evicting v1 would free a GPU beside the peer, which r may not use: v0 on n0 goes instead.
    assert [(e["pod"], e["action"]) for e in first["evicted"]] == [("ns/v0", "reclaim")]
    assert first["pipelined"] == [{"pod": "ns/r", "node": "n0"}]


# -- input ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("affinity", "field"),
    [
        (required("podAntiAffinity", {"labelSelector": {}}), "topologyKey"),
        (preferred("podAffinity", (0, term(HOST, {"app": "a"}))), "weight"),
        (
            required(
                "podAffinity",
                term(HOST, None, labelSelector={"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}),
            ),
            "operator",
        ),
    ],
)
def test_terms_the_api_server_rejects_are_refused_naming_the_field(affinity: dict[str, Any], field: str) -> None:
    from kai.api.errors import InvalidInput

    with pytest.raises(InvalidInput) as err:
        run([*nodes(1), queue("q"), *solo("p", gpus=1, affinity=affinity)])
    assert "Pod ns/p" in str(err.value) and field in str(err.value)


def test_a_job_that_failed_for_its_anti_affinity_does_not_stop_a_look_alike_without_it() -> None:
    """Scheduling signatures skip a job like one that already failed; pod affinity is part of what a
    job looks like (as in KAI), so the plain job still reclaims."""
    dept = {"quota": 2, "overQuotaWeight": 1, "limit": -1}
    objects = [
        *nodes(2, gpus=1),
        queue("dept", gpu=dept),
        queue("q1", parent="dept", gpu={"quota": 2, "overQuotaWeight": 1, "limit": -1}),
        queue("q2", parent="dept", gpu={"quota": 0, "overQuotaWeight": 1, "limit": -1}),
    ]
    for i in range(2):
        objects += [podgroup(f"v{i}", "q2"), pod(f"v{i}", group=f"v{i}", gpus=1, labels={"app": "a"}, node=f"n{i}")]
    objects += [podgroup("picky", "q1", created="2026-01-01T00:00:01Z")]
    objects += [pod("picky", group="picky", gpus=1, affinity=ANTI_A_HOST, created="2026-01-01T00:00:01Z")]
    objects += [podgroup("plain", "q1", created="2026-01-01T00:00:02Z")]
    objects += [pod("plain", group="plain", gpus=1, created="2026-01-01T00:00:02Z")]
    first = run(objects)["rounds"][0]
    assert [e["by"] for e in first["evicted"]] == ["ns/plain"]
    assert [p["pod"] for p in first["pipelined"]] == ["ns/plain"]
