"""Dividing one resource among sibling queues: deserved quota first, then the surplus by priority
level and over-quota weight, in whole units, and the flooring remainder last.

A pure function of numbers, so that it can be checked by hand and by property tests.

Values are used as KAI uses them, odd ones included: only -1 means unlimited (a quota of -2 is a
share that starts at -2, a limit of -2 caps at -2); over-quota weights are divided by their sum over
the queues still wanting more, whatever their sign, and a level whose weights sum to zero gives no
one any surplus.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

UNLIMITED = -1.0
EPS = 1e-9


@dataclass(frozen=True, slots=True)
class ShareRequest:
    """One sibling queue's inputs for one resource (core units; -1 = unlimited)."""

    name: str
    deserved: float
    limit: float
    weight: float
    priority: int
    request: float
    creation: float = 0.0
    usage: float = 0.0  # normalised historical usage (time-based fair share); 0 without it

    @property
    def requestable(self) -> float:
        return self.request if self.limit == UNLIMITED else min(self.request, self.limit)


def divide(total: float, queues: list[ShareRequest], k_value: float = 1.0) -> dict[str, float]:
    """Fair share of each queue out of `total`."""
    share = {q.name: 0.0 for q in queues}
    if not queues:
        return share
    # 1. Deserved phase: every queue that asks for something gets its quota (all of `total` for -1), capped
    # by what it can use.
    for q in queues:
        if q.request <= 0:
            continue  # no demand, no share
        deserved = total if q.deserved == UNLIMITED else q.deserved
        share[q.name] = min(deserved, q.requestable)
    # Sums are exact (math.fsum), so that the result does not depend on the order of the queues.
    remaining = total - math.fsum(share.values())
    if remaining <= EPS:
        return share

    leftovers: dict[str, float] = {}
    levels = sorted({q.priority for q in queues}, reverse=True)
    # 2. Over-quota phase: strictly by priority level; within a level by weight, whole units per round.
    for level in levels:
        members = [q for q in queues if q.priority == level]
        while remaining > EPS:
            hungry = [q for q in members if q.request > 0 and q.requestable - share[q.name] > EPS]
            weight_sum = math.fsum(q.weight for q in hungry)
            if not hungry or weight_sum == 0:
                break
            weights = {}
            for q in hungry:
                normalised = q.weight / weight_sum
                weights[q.name] = max(0.0, normalised + k_value * (normalised - q.usage))
            weight_total = math.fsum(weights.values())
            if weight_total <= EPS:
                break
            someone_sated = False
            for q in hungry:
                portion = remaining * weights[q.name] / weight_total
                wanted = q.requestable - share[q.name]
                if wanted <= portion + EPS:
                    share[q.name] += wanted
                    someone_sated = True
                else:
                    whole = math.floor(portion + EPS)
                    share[q.name] += whole
                    leftovers[q.name] = portion - whole
            remaining = total - math.fsum(share.values())
            if not someone_sated:
                break
    # 3. Remainder phase: what flooring left goes one unit at a time to the largest leftovers.
    for level in levels:
        if remaining <= EPS:
            break
        members = [q for q in queues if q.priority == level and leftovers.get(q.name, 0.0) > EPS]
        members.sort(key=lambda q: (-leftovers[q.name], q.creation, q.name))
        for q in members:
            if remaining <= EPS:
                break
            give = min(1.0, remaining, q.requestable - share[q.name])
            if give > EPS:
                share[q.name] += give
                remaining -= give
    return share
