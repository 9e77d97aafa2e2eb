"""RFC 3339 timestamps and Go-style durations, as they appear in Kubernetes objects."""

from __future__ import annotations

import re
from datetime import UTC, datetime

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_time(value: object) -> float:
    """Epoch seconds of an RFC 3339 timestamp (YAML may already have turned it into a datetime)."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        moment = datetime.fromisoformat(value.strip().replace("z", "Z"))
    else:
        raise ValueError(f"{value!r} is not an RFC 3339 timestamp")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def format_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_duration(value: object) -> float:
    """Seconds of a Go duration such as `90s`, `1h30m` or `-5m` (a bare number is seconds)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{value!r} is not a duration")
    text = value.strip()
    sign = -1.0 if text.startswith("-") else 1.0
    text = text.lstrip("+-")
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise ValueError(f"{value!r} is not a duration (like 90s, 5m or 1h30m)")
    return sign * total
