"""Retry policies: per-category retry strategies and the decision after a failed
attempt.

The numbers are the retry strategies' (``retryStrategies``)::

    timeout     2 retries, linear 30 s, timeout x1.5 on each retry
    network     3 retries, exponential from 1 s, capped at 30 s
    rate_limit  5 retries, exponential from 60 s; the CLI's retry-after wins (capped)
    internal    1 retry, fixed 60 s, then escalate
    partial     1 retry, fixed 1 s, continuing from the completed steps
    invalid_output  1 retry at once, resuming with the validation error
                    (ours: a request with ``output_schema=``, even without a policy)

The policy never decides retryability itself: it reads the failure value's
``retryable`` (decided once by the failure analysis from the same table,
:data:`DEFAULT_RETRIES`) and ``retry_after_s``, and only adds counts, backoff,
timeouts and the deadline.  So for every failure ``failure.retryable`` is
exactly whether ``RetryPolicy.default()`` retries it on a first attempt.

The loop that runs the attempts lives in the run pipeline.  :func:`testing` (or :func:`set_testing`)
makes every backoff instant and records it, for tests.
"""

from __future__ import annotations

import enum
import random as _random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from coding_genesis._util.clock import set_testing, testing
from coding_genesis._util.renamed import warn_renamed
from coding_genesis.errors import ConfigError
from coding_genesis.status import FailureCategory

if TYPE_CHECKING:
    from coding_genesis.result import ChildFailure

__all__ = [
    "DEFAULT_RETRIES",
    "Action",
    "Backoff",
    "CategoryPolicy",
    "Decision",
    "RetryPolicy",
    "set_testing",
    "testing",
]


class Backoff(enum.StrEnum):
    """How the delay grows with the retry number n (1, 2, ...)."""

    FIXED = "fixed"  # base
    LINEAR = "linear"  # base * n
    EXPONENTIAL = "exponential"  # base * 2**(n-1)


class Action(enum.StrEnum):
    """What happens after a failed attempt (the retry strategies' actions)."""

    RETRY = "retry"
    #: Give up; the caller can fix the request and retry by hand.
    FAIL = "fail"
    #: Give up and hand it to a human or an orchestrator, with an escalation record.
    ESCALATE = "escalate"


_CATEGORY_RENAMES = {
    "base_delay_s": "base_delay",
    "max_delay_s": "max_delay",
    "retry_after_cap_s": "retry_after_cap",
}


def _old_keys(data: Any, names: Mapping[str, str], where: str) -> Any:
    """Input (JSON from ``--retry`` or a run-many line, keywords) with 0.1's
    ``_s`` names renamed, each with a DeprecationWarning."""
    if not isinstance(data, Mapping) or not any(old in data for old in names):
        return data
    data = dict(data)
    for old, new in names.items():
        if old in data:
            warn_renamed(where, old, new, stacklevel=6)
            data[new] = data.pop(old)  # the caller's, over a dump's (with_category)
    return data


class CategoryPolicy(BaseModel):
    """How one failure category is retried (one entry of the retry strategies' ``retryStrategies``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_retries: Annotated[int, Field(ge=0, le=1000)] = 0
    backoff: Backoff = Backoff.FIXED
    #: Delay of the first retry, in seconds.
    base_delay: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0
    #: Cap on the computed delay (None: no cap).
    max_delay: Annotated[float | None, Field(ge=0, allow_inf_nan=False)] = None
    #: Full jitter: the delay is drawn uniformly from [0, delay).
    jitter: bool = False
    #: Wait what the CLI or API asked for (retry-after) instead of the backoff.
    use_retry_after: bool = False
    #: Longest retry-after honored; a longer one is cut to this.
    retry_after_cap: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 900.0
    #: The timeout of the next attempt is multiplied by this (1.5 for timeouts).
    extend_timeout: Annotated[float, Field(ge=1.0, le=100.0, allow_inf_nan=False)] = 1.0
    #: What happens when this category is not retried (any more).
    on_give_up: Literal[Action.FAIL, Action.ESCALATE] = Action.FAIL

    @model_validator(mode="before")
    @classmethod
    def old_names(cls, data: Any) -> Any:
        """0.1's ``_s`` keys renamed (deprecated)."""
        return _old_keys(data, _CATEGORY_RENAMES, "CategoryPolicy")

    @property
    def base_delay_s(self) -> float:
        """0.1's name of :attr:`base_delay` (deprecated)."""
        warn_renamed("CategoryPolicy", "base_delay_s", "base_delay")
        return self.base_delay

    @property
    def max_delay_s(self) -> float | None:
        """0.1's name of :attr:`max_delay` (deprecated)."""
        warn_renamed("CategoryPolicy", "max_delay_s", "max_delay")
        return self.max_delay

    @property
    def retry_after_cap_s(self) -> float:
        """0.1's name of :attr:`retry_after_cap` (deprecated)."""
        warn_renamed("CategoryPolicy", "retry_after_cap_s", "retry_after_cap")
        return self.retry_after_cap

    def delay(self, retry_number: int, random: Callable[[], float] | None = None) -> float:
        """Backoff before retry ``retry_number`` (1-based), the retry strategies' ``calculateBackoff``."""
        n = max(1, retry_number)
        base = self.base_delay
        if self.backoff is Backoff.LINEAR:
            delay = base * n
        elif self.backoff is Backoff.EXPONENTIAL:
            delay = base * 2.0 ** min(n - 1, 60)
        else:
            delay = base
        if self.max_delay is not None:
            delay = min(delay, self.max_delay)
        if self.jitter:
            delay *= (random or _random.random)()
        return delay


