"""Token usage: the four counts we keep (input, output, cache reads, cache
writes) and how each CLI's usage dict maps onto them.

A data type below the backends: a backend's translator folds usage with it,
metering sums it, progress shows it; each reads the same counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from coding_genesis._util.numbers import MAX_SAFE_INT

__all__ = ["Tokens", "normalize_usage"]


@dataclass(slots=True)
class Tokens:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def add(self, other: Tokens, sign: int = 1) -> None:
        self.input += sign * other.input
        self.output += sign * other.output
        self.cache_read += sign * other.cache_read
        self.cache_write += sign * other.cache_write

    @property
    def prompt(self) -> int:
        return self.input + self.cache_read + self.cache_write

    def to_dict(self) -> dict[str, int]:
        return {
            "input": self.input,
            "output": self.output,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "total": self.input + self.output,
        }


def _int(value: object) -> int:
    """A count, or 0 for anything else: a negative number, NaN, and a number
    beyond ``MAX_SAFE_INT`` (an over-64-bit int breaks every JSON writer)."""
    if type(value) is int:
        return value if 0 < value <= MAX_SAFE_INT else 0
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return int(value) if 0 < value <= MAX_SAFE_INT else 0  # NaN fails the test


def normalize_usage(usage: Mapping[str, Any]) -> Tokens:
    """Our four counts from a CLI's usage dict.  claude: ``input_tokens``
    excludes the cache (``cache_read_input_tokens``,
    ``cache_creation_input_tokens``); codex/OpenAI: ``input_tokens`` includes
    ``cached_input_tokens``; claude's ``modelUsage`` uses camelCase."""
    if "cached_input_tokens" in usage:
        cached = _int(usage.get("cached_input_tokens"))
        return Tokens(
            max(0, _int(usage.get("input_tokens")) - cached),
            _int(usage.get("output_tokens")),
            cached,
            _int(usage.get("cache_write_input_tokens")),
        )
    if "inputTokens" in usage:
        return Tokens(
            _int(usage.get("inputTokens")),
            _int(usage.get("outputTokens")),
            _int(usage.get("cacheReadInputTokens")),
            _int(usage.get("cacheCreationInputTokens")),
        )
    get = usage.get
    i, o = get("input_tokens"), get("output_tokens")
    r, w = get("cache_read_input_tokens"), get("cache_creation_input_tokens")
    if (  # the usual case, checked inline (a budget normalizes every message)
        type(i) is int
        and type(o) is int
        and type(r) is int
        and type(w) is int
        and 0 <= i <= MAX_SAFE_INT
        and 0 <= o <= MAX_SAFE_INT
        and 0 <= r <= MAX_SAFE_INT
        and 0 <= w <= MAX_SAFE_INT
    ):
        return Tokens(i, o, r, w)
    return Tokens(_int(i), _int(o), _int(r), _int(w))
