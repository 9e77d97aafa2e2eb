"""CEL device selectors as Kubernetes evaluates them: attributes by domain, capacities as quantities,
semantic versions, an unknown domain as an empty map, errors as no match (with the reason kept)."""

from __future__ import annotations

import pytest

from kai.model import Device, SemVer
from kai.plugins.dracel import Selectors

GPU = Device(
    "gpu.nvidia.com",
    "n1",
    "gpu-0",
    node="n1",
    attributes={
        "gpu.nvidia.com/model": "H100",
        "gpu.nvidia.com/index": 3,
        "gpu.nvidia.com/mig": False,
        "gpu.nvidia.com/driverVersion": SemVer("550.54.15"),
        "example.com/rack": "r7",
    },
    capacity={"gpu.nvidia.com/memory": 80 * 2**30},
)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('device.driver == "gpu.nvidia.com"', True),
        ('device.attributes["gpu.nvidia.com"].model == "H100"', True),
        ('device.attributes["gpu.nvidia.com"].model.startsWith("A")', False),
        ('device.attributes["gpu.nvidia.com"].index >= 2 && !device.attributes["gpu.nvidia.com"].mig', True),
        ('device.attributes["example.com"].rack in ["r6", "r7"]', True),
        ('has(device.attributes["other.org"].rack)', False),  # an unknown domain is an empty map
        ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) == 0', True),
        ('device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("40Gi"))', True),
        ('device.capacity["gpu.nvidia.com"].memory.isLessThan(quantity("40Gi"))', False),
        ('device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("535.0.0"))', True),
        ('device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("550.54.15")) == 0', True),
        ('device.attributes["gpu.nvidia.com"].driverVersion.major() == 550', True),
        ('isSemver("1.2.3") && !isSemver("1.2")', True),
        ('semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))', True),
    ],
)
def test_selectors(expression: str, expected: bool) -> None:
    assert Selectors().matches(expression, GPU) is expected


def test_a_missing_attribute_or_a_type_error_is_no_match_and_says_why() -> None:
    sel = Selectors()
    assert not sel.matches('device.attributes["gpu.nvidia.com"].vendor == "x"', GPU)
    assert "failed on device gpu.nvidia.com/n1/gpu-0" in sel.last_error
    assert not sel.matches('device.attributes["gpu.nvidia.com"].model > 3', GPU)


def test_a_bad_expression_is_reported_once_compiled() -> None:
    sel = Selectors()
    assert "does not compile" in sel.compile("device.driver ==")
    assert sel.compile('device.driver == "x"') == ""


def test_devices_alike_in_what_the_expression_names_share_one_result() -> None:
    """Two GPUs differing only in index: a model selector is evaluated once, an index one twice."""
    other = Device("gpu.nvidia.com", "n1", "gpu-1", node="n1", attributes={**GPU.attributes, "gpu.nvidia.com/index": 4})
    sel = Selectors()
    model = 'device.attributes["gpu.nvidia.com"].model == "H100"'
    index = 'device.attributes["gpu.nvidia.com"].index == 3'
    assert sel.matches(model, GPU) and sel.matches(model, other)
    assert sel.matches(index, GPU) and not sel.matches(index, other)
    assert sum(1 for key in sel._results if key[0] == model) == 1
    assert sum(1 for key in sel._results if key[0] == index) == 2
