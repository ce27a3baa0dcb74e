"""The error context: what failed, told so that whoever answers the
user (an orchestrator, a response node, a person) can say what happened and
what to do, instead of showing a raw error or reaching a dead end.

Built from a failed run (:func:`error_context_for_failure`) or from an
exception in a graph node (:func:`error_context_for_exception`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from coding_genesis._failures.classify import classify_exception
from coding_genesis._failures.taxonomy import (
    LAST_RESORT_MESSAGES,
    RETRY_SUGGESTIONS,
    USER_HINTS,
    category_from_name,
    retry_verdict,
)
from coding_genesis._util.redact import Redactor
from coding_genesis.result import ChildFailure, RunResult
from coding_genesis.status import FailureCategory

__all__ = [
    "CONTROL_KEYS",
    "ErrorContext",
    "error_context_for_exception",
    "error_context_for_failure",
    "last_resort_message",
]

_DETAIL = 2000

#: State keys the graph helpers own; never reported as "available data".
CONTROL_KEYS = frozenset({"error_context", "partial_failure", "force_response", "trace_id"})


class ErrorContext(TypedDict, total=False):
    """Context about a failure that the response generator can use."""

    failed_node: str  # which node (agent) failed
    error_type: str  # a FailureCategory value
    error_detail: str  # technical detail, for logs, not for users
    user_hint: str  # pre-written hint for whoever answers the user
    degraded_results: bool  # True if there are partial results
    available_data: list[str]  # what DID come through
    unavailable_data: list[str]  # what did not
    can_retry: bool  # whether retrying might help
    retry_suggestion: str  # e.g. "Wait a minute and try again."
    retry_after_s: float | None  # how long the API asked us to wait, if it said


def last_resort_message(category: FailureCategory | str | None) -> str:
    """A hard-coded answer for when nothing better can be said (never empty)."""
    found = category_from_name(category) if not isinstance(category, FailureCategory) else category
    return LAST_RESORT_MESSAGES[found or FailureCategory.UNKNOWN]


def _retry_suggestion(category: FailureCategory, retry_after: float | None, can_retry: bool) -> str:
    if retry_after is not None and category is not FailureCategory.AUTH:
        return f"Wait {retry_after:g}s and try again."
    if category is FailureCategory.TIMEOUT and not can_retry:
        return "Split the task into smaller steps: no progress was made before the time ran out."
    return RETRY_SUGGESTIONS[category]


def error_context_for_failure(
    failure: ChildFailure, *, node: str, result: RunResult | None = None
) -> ErrorContext:
    """The error context of a failed run (every failed response carries one)."""
    category = failure.category
    hint = USER_HINTS[category]
    done = len(failure.completed_steps)
    if done:
        hint += f" It completed {done} step(s) before stopping."
    if failure.files_modified:
        hint += f" {len(failure.files_modified)} file(s) were changed."
    available: list[str] = []
    if failure.session_id:
        available.append("session_id")
    if failure.completed_steps:
        available.append("completed_steps")
    if failure.files_modified:
        available.append("files_modified")
    if failure.tool_usage:
        available.append("tool_usage")
    if result is not None and result.data is not None:
        available.append("error_body")
    if failure.stderr_tail.strip():
        available.append("stderr")
    unavailable = ["final_answer"]
    if not failure.session_id:
        unavailable.append("session_id")
    detail = f"{failure.reason}: {failure.message}" if failure.reason else failure.message
    last_err = next(
        (line.strip() for line in reversed(failure.stderr_tail.splitlines()) if line.strip()), ""
    )
    if last_err and last_err not in detail:
        detail += f" | stderr: {last_err}"
    return ErrorContext(
        failed_node=node,
        error_type=category.value,
        error_detail=detail[:_DETAIL],
        user_hint=hint,
        degraded_results=bool(failure.completed_steps or failure.files_modified),
        available_data=available,
        unavailable_data=unavailable,
        can_retry=failure.retryable,
        retry_suggestion=_retry_suggestion(category, failure.retry_after_s, failure.retryable),
        retry_after_s=failure.retry_after_s,
    )


#: Hints for a failed graph step (the run hints above speak of the coding agent).
_STEP_HINTS: dict[FailureCategory, str] = {
    FailureCategory.TIMEOUT: "The {node} step took too long; results may be incomplete.",
    FailureCategory.RATE_LIMIT: "The {node} step is being rate-limited right now.",
    FailureCategory.NETWORK: "The {node} step could not reach a service it needs.",
    FailureCategory.AUTH: "The {node} step was not allowed to do what it needed.",
    FailureCategory.INVALID_TASK: "The {node} step could not use the data it was given.",
    FailureCategory.MISSING_CONTEXT: "The {node} step did not have the information it needed.",
    FailureCategory.TOOL_ERROR: "A tool the {node} step needs failed or is missing.",
    FailureCategory.MISSING: "Something the {node} step needs was not found.",
    FailureCategory.PARTIAL: "The {node} step finished only part of its work.",
    FailureCategory.VERIFY_FAILED: "The {node} step finished, but its verification failed.",
    FailureCategory.INVALID_OUTPUT: "The {node} step answered, but not in the shape asked for.",
    FailureCategory.AGENT_ERROR: "The {node} step failed internally.",
    FailureCategory.BUDGET_EXCEEDED: "The {node} step was stopped when its budget was spent.",
    FailureCategory.WORKSPACE_TAMPERED: "The {node} step replaced its workspace's repository; "
    "its work was not used.",
    FailureCategory.UNKNOWN: "Something unexpected happened in the {node} step, "
    "but the rest can still answer.",
}


def _present(value: Any) -> bool:
    if value is None or value is False:
        return False
    if isinstance(value, str | bytes | Mapping | list | tuple | set | frozenset):
        return len(value) > 0
    return True


def error_context_for_exception(
    node: str,
    exc: BaseException,
    state: Mapping[str, Any] | None = None,
    *,
    provides: Iterable[str] = (),
    redactor: Redactor | None = None,
) -> ErrorContext:
    """The ``build_error_context``: an exception in a graph node.

    ``available_data`` lists the state keys that hold something; ``provides``
    names what the failed node would have added (reported as unavailable).
    """
    found = classify_exception(exc)
    category = found.category
    redactor = redactor or Redactor()
    state = state if isinstance(state, Mapping) else {}
    available = [
        str(key)
        for key, value in state.items()
        if key not in CONTROL_KEYS and isinstance(key, str) and _present(value)
    ]
    unavailable = list(dict.fromkeys(provides)) or [f"{node} output"]
    # A graph step has no tool-call count: judge it as if it had made progress.
    can_retry = retry_verdict(category, progress=True)[0]
    return ErrorContext(
        failed_node=node,
        error_type=category.value,
        error_detail=redactor.text(f"{type(exc).__name__}: {exc}")[:_DETAIL],
        user_hint=_STEP_HINTS[category].format(node=node),
        degraded_results=True,
        available_data=available,
        unavailable_data=unavailable,
        can_retry=can_retry,
        retry_suggestion=_retry_suggestion(category, found.retry_after_s, can_retry),
        retry_after_s=found.retry_after_s,
    )
