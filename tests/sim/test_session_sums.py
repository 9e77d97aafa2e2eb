"""The session's node sums (kai.framework.session: _subtract_rows, _add_rows) are the sums one pod at a
time would give, to the bit: whole numbers (millicores, bytes, devices) are summed per row, anything
else is subtracted one pod at a time, in pod order."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kai.framework.session import _add_rows, _subtract_rows


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
