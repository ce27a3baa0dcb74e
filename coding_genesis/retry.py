"""Retry and recovery: per-category retry policies, continuation prompts,
escalation records, the DEGRADED circuit breaker, and injectable time.

The numbers are spec 002's (``retryStrategies``)::

    timeout     2 retries, linear 30 s, timeout x1.5 on each retry
    network     3 retries, exponential from 1 s, capped at 30 s
    rate_limit  5 retries, exponential from 60 s; the CLI's retry-after wins (capped)
    internal    1 retry, fixed 60 s, then escalate

Everything else (auth, invalid_task, missing_context, not_found, tool_error,
unknown) is not retried as-is: it fails or escalates at once.  Spec 004 adds
two rules: a timeout with no progress (no tool call) is not retried as-is (the
task should be broken up), and a retry continues from the partial progress
("Continue from previous attempt") — in the same CLI session when the backend
can resume it.

An agent has no retry policy unless one is given (``retry=``), so one request
is one attempt by default.  Time is injectable: pass ``clock=`` to the agent,
or switch the whole process to virtual time with :func:`testing` (as stamina's
``set_testing`` does) so that backoffs return at once and are recorded.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import enum
import os
import random as _random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, overload

import anyio
import anyio.lowlevel
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ConfigError
from .failures import FailureCategory

if TYPE_CHECKING:
    from .result import RunResult

__all__ = [
    "TESTING_ENV",
    "Action",
    "Backoff",
    "CategoryPolicy",
    "Circuit",
    "CircuitBreaker",
    "Clock",
    "Decision",
    "RetryPolicy",
    "SystemClock",
    "VirtualClock",
    "blocker",
    "completed_steps",
    "continuation_prompt",
    "current_clock",
    "escalation_record",
    "is_testing",
    "iso",
    "set_testing",
    "suggested_actions",
    "testing",
]

#: Set to 1 in a process's environment to make its backoff sleeps instant
#: (virtual time), e.g. to test an orchestrator that shells out to ``genesis run``.
TESTING_ENV = "GENESIS_RETRY_TESTING"


class Backoff(enum.StrEnum):
    """How the delay grows with the retry number n (1, 2, ...)."""

    FIXED = "fixed"  # base
    LINEAR = "linear"  # base * n
    EXPONENTIAL = "exponential"  # base * 2**(n-1)


class Action(enum.StrEnum):
    """What happens after a failed attempt (spec 002's strategy actions)."""

    RETRY = "retry"
    #: Give up; the caller can fix the request and retry by hand.
    FAIL = "fail"
    #: Give up and hand it to a human or an orchestrator, with an escalation record.
    ESCALATE = "escalate"


class CategoryPolicy(BaseModel):
    """How one failure category is retried (one entry of spec 002's ``retryStrategies``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_retries: Annotated[int, Field(ge=0, le=1000)] = 0
    backoff: Backoff = Backoff.FIXED
    #: Delay of the first retry, in seconds.
    base_delay_s: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0
    #: Cap on the computed delay (None: no cap).
    max_delay_s: Annotated[float | None, Field(ge=0, allow_inf_nan=False)] = None
    #: Full jitter: the delay is drawn uniformly from [0, delay).
    jitter: bool = False
    #: Wait what the CLI or API asked for (retry-after) instead of the backoff.
    use_retry_after: bool = False
    #: Longest retry-after honoured; a longer one is cut to this.
    retry_after_cap_s: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 900.0
    #: The timeout of the next attempt is multiplied by this (spec 002: 1.5 for timeouts).
    extend_timeout: Annotated[float, Field(ge=1.0, le=100.0, allow_inf_nan=False)] = 1.0
    #: Spec 004: retry only if the failed attempt made progress (at least one tool call).
    require_progress: bool = False
    #: What happens when this category is not retried (any more).
    on_give_up: Literal[Action.FAIL, Action.ESCALATE] = Action.FAIL

    def delay(self, retry_number: int, random: Callable[[], float] | None = None) -> float:
        """Backoff before retry ``retry_number`` (1-based), spec 002's ``calculateBackoff``."""
        n = max(1, retry_number)
        base = self.base_delay_s
        if self.backoff is Backoff.LINEAR:
            delay = base * n
        elif self.backoff is Backoff.EXPONENTIAL:
            delay = base * 2.0 ** min(n - 1, 60)
        else:
            delay = base
        if self.max_delay_s is not None:
            delay = min(delay, self.max_delay_s)
        if self.jitter:
            delay *= (random or _random.random)()
        return delay


_C = FailureCategory

#: What each category does when it is not retried (spec 002's table, "Action" column).
_GIVE_UP: dict[FailureCategory, Literal[Action.FAIL, Action.ESCALATE]] = {
    _C.TIMEOUT: Action.ESCALATE,
    _C.RATE_LIMIT: Action.FAIL,
    _C.NETWORK: Action.FAIL,
    _C.AUTH: Action.ESCALATE,
    _C.INVALID_TASK: Action.FAIL,
    _C.MISSING_CONTEXT: Action.FAIL,
    _C.TOOL_ERROR: Action.ESCALATE,
    _C.NOT_FOUND: Action.ESCALATE,
    _C.PARTIAL: Action.ESCALATE,
    _C.INTERNAL: Action.ESCALATE,
    _C.UNKNOWN: Action.ESCALATE,
}


def _spec_defaults() -> dict[FailureCategory, CategoryPolicy]:
    policies = {category: CategoryPolicy(on_give_up=_GIVE_UP[category]) for category in _C}
    policies[_C.TIMEOUT] = CategoryPolicy(
        max_retries=2,
        backoff=Backoff.LINEAR,
        base_delay_s=30.0,
        extend_timeout=1.5,
        require_progress=True,
        on_give_up=Action.ESCALATE,
    )
    policies[_C.NETWORK] = CategoryPolicy(
        max_retries=3, backoff=Backoff.EXPONENTIAL, base_delay_s=1.0, max_delay_s=30.0
    )
    policies[_C.RATE_LIMIT] = CategoryPolicy(
        max_retries=5, backoff=Backoff.EXPONENTIAL, base_delay_s=60.0, use_retry_after=True
    )
    policies[_C.INTERNAL] = CategoryPolicy(
        max_retries=1, backoff=Backoff.FIXED, base_delay_s=60.0, on_give_up=Action.ESCALATE
    )
    # Spec 004: partial success is "often retryable with adjusted approach" — the
    # continuation prompt is that adjustment.
    policies[_C.PARTIAL] = CategoryPolicy(
        max_retries=1, backoff=Backoff.FIXED, base_delay_s=1.0, on_give_up=Action.ESCALATE
    )
    return policies


@dataclass(frozen=True, slots=True)
class Decision:
    """The strategy chosen after one failed attempt."""

    action: Action
    #: Why, in words (goes to the retry history).
    reason: str
    #: Seconds to wait before the next attempt.
    delay_s: float = 0.0
    #: Timeout of the next attempt.
    next_timeout_s: float | None = None


class RetryPolicy(BaseModel):
    """Retry strategies per failure category, an overall deadline, and resume.

    ``RetryPolicy.default()`` has spec 002's numbers; ``with_retries(n)``,
    ``with_category(category, **changes)`` and ``model_copy(update=...)`` derive
    others.  Categories absent from ``categories`` are not retried.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    categories: Mapping[FailureCategory, CategoryPolicy] = Field(default_factory=_spec_defaults)
    #: Overall budget across attempts and waits, in seconds (None: no deadline).
    deadline_s: Annotated[float | None, Field(gt=0, allow_inf_nan=False)] = None
    #: Continue the CLI session of the failed attempt when the backend can resume it;
    #: False starts every retry in a fresh session.
    resume: bool = True

    @classmethod
    def default(cls, **changes: Any) -> RetryPolicy:
        """Spec 002's strategies (optionally with top-level changes, e.g. ``deadline_s``)."""
        return cls.model_validate(changes) if changes else cls()

    @classmethod
    def parse(cls, value: object) -> RetryPolicy | None:
        """Accept what ``retry=`` accepts: a policy, None/"none" (off), "default",
        or an int N (the default strategies with N retries per retryable category)."""
        if value is None or isinstance(value, RetryPolicy):
            return value
        if isinstance(value, bool):
            return cls.default() if value else None
        if isinstance(value, int):
            return cls.default().with_retries(value)
        if isinstance(value, str):
            name = value.strip().lower()
            if name in ("none", "off", "no"):
                return None
            if name in ("default", "spec", "on"):
                return cls.default()
            if name.isdigit():
                return cls.default().with_retries(int(name))
            raise ConfigError(
                f"unknown retry policy {value!r}: use 'default', 'none' or a number of retries"
            )
        if isinstance(value, Mapping):
            try:
                return cls.model_validate(value)
            except ValidationError as exc:
                raise ConfigError(f"invalid retry policy: {exc}") from None
        raise ConfigError(
            f"retry must be a RetryPolicy, 'default', 'none', an int or None, got {value!r}"
        )

    def for_category(self, category: str | FailureCategory) -> CategoryPolicy:
        cat = _category(category)
        found = self.categories.get(cat)
        return found if found is not None else CategoryPolicy(on_give_up=_GIVE_UP[cat])

    def with_retries(self, n: int) -> RetryPolicy:
        """The same strategies, with ``n`` retries for every category that retries."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ConfigError(f"the number of retries must be an int >= 0, got {n!r}")
        updated = {
            cat: (policy.model_copy(update={"max_retries": n}) if policy.max_retries else policy)
            for cat, policy in self.categories.items()
        }
        return self.model_copy(update={"categories": updated})

    def with_category(self, category: str | FailureCategory, **changes: Any) -> RetryPolicy:
        """A copy with one category's strategy changed (validated)."""
        cat = _category(category)
        try:
            policy = CategoryPolicy.model_validate(
                {**self.for_category(cat).model_dump(), **changes}
            )
        except ValidationError as exc:
            raise ConfigError(f"invalid retry strategy for {cat}: {exc}") from None
        return self.model_copy(update={"categories": {**self.categories, cat: policy}})

    def decide(
        self,
        category: str | FailureCategory,
        *,
        retries_done: int,
        tool_calls: int = 0,
        timeout_s: float | None = None,
        retry_after_s: float | None = None,
        elapsed_s: float = 0.0,
        random: Callable[[], float] | None = None,
    ) -> Decision:
        """Spec 002's ``determineStrategy`` + ``executeRetry`` for one failed attempt."""
        cat = _category(category)
        policy = self.for_category(cat)
        give_up = policy.on_give_up
        if policy.max_retries == 0:
            return Decision(give_up, f"{cat} failures are not retried as-is")
        if policy.require_progress and tool_calls <= 0:
            return Decision(
                give_up,
                f"{cat} with no progress (0 tool calls): not retried as-is; "
                "break the task into smaller subtasks",
            )
        if retries_done >= policy.max_retries:
            used = policy.max_retries
            return Decision(
                give_up, f"{cat}: gave up after {used} retr{'y' if used == 1 else 'ies'}"
            )
        n = retries_done + 1
        if policy.use_retry_after and retry_after_s is not None and retry_after_s >= 0:
            delay = min(retry_after_s, policy.retry_after_cap_s)
            how = f"retry-after {retry_after_s:g}s" + (
                f" (capped at {policy.retry_after_cap_s:g}s)" if delay < retry_after_s else ""
            )
        else:
            delay = policy.delay(n, random)
            how = f"{policy.backoff} backoff" + (" with jitter" if policy.jitter else "")
        next_timeout = timeout_s * policy.extend_timeout if timeout_s is not None else None
        if self.deadline_s is not None:
            left = self.deadline_s - elapsed_s - delay
            if left <= 0:
                return Decision(
                    give_up,
                    f"{cat}: waiting {delay:g}s would pass the retry deadline of {self.deadline_s:g}s",
                )
            if next_timeout is not None:
                next_timeout = min(next_timeout, left)
        reason = f"{cat}: retry {n} of {policy.max_retries} after {delay:g}s ({how})"
        if next_timeout is not None and timeout_s is not None and next_timeout != timeout_s:
            reason += f"; timeout {timeout_s:g}s -> {next_timeout:g}s"
        return Decision(Action.RETRY, reason, delay, next_timeout)


def _category(value: str | FailureCategory) -> FailureCategory:
    try:
        return FailureCategory(value)
    except ValueError:
        return FailureCategory.UNKNOWN


# -- suggested actions, continuation prompts, escalation records --------------

#: Spec 002's ``getSuggestedActions`` (translated) and spec 004's recovery actions.
_SUGGESTED: dict[FailureCategory, tuple[str, ...]] = {
    _C.TIMEOUT: (
        "Check the load on the target",
        "Increase the timeout",
        "Break the task into smaller subtasks",
    ),
    _C.RATE_LIMIT: (
        "Wait until the rate-limit window resets",
        "Lower the number of concurrent requests",
    ),
    _C.NETWORK: ("Check network connectivity and proxies", "Retry later"),
    _C.AUTH: ("Check the credentials and access", "Request the permissions needed"),
    _C.INVALID_TASK: (
        "Check the format of the input",
        "Clarify the task requirements and success criteria",
    ),
    _C.MISSING_CONTEXT: (
        "Include specific file paths in the prompt",
        "Provide full context (the agent has no access to the caller's history)",
        "Add an example of the expected output",
    ),
    _C.TOOL_ERROR: (
        "Check file permissions",
        "Install missing dependencies",
        "Verify the command exists: which <command>",
    ),
    _C.NOT_FOUND: ("Check that the resource exists", "Update the references"),
    _C.PARTIAL: (
        "Complete the remaining work",
        "Fix the blocker",
        "Adjust the approach",
    ),
}


def suggested_actions(
    category: str | FailureCategory, *, timeout_s: float | None = None, tool_calls: int = 0
) -> list[str]:
    """What a human or an orchestrator could do about a failure of this category."""
    cat = _category(category)
    actions = list(_SUGGESTED.get(cat, ("Analyse the error manually",)))
    if cat is _C.TIMEOUT and timeout_s is not None:
        retry = f"Retry with timeout={timeout_s * 2:g}s"
        if tool_calls > 0:
            actions.insert(0, retry)
        else:
            actions.remove("Break the task into smaller subtasks")
            actions[:0] = ["Break the task into smaller subtasks", retry]
    return actions


_MAX_BLOCKER = 500


def blocker(result: RunResult) -> str:
    """A short description of what stopped an attempt."""
    data = result.data or {}
    for key in ("error_message", "error"):
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()[:_MAX_BLOCKER]
    for line in (result.message or "").splitlines():
        if line.strip():
            return line.strip()[:_MAX_BLOCKER]
    return result.error or "unknown failure"


def completed_steps(result: RunResult) -> list[str]:
    """Spec 004's "work completed before failure", from what the attempt did."""
    steps = [
        f"Used {name} {count} time{'s' if count != 1 else ''}"
        for name, count in result.tool_usage.items()
    ]
    steps += [f"Modified {path}" for path in result.files_modified[:50]]
    return steps


def continuation_prompt(original: str, result: RunResult, category: str | None = None) -> str:
    """Spec 004's "Continue from previous attempt" prompt for a retry.

    The original request is repeated at the end, so the prompt also stands on
    its own when the retry cannot continue the same session.
    """
    steps = completed_steps(result)
    done = "\n".join(f"✓ {step}" for step in steps) if steps else "(nothing yet)"
    kind = f" ({category})" if category else ""
    return (
        "Continue from previous attempt:\n\n"
        f"Already completed:\n{done}\n\n"
        f"Blocker encountered{kind}: {blocker(result)}\n\n"
        "Please:\n1. Address the blocker\n2. Complete the remaining work\n"
        "3. Verify everything works\n\n"
        f"Original request:\n{original}"
    )


def iso(ts: float) -> str:
    """ISO 8601 UTC with milliseconds and a Z, like the failer's timestamps."""
    return (
        _dt.datetime.fromtimestamp(ts, _dt.UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def escalation_record(
    *,
    run_id: str,
    category: str,
    message: str,
    reason: str,
    history: list[dict[str, Any]],
    now: float,
    agent: str = "",
    backend: str = "",
    session_id: str | None = None,
    timeout_s: float | None = None,
    tool_calls: int = 0,
) -> dict[str, Any]:
    """Spec 002's ``escalateError`` record."""
    return {
        "id": f"ESC-{run_id[:12] or 'run'}-{int(now * 1000)}",
        "run_id": run_id,
        "category": category,
        "message": message,
        "reason": reason,
        "created_at": iso(now),
        "agent": agent,
        "backend": backend,
        "session_id": session_id,
        "attempts": len(history),
        "error_history": [
            {
                "attempt": entry["attempt"],
                "category": entry["category"],
                "error": entry["error"],
                "message": entry["message"],
                "at": entry["at"],
            }
            for entry in history
        ],
        "suggested_actions": suggested_actions(
            category, timeout_s=timeout_s, tool_calls=tool_calls
        ),
    }


# -- the circuit breaker -------------------------------------------------------


class CircuitBreaker(BaseModel):
    """When an agent goes DEGRADED: after ``threshold`` consecutive requests
    failing in a way no retry fixes (``trip_on``: CLI missing, auth), for
    ``cooldown_s``; then one probe request may run and a success closes it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    threshold: Annotated[int, Field(ge=1)] = 3
    cooldown_s: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 60.0
    trip_on: frozenset[FailureCategory] = frozenset({_C.NOT_FOUND, _C.AUTH})


#: Error codes that say nothing about the backend's health (the request never reached it).
NEUTRAL_ERRORS = frozenset({"invalid_request", "busy", "degraded"})


class Circuit:
    """The breaker's running state (consecutive failures, when it opened)."""

    __slots__ = ("config", "consecutive", "last_category", "opened_at", "reason")

    def __init__(self, config: CircuitBreaker) -> None:
        self.config = config
        self.consecutive = 0
        self.last_category: str | None = None
        self.opened_at: float | None = None
        self.reason = ""

    @property
    def open(self) -> bool:
        return self.opened_at is not None

    def remaining(self, now: float) -> float:
        """Seconds of cooldown left (0 when a probe may run, or when closed)."""
        if self.opened_at is None:
            return 0.0
        return max(0.0, self.opened_at + self.config.cooldown_s - now)

    def record(self, error: str | None, category: str | None, message: str, now: float) -> str:
        """Fold one request's outcome in: "success", "neutral", "other" or "trip"
        (a failure that counts; the circuit is open once enough counted)."""
        if error is None:
            self.reset()
            return "success"
        if error in NEUTRAL_ERRORS:
            return "neutral"
        if category is None or _category(category) not in self.config.trip_on:
            self.consecutive = 0
            return "other"
        self.consecutive += 1
        self.last_category = category
        if self.consecutive >= self.config.threshold:
            self.opened_at = now
            first = message.strip().splitlines()[0][:200] if message.strip() else ""
            self.reason = (
                f"{self.consecutive} consecutive {category} failure"
                f"{'s' if self.consecutive != 1 else ''}"
                + (f" ({first})" if first else "")
                + f"; cooldown {self.config.cooldown_s:g}s"
            )
        return "trip"

    def reset(self) -> None:
        self.consecutive = 0
        self.last_category = None
        self.opened_at = None
        self.reason = ""


# -- time ----------------------------------------------------------------------


class Clock(Protocol):
    """Where the retry loop and the circuit breaker get their time from."""

    def monotonic(self) -> float: ...

    def time(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """Real time."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


class VirtualClock:
    """Time that the test controls: ``sleep`` returns at once (after a
    checkpoint, so cancellation still works), records how long it was asked to
    wait and moves the clock on by that much; ``advance`` moves it by hand.

    Real time still passes underneath unless ``frozen`` is set.
    """

    def __init__(self, *, frozen: bool = False) -> None:
        self.frozen = frozen
        self._mono0 = time.monotonic()
        self._wall0 = time.time()
        self.offset = 0.0
        #: Every backoff asked for, in order, in seconds.
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return (self._mono0 if self.frozen else time.monotonic()) + self.offset

    def time(self) -> float:
        if self.frozen:
            return self._wall0 + self.offset
        return self._wall0 + (time.monotonic() - self._mono0) + self.offset

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ConfigError("a clock cannot go back")
        self.offset += seconds

    async def sleep(self, seconds: float) -> None:
        seconds = max(0.0, float(seconds))
        self.sleeps.append(seconds)
        self.offset += seconds
        await anyio.lowlevel.checkpoint()

    @property
    def slept(self) -> float:
        """Total virtual time spent sleeping."""
        return sum(self.sleeps)


SYSTEM_CLOCK = SystemClock()
_testing_clock: VirtualClock | None = None
_env_clock: VirtualClock | None = None


def current_clock() -> Clock:
    """The virtual clock while testing is on, else real time."""
    global _env_clock
    if _testing_clock is not None:
        return _testing_clock
    if os.environ.get(TESTING_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        if _env_clock is None:
            _env_clock = VirtualClock()
        return _env_clock
    return SYSTEM_CLOCK


def is_testing() -> bool:
    return not isinstance(current_clock(), SystemClock)


def set_testing(enabled: bool) -> VirtualClock | None:
    """Switch the whole process to virtual time (backoff sleeps are instant and
    recorded) or back.  Returns the clock now in use when enabled."""
    global _testing_clock
    _testing_clock = VirtualClock() if enabled else None
    return _testing_clock


@overload
def testing(enabled: Literal[True] = ...) -> contextlib.AbstractContextManager[VirtualClock]: ...


@overload
def testing(enabled: bool) -> contextlib.AbstractContextManager[VirtualClock | None]: ...


def testing(enabled: bool = True) -> contextlib.AbstractContextManager[VirtualClock | None]:
    """``with testing() as clock:`` — virtual time inside the block.

    Process-wide (agents in other threads see it too); the previous setting
    comes back on exit.  ``clock.sleeps`` lists the backoffs the code asked for.
    """
    return _testing(enabled)


@contextlib.contextmanager
def _testing(enabled: bool) -> Iterator[VirtualClock | None]:
    global _testing_clock
    previous = _testing_clock
    _testing_clock = VirtualClock() if enabled else None
    try:
        yield _testing_clock
    finally:
        _testing_clock = previous
