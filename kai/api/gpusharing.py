"""The GPU-sharing annotations of a pod (gpu-fraction, gpu-memory, gpu-fraction-num-devices, mps) and
the rules they must follow. One place for the rules: the snapshot loader and the admission webhook
both call `parse_gpu_sharing`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kai.api import keys

MPS_ANNOTATION = "mps"


@dataclass(frozen=True, slots=True)
class GpuSharing:
    fraction: float = 0.0
    memory_mib: int = 0
    num_devices: int = 1
    problems: tuple[tuple[str, str], ...] = field(default=())  # (field path, message)

    @property
    def shared(self) -> bool:
        return self.fraction > 0 or self.memory_mib > 0


def _annotation(key: str) -> str:
    return f"metadata.annotations[{key}]"


def parse_gpu_sharing(annotations: Mapping[str, object], whole_gpus: float) -> GpuSharing:
    """Read the annotations of a pod that asks for `whole_gpus` nvidia.com/gpu; list every broken rule."""
    problems: list[tuple[str, str]] = []

    def number(key: str, parse: Callable[[str], float], valid: Callable[[float], bool], rule: str) -> float:
        raw = annotations.get(key)
        if raw is None:
            return 0
        try:
            value = parse(str(raw))
        except ValueError:
            value = None
        if value is None or not valid(value):
            problems.append((_annotation(key), f"must be {rule}, got {raw!r}"))
            return 0
        return value

    fraction = number(
        keys.GPU_FRACTION_ANNOTATION,
        float,
        lambda v: 0 < v < 1,
        f"a number between 0 and 1 (exclusive: whole GPUs are asked for with {keys.GPU_RESOURCE})",
    )
    memory = int(number(keys.GPU_MEMORY_ANNOTATION, int, lambda v: v > 0, "a positive whole number of MiB"))
    devices = int(number(keys.GPU_FRACTION_NUM_DEVICES_ANNOTATION, int, lambda v: v > 0, "a positive whole number"))
    has_fraction = keys.GPU_FRACTION_ANNOTATION in annotations
    has_memory = keys.GPU_MEMORY_ANNOTATION in annotations
    if has_fraction and whole_gpus:
        problems.append(
            (_annotation(keys.GPU_FRACTION_ANNOTATION), f"cannot be combined with a request of {keys.GPU_RESOURCE}")
        )
    if has_memory and whole_gpus:
        problems.append(
            (_annotation(keys.GPU_MEMORY_ANNOTATION), f"cannot be combined with a request of {keys.GPU_RESOURCE}")
        )
    if has_memory and has_fraction:
        problems.append(
            (_annotation(keys.GPU_MEMORY_ANNOTATION), f"cannot be combined with {keys.GPU_FRACTION_ANNOTATION}")
        )
    if keys.GPU_FRACTION_NUM_DEVICES_ANNOTATION in annotations and not (has_fraction or has_memory):
        problems.append(
            (
                _annotation(keys.GPU_FRACTION_NUM_DEVICES_ANNOTATION),
                f"needs {keys.GPU_FRACTION_ANNOTATION} or {keys.GPU_MEMORY_ANNOTATION}",
            )
        )
    if str(annotations.get(MPS_ANNOTATION, "")).lower() == "true" and not (has_fraction or has_memory):
        problems.append(
            (_annotation(MPS_ANNOTATION), f"needs {keys.GPU_FRACTION_ANNOTATION} or {keys.GPU_MEMORY_ANNOTATION}")
        )
    if problems:
        return GpuSharing(problems=tuple(problems))
    return GpuSharing(fraction, memory, devices or 1)
