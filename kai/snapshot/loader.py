"""Loading a snapshot from YAML files: read, check the shape of every field, build, and refuse it whole
if anything is wrong."""

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
    result = build_snapshot(objects, now, scheduler_name)
    problems.extend(result.problems)
    if problems:
        raise InvalidInput(problems)
    return result.snapshot
