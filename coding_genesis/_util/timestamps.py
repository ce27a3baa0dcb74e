"""An event's time as text (ISO 8601, UTC, milliseconds), fast: the hot path
turns ~100k events a run into dicts."""

from __future__ import annotations

import datetime as _dt
import math

__all__ = ["iso_ms"]

#: (whole second, its ISO text): events come many per second, and building a
#: datetime per event was most of ``to_dict``'s cost.
_second: tuple[int, str] = (-1, "")


def iso_ms(ts: float) -> str:
    """``ts`` (``time.time()``) as ISO 8601 in UTC to the millisecond; ``""`` for
    no time (0, negative, not finite)."""
    global _second
    if not math.isfinite(ts) or ts <= 0:
        return ""
    second = int(ts)
    # Round to microseconds first, as datetime does, then truncate to milliseconds.
    micros = round((ts - second) * 1_000_000)
    if micros >= 1_000_000:
        second, micros = second + 1, micros - 1_000_000
    cached = _second
    if cached[0] != second:
        text = _dt.datetime.fromtimestamp(second, _dt.UTC).isoformat(timespec="seconds")
        cached = _second = (second, text[:-6])  # without "+00:00"
    return f"{cached[1]}.{micros // 1000:03d}+00:00"
