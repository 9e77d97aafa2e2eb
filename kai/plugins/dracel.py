"""CEL device selectors, evaluated as Kubernetes' structured DRA allocator does (with cel-python).

An expression sees one `device`: `device.driver`, `device.attributes["<domain>"].<id>` (int, bool,
string or semantic version), `device.capacity["<domain>"].<id>` (a quantity) and
`device.allowMultipleAllocations`. A domain the device has no attribute in is an empty map (so
`has(device.attributes["x"].y)` is false); a missing attribute is a runtime error. Kubernetes' CEL
library functions selectors use are here: `quantity()`, `isQuantity()`, `semver()`, `isSemver()` and
the methods `compareTo`, `isGreaterThan`, `isLessThan`, `asInteger`, `asApproximateFloat`, `isInteger`,
`sign`, `add`, `sub`, `major`, `minor`, `patch`.

Each expression is compiled once (`Selectors.compile`), and its result is kept per device, or rather per
what of the device it names (the driver, and the attributes and capacities whose name it mentions):
the GPUs of a slice, alike but for their uuid and index, cost one evaluation. A selector that does
not compile or fails on a device makes that device not match, and the error is kept for the
why-pending message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kai.api.quantity import QuantityError, as_float
from kai.model import Device, SemVer

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z.-]+)?$"
)


_TOKEN = re.compile(r"[A-Za-z0-9_]+")
# Macros and functions that walk a map or list: such an expression may see every attribute.
_ITERATES = re.compile(r"\b(all|exists|exists_one|map|filter|size)\s*\(|\.\s*(all|exists|exists_one|map|filter)\b")


MAX_COMPILED = 4096
# expression -> (program, "") or (None, why it does not compile); shared by every session.
_COMPILED: dict[str, tuple[Any, str]] = {}


class CelError(Exception):
    """A selector that does not compile or cannot be evaluated on a device."""


@dataclass(frozen=True, slots=True)
class Quantity:
    value: float


@dataclass(frozen=True, slots=True)
class Version:
    major: int
    minor: int
    patch: int
    pre: tuple[Any, ...] = ()

    @staticmethod
    def parse(text: str) -> Version:
        found = _SEMVER.match(str(text).strip())
        if not found:
            raise CelError(f"{text!r} is not a semantic version")
        pre = tuple(int(p) if p.isdigit() else p for p in (found.group(4) or "").split(".") if p)
        return Version(int(found.group(1)), int(found.group(2)), int(found.group(3)), pre)

    def key(self) -> tuple[Any, ...]:
        # A pre-release sorts before its release; numeric identifiers before alphanumeric ones.
        pre = tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, pre)


def _celpy() -> Any:
    import celpy  # imported on first use: only snapshots with DRA objects need it

    return celpy


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return (a.value > b.value) - (a.value < b.value)
    if isinstance(a, Version) and isinstance(b, Version):
        return (a.key() > b.key()) - (a.key() < b.key())
    raise CelError(f"cannot compare {type(a).__name__} with {type(b).__name__}")


def _functions() -> dict[str, Any]:
    from celpy import celtypes

    def quantity(text: Any) -> Quantity:
        try:
            return Quantity(as_float(str(text)))
        except QuantityError as err:
            raise CelError(f"quantity({str(text)!r}): not a quantity") from err

    def is_quantity(text: Any) -> Any:
        try:
            as_float(str(text))
        except QuantityError:
            return celtypes.BoolType(False)
        return celtypes.BoolType(True)

    def is_semver(text: Any) -> Any:
        return celtypes.BoolType(bool(_SEMVER.match(str(text).strip())))

    def number(q: Any) -> float:
        if not isinstance(q, Quantity):
            raise CelError("expected a quantity")
        return q.value

    return {
        "quantity": quantity,
        "isQuantity": is_quantity,
        "semver": lambda text: Version.parse(str(text)),
        "isSemver": is_semver,
        "compareTo": lambda a, b: celtypes.IntType(_compare(a, b)),
        "isGreaterThan": lambda a, b: celtypes.BoolType(_compare(a, b) > 0),
        "isLessThan": lambda a, b: celtypes.BoolType(_compare(a, b) < 0),
        "asInteger": lambda q: celtypes.IntType(int(number(q))),
        "asApproximateFloat": lambda q: celtypes.DoubleType(number(q)),
        "isInteger": lambda q: celtypes.BoolType(float(number(q)).is_integer()),
        "sign": lambda q: celtypes.IntType((number(q) > 0) - (number(q) < 0)),
        "add": lambda a, b: Quantity(number(a) + (number(b) if isinstance(b, Quantity) else float(b))),
        "sub": lambda a, b: Quantity(number(a) - (number(b) if isinstance(b, Quantity) else float(b))),
        "major": lambda v: celtypes.IntType(v.major),
        "minor": lambda v: celtypes.IntType(v.minor),
        "patch": lambda v: celtypes.IntType(v.patch),
    }


def _activation(device: Device) -> dict[str, Any]:
    """The `device` variable of Kubernetes' DRA CEL environment."""
    from celpy import celtypes

    class DomainMap(celtypes.MapType):  # type: ignore[misc]
        """A map of domains: an unknown domain is an empty map, as in Kubernetes."""

        def __getitem__(self, key: Any) -> Any:
            try:
                return super().__getitem__(key)
            except KeyError:
                return celtypes.MapType({})

    def value(v: Any) -> Any:
        if isinstance(v, bool):
            return celtypes.BoolType(v)
        if isinstance(v, int):
            return celtypes.IntType(v)
        if isinstance(v, SemVer):
            try:
                return Version.parse(v.text)
            except CelError:
                return celtypes.StringType(v.text)
        return celtypes.StringType(str(v))

    def domains(values: dict[str, Any], convert: Any) -> Any:
        grouped: dict[str, dict[Any, Any]] = {}
        for name, v in values.items():
            domain, _, ident = name.rpartition("/")
            grouped.setdefault(domain, {})[celtypes.StringType(ident)] = convert(v)
        return DomainMap({celtypes.StringType(d): celtypes.MapType(m) for d, m in grouped.items()})

    return {
        "device": celtypes.MapType(
            {
                celtypes.StringType("driver"): celtypes.StringType(device.driver),
                celtypes.StringType("attributes"): domains(device.attributes, value),
                celtypes.StringType("capacity"): domains(device.capacity, Quantity),
                celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(False),
            }
        )
    }