#: Retries ``RetryPolicy.default()`` makes per category; a category absent here is
#: not retried as-is.  This is the one table retryability is read from: the
#: failure analysis decides ``failure.retryable`` with it and the default policy
#: retries exactly these categories, so the two agree.  (The retry strategies
#: call ``internal`` "Partiel": analyze and decide.  We decided: one retry after
#: a pause.  Failure recovery's tool errors are retryable "after fixing the environment":
#: not as-is, so not by a policy.)
DEFAULT_RETRIES: dict[FailureCategory, int] = {
    FailureCategory.TIMEOUT: 2,
    FailureCategory.STALLED: 1,
    FailureCategory.NETWORK: 3,
    FailureCategory.RATE_LIMIT: 5,
    FailureCategory.AGENT_ERROR: 1,
    FailureCategory.PARTIAL: 1,
    FailureCategory.VERIFY_FAILED: 1,
    # Also without a retry policy: a request with output_schema= has this one row.
    FailureCategory.INVALID_OUTPUT: 1,
}

#: What each category does when it is not retried (the retry strategies' table, "Action" column).
_GIVE_UP: dict[FailureCategory, Literal[Action.FAIL, Action.ESCALATE]] = {
    FailureCategory.TIMEOUT: Action.ESCALATE,
    FailureCategory.STALLED: Action.ESCALATE,
    FailureCategory.RATE_LIMIT: Action.FAIL,
    FailureCategory.NETWORK: Action.FAIL,
    FailureCategory.AUTH: Action.ESCALATE,
    FailureCategory.INVALID_TASK: Action.FAIL,
    FailureCategory.CONTEXT_OVERFLOW: Action.FAIL,
    FailureCategory.MISSING_CONTEXT: Action.FAIL,
    FailureCategory.TOOL_ERROR: Action.ESCALATE,
    FailureCategory.MISSING: Action.ESCALATE,
    FailureCategory.PARTIAL: Action.ESCALATE,
    FailureCategory.VERIFY_FAILED: Action.FAIL,
    # The model's answer kept its own shape: the caller decides (a simpler schema, a better prompt).
    FailureCategory.INVALID_OUTPUT: Action.FAIL,
    FailureCategory.AGENT_ERROR: Action.ESCALATE,
    # The caller set the budget: spending more is the caller's call, not an escalation.
    FailureCategory.BUDGET_EXCEEDED: Action.FAIL,
    # A CLI that rewrote its repository: a person looks first.
    FailureCategory.WORKSPACE_TAMPERED: Action.ESCALATE,
    # The caller's approver refused: its policy, so the caller decides (not an escalation).
    FailureCategory.PERMISSION_DENIED: Action.FAIL,
    # Endings that are no failure of the run: the caller decides what comes next.
    FailureCategory.CANCELLED: Action.FAIL,
    FailureCategory.INTERRUPTED: Action.FAIL,
    FailureCategory.BUSY: Action.FAIL,
    FailureCategory.DEGRADED: Action.FAIL,
    FailureCategory.NOT_STARTED: Action.FAIL,
    FailureCategory.UNKNOWN: Action.ESCALATE,
}


