"""The values of a Queue's `spec.resources.<gpu|cpu|memory>` that KAI accepts but that are odd.

KAI's Queue CRD types `quota`, `overQuotaWeight` and `limit` as plain numbers, and KAI uses whatever
number it gets: only -1 means unlimited. So kai accepts every finite number too (a string, a boolean,
NaN or infinity is refused, as the API server or JSON would) and warns, naming the field, about the
values that rarely mean what their author wanted. The snapshot builder and the admission webhook both
say it in these words.
"""

from __future__ import annotations

UNLIMITED = -1.0


def odd_queue_values(resource: str, quota: float, weight: float, limit: float) -> list[tuple[str, str]]:
    """(field, message) for each odd value of one resource (`gpu`, `cpu` or `memory`), in KAI units."""
    odd: list[tuple[str, str]] = []
    if weight < 0:
        odd.append(
            (
                "overQuotaWeight",
                f"{weight:g} is negative: used as given, as KAI does (sibling weights are divided by their sum, "
                "so a negative weight can leave the surplus to no one or to one queue alone)",
            )
        )
    if quota < 0 and quota != UNLIMITED:
        odd.append(
            (
                "quota",
                f"{quota:g} is negative and not -1 (unlimited): used as given, as KAI does (the queue's share "
                "starts below zero and its siblings divide the difference)",
            )
        )
    if limit < 0 and limit != UNLIMITED:
        odd.append(
            (
                "limit",
                f"{limit:g} is negative and not -1 (unlimited): nothing that asks for {resource} can run in this "
                "queue, as with a limit of 0 (as in KAI)",
            )
        )
    elif limit != UNLIMITED and quota != UNLIMITED and quota > limit:
        odd.append(("quota", f"{quota:g} is above the limit ({limit:g}): the limit wins, as in KAI"))
    return odd
