"""Loading a snapshot from YAML files: read, check the shape of every field, build, and refuse it whole
if anything is wrong.

What is wrong (the rule, once, for the loader and the builder behind it):

- **Refuse** only what the API server itself would reject (KAI's CRD schemas: a string where the
  Queue's `quota` is `type: number`, a fractional whole-GPU request, a malformed quantity or
  timestamp) or what cannot mean anything (NaN or infinity, a pod naming a queue or PodGroup that does
  not exist, a queue cycle); each refusal is one problem naming the object and the field.
- **Accept** every value KAI accepts, with KAI's meaning, and **warn** (naming the object and field)
  on the merely odd: a negative `overQuotaWeight`, a quota or limit below zero other than -1, a quota
  above its limit, objects of kinds kai does not read, a pod using a feature kai has not built (a DRA
  request with alternatives, `firstAvailable`: recorded in the snapshot's `unsupported`, which the
  live scheduler counts).
"""

from __future__ import annotations

from pathlib import Path

from kai.api import keys
from kai.api.errors import InvalidInput
from kai.model import ClusterSnapshot
from kai.snapshot.builder import build_snapshot
from kai.snapshot.reader import read_objects
from kai.snapshot.shape import check_shapes


def load_snapshot(paths: list[str | Path], now: float, scheduler_name: str = keys.SCHEDULER_NAME) -> ClusterSnapshot:
    """The snapshot in the files; raises InvalidInput listing every problem found."""
    objects, problems = read_objects(paths)
    objects, shape_problems = check_shapes(objects)
    problems.extend(shape_problems)
    result = build_snapshot(objects, now, scheduler_name, storage_listed=True)  # the files are the whole cluster
    problems.extend(result.problems)
    if problems:
        raise InvalidInput(problems)
    return result.snapshot
