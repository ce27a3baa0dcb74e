"""Small helpers shared by the adapters (pure functions only)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["PROXY_ENV", "as_int", "first_class", "first_hint", "preview", "str_list"]

#: The proxy variables every CLI that talks HTTP honors (part of its ``env_needs``).
PROXY_ENV = ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY")

_PREVIEW = 2000


def preview(value: Any, limit: int = _PREVIEW) -> str:
    """A bounded text view of a tool's output (which can be tens of MiB)."""
    if value is None:
        return ""
    if isinstance(value, list):
        parts = []
        for item in value:
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                parts.append(item["text"])
            elif isinstance(item, str):
                parts.append(item)
        text = "\n".join(parts)
    else:
        text = value if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"


#: Beyond this an integer is no number a JSON reader holds exactly (2**53 - 1).
_MAX_SAFE_INT = 2**53 - 1


def as_int(value: Any) -> int | None:
    """An integer the CLI wrote (as a number or as digits), or ``None``; one
    beyond ±2**53 - 1 is ``None`` too (``int("1" * 40)`` would break every
    JSON writer downstream)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif (isinstance(value, float) and value.is_integer()) or (
        isinstance(value, str) and len(value) < 40 and value.strip().lstrip("-").isdigit()
    ):
        number = int(value)
    else:
        return None
    return number if -_MAX_SAFE_INT <= number <= _MAX_SAFE_INT else None


def str_list(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    return ()


def first_class(
    value: Any, name: str, options: Mapping[str, Any], key: str, warnings: list[str]
) -> Any:
    """A request's first-class option (``value``, the keyword ``name``) over the
    backend option of the same meaning (``options[key]``): the first-class one
    wins, with a warning when both are set; unset, the backend option holds."""
    old = options.get(key)
    if not value:
        return old
    if old:
        warnings.append(f"option {key}={old!r} ignored: {name}= sets it")
    return value


def first_hint(
    texts: Iterable[str | None], hints: Sequence[tuple[str, re.Pattern[str]]]
) -> str | None:
    """The category of the first pattern found in the first text that has one (texts in order
    of trust, patterns most specific first); ``None`` when none matches."""
    for text in texts:
        for category, pattern in hints:
            if text and pattern.search(text):
                return category
    return None
