"""The circuit breaker behind the DEGRADED state, shareable between agents.

One :class:`CircuitBreaker` holds both its settings and its running state, so
agents (a pool, a graph of nodes) given the same breaker degrade together: once
``threshold`` consecutive requests fail in a way no retry fixes (``trip_on``:
the CLI is missing, auth), every agent on it answers status 69 for
``cooldown`` seconds; then one probe request may run, and its success closes it for
all of them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from coding_genesis._util.renamed import renamed, warn_renamed
from coding_genesis.errors import ConfigError
from coding_genesis.status import FailureCategory

__all__ = ["NEUTRAL_ERRORS", "CircuitBreaker"]

#: Error codes that say nothing about the backend's health: the request never
#: reached it, or the caller interrupted the turn (like a cancelled run, which
#: the breaker never sees).
NEUTRAL_ERRORS = frozenset({"invalid_request", "busy", "degraded", "interrupted"})

_DEFAULT_TRIP_ON = frozenset({FailureCategory.MISSING, FailureCategory.AUTH})


class CircuitBreaker:
    """Settings and state of one circuit; thread-safe, so pools and Ray actors
    in one process may share it."""

    __slots__ = (
        "_lock",
        "consecutive",
        "cooldown",
        "last_category",
        "opened_at",
        "probing",
        "reason",
        "threshold",
        "trip_on",
    )

    def __init__(
        self,
        threshold: int = 3,
        cooldown: float = 60.0,
        trip_on: Iterable[FailureCategory | str] = _DEFAULT_TRIP_ON,
        **old: Any,
    ) -> None:
        cooldown = renamed(old, {"cooldown_s": "cooldown"}, "CircuitBreaker").get(
            "cooldown", cooldown
        )
        if old:
            raise TypeError(f"CircuitBreaker() got unexpected keyword argument(s) {sorted(old)}")
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
            raise ConfigError(f"threshold must be an int >= 1, got {threshold!r}")
        if (
            isinstance(cooldown, bool)
            or not isinstance(cooldown, int | float)
            or not 0 <= cooldown < float("inf")
        ):
            raise ConfigError(f"cooldown must be a finite number >= 0, got {cooldown!r}")
        try:
            categories = frozenset(FailureCategory(c) for c in trip_on)
        except ValueError as exc:
            raise ConfigError(f"trip_on: {exc}") from None
        self.threshold = threshold
        self.cooldown = float(cooldown)
        self.trip_on = categories
        self._lock = threading.Lock()
        self.consecutive = 0
        self.last_category: str | None = None
        self.opened_at: float | None = None
        self.reason = ""
        #: A probe request is in flight (only one at a time).
        self.probing = False

    @property
    def cooldown_s(self) -> float:
        """0.1's name of :attr:`cooldown` (deprecated)."""
        warn_renamed("CircuitBreaker", "cooldown_s", "cooldown")
        return self.cooldown

    def __repr__(self) -> str:
        state = "open" if self.open else "closed"
        return (
            f"CircuitBreaker(threshold={self.threshold}, cooldown={self.cooldown:g}, "
            f"{state}, consecutive={self.consecutive})"
        )

    @property
    def open(self) -> bool:
        return self.opened_at is not None

    def remaining(self, now: float) -> float:
        """Seconds of cooldown left (0 when a probe may run, or when closed)."""
        opened = self.opened_at
        if opened is None:
            return 0.0
        return max(0.0, opened + self.cooldown - now)

    def admit(self, now: float) -> tuple[bool, float]:
        """May a request run now?  ``(probe, wait)``: ``wait > 0`` refuses it
        (the cooldown left, or another agent's probe still running);
        ``probe`` says it is the one probe after the cooldown."""
        with self._lock:
            if self.opened_at is None:
                return False, 0.0
            left = max(0.0, self.opened_at + self.cooldown - now)
            if left > 0:
                return False, left
            if self.probing:
                return False, min(1.0, self.cooldown) or 0.001
            self.probing = True
            return True, 0.0

    def record(
        self, error: str | None, category: str | None, message: str, now: float, *, probe: bool
    ) -> str:
        """Fold one request's outcome in: "success", "neutral", "other" or "trip"
        (a failure that counts; the circuit is open once enough counted)."""
        with self._lock:
            if probe:
                self.probing = False
            if error is None:
                self._reset()
                return "success"
            if error in NEUTRAL_ERRORS:
                return "neutral"
            try:
                found = FailureCategory(category) if category is not None else None
            except ValueError:
                found = None
            if found is None or found not in self.trip_on:
                self.consecutive = 0
                if probe:
                    self._reset()
                return "other"
            self.consecutive += 1
            self.last_category = category
            if self.consecutive >= self.threshold or probe:
                self.opened_at = now
                first = message.strip().splitlines()[0][:200] if message.strip() else ""
                self.reason = (
                    f"{self.consecutive} consecutive {category} failure"
                    f"{'s' if self.consecutive != 1 else ''}"
                    + (f" ({first})" if first else "")
                    + f"; cooldown {self.cooldown:g}s"
                )
            return "trip"

    def snapshot(self, remaining: float) -> dict[str, object]:
        """What a DEGRADED state event says of the breaker (``remaining``: the
        seconds of its cooldown left)."""
        return {
            "category": self.last_category,
            "consecutive_failures": self.consecutive,
            "cooldown_s": self.cooldown,
            "retry_after_s": round(remaining, 3),
        }

    def release_probe(self) -> None:
        """A probe ended without an answer (cancelled): the next request probes again."""
        with self._lock:
            self.probing = False

    def reset(self) -> None:
        """Close the circuit by hand."""
        with self._lock:
            self._reset()

    def _reset(self) -> None:
        self.consecutive = 0
        self.last_category = None
        self.opened_at = None
        self.reason = ""
        self.probing = False
