"""Usage limits: when a CLI's account quota resets, read from what it printed.

A usage limit is not a rate limit: the account is out of quota until a reset
time, often hours away, and retrying before then fails the same way.  The
classifier (coding_genesis._failures.classify) files it as ``rate_limit`` with
``retry_after_s`` = seconds until the reset and ``retry_at`` = the reset time;
the retry policy waits for it only within its deadline (else the failure says
when to retry), and ``run_many`` pauses the batch instead of spending every
queued request on the same error.

What the CLIs print (``tests/fakes/recordings/usage_limits/``):

* codex 0.169 (recorded against a server answering 429 with an
  ``usage_limit_reached`` body and its ``resets_at``): ``You've hit your usage
  limit. ... try again at 11:11 AM.`` (today or tomorrow, local time) or ``...
  try again at Nov 27th, 2026 11:11 AM.`` (further away);
* claude (documented, not recorded: a subscription login is needed):
  ``Claude AI usage limit reached|1767225600`` (the reset as a Unix time) and
  ``Claude usage limit reached. Your limit will reset at 5pm (Europe/Paris).``;
* an error body with ``resets_at`` (Unix time) or ``resets_in_seconds``.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Mapping
from typing import Any

from coding_genesis._failures.retryafter import LIMIT_EPOCH, iso_timestamp, number

__all__ = ["reset_at"]

_MONTHS = {
    m: i
    for i, m in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1
    )
}
# "try again at Nov 27th, 2026 11:11 AM", "try again at 11:11 AM"
_TRY_AGAIN_AT = re.compile(
    r"try again at\s+(?:(?P<mon>[A-Z][a-z]{2})[a-z]*\.?\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+"
    r"(?P<year>\d{4})\s+)?(?P<h>\d{1,2})(?::(?P<m>\d\d))?\s*(?P<ampm>[AP]\.?M\.?)?",
    re.I,
)
# "will reset at 5pm (Europe/Paris)", "resets 11am (UTC)", "resets at 3:30pm"
_RESETS = re.compile(
    r"\breset(?:s)?(?:\s+at)?\s+(?P<h>\d{1,2})(?::(?P<m>\d\d))?\s*(?P<ampm>[ap]m)\b"
    r"(?:\s*\((?P<tz>[A-Za-z_]+(?:/[A-Za-z_+-]+)*)\))?",
    re.I,
)
# "resets at 2026-11-24T11:11:13Z" (our own batch refusals say it so)
_ISO = re.compile(r"resets? at (\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:?\d\d)?)", re.I)
_LIMIT_WORDS = re.compile(r"usage limit|limit reached|hit your (?:usage )?limit", re.I)


def _zone(name: str | None) -> _dt.tzinfo | None:
    if not name:
        return None
    if name.upper() in ("UTC", "GMT", "Z"):
        return _dt.UTC
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(name)
    except (ValueError, KeyError, OSError, ImportError):
        return None


def _hour(h: str, ampm: str | None) -> int | None:
    hour = int(h)
    if ampm:
        marker = ampm.replace(".", "").lower()
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if marker == "pm" else 0)
    return hour if 0 <= hour <= 23 else None


def _clock(found: re.Match[str]) -> tuple[int, int] | None:
    """The hour and minute of a match with ``h``, ``m`` and ``ampm`` groups, if valid."""
    hour = _hour(found["h"], found["ampm"])
    minute = int(found["m"] or 0)
    return None if hour is None or minute > 59 else (hour, minute)


def _next_time_of_day(hour: int, minute: int, tz: _dt.tzinfo | None, now: float) -> float:
    """The next moment at ``hour:minute`` (``tz``, else local time) after ``now``."""
    current = _dt.datetime.fromtimestamp(now, tz) if tz else _dt.datetime.fromtimestamp(now)
    if tz is None:
        current = current.astimezone()
    when = current.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if when.timestamp() <= now - 60:
        when += _dt.timedelta(days=1)
    return when.timestamp()


def reset_at(*texts: str, data: Mapping[str, Any] | None = None, now: float) -> float | None:  # noqa: C901
    """The Unix time a usage limit resets at, if the output says so, else None."""
    if data:
        error = data.get("error")
        for source in (data, error if isinstance(error, Mapping) else None):
            if not source:
                continue
            at = number(source.get("resets_at"))
            if at is not None and at > 1e9:
                return at
            seconds = number(source.get("resets_in_seconds"))
            if seconds is not None:
                return now + seconds
    for text in texts:
        if not text or not _LIMIT_WORDS.search(text):
            continue
        match = LIMIT_EPOCH.search(text)
        if match:
            return float(match.group(1))
        match = _ISO.search(text)
        if match:
            at = iso_timestamp(match.group(1))
            if at is None:
                continue
            return at
        found = _TRY_AGAIN_AT.search(text)
        if found:
            clock = _clock(found)
            if clock is None:
                continue
            hour, minute = clock
            if found["year"]:
                month = _MONTHS.get(found["mon"][:3].lower())
                if month is None:
                    continue
                try:
                    when = _dt.datetime(int(found["year"]), month, int(found["day"]), hour, minute)
                except ValueError:
                    continue
                return when.astimezone().timestamp()
            return _next_time_of_day(hour, minute, None, now)
        found = _RESETS.search(text)
        if found:
            clock = _clock(found)
            if clock is None:
                continue
            hour, minute = clock
            return _next_time_of_day(hour, minute, _zone(found["tz"]), now)
    return None
