"""Numbers from outside, clamped at the door.

A CLI's token counts, costs and durations are read as numbers by the tally,
metering and budgets, and written as JSON by every output.  JSON allows any
integer; orjson (and JavaScript) do not: an integer beyond 64 bits makes
``orjson.dumps`` raise, one beyond 2**53 loses precision in every JSON reader
that uses doubles.  So an integer outside ``0 … 2**53 - 1`` and a negative or
non-finite float, where we read a count or an amount, becomes ``None`` (and a
warning names the field); nothing downstream meets it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["INT64_RANGE", "MAX_SAFE_INT", "clamp_fields", "is_bad_number", "safe_count"]

#: The largest integer every JSON reader holds exactly (a double's mantissa).
MAX_SAFE_INT = 2**53 - 1

#: The integers orjson writes; one outside raises.  (orjson reads a longer
#: integer as a float: ``1e30``, which ``int()`` would make one again.)
INT64_RANGE = (-(2**63), 2**64 - 1)

#: Field paths named per run at most (the first ones; a flood adds nothing).
MAX_NAMED = 20


def is_bad_number(value: object) -> bool:
    """Whether ``value`` is a number we do not take as a count or an amount:
    an int or float outside ``0 … MAX_SAFE_INT`` (so negative, non-finite
    and NaN too: a float that large is an integer no reader holds exactly,
    and ``int()`` of it breaks every JSON writer).  ``bool`` is not a number
    here."""
    if type(value) is int or type(value) is float:
        return not 0 <= value <= MAX_SAFE_INT
    return False


def safe_count(value: object) -> int | None:
    """``value`` as a count (an int in ``0 … MAX_SAFE_INT``; an integral
    float in that range becomes its int), else ``None``."""
    if type(value) is int:
        return value if 0 <= value <= MAX_SAFE_INT else None
    if type(value) is float and 0 <= value <= MAX_SAFE_INT and value.is_integer():
        return int(value)
    return None


def _has_bad(value: Any) -> bool:
    """Whether a container holds a bad number anywhere (iterative; no
    allocation but the stack: the common case, nothing found, stays cheap)."""
    stack = [value]
    pop, push = stack.pop, stack.append
    while stack:
        item = pop()
        for child in item.values() if type(item) is dict else item:
            kind = type(child)
            if kind is int or kind is float:
                if not 0 <= child <= MAX_SAFE_INT:
                    return True
            elif kind is dict or kind is list:
                push(child)
    return False


def _walk(value: Any, path: str, warn: Callable[[str], object]) -> None:
    """Replace the bad numbers inside a container by ``None``, in place
    (iterative: whatever the nesting)."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if type(item) is dict:
            for key, child in item.items():
                if type(child) is dict or type(child) is list:
                    stack.append((child, f"{where}.{key}"))
                elif is_bad_number(child):
                    item[key] = None
                    warn(f"{where}.{key}")
        elif type(item) is list:
            for i, child in enumerate(item):
                if type(child) is dict or type(child) is list:
                    stack.append((child, f"{where}[{i}]"))
                elif is_bad_number(child):
                    item[i] = None
                    warn(f"{where}[{i}]")


def clamp_fields(obj: Any, names: tuple[str, ...], warn: Callable[[str], object]) -> None:
    """Set each named attribute of ``obj`` that is a bad number to ``None``;
    in a dict or list attribute, each bad number inside it.  ``warn`` gets
    the path of each (``usage.input_tokens``)."""
    for name in names:
        value = getattr(obj, name)
        if type(value) is dict or type(value) is list:
            if _has_bad(value):
                _walk(value, name, warn)
        elif is_bad_number(value):
            setattr(obj, name, None)
            warn(name)