class Selectors:
    """Compiled selectors and their results per device, for one session."""

    def __init__(self) -> None:
        self._programs: dict[str, Any] = {}
        self._results: dict[tuple[str, tuple[Any, ...]], bool] = {}
        self._tokens: dict[str, frozenset[str]] = {}
        self._activations: dict[str, dict[str, Any]] = {}
        self.last_error = ""  # the latest evaluation error, for messages

    def compile(self, expression: str) -> str:
        """Compile once (programs are kept across sessions); "" when it compiles, else the error."""
        if expression in self._programs:
            return ""
        found = _COMPILED.get(expression)
        if found is None:
            celpy = _celpy()
            env = celpy.Environment()
            try:
                found = (env.program(env.compile(expression), functions=_functions()), "")
            except Exception as err:  # cel-python raises several types for a bad expression
                found = (None, f"CEL expression {expression!r} does not compile: {err}")
            if len(_COMPILED) >= MAX_COMPILED:
                _COMPILED.clear()
            _COMPILED[expression] = found
        program, error = found
        if error:
            return error
        self._programs[expression] = program
        return ""

    def _projection(self, expression: str, device: Device) -> tuple[Any, ...]:
        """What of the device the expression can see: the driver and the attributes and capacities whose
        name it mentions. Devices alike in those get one evaluation (a slice's GPUs differ only in uuid, index...).
        An expression that iterates (macros) sees everything: the device itself is the key."""
        tokens = self._tokens.get(expression)
        if tokens is None:
            if _ITERATES.search(expression):
                tokens = self._tokens[expression] = frozenset()
            else:
                tokens = self._tokens[expression] = frozenset(_TOKEN.findall(expression)) | {""}
        if not tokens:
            return ("device", device.key)

        def seen(values: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
            out = []
            for name, value in values.items():
                if name.rpartition("/")[2] in tokens:
                    out.append((name, value))
            return tuple(sorted(out, key=lambda kv: kv[0]))

        return (device.driver, seen(device.attributes), seen(device.capacity))

    def matches(self, expression: str, device: Device) -> bool:
        key = (expression, self._projection(expression, device))
        found = self._results.get(key)
        if found is not None:
            return found
        error = self.compile(expression)
        result = False
        if not error:
            activation = self._activations.get(device.key)
            if activation is None:
                activation = self._activations[device.key] = _activation(device)
            try:
                out = self._programs[expression].evaluate(activation)
            except Exception as err:  # a runtime error: the device does not match
                out = err
            from celpy import celtypes

            if isinstance(out, celtypes.BoolType):
                result = bool(out)
            else:
                error = f"CEL expression {expression!r} failed on device {device.key}: {out}"
        if error:
            self.last_error = error
        self._results[key] = result
        return result
