"""RFC 3339 timestamps and Go-style durations, as they appear in Kubernetes objects."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

# One element of a Go duration: digits with an optional fraction (`5`, `.5`, `5.`, `1.25`) and a unit.
# `µs` is written with the micro sign (U+00B5) or the Greek mu (U+03BC), as Go accepts both.
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_NUMBER = re.compile(r"[0-9]*(?:\.[0-9]*)?")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_MAX_DURATION_SECONDS = (2**63 - 1) / 1e9  # Go's time.Duration is int64 nanoseconds

# The form the API server writes (`2026-01-01T12:34:56Z`) is read as the epoch of its hour, parsed in
# full once per hour, plus its minutes and seconds; any other text takes the full parser.
_HOUR = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T(?:[01][0-9]|2[0-3]):"  # `YYYY-MM-DDTHH:` (compiled on first use)
_SIXTY = {f"{n:02d}": n for n in range(60)}  # `00` to `59`
_hours: dict[str, float | None] = {}  # `YYYY-MM-DDTHH:` -> epoch seconds, None when not a valid hour
_MAX_HOURS = 100_000


def parse_time_text(text: str) -> float:
    """parse_time of a text; the API server's own form on a short path."""
    if len(text) == 20 and text[16] == ":" and text[19] == "Z":
        minute, second = _SIXTY.get(text[14:16]), _SIXTY.get(text[17:19])
        if minute is not None and second is not None:
            prefix = text[:14]
            hour = _hours.get(prefix, False)
            if hour is False:
                hour = _hour(prefix)
            if hour is not None:
                return hour + (60 * minute + second)
    return _parse_text(text)


def _hour(prefix: str) -> float | None:
    """Epoch seconds of `YYYY-MM-DDTHH:`, None when it is not that form or not a valid date and hour."""
    hour: float | None = None
    if re.fullmatch(_HOUR, prefix):
        try:
            hour = _parse_text(prefix + "00:00Z")
        except ValueError:
            hour = None
    if len(_hours) >= _MAX_HOURS:
        _hours.clear()
    _hours[prefix] = hour
    return hour


def _parse_text(text: str) -> float:
    moment = datetime.fromisoformat(text.strip().replace("z", "Z"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def parse_time(value: object) -> float:
    """Epoch seconds of an RFC 3339 timestamp (YAML may already have turned it into a datetime)."""
    if isinstance(value, str):
        return parse_time_text(value)
    if isinstance(value, datetime):
        moment = value
    else:
        raise ValueError(f"{value!r} is not an RFC 3339 timestamp")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def format_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_duration(value: object) -> float:
    """Seconds of a Go duration, with Go's grammar (`time.ParseDuration`): an optional sign, then one or
    more decimal numbers, each with a unit — `90s`, `1h2m3s`, `.5s`, `1.5h`, `-1s`, `300ms`, `2us`,
    `2µs`, `10ns`; `0` alone needs no unit. A YAML number (not a string) is read as seconds."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration (like 90s, 5m or 1h30m)")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a duration (like 90s, 5m or 1h30m)")
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a duration (like 90s, 5m or 1h30m)")
    text = value.strip()
    sign = 1.0
    if text[:1] in ("-", "+"):
        sign = -1.0 if text[0] == "-" else 1.0
        text = text[1:]
    if text == "0":
        return 0.0
    if not text:
        raise ValueError(f"{value!r} is not a duration (like 90s, 5m or 1h30m)")
    pos, total = 0, 0.0
    while pos < len(text):
        match = _DURATION_PART.match(text, pos)
        if match is None or not any(ch.isdigit() for ch in match.group(1)):
            if match is None and _NUMBER.fullmatch(text, pos):
                raise ValueError(f"{value!r} is not a duration: a number needs a unit (ns, us, ms, s, m or h)")
            raise ValueError(f"{value!r} is not a duration (like 90s, 5m or 1h30m)")
        total += float(match.group(1).rstrip(".") or "0") * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if total > _MAX_DURATION_SECONDS:
        raise ValueError(f"{value!r} is longer than a Go duration can be (about 292 years)")
    return sign * total
