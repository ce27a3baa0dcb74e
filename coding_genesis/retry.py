"""Retry and recovery: per-category retry policies, the decision after a failed
attempt, the retry loop, continuation prompts and escalation records.

The numbers are spec 002's (``retryStrategies``)::

    timeout     2 retries, linear 30 s, timeout x1.5 on each retry
    network     3 retries, exponential from 1 s, capped at 30 s
    rate_limit  5 retries, exponential from 60 s; the CLI's retry-after wins (capped)
    internal    1 retry, fixed 60 s, then escalate
    partial     1 retry, fixed 1 s, continuing from the completed steps

The policy never decides retryability itself: it reads the failure value's
``retryable`` (decided once by :mod:`coding_genesis.analysis` from the same
table, :data:`~coding_genesis.failures.DEFAULT_RETRIES`) and ``retry_after_s``,
and only adds counts, backoff, timeouts and the deadline.  So for every failure
``failure.retryable`` is exactly whether ``RetryPolicy.default()`` retries it on
a first attempt.

The loop (:func:`retrying`) knows nothing of processes or backends: it calls
an attempt function with an :class:`AttemptPlan` and reads the result's
failure.  Time comes from :mod:`coding_genesis.clock` (injectable).
"""

from __future__ import annotations

import datetime as _dt
import enum
import random as _random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .breaker import CircuitBreaker
from .clock import (
    Clock,
    SystemClock,
    VirtualClock,
    current_clock,
    is_testing,
    set_testing,
    testing,
)
from .errors import ConfigError
from .failures import DEFAULT_RETRIES, FailureCategory

if TYPE_CHECKING:
    from .report import ChildFailure
    from .result import RunResult

__all__ = [
    "Action",
    "AttemptPlan",
    "Backoff",
    "CategoryPolicy",
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
    "retrying",
    "set_testing",
    "testing",
]


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
    _C.STALLED: Action.ESCALATE,
    _C.RATE_LIMIT: Action.FAIL,
    _C.NETWORK: Action.FAIL,
    _C.AUTH: Action.ESCALATE,
    _C.INVALID_TASK: Action.FAIL,
    _C.MISSING_CONTEXT: Action.FAIL,
    _C.TOOL_ERROR: Action.ESCALATE,
    _C.NOT_FOUND: Action.ESCALATE,
    _C.PARTIAL: Action.ESCALATE,
    _C.VERIFY_FAILED: Action.FAIL,
    _C.INTERNAL: Action.ESCALATE,
    # The caller set the budget: spending more is the caller's call, not an escalation.
    _C.BUDGET_EXCEEDED: Action.FAIL,
    # A CLI that rewrote its repository: a person looks first.
    _C.WORKSPACE_TAMPERED: Action.ESCALATE,
    _C.UNKNOWN: Action.ESCALATE,
}


