"""Parsing Kubernetes resource quantities ("500m", "1Gi", "2e3") into numbers.

Written by hand on purpose: it is a small, fully specified grammar, and the only
library that ships a parser (the Kubernetes client) is far too heavy to import
into the offline core for it.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

# The largest quantity accepted, in base units (bytes, cores, devices): int64, what Kubernetes' own
# Quantity.Value() can hold. `1e309`, `.inf` and `.nan` mean nothing and are refused.
MAX_QUANTITY = Decimal(2**63 - 1)

_SUFFIXES: dict[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity."""


def parse_quantity(value: object) -> Decimal:
    """Return the exact value of a quantity given as a string or a number."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, float) and not math.isfinite(value):
        raise QuantityError(f"{value!r} is not a finite quantity")
    if isinstance(value, int | float):
        return _bounded(Decimal(str(value)), value)
    if not isinstance(value, str):
        raise QuantityError(f"{_short(value)} is not a quantity")
    match = _QUANTITY.match(value.strip())
    if not match:
        raise QuantityError(f"{_short(value)} is not a quantity")
    number, suffix = match.group(1), match.group(2) or ""
    try:
        return _bounded(Decimal(number) * _SUFFIXES[suffix], value)
    except InvalidOperation as err:  # pragma: no cover - the regex admits only valid decimals
        raise QuantityError(f"{_short(value)} is not a quantity") from err


def _short(value: object) -> str:
    text = repr(value) if isinstance(value, str | int | float) else type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def _bounded(amount: Decimal, value: object) -> Decimal:
    if abs(amount) > MAX_QUANTITY:
        raise QuantityError(f"{_short(value)} is larger than any quantity Kubernetes holds (2^63 - 1)")
    return amount


# Parsed values by (unit, type, value): a cluster repeats a handful of quantities ("8Gi", "4") thousands
# of times. Only valid quantities are kept; the type is part of the key, since 1 == 1.0 == True.
_PARSED: dict[tuple[bool, type, object], float] = {}
_PARSED_MAX = 65536


def _cached(value: object, millis: bool) -> float:
    key = (millis, type(value), value)
    try:
        return _PARSED[key]
    except KeyError:
        pass
    except TypeError:  # not hashable: parse_quantity names it
        amount = parse_quantity(value)
        return float(amount * 1000) if millis else float(amount)
    amount = parse_quantity(value)
    result = float(amount * 1000) if millis else float(amount)
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.clear()
    _PARSED[key] = result
    return result


def cpu_millis(value: object) -> float:
    """CPU quantity in millicores."""
    return _cached(value, True)


def as_float(value: object) -> float:
    """Any quantity (memory bytes, GPUs, pods, extended resources) as a float of base units."""
    return _cached(value, False)
