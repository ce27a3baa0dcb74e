"""Numbers in words, said one way everywhere: counts with their noun in the
singular or plural ("1 tool call", "2 tool calls"), money in fixed decimals
with its currency ("0.0031 USD", never ``7e-05``), token counts short ("1M",
"1.5k", never "1000.0k"), and "unknown" where nothing was reported."""

from __future__ import annotations

import math

__all__ = ["UNKNOWN", "counted", "money", "short_count"]

#: What is shown where nothing was reported (never a made-up 0).
UNKNOWN = "unknown"


def counted(n: int, noun: str, plural: str | None = None, *, short: bool = False) -> str:
    """``n`` with ``noun``, in the plural unless ``n`` is 1 (``plural``: when
    it is not ``noun + "s"``); ``short``: a large ``n`` as :func:`short_count`
    says it ("1.5k tokens")."""
    number = short_count(n) if short and n >= 10_000 else str(n)
    return f"{number} {noun if n == 1 else (plural or noun + 's')}"


def money(amount: float | None, currency: str = "USD", *, places: int = 4) -> str:
    """An amount in fixed decimals with its currency: ``0.0031 USD``; a tiny
    amount with two more places (``0.000070 USD``), below those ``<0.000001
    USD`` (never 0, never ``7e-05``); None: unknown."""
    if amount is None or not math.isfinite(amount):
        return UNKNOWN
    if 0 < amount < 10**-places:
        places += 2
        if amount < 10**-places:
            return f"<{10**-places:.{places}f} {currency}"
    return f"{amount:.{places}f} {currency}"


def short_count(n: float) -> str:
    """A large count short: ``950``, ``1.5k``, ``12k``, ``1M``, ``2.5M`` (one
    decimal at most, none when it is 0; a value that rounds up to the next unit
    takes that unit: ``999_999`` is ``1M``, not ``1000.0k``)."""
    n = float(n)
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size * 0.99995:
            value = round(n / size, 1)
            text = f"{value:.1f}".removesuffix(".0")
            return f"{text}{unit}"
    return f"{n:.0f}" if n == int(n) else f"{n:.1f}"
