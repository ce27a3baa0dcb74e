"""A budget's usage and accounts: what was used, where it is summed and checked.

:class:`Usage` is what a run used (cheap to build on the hot path);
:class:`Totals` holds a budget's limits, what was used and what was warned
about; an :class:`Account` guards one (:class:`LocalAccount` in this
process; the Ray integration's actor holds one in another).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from coding_genesis._util.words import counted, money

__all__ = [
    "LIMITS",
    "Account",
    "BudgetWarning",
    "Exceeded",
    "LocalAccount",
    "Totals",
    "Usage",
    "amount_text",
    "fmt",
]


#: The limits a budget may set, in the order they are checked.
LIMITS = ("max_cost_usd", "max_tokens", "max_turns", "max_tool_calls")


class Usage(NamedTuple):
    """What a run has used so far (or a change of it); a tuple: cheap on the
    hot path, where a budget is charged on every usage and tool-call event."""

    cost_usd: float = 0.0
    tokens: int = 0
    cache_tokens: int = 0
    turns: int = 0
    tool_calls: int = 0

    def minus(self, other: Usage) -> Usage:
        return Usage(
            self.cost_usd - other.cost_usd,
            self.tokens - other.tokens,
            self.cache_tokens - other.cache_tokens,
            self.turns - other.turns,
            self.tool_calls - other.tool_calls,
        )

    def plus(self, other: Usage) -> Usage:
        return Usage(
            self.cost_usd + other.cost_usd,
            self.tokens + other.tokens,
            self.cache_tokens + other.cache_tokens,
            self.turns + other.turns,
            self.tool_calls + other.tool_calls,
        )

    def is_zero(self) -> bool:
        return not (
            self.cost_usd or self.tokens or self.cache_tokens or self.turns or self.tool_calls
        )


@dataclass(frozen=True, slots=True)
class Exceeded:
    """Which limit was crossed, and by how much."""

    limit: str
    max: float
    used: float

    @property
    def over(self) -> float:
        return self.used - self.max

    def describe(self, shared: bool) -> str:
        """``budget exceeded: max_tool_calls=1 (used 2 tool calls, 1 tool call over)``."""
        what = "shared budget" if shared else "budget"
        maximum = money(self.max) if self.limit == "max_cost_usd" else fmt(self.max)
        return (
            f"{what} exceeded: {self.limit}={maximum} "
            f"(used {amount_text(self.limit, self.used)}, {amount_text(self.limit, self.over)} over)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"limit": self.limit, "max": self.max, "used": self.used, "over": self.over}


#: The noun each count limit counts (the cost limit is money).
_NOUNS = {"max_tokens": "token", "max_turns": "turn", "max_tool_calls": "tool call"}


def amount_text(limit: str, value: float) -> str:
    """A limit's value in words: ``0.0123 USD``, ``1 tool call``, ``60600 tokens``."""
    if limit == "max_cost_usd":
        return money(value)
    return counted(round(value), _NOUNS[limit])


def fmt(value: float) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.6g}"
    return f"{int(value)}"


@dataclass(frozen=True, slots=True)
class BudgetWarning:
    limit: str
    fraction: float
    used: float
    max: float


class Account(Protocol):
    """Where a budget's totals live (this process, or a Ray actor): the
    strategy an integration supplies to :meth:`Budget.move_pot`."""

    def charge(
        self, key: str, delta: Usage
    ) -> tuple[Exceeded | None, list[BudgetWarning], bool]: ...
    def open(self, key: str) -> Exceeded | None: ...
    def close(self, key: str) -> None: ...
    def snapshot(self) -> dict[str, Any]: ...
    def stopped_since(self, key: str) -> Exceeded | None: ...


