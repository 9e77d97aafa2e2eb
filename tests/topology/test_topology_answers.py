"""The topology plugin keeps its SubsetNodes answers within a session, under the candidate nodes, their
free room and the batch. The same question asked again after evictions (and after their rollback) must
be answered from the room at that moment, never from an answer kept under another room."""

from __future__ import annotations

import numpy as np

from kai.framework.session import NodeSubset, Session, SubsetRequest
from kai.framework.statement import Statement
from kai.framework.status import Status
from kai.model import PodStatus
from tests.topology.test_topology import RACK, constraint
from tests.topology.test_topology_precheck import full_racks, gang, session


def ask(ssn: Session, job: str) -> list[NodeSubset] | Status | None:
    pending = [p for p in ssn.jobs[f"ns/{job}"].pods if p.status is PodStatus.PENDING]
    return ssn.subset_nodes(SubsetRequest(ssn.jobs[f"ns/{job}"], None, pending, None))


def evict_runs(stmt: Statement, ssn: Session, nodes: list[str]) -> None:
    for name in nodes:
        for p in ssn.jobs[f"ns/run-{name}"].pods:
            stmt.evict(p, "reclaim")


def test_the_answer_follows_the_room_of_the_candidate_nodes() -> None:
    # 1 block x 2 racks x 2 nodes, all full; two 8-GPU pods required in one rack.
    ssn = session([*full_racks(1, 2, 2), *gang("g", [8, 8], constraint(required=RACK))])
    assert isinstance(ask(ssn, "g"), Status)  # no rack has room

    stmt = Statement(ssn)
    mark = stmt.checkpoint()
    evict_runs(stmt, ssn, ["b0-r1-n0", "b0-r1-n1"])  # rack r1 releases 16 GPUs
    found = ask(ssn, "g")
    assert isinstance(found, list)
    assert [s.name for s in found] == ["topology domain b0.r1"]
    rows = sorted(ssn.nodes.index[n] for n in ("b0-r1-n0", "b0-r1-n1"))
    assert np.flatnonzero(found[0].mask).tolist() == rows

    stmt.rollback(mark)  # the room is back to none: the same question gets the first answer again
    assert isinstance(ask(ssn, "g"), Status)

    evict_runs(stmt, ssn, ["b0-r0-n0", "b0-r1-n0"])  # 8 GPUs in each rack: still no rack for both pods
    assert isinstance(ask(ssn, "g"), Status)
    evict_runs(stmt, ssn, ["b0-r0-n1"])  # rack r0 now releases 16
    found = ask(ssn, "g")
    assert isinstance(found, list) and found[0].name == "topology domain b0.r0"