def _spec_defaults() -> dict[FailureCategory, CategoryPolicy]:
    policies = {
        category: CategoryPolicy(on_give_up=_GIVE_UP[category]) for category in FailureCategory
    }
    shapes: dict[FailureCategory, dict[str, Any]] = {
        FailureCategory.TIMEOUT: {
            "backoff": Backoff.LINEAR,
            "base_delay": 30.0,
            "extend_timeout": 1.5,
        },
        FailureCategory.NETWORK: {
            "backoff": Backoff.EXPONENTIAL,
            "base_delay": 1.0,
            "max_delay": 30.0,
        },
        # A hung CLI or tool: once more at once, continuing the session.
        FailureCategory.STALLED: {"backoff": Backoff.FIXED, "base_delay": 1.0},
        FailureCategory.RATE_LIMIT: {
            "backoff": Backoff.EXPONENTIAL,
            "base_delay": 60.0,
            "use_retry_after": True,
        },
        FailureCategory.AGENT_ERROR: {"backoff": Backoff.FIXED, "base_delay": 60.0},
        # Failure recovery: partial success is "often retryable with adjusted approach" — the
        # continuation prompt is that adjustment.
        FailureCategory.PARTIAL: {"backoff": Backoff.FIXED, "base_delay": 1.0},
        # The verify output is the continuation prompt (coding_genesis._pipeline.retrying).
        FailureCategory.VERIFY_FAILED: {"backoff": Backoff.FIXED, "base_delay": 0.0},
        # The validation error is the continuation prompt (coding_genesis._pipeline.retrying).
        FailureCategory.INVALID_OUTPUT: {"backoff": Backoff.FIXED, "base_delay": 0.0},
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

    ``RetryPolicy.default()`` has the retry strategies' numbers; ``with_retries(n)``,
    ``with_category(category, **changes)`` and ``model_copy(update=...)`` derive
    others.  Categories absent from ``categories`` are not retried.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    categories: Mapping[FailureCategory, CategoryPolicy] = Field(default_factory=_spec_defaults)
    #: Overall budget across attempts and waits, in seconds (None: no deadline).
    deadline: Annotated[float | None, Field(gt=0, allow_inf_nan=False)] = None
    #: Continue the CLI session of the failed attempt when the backend can resume it;
    #: False starts every retry in a fresh session.
    resume: bool = True

    @model_validator(mode="before")
    @classmethod
    def old_names(cls, data: Any) -> Any:
        """0.1's ``deadline_s`` renamed (deprecated)."""
        return _old_keys(data, {"deadline_s": "deadline"}, "RetryPolicy")

    @property
    def deadline_s(self) -> float | None:
        """0.1's name of :attr:`deadline` (deprecated)."""
        warn_renamed("RetryPolicy", "deadline_s", "deadline")
        return self.deadline

    @classmethod
    def default(cls, **changes: Any) -> RetryPolicy:
        """The default retry strategies (optionally with top-level changes, e.g. ``deadline``)."""
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
        """The retry strategies' ``determineStrategy`` + ``executeRetry`` for one failed attempt.

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
                self.deadline - elapsed_s if self.deadline is not None else policy.retry_after_cap
            )
            if retry_after_s >= allowed:
                bound = (
                    f"the retry deadline of {self.deadline:g}s"
                    if self.deadline is not None
                    else f"retry_after_cap={policy.retry_after_cap:g}s"
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
            if self.deadline is not None and timeout_s is not None:
                next_timeout = min(timeout_s, allowed - retry_after_s)
            return Decision(Action.RETRY, reason, retry_after_s, next_timeout)
        if policy.use_retry_after and retry_after_s is not None and retry_after_s >= 0:
            delay = min(retry_after_s, policy.retry_after_cap)
            how = f"retry-after {retry_after_s:g}s" + (
                f" (capped at {policy.retry_after_cap:g}s)" if delay < retry_after_s else ""
            )
        else:
            delay = policy.delay(n, random)
            how = f"{policy.backoff} backoff" + (" with jitter" if policy.jitter else "")
        next_timeout = timeout_s * policy.extend_timeout if timeout_s is not None else None
        if self.deadline is not None:
            left = self.deadline - elapsed_s - delay
            if left <= 0:
                return Decision(
                    give_up,
                    f"{cat}: waiting {delay:g}s would pass the retry deadline of {self.deadline:g}s",
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
