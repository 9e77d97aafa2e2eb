"""The GPU-sharing annotations of a pod (gpu-fraction, gpu-memory, gpu-fraction-num-devices, mps) and
the rules they must follow. One place for the rules: the snapshot loader and the admission webhook
both call `parse_gpu_sharing`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kai.api import keys
from kai.api.errors import show

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
            value = parse(str(raw).strip())
        except ValueError:
            value = None
        if value is None or not valid(value):
            problems.append((_annotation(key), f"must be {rule}, got {show(raw)}"))
            return 0
        return value

    fraction = number(keys.GPU_FRACTION_ANNOTATION, float, lambda v: 0 < v < 1, "a number between 0 and 1 (exclusive)")
    memory = int(number(keys.GPU_MEMORY_ANNOTATION, int, lambda v: v > 0, "a positive integer (MiB)"))
    devices = int(number(keys.GPU_FRACTION_NUM_DEVICES_ANNOTATION, int, lambda v: v > 0, "a positive integer"))
    has_fraction = keys.GPU_FRACTION_ANNOTATION in annotations
    has_memory = keys.GPU_MEMORY_ANNOTATION in annotations
    shared = f"{keys.GPU_FRACTION_ANNOTATION} or {keys.GPU_MEMORY_ANNOTATION}"
    with_whole = (
        f"cannot be combined with a whole-GPU request ({keys.GPU_RESOURCE}: {whole_gpus:g}); ask for one or the other"
    )
    if has_fraction and whole_gpus:
        problems.append((_annotation(keys.GPU_FRACTION_ANNOTATION), with_whole))
    if has_memory and whole_gpus:
        problems.append((_annotation(keys.GPU_MEMORY_ANNOTATION), with_whole))
    if has_memory and has_fraction:
        problems.append(
            (
                _annotation(keys.GPU_MEMORY_ANNOTATION),
                f"cannot be combined with {keys.GPU_FRACTION_ANNOTATION}; ask for a fraction or an amount of memory",
            )
        )
    if keys.GPU_FRACTION_NUM_DEVICES_ANNOTATION in annotations and not (has_fraction or has_memory):
        problems.append(
            (_annotation(keys.GPU_FRACTION_NUM_DEVICES_ANNOTATION), f"needs {shared} (the share to take on each GPU)")
        )
    if str(annotations.get(MPS_ANNOTATION, "")).strip().lower() == "true" and not (has_fraction or has_memory):
        problems.append((_annotation(MPS_ANNOTATION), f"MPS is only for shared GPUs: set {shared}"))
    if problems:
        return GpuSharing(problems=tuple(problems))
    return GpuSharing(fraction, memory, devices or 1)
