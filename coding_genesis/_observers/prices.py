"""The bundled price table: USD per million tokens, by model, dated and sourced.

A run's cost is ``computed`` from its tokens with this table when the CLI does
not report one (codex never does), and live, mid-run, for budgets (claude
reports its cost only at the end).  Models are matched by the longest prefix
of their id (``claude-sonnet-4-5-20250929`` → ``claude-sonnet-4``); a suffix in
brackets (claude's ``[1m]``) is dropped first.

Prices change: the table says when it was compiled and where from, and the
user overrides or extends it with ``AgentConfig(prices={...})`` (a mapping of
model prefix → :class:`ModelPrice` or a dict of its fields), or ``genesis run
--prices FILE`` (a JSON file of that mapping).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from coding_genesis._util.files import read_regular
from coding_genesis._util.numbers import MAX_SAFE_INT
from coding_genesis.errors import ConfigError

__all__ = [
    "PRICES",
    "PRICES_AS_OF",
    "PRICES_SOURCES",
    "ModelPrice",
    "PriceTable",
    "context_window",
    "load_prices",
]

#: When the bundled table was compiled.
PRICES_AS_OF = "2025-08-01"
#: Where its prices come from (the providers' public price pages).
PRICES_SOURCES = (
    "https://docs.anthropic.com/en/docs/about-claude/pricing",
    "https://openai.com/api/pricing/",
)


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per million tokens.  ``cache_read`` / ``cache_write`` None: priced
    as plain input.  ``context_window``: the model's window in tokens, when known."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    context_window: int | None = None

    def __post_init__(self) -> None:
        for name in ("input", "output", "cache_read", "cache_write"):
            value = getattr(self, name)
            if value is None and name.startswith("cache"):
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or not 0 <= value <= MAX_SAFE_INT
            ):
                raise ConfigError(
                    f"price {name} must be a finite number from 0 to {MAX_SAFE_INT}, got {value!r}"
                )
        window = self.context_window
        if window is not None and (
            isinstance(window, bool)
            or not isinstance(window, int)
            or not 0 < window <= MAX_SAFE_INT
        ):
            # A negative window gave a negative context fraction; a huge one an
            # integer no JSON writer takes.
            raise ConfigError(
                f"context_window must be an integer from 1 to {MAX_SAFE_INT}, got {window!r}"
            )

    @classmethod
    def parse(cls, value: object) -> ModelPrice:
        if isinstance(value, ModelPrice):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(f"a price must be a ModelPrice or a mapping, got {value!r}")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(map(str, value)) - names)
        if unknown:
            raise ConfigError(f"unknown price field(s) {unknown}; valid: {sorted(names)}")
        if "input" not in value or "output" not in value:
            raise ConfigError(
                "a price needs at least 'input' and 'output' (USD per million tokens)"
            )
        return cls(**{str(k): v for k, v in value.items()})

    def cost(self, input: int, output: int, cache_read: int, cache_write: int) -> float:
        """USD for these token counts (``input`` excludes cached tokens)."""
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        return (
            input * self.input + output * self.output + cache_read * read + cache_write * write
        ) / 1_000_000


def _anthropic(input: float, output: float, window: int = 200_000) -> ModelPrice:
    # Anthropic: cache reads 0.1x input, 5-minute cache writes 1.25x input.
    return ModelPrice(input, output, input * 0.1, input * 1.25, window)


def _openai(input: float, output: float, cached: float, window: int) -> ModelPrice:
    # OpenAI: cached input at its own price; no separate cache-write price.
    return ModelPrice(input, output, cached, None, window)


#: Model-id prefix → price (USD per million tokens), as of :data:`PRICES_AS_OF`.
PRICES: dict[str, ModelPrice] = {
    "claude-opus-4": _anthropic(5.0, 25.0),  # Opus 4.5 and later
    "claude-opus-4-0": _anthropic(15.0, 75.0),
    "claude-opus-4-1": _anthropic(15.0, 75.0),
    "claude-opus-4-2025": _anthropic(15.0, 75.0),  # claude-opus-4-20250514
    "claude-sonnet-4": _anthropic(3.0, 15.0),
    "claude-3-7-sonnet": _anthropic(3.0, 15.0),
    "claude-haiku-4": _anthropic(1.0, 5.0),
    "claude-3-5-haiku": _anthropic(0.8, 4.0),
    "gpt-5": _openai(1.25, 10.0, 0.125, 400_000),
    "gpt-5-mini": _openai(0.25, 2.0, 0.025, 400_000),
    "gpt-5-nano": _openai(0.05, 0.4, 0.005, 400_000),
    "gpt-4.1": _openai(2.0, 8.0, 0.5, 1_047_576),
    "gpt-4.1-mini": _openai(0.4, 1.6, 0.1, 1_047_576),
    "o3": _openai(2.0, 8.0, 0.5, 200_000),
    "o4-mini": _openai(1.1, 4.4, 0.275, 200_000),
    "codex-mini": _openai(1.5, 6.0, 0.375, 200_000),
}

#: A model's ``[1m]`` window suffix (the model name comes from the CLI: at
#: most 9 digits, so the window stays a number every JSON writer takes).
_SUFFIX = re.compile(r"\[(\d{1,9})([km])\]$", re.I)


def _base(model: str) -> str:
    return _SUFFIX.sub("", model.strip()).lower()


def context_window(model: str, table: Mapping[str, ModelPrice] | None = None) -> int | None:
    """The model's context window in tokens: claude's ``[1m]`` suffix says it,
    else the price table, else None."""
    match = _SUFFIX.search(model.strip())
    if match:
        return int(match.group(1)) * (1_000_000 if match.group(2).lower() == "m" else 1_000)
    price = PriceTable(table).lookup(model)
    return price.context_window if price is not None else None


class PriceTable:
    """The bundled table with the user's overrides on top; lookups by longest prefix."""

    __slots__ = ("_cache", "_prices")

    def __init__(self, overrides: Mapping[str, ModelPrice | Mapping[str, Any]] | None = None):
        prices = dict(PRICES)
        for key, value in (overrides or {}).items():
            if not isinstance(key, str) or not key.strip():
                raise ConfigError(f"a price table key must be a model id prefix, got {key!r}")
            prices[key.strip().lower()] = ModelPrice.parse(value)
        self._prices = prices
        self._cache: dict[str, ModelPrice | None] = {}

    def lookup(self, model: str | None) -> ModelPrice | None:
        """The price of ``model`` (longest matching prefix), or None."""
        if not model:
            return None
        cached = self._cache.get(model, False)
        if cached is not False:
            return cached  # type: ignore[return-value]
        base = _base(model)
        best: str | None = None
        for prefix in self._prices:
            if base.startswith(prefix) and (best is None or len(prefix) > len(best)):
                best = prefix
        found = self._prices[best] if best is not None else None
        self._cache[model] = found
        return found


#: The largest price file read (a price table is a few KiB).
MAX_PRICE_FILE = 4 * 1024 * 1024


def load_prices(path: str | os.PathLike[str]) -> dict[str, ModelPrice]:
    """A price-table override from a JSON file ``{"model-prefix": {"input": 3.0,
    "output": 15.0, ...}}`` (USD per million tokens); a ConfigError when bad."""
    try:
        # A regular file only (a FIFO would block), bounded; deep nesting is
        # a RecursionError in ``json``, a usage error here.
        data = json.loads(read_regular(path, MAX_PRICE_FILE, follow=True).decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        if isinstance(exc, RecursionError):
            reason = "nested too deep"
        raise ConfigError(f"cannot read the price file {os.fspath(path)!r}: {reason}") from None
    if not isinstance(data, dict):
        raise ConfigError("the price file must hold a JSON object of model prefix -> price")
    return {str(k): ModelPrice.parse(v) for k, v in data.items()}