def _spec_defaults() -> dict[FailureCategory, CategoryPolicy]:
    policies = {category: CategoryPolicy(on_give_up=_GIVE_UP[category]) for category in _C}
    shapes: dict[FailureCategory, dict[str, Any]] = {
        _C.TIMEOUT: {"backoff": Backoff.LINEAR, "base_delay_s": 30.0, "extend_timeout": 1.5},
        _C.NETWORK: {"backoff": Backoff.EXPONENTIAL, "base_delay_s": 1.0, "max_delay_s": 30.0},
        # A hung CLI or tool: once more at once, continuing the session.
        _C.STALLED: {"backoff": Backoff.FIXED, "base_delay_s": 1.0},
        _C.RATE_LIMIT: {
            "backoff": Backoff.EXPONENTIAL,
            "base_delay_s": 60.0,
            "use_retry_after": True,
        },
        _C.INTERNAL: {"backoff": Backoff.FIXED, "base_delay_s": 60.0},
        # Spec 004: partial success is "often retryable with adjusted approach" — the
        # continuation prompt is that adjustment.
        _C.PARTIAL: {"backoff": Backoff.FIXED, "base_delay_s": 1.0},
        # The verify output is the continuation prompt (see continuation_prompt).
        _C.VERIFY_FAILED: {"backoff": Backoff.FIXED, "base_delay_s": 0.0},
    }
    for category, retries in DEFAULT_RETRIES.items():
        policies[category] = CategoryPolicy(
            max_retries=retries, on_give_up=_GIVE_UP[category], **shapes[category]
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
        failure: ChildFailure,
        *,
        retries_done: int,
        timeout_s: float | None = None,
        elapsed_s: float = 0.0,
        random: Callable[[], float] | None = None,
    ) -> Decision:
        """Spec 002's ``determineStrategy`` + ``executeRetry`` for one failed attempt.

        Whether the failure is worth retrying at all is the failure's own
        answer (``failure.retryable``); the policy adds how often and when."""
        cat = failure.category
        policy = self.for_category(cat)
        give_up = policy.on_give_up
        if not failure.retryable:
            return Decision(give_up, f"not retryable: {failure.retryable_reason or cat}")
        if policy.max_retries == 0:
            return Decision(give_up, f"{cat} failures are not retried by this policy")
        if retries_done >= policy.max_retries:
            used = policy.max_retries
            return Decision(
                give_up, f"{cat}: gave up after {used} retr{'y' if used == 1 else 'ies'}"
            )
        n = retries_done + 1
        retry_after_s = failure.retry_after_s
        if policy.use_retry_after and failure.retry_at is not None and retry_after_s is not None:
            # A usage limit: retrying before its reset fails the same way.  Wait
            # for it within the deadline (without one, within the cap), else say when.
            allowed = (
                self.deadline_s - elapsed_s
                if self.deadline_s is not None
                else policy.retry_after_cap_s
            )
            if retry_after_s >= allowed:
                bound = (
                    f"the retry deadline of {self.deadline_s:g}s"
                    if self.deadline_s is not None
                    else f"retry_after_cap_s={policy.retry_after_cap_s:g}s"
                )
                return Decision(
                    give_up,
                    f"{cat}: the usage limit resets at {failure.retry_at} (in "
                    f"{retry_after_s:g}s), past {bound}: retry at {failure.retry_at}",
                )
            reason = (
                f"{cat}: retry {n} of {policy.max_retries} after {retry_after_s:g}s "
                f"(waiting for the usage limit to reset at {failure.retry_at})"
            )
            next_timeout = timeout_s
            if self.deadline_s is not None and timeout_s is not None:
                next_timeout = min(timeout_s, allowed - retry_after_s)
            return Decision(Action.RETRY, reason, retry_after_s, next_timeout)
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
    verify = result.verify
    checked = ""
    if verify is not None and verify.get("status") != "passed":
        checked = (
            f"Verification `{' '.join(verify.get('argv') or [])}` "
            f"({verify.get('status')}, exit {verify.get('exit_code')}) printed:\n"
            f"```\n{str(verify.get('output_tail') or '').rstrip()}\n```\n\n"
        )
    return (
        "Continue from previous attempt:\n\n"
        f"Already completed:\n{done}\n\n"
        f"Blocker encountered{kind}: {blocker(result)}\n\n"
        f"{checked}"
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
    failure: ChildFailure,
    reason: str,
    history: list[dict[str, Any]],
    now: float,
    agent: str = "",
    backend: str = "",
) -> dict[str, Any]:
    """Spec 002's ``escalateError`` record: a view of the last attempt's failure."""
    return {
        "id": f"ESC-{run_id[:12] or 'run'}-{int(now * 1000)}",
        "run_id": run_id,
        "category": failure.category.value,
        "message": history[-1]["message"] if history else failure.message,
        "reason": reason,
        "created_at": iso(now),
        "agent": agent,
        "backend": backend,
        "session_id": failure.session_id,
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
        "suggested_actions": list(failure.suggested_actions),
    }


# -- the loop ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AttemptPlan:
    """What one attempt is asked to do."""

    #: 1-based.
    number: int
    prompt: str
    #: CLI session to continue (None: a fresh one).
    resume: str | None
    #: The attempt's wall-clock timeout (None: the agent's).
    timeout: float | None
    #: The prompt is a continuation of the original request.
    continuation: bool = False


@dataclass(slots=True)
class _Loop:
    history: list[dict[str, Any]] = field(default_factory=list)
    retries: int = 0
    fresh_fallback: bool = False


