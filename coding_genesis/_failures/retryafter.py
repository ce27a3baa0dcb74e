"""How long to wait before a retry, read from what a CLI or an API said.

``Retry-After`` values and HTTP dates, durations ("try again in 2 hours 5
minutes"), error-body fields and reset times (Unix or ISO 8601): one parser,
shared by the classifier (coding_genesis._failures.classify) and the usage
limits (coding_genesis._failures.usagelimits).
"""

from __future__ import annotations

import datetime as _dt
import email.utils
import math
import re
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["LIMIT_EPOCH", "extract_retry_after", "iso_timestamp", "number"]


def _unit_seconds(unit: str) -> float:
    unit = unit.lower()
    if unit == "ms" or unit.startswith("milli"):
        return 0.001
    if unit == "m" or unit.startswith("min"):
        return 60.0
    if unit.startswith("h"):
        return 3600.0
    if unit.startswith("d"):
        return 86400.0
    return 1.0


_NUMBER_UNIT = r"(\d+(?:\.\d+)?)\s*(milliseconds?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?|d)?\b"
_DURATION = re.compile(_NUMBER_UNIT, re.I)
_RETRY_AFTER_TEXT = (
    # "Retry-After: 30", "retry after 30 seconds", "retry_after=1.5s"
    re.compile(r"retry[ _-]?after[\"']?\s*[:=]?\s*(\d[^\n,;)]*)", re.I),
    # "try again in 2 hours 5 minutes", "retry in 30s", "wait 20 seconds"
    re.compile(r"(?:try again|retry|retrying) in\s+(\d[^\n,;)]*)", re.I),
    re.compile(r"\bwait\s+(\d[^\n,;)]*)", re.I),
)
#: claude: "Claude AI usage limit reached|1767225600" (the reset as a Unix time).
LIMIT_EPOCH = re.compile(r"limit reached\|(\d{9,11})\b", re.I)
# "resets at 2026-01-01T12:00:00Z", "reset at 1767225600"
_RESET_AT = re.compile(
    r"resets?\s+at\s+(\d{9,11}\b|\d{4}-\d\d-\d\d[T ][\d:.]+(?:Z|[+-]\d\d:?\d\d)?)", re.I
)
# Retry-After: Wed, 21 Oct 2015 07:28:00 GMT
_HTTP_DATE = re.compile(
    r"retry[ _-]?after[\"']?\s*[:=]\s*([A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} [\d:]{8} GMT)", re.I
)


def _duration(text: str) -> float | None:
    """Seconds in "30", "1.5s", "250 ms", "2 hours 5 minutes" (bare number = seconds)."""
    total = 0.0
    found = False
    for match in _DURATION.finditer(text):
        if found and not match.group(2):
            break
        total += float(match.group(1)) * _unit_seconds(match.group(2) or "s")
        found = True
        rest = text[match.end() :]
        if not re.match(r"\s*(?:and\s+)?\d", rest):
            break
    return total if found else None


def number(value: Any) -> float | None:
    """A finite number >= 0 from a JSON value (a number or its text), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        found = float(value)
    except ValueError:
        return None
    return found if math.isfinite(found) and found >= 0 else None


def iso_timestamp(raw: str) -> float | None:
    """The Unix time of an ISO 8601 date-time (``Z``, an offset, or none: UTC), else None."""
    try:
        when = _dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.UTC)
    return when.timestamp()


def extract_retry_after(
    *texts: str, data: Mapping[str, Any] | None = None, now: float | None = None
) -> float | None:
    """Seconds to wait before retrying, if the output says so: an error body
    field (``retry_after_seconds``...), a ``Retry-After`` value or date, "try
    again in N minutes", or a reset time."""
    if data:
        for key, factor in (
            ("retry_after_seconds", 1.0),
            ("retry_after_s", 1.0),
            ("retry_after", 1.0),
            ("retry_after_ms", 0.001),
        ):
            value = number(data.get(key))
            if value is not None:
                return value * factor
        details = data.get("details")
        if isinstance(details, Mapping) and details is not data:
            nested = extract_retry_after(data=details, now=now)
            if nested is not None:
                return nested
    clock = time.time() if now is None else now
    for text in texts:
        if not text:
            continue
        match = _HTTP_DATE.search(text)
        if match:
            with_tz = email.utils.parsedate_to_datetime(match.group(1))
            return max(0.0, with_tz.timestamp() - clock)
        for pattern in _RETRY_AFTER_TEXT:
            match = pattern.search(text)
            if match:
                seconds = _duration(match.group(1))
                if seconds is not None:
                    return seconds
        match = LIMIT_EPOCH.search(text) or _RESET_AT.search(text)
        if match:
            raw = match.group(1)
            if raw.isdigit():
                return max(0.0, float(raw) - clock)
            when = iso_timestamp(raw)
            if when is None:
                continue
            return max(0.0, when - clock)
    return None
