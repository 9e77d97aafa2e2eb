"""Properties of the fair-share division that must hold for any input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kai.plugins.proportion.fairshare import ShareRequest, divide

amount = st.integers(min_value=0, max_value=64).map(float)
limit = st.one_of(st.just(-1.0), amount)


@st.composite
def level(draw: st.DrawFn) -> tuple[float, list[ShareRequest]]:
    total = float(draw(st.integers(min_value=0, max_value=128)))
    count = draw(st.integers(min_value=1, max_value=6))
    queues = []
    budget = total  # guaranteed quotas that fit in what exists (KAI gives each its quota regardless)
    for i in range(count):
        deserved = draw(st.one_of(st.just(0.0), st.floats(min_value=0, max_value=budget).map(float)))
        budget -= deserved
        queues.append(
            ShareRequest(
                f"q{i}",
                deserved,
                draw(limit),
                draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0])),
                draw(st.sampled_from([50, 100, 200])),
                draw(amount),
                float(draw(amount)),
            )
        )
    return total, queues


@settings(max_examples=300, deadline=None)
@given(level())
def test_shares_stay_within_total_limits_and_demand(case: tuple[float, list[ShareRequest]]) -> None:
    total, queues = case
    shares = divide(total, queues)
    assert sum(shares.values()) <= total + 1e-6
    for q in queues:
        assert shares[q.name] >= 0
        assert shares[q.name] <= q.request + 1e-6
        if q.limit >= 0:
            assert shares[q.name] <= q.limit + 1e-6


@settings(max_examples=300, deadline=None)
@given(level())
def test_nothing_is_left_idle_while_someone_with_weight_wants_more(case: tuple[float, list[ShareRequest]]) -> None:
    total, queues = case
    shares = divide(total, queues)
    left = total - sum(shares.values())
    hungry = [q for q in queues if q.weight > 0 and q.requestable - shares[q.name] >= 1]
    if hungry:
        assert left < 1 + 1e-6 * len(queues) or all(q.weight == 0 for q in hungry)


@settings(max_examples=200, deadline=None)
@given(level())
def test_same_input_same_output_whatever_the_order(case: tuple[float, list[ShareRequest]]) -> None:
    total, queues = case
    first = divide(total, queues)
    assert first == divide(total, queues)  # exactly the same for the same input
    assert divide(total, list(reversed(queues))) == pytest.approx(first, abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=100), st.integers(min_value=2, max_value=6))
def test_equal_queues_differ_by_at_most_one_gpu(total: int, count: int) -> None:
    queues = [ShareRequest(f"q{i}", 0, -1, 1, 100, 1000) for i in range(count)]
    shares = divide(float(total), queues).values()
    assert max(shares) - min(shares) <= 1
    assert sum(shares) == total