async def retrying(
    policy: RetryPolicy,
    clock: Clock,
    attempt: Callable[[AttemptPlan], Awaitable[RunResult]],
    first: AttemptPlan,
    *,
    can_resume: bool,
    on_attempt: Callable[[dict[str, Any]], object] = lambda entry: None,
    escalation: Mapping[str, str] | None = None,
) -> RunResult:
    """Run ``attempt`` until it succeeds or ``policy`` gives up (spec 002's
    ``handleError``/``executeRetry`` loop, spec 004's continuation).

    Every failed result handed back by ``attempt`` carries its analysed
    ``failure``; the loop reads it and decides nothing else about the failure.
    ``on_attempt`` hears each attempt start (``phase="started"``) and end.
    ``escalation``: ``run_id``, ``agent`` and ``backend`` for the escalation record.
    """
    started = clock.monotonic()
    loop = _Loop()
    plan = first
    original_resume = first.resume
    ids = dict(escalation or {})
    while True:
        on_attempt(
            {
                "phase": "started",
                "attempt": plan.number,
                "timeout": plan.timeout,
                "resume_session": plan.resume,
                "continuation": plan.continuation,
            }
        )
        result = await attempt(plan)
        failure = result.failure
        if not result.is_error or failure is None:
            on_attempt(
                {
                    "phase": "finished",
                    "attempt": plan.number,
                    "status": result.status,
                    "action": "succeed" if not result.is_error else "fail",
                    "session_id": result.session_id,
                }
            )
            return result.model_copy(
                update={
                    "retry_count": loop.retries,
                    "attempts": loop.retries + 1,
                    "retry_history": loop.history,
                }
            )
        decision = policy.decide(
            failure,
            retries_done=loop.retries,
            timeout_s=plan.timeout,
            elapsed_s=clock.monotonic() - started,
        )
        resumed_by_us = (
            plan.number > 1 and plan.resume is not None and plan.resume != original_resume
        )
        if (
            decision.action is not Action.RETRY
            and resumed_by_us
            and result.lines == 0
            and not loop.fresh_fallback
            and result.error not in ("timeout", "idle_timeout", "stalled", "invalid_request")
        ):
            # The CLI rejected the session (codex: unknown id, exit 1, no output):
            # start over in a fresh session once, at once.
            loop.fresh_fallback = True
            can_resume = False
            decision = Decision(
                Action.RETRY,
                f"resuming session {plan.resume} failed with no output; "
                "retrying in a fresh session",
                0.0,
                plan.timeout,
            )
        now = clock.time()
        retrying_now = decision.action is Action.RETRY
        next_resume = (result.session_id or plan.resume) if can_resume else None
        entry: dict[str, Any] = {
            "attempt": plan.number,
            "category": failure.category.value,
            "error": result.error,
            "status": result.status,
            "message": blocker(result),
            "at": iso(now),
            "duration_s": result.duration_s,
            "tool_calls": result.tool_calls,
            "cli_retries": result.cli_retries,
            "session_id": result.session_id,
            "timeout_s": plan.timeout,
            "retryable": failure.retryable,
            "action": decision.action.value,
            "reason": decision.reason,
            "delay_s": round(decision.delay_s, 3) if retrying_now else None,
            "scheduled_at": iso(now + decision.delay_s) if retrying_now else None,
            "next_timeout_s": decision.next_timeout_s if retrying_now else None,
            "resume_session": next_resume if retrying_now else None,
        }
        if result.verify is not None:
            entry["verify"] = result.verify
        if not retrying_now:
            entry["suggested_actions"] = list(failure.suggested_actions)
        loop.history.append(entry)
        on_attempt({"phase": "finished", **entry})
        if not retrying_now:
            update: dict[str, Any] = {
                "retry_count": loop.retries,
                "attempts": loop.retries + 1,
                "retry_history": loop.history,
            }
            if decision.action is Action.ESCALATE:
                update["escalation"] = escalation_record(
                    run_id=ids.get("run_id", ""),
                    failure=failure,
                    reason=decision.reason,
                    history=loop.history,
                    now=now,
                    agent=ids.get("agent", ""),
                    backend=ids.get("backend", ""),
                )
            return result.model_copy(update=update)
        loop.retries += 1
        await clock.sleep(decision.delay_s)
        made_progress = result.tool_calls > 0 or bool(result.files_modified)
        # A failed verify is always continued: its output is what the retry needs.
        continuation = next_resume is not None or made_progress or result.verify is not None
        plan = AttemptPlan(
            number=plan.number + 1,
            prompt=(
                continuation_prompt(first.prompt, result, failure.category.value)
                if continuation
                else first.prompt
            ),
            resume=next_resume,
            timeout=decision.next_timeout_s
            if decision.next_timeout_s is not None
            else plan.timeout,
            continuation=continuation,
        )
