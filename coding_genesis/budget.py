"""Budgets: limits on cost, tokens, turns and tool calls, enforced by us, mid-run.

A :class:`Budget` is given as ``budget=`` to an agent, a ``RunSpec`` or
:func:`~coding_genesis.batch.run_many`.  Metering (``metering=True``, the default)
charges it on every event that reports usage, each turn and each tool call;
the run that crosses a limit is stopped through its stop handle like a
timeout (same supervisor stop path) and answers ``error: budget_exceeded``
(failure category ``budget_exceeded``, not retried), saying which limit and by
how much.  Warning events (``BudgetEvent``, level ``warning``) are published
at the fractions of ``warn_at``.

Shared or per run:

* by default a budget is **one pot**: everything it is given to (several
  agents, every request of a batch, every run of one agent) is charged to it.
  Once it is spent, the runs still going are stopped and runs not yet
  started are refused (nothing is started); each result's ``budget`` field
  says ``ran``, ``stopped`` or ``not_started``, and why.
* ``per_run=True``: every run gets a fresh account with the same limits.

What counts: ``tokens`` are input + output; cache reads and writes only with ``include_cache=True``.
A turn is one model response.  Thread-safe: many agents in one process (threads or tasks) may
share one budget.  On Ray the shared account lives in a Ray actor (the Ray integration moves it
there with :meth:`Budget.move_pot`), so runs in different worker processes charge the same pot.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from coding_genesis._supervision.stop import StopHandle
from coding_genesis._util.accounts import (
    LIMITS,
    Account,
    BudgetWarning,
    Exceeded,
    LocalAccount,
    Totals,
    Usage,
    amount_text,
    fmt,
)
from coding_genesis.errors import ConfigError
from coding_genesis.status import ErrorCode, FailureCategory

__all__ = ["LIMITS", "Budget", "BudgetRun", "Exceeded", "Usage", "amount_text"]

#: ``per_run`` accounts of live sessions kept (a session past it starts afresh).
_SESSIONS_KEPT = 256


class Budget:
    """Limits on what runs may use (see the module docstring).

    ``max_cost_usd`` (USD), ``max_tokens`` (input + output, plus cache tokens
    with ``include_cache``), ``max_turns`` (model responses), ``max_tool_calls``;
    at least one.  ``warn_at``: fractions of each limit at which a warning
    event is published (default 50 % and 80 %).  ``per_run``: a fresh account
    for every run instead of one pot for everything the budget is given to.
    """

    def __init__(
        self,
        *,
        max_cost_usd: float | None = None,
        max_tokens: int | None = None,
        max_turns: int | None = None,
        max_tool_calls: int | None = None,
        include_cache: bool = False,
        warn_at: Iterable[float] = (0.5, 0.8),
        per_run: bool = False,
        name: str | None = None,
    ) -> None:
        limits: dict[str, float] = {}
        for limit, value, integer in (
            ("max_cost_usd", max_cost_usd, False),
            ("max_tokens", max_tokens, True),
            ("max_turns", max_turns, True),
            ("max_tool_calls", max_tool_calls, True),
        ):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"{limit} must be a number, got {value!r}")
            if integer and not float(value).is_integer():
                raise ConfigError(f"{limit} must be a whole number, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ConfigError(f"{limit} must be a finite number >= 0, got {value!r}")
            limits[limit] = float(value) if not integer else int(value)
        if not limits:
            raise ConfigError(
                "a Budget needs at least one limit: max_cost_usd, max_tokens, max_turns "
                "or max_tool_calls"
            )
        if not isinstance(include_cache, bool) or not isinstance(per_run, bool):
            raise ConfigError("include_cache and per_run must be True or False")
        try:
            fractions = tuple(sorted({float(f) for f in warn_at}))
        except (TypeError, ValueError):
            raise ConfigError(
                f"warn_at must be fractions between 0 and 1, got {warn_at!r}"
            ) from None
        if any(not 0 < f < 1 for f in fractions):
            raise ConfigError(f"warn_at must be fractions between 0 and 1, got {warn_at!r}")
        self.limits: Mapping[str, float] = dict(limits)
        self.include_cache = include_cache
        self.warn_at = fractions
        self.per_run = per_run
        self.name = name
        self._account: Account | None = None if per_run else LocalAccount(self._totals())
        #: How many agents (and batches) this budget was given to: "shared" is
        #: said only of a budget given to more than one (see :meth:`hold`).
        self._holders = 0
        #: Stop handles of the runs in flight on this budget (shared budgets).
        self._lock = threading.Lock()
        self._running: dict[str, StopHandle] = {}
        #: ``per_run``: the account of each live session (its turns share it),
        #: the most recent few kept.
        self._sessions: dict[str, Account] = {}

    def _totals(self) -> Totals:
        return Totals(dict(self.limits), self.include_cache, self.warn_at)

    # -- where the pot lives -------------------------------------------------

    def move_pot(self, make_account: Callable[[Totals], Account]) -> Budget:
        """Move this budget's shared pot (with what was spent so far) into the
        account ``make_account`` builds from it, e.g. a Ray actor
        (:func:`coding_genesis.integrations.ray_budget.on_ray`), so that runs
        in other processes charge one account.  Returns self."""
        if self.per_run:
            return self
        account = self._account
        if isinstance(account, LocalAccount):
            with account._lock:  # what was spent so far moves with the pot
                self._account = make_account(account._totals)
        return self

    @property
    def on_this_machine(self) -> bool:
        """True while the shared pot lives in this process (not per run, not on Ray)."""
        return isinstance(self._account, LocalAccount)

    def __reduce__(self) -> tuple[Callable[..., Budget], tuple[Any, ...]]:
        account = self._account
        if account is not None and not isinstance(account, LocalAccount):
            return (_rebuild, (self._kwargs(), account))
        if account is not None:
            raise TypeError(
                "a shared Budget cannot be sent to another process as it is: move its "
                "pot first (coding_genesis.integrations.ray_budget.on_ray(budget): it "
                "then lives in a Ray actor)"
            )
        return (_rebuild, (self._kwargs(), None))

    def _kwargs(self) -> dict[str, Any]:
        return {
            **self.limits,
            "include_cache": self.include_cache,
            "warn_at": self.warn_at,
            "per_run": self.per_run,
            "name": self.name,
        }

    def hold(self) -> None:
        """One more agent or batch was given this budget (its metering, or
        ``run_many``, says so once)."""
        with self._lock:
            self._holders += 1

    @property
    def shared_by_many(self) -> bool:
        """The pot is given to more than one agent or batch (or lives in a Ray
        actor): what a person calls a shared budget.  A single agent's budget
        is a pot across its runs, but not "shared"."""
        if self._account is None:
            return False
        return self._holders > 1 or not isinstance(self._account, LocalAccount)

    # -- reading ------------------------------------------------------------

    @property
    def spent(self) -> dict[str, Any]:
        """What the shared pot has used so far (empty for a per-run budget)."""
        return self._account.snapshot() if self._account is not None else {}

    @property
    def exhausted(self) -> bool:
        account = self._account
        return account is not None and account.stopped_since("") is not None

    def describe(self) -> str:
        parts = [f"{k}={fmt(v)}" for k, v in self.limits.items()]
        if self.include_cache:
            parts.append("include_cache")
        if self.per_run:
            parts.append("per run")
        return "Budget(" + ", ".join(parts) + ")"

    __repr__ = describe

    # -- metering's side ----------------------------------------------------

    def open_run(self, key: str, stop: StopHandle | None, session: str | None = None) -> BudgetRun:
        """Start charging one run; a run of a spent shared budget is refused
        at once (its stop handle is stopped before anything is spawned).
        ``session``: the run is a turn of that live session; ``per_run``, its
        turns share one account (the session is the run a limit is set for)."""
        shared = self._account is not None
        account: Account
        if self._account is not None:
            account = self._account
        elif session is not None:
            with self._lock:
                found = self._sessions.pop(session, None)
                account = found if found is not None else LocalAccount(self._totals())
                self._sessions[session] = account  # the most recent last
                while len(self._sessions) > _SESSIONS_KEPT:
                    del self._sessions[next(iter(self._sessions))]
        else:
            account = LocalAccount(self._totals())
        run = BudgetRun(self, account, key, stop, shared, alone=session is None)
        exceeded = account.open(key)
        if exceeded is not None:
            run.refuse(exceeded)
        elif shared and stop is not None:
            with self._lock:
                self._running[key] = stop
        return run

    def _stop_others(self, key: str, exceeded: Exceeded) -> None:
        with self._lock:
            others = [(k, h) for k, h in self._running.items() if k != key]
        for _other, handle in others:
            handle.stop(
                ErrorCode.BUDGET_EXCEEDED,
                f"{exceeded.describe(True)} by another run of the batch",
            )

    def _forget(self, key: str) -> None:
        with self._lock:
            self._running.pop(key, None)


def _rebuild(kwargs: dict[str, Any], account: Account | None) -> Budget:
    budget = Budget(**kwargs)
    if account is not None:
        budget._account = account
    return budget


class BudgetRun:
    """One run's charges to a budget (metering's handle)."""

    __slots__ = (
        "_account",
        "_budget",
        "_charged",
        "_key",
        "_owed",
        "_own",
        "_shared",
        "_stop",
        "exceeded",
        "outcome",
        "reason",
    )

    def __init__(
        self,
        budget: Budget,
        account: Account,
        key: str,
        stop: StopHandle | None,
        shared: bool,
        alone: bool = True,
    ) -> None:
        self._budget = budget
        self._account = account
        self._key = key
        self._stop = stop
        self._shared = shared
        self._charged = Usage()
        #: A per-run account in this process is this run's alone (not a live
        #: session's, which its turns share): charged without its lock, with
        #: the run's total (no delta to build).
        self._own: Totals | None = (
            account._totals if alone and not shared and isinstance(account, LocalAccount) else None
        )
        #: The run's totals not yet charged, because they reached no threshold
        #: of its own account (see :meth:`below`); charged on :meth:`close`.
        self._owed: tuple[float, int, int, int, int] | None = None
        #: ``ran``, ``stopped`` or ``not_started``.
        self.outcome = "ran"
        self.reason: str | None = None
        self.exceeded: Exceeded | None = None

    @property
    def _told_shared(self) -> bool:
        """Whether to call the budget shared (given to more than one agent or batch)."""
        return self._shared and self._budget.shared_by_many

    def refuse(self, exceeded: Exceeded) -> None:
        self.outcome = "not_started"
        self.exceeded = exceeded
        self.reason = (
            f"{exceeded.describe(self._told_shared)} before this run started; nothing was started"
        )
        if self._stop is not None:
            self._stop.stop(ErrorCode.BUDGET_EXCEEDED, self.reason, FailureCategory.NOT_STARTED)

    def below(
        self, cost_usd: float, tokens: int, cache_tokens: int, turns: int, tools: int
    ) -> bool:
        """True when the run's usage so far (as :class:`Usage`'s fields) need
        not be charged now: the account is this run's own (``per_run``, in
        this process) and the totals reach none of its thresholds (no warning,
        no limit), so charging them would say nothing.  They are charged on
        :meth:`close`, or with the next charge.  The hot path's check (metering
        asks on every usage and tool-call event): no allocation, no lock."""
        own = self._own
        if own is None:
            return False
        floor = own.floor
        if (
            cost_usd < floor[0]
            and tokens + (cache_tokens if own.include_cache else 0) < floor[1]
            and turns < floor[2]
            and tools < floor[3]
        ):
            self._owed = (cost_usd, tokens, cache_tokens, turns, tools)
            return True
        return False

    def charge(self, total: Usage) -> list[BudgetWarning]:
        """The run's usage so far is ``total``: charge the change; stop the run
        (and, for a shared budget, the others) when a limit is crossed."""
        self._owed = None
        if self.outcome == "not_started":
            return []
        if total == self._charged:
            return []
        own = self._own
        if own is not None:
            self._charged = total
            exceeded, warnings, crossed = own.reach(total)
        else:
            delta = total.minus(self._charged)
            self._charged = total
            exceeded, warnings, crossed = self._account.charge(self._key, delta)
        if exceeded is not None and self.exceeded is None:
            self.exceeded = exceeded
            self.outcome = "stopped"
            self.reason = exceeded.describe(self._told_shared)
            if self._stop is not None:
                self._stop.stop(ErrorCode.BUDGET_EXCEEDED, self.reason)
            if crossed and self._shared:
                self._budget._stop_others(self._key, exceeded)
        return warnings

    def check_stopped(self) -> None:
        """For an account shared across processes: a stop made elsewhere."""
        if self.exceeded is None and self._shared:
            exceeded = self._account.stopped_since(self._key)
            if exceeded is not None:
                self.exceeded = exceeded
                self.outcome = "stopped"
                self.reason = f"{exceeded.describe(True)} by another run of the batch"
                if self._stop is not None:
                    self._stop.stop(ErrorCode.BUDGET_EXCEEDED, self.reason)

    def close(self, stopped_by_us: bool) -> dict[str, Any]:
        """The run is over: its ``budget`` response field."""
        owed = self._owed
        if owed is not None:  # below every threshold: settles the figures, says nothing
            self.charge(Usage(*owed))
        self._account.close(self._key)
        self._budget._forget(self._key)
        if self.outcome == "ran" and self._stop is not None and self._stop.request is not None:
            request = self._stop.request
            if request.error == ErrorCode.BUDGET_EXCEEDED:
                self.outcome = "stopped"
                self.reason = request.message
        if self.outcome == "stopped" and not stopped_by_us:
            # The limit was crossed at the run's last event: it had finished.
            self.outcome = "ran"
        return {
            "outcome": self.outcome,
            "reason": self.reason,
            "limits": dict(self._budget.limits),
            "include_cache": self._budget.include_cache,
            "shared": self._told_shared,
            "exceeded": self.exceeded.to_dict() if self.exceeded else None,
            "charged": {
                "cost_usd": round(self._charged.cost_usd, 8),
                "tokens": self._charged.tokens,
                "cache_tokens": self._charged.cache_tokens,
                "turns": self._charged.turns,
                "tool_calls": self._charged.tool_calls,
            },
            "spent": self._account.snapshot(),
        }
