"""The fuzz property, in the normal test suite at a size that fits CI (KAI_FUZZ_CASES raises it; `make fuzz`
runs 10,000 cases per suite through `tests.fuzz.census`).

Mutated snapshots, configs and AdmissionReviews end in exit 0 with contract-valid JSON (or an allowed
review), or in a clean error naming object and field (or a denial in AdmissionReview form): never an
internal error, never a signal. In-process (the real command, its streams captured), except a handful
of snapshots through the real `kai` binary under a 1 GiB memory limit.
"""

from __future__ import annotations

import logging
import os

import pytest
from hypothesis import HealthCheck, given, settings

from tests.fuzz import mutate, outcome

CASES = int(os.environ.get("KAI_FUZZ_CASES", "120"))
FUZZ = settings(
    max_examples=CASES, deadline=None, database=None, suppress_health_check=list(HealthCheck), derandomize=True
)


@pytest.fixture(autouse=True)
def quiet_webhook() -> None:
    logging.getLogger("kai.admission").setLevel(logging.CRITICAL)


@FUZZ
@given(mutate.snapshot_files())
def test_mutated_snapshots(data: bytes) -> None:
    result = outcome.snapshot_case(data)
    assert result.kind in ("ok", "clean"), result.detail


@settings(FUZZ, max_examples=max(CASES // 2, 10))
@given(mutate.admission_requests())
def test_mutated_admission_reviews(case: tuple[str, bytes]) -> None:
    path, data = case
    result = outcome.admission_case(path, data)
    assert result.kind in ("ok", "clean"), result.detail


# The property for the whole configuration path: reading the file and parsing every field.
@settings(FUZZ, max_examples=max(CASES // 2, 10))
@given(mutate.config_files())
def test_mutated_configs(data: bytes) -> None:
    result = outcome.config_case(data)
    assert result.kind in ("ok", "clean"), result.detail


@settings(FUZZ, max_examples=5)
@given(mutate.snapshot_files())
def test_mutated_snapshots_through_the_real_cli(data: bytes) -> None:
    result = outcome.snapshot_case(data, cli=True)
    assert result.kind in ("ok", "clean"), result.detail