@dataclass(slots=True)
class Totals:
    """The state of one account; pure, so that a Ray actor can hold it too."""

    limits: dict[str, float]
    include_cache: bool
    warn_at: tuple[float, ...]
    used: Usage = field(default_factory=Usage)
    exceeded: Exceeded | None = None
    warned: set[tuple[str, float]] = field(default_factory=set)
    open_runs: set[str] = field(default_factory=set)
    #: The smallest value of all limits' next thresholds, as (limit -> value):
    #: a charge that reaches none of them has nothing to check.
    next_at: dict[str, float] = field(default_factory=dict)
    #: ``next_at`` as (cost, tokens, turns, tool calls), infinite where no
    #: limit is set: the quick check of a charge that reaches nothing.
    floor: tuple[float, float, float, float] = (math.inf, math.inf, math.inf, math.inf)

    def __post_init__(self) -> None:
        for limit, maximum in self.limits.items():
            self.next_at[limit] = min([f * maximum for f in self.warn_at] + [maximum])
        self._set_floor()

    def _set_floor(self) -> None:
        get = self.next_at.get
        inf = math.inf
        self.floor = (
            get("max_cost_usd", inf),
            get("max_tokens", inf),
            get("max_turns", inf),
            get("max_tool_calls", inf),
        )

    def value(self, limit: str) -> float:
        used = self.used
        if limit == "max_cost_usd":
            return used.cost_usd
        if limit == "max_tokens":
            return used.tokens + (used.cache_tokens if self.include_cache else 0)
        if limit == "max_turns":
            return used.turns
        return used.tool_calls

    def charge(self, delta: Usage) -> tuple[Exceeded | None, list[BudgetWarning], bool]:
        """Add ``delta``; (the crossing, new warnings, True if this charge crossed)."""
        return self.reach(self.used.plus(delta))

    def reach(self, total: Usage) -> tuple[Exceeded | None, list[BudgetWarning], bool]:
        """What has been used is now ``total``; as :meth:`charge`."""
        self.used = total
        floor = self.floor
        if (
            total.cost_usd < floor[0]
            and total.tokens + (total.cache_tokens if self.include_cache else 0) < floor[1]
            and total.turns < floor[2]
            and total.tool_calls < floor[3]
        ):
            return self.exceeded, [], False  # below every next threshold: nothing new
        warnings: list[BudgetWarning] = []
        crossed = False
        for limit, maximum in self.limits.items():
            used = self.value(limit)
            if used < self.next_at[limit] or (self.exceeded is not None and used > maximum):
                continue  # below its next threshold (or past the end): nothing new
            for fraction in self.warn_at:
                key = (limit, fraction)
                if used >= fraction * maximum and key not in self.warned and used <= maximum:
                    self.warned.add(key)
                    warnings.append(BudgetWarning(limit, fraction, used, maximum))
            if self.exceeded is None and used > maximum:
                self.exceeded = Exceeded(limit, maximum, used)
                crossed = True
            ahead = [f * maximum for f in self.warn_at if (limit, f) not in self.warned]
            self.next_at[limit] = min([a for a in ahead if a > used] + [maximum])
            if used >= maximum:
                self.next_at[limit] = maximum if used <= maximum else math.inf
        self._set_floor()
        return self.exceeded, warnings, crossed

    def snapshot(self) -> dict[str, Any]:
        used = self.used
        return {
            "cost_usd": round(used.cost_usd, 8),
            "tokens": used.tokens,
            "cache_tokens": used.cache_tokens,
            "turns": used.turns,
            "tool_calls": used.tool_calls,
            "exceeded": self.exceeded.to_dict() if self.exceeded else None,
        }


class LocalAccount:
    """An account in this process, guarded by a lock."""

    def __init__(self, totals: Totals) -> None:
        self._lock = threading.Lock()
        self._totals = totals

    def charge(self, key: str, delta: Usage) -> tuple[Exceeded | None, list[BudgetWarning], bool]:
        with self._lock:
            return self._totals.charge(delta)

    def open(self, key: str) -> Exceeded | None:
        with self._lock:
            self._totals.open_runs.add(key)
            return self._totals.exceeded

    def close(self, key: str) -> None:
        with self._lock:
            self._totals.open_runs.discard(key)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return self._totals.snapshot()

    def stopped_since(self, key: str) -> Exceeded | None:
        return self._totals.exceeded
