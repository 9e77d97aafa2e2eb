"""What a session reads at open, computed a column at a time, is what one node or pod at a time gives:
the node sums (kai.framework.session: _subtract_rows, _add_rows) to the bit (whole numbers, such as
millicores, bytes and devices, summed per row; anything else subtracted one pod at a time, in pod
order), and the MIG nodes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kai.api import keys
from kai.framework.gpushare import is_mig_node, mig_nodes
from kai.framework.session import _add_rows, _subtract_rows
from kai.model import NodeInfo, Resources


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(0, 40), st.booleans(), st.integers(0, 2**32))
def test_row_sums_equal_one_pod_at_a_time(nodes: int, pods: int, whole: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    start = np.asfortranarray(rng.integers(0, 10**12, (nodes, 3)).astype(float))
    rows = rng.integers(0, nodes, pods)
    amounts = rng.integers(0, 10**9, (pods, 3)).astype(float)
    if not whole:
        amounts = amounts / 7.0  # fractions whose sums depend on the order of the additions
    want, got = start.copy(order="F"), start.copy(order="F")
    for row, amount in zip(rows.tolist(), amounts, strict=True):
        want[row] -= amount
    _subtract_rows(got, rows, amounts)
    assert want.tobytes() == got.tobytes()
    zeros_want, zeros_got = np.zeros((nodes, 3)), np.zeros((nodes, 3))
    for row, amount in zip(rows.tolist(), amounts, strict=True):
        zeros_want[row] += amount
    _add_rows(zeros_got, rows, amounts)
    assert zeros_want.tobytes() == zeros_got.tobytes()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([None, "true", "false"]),
            st.sampled_from([None, "single", "mixed", "none"]),
            st.sampled_from([(), ("nvidia.com/mig-1g.10gb",), ("cpu", "nvidia.com/gpu")]),
        ),
        max_size=6,
    )
)
def test_mig_nodes_are_the_nodes_is_mig_node_names(specs: list[tuple[str | None, str | None, tuple[str, ...]]]) -> None:
    nodes = []
    for i, (enabled, strategy, resources) in enumerate(specs):
        labels = {}
        if enabled is not None:
            labels[keys.MIG_ENABLED_NODE_LABEL] = enabled
        if strategy is not None:
            labels[keys.MIG_STRATEGY_NODE_LABEL] = strategy
        nodes.append(NodeInfo(f"n{i}", Resources({r: 1.0 for r in resources}), labels))
    names = {r for n in nodes for r in n.allocatable.names()}
    want = [is_mig_node(n) for n in nodes]
    assert mig_nodes(nodes).tolist() == want
    assert mig_nodes(nodes, names).tolist() == want
