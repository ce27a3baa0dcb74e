"""The two endings of a live session's turn: ``interrupted`` (the caller stopped
it, status 130) and ``permission_denied`` (the approver refused a tool call and
ended the turn, status 1), through the one failure analysis and the breaker."""

from __future__ import annotations

import pytest

from coding_genesis._failures.analysis import analyze
from coding_genesis._failures.errorcontext import last_resort_message
from coding_genesis._failures.taxonomy import (
    LAST_RESORT_MESSAGES,
    RETRY_SUGGESTIONS,
    USER_HINTS,
    category_from_name,
)
from coding_genesis.backends import CodexBackend
from coding_genesis.breaker import CircuitBreaker
from coding_genesis.result import RunResult
from coding_genesis.retry import Action, RetryPolicy
from coding_genesis.status import ErrorCode, FailureCategory, Status

ENDINGS = [
    (ErrorCode.INTERRUPTED, Status.CANCELLED, FailureCategory.INTERRUPTED),
    (ErrorCode.PERMISSION_DENIED, Status.FAILED, FailureCategory.PERMISSION_DENIED),
]


def ended(error: ErrorCode, status: int, message: str) -> RunResult:
    return RunResult(
        status=status,
        error=error,
        is_error=True,
        message=message,
        backend="codex",
        session_id="thread-1",
        tool_calls=3,  # progress: a retry would not be ruled out for want of it
        files_modified=["src/a.py"],  # nor turned into "partial" by it
        stderr_tail="Error: permission denied (EACCES) 403",  # text that says otherwise
    )


@pytest.mark.parametrize(("error", "status", "category"), ENDINGS)
def test_the_error_code_decides_the_category_and_nothing_is_retried(
    error: ErrorCode, status: Status, category: FailureCategory
) -> None:
    result = analyze(
        ended(error, status, f"turn ended: {error}"), CodexBackend(), node="codex", timeout=60
    )
    failure = result.failure
    assert failure is not None and failure.category is category
    assert failure.reason == f"runner: {error}"
    assert result.status == status and result.error is error
    assert failure.retryable is False and failure.retryable_reason.startswith(f"{category}: ")
    assert failure.suggested_actions and all(a.strip() for a in failure.suggested_actions)
    context = result.error_context
    assert context is not None and context["error_type"] == category.value
    assert context["user_hint"].startswith(USER_HINTS[category]) and not context["can_retry"]
    assert context["retry_suggestion"] == RETRY_SUGGESTIONS[category]
    assert result.failure_report is not None and category.value in result.failure_report
    policy = RetryPolicy.default()
    assert policy.for_category(category).max_retries == 0
    assert policy.for_category(category).on_give_up is Action.FAIL


@pytest.mark.parametrize(("error", "status", "category"), ENDINGS)
def test_an_empty_message_gets_the_last_resort_text(
    error: ErrorCode, status: Status, category: FailureCategory
) -> None:
    result = analyze(ended(error, status, ""), CodexBackend(), node="codex", timeout=60)
    assert result.message == LAST_RESORT_MESSAGES[category]
    # a category's own name means it, in every vocabulary we read
    assert category_from_name(category.value) is category
    assert last_resort_message(category.value) == LAST_RESORT_MESSAGES[category]


def test_a_refusal_names_the_refused_tool_in_its_advice() -> None:
    result = ended(ErrorCode.PERMISSION_DENIED, 1, "Bash denied by the approver")
    result = result.model_copy(update={"denied_tools": ["Bash"]})
    failure = analyze(result, CodexBackend(), node="codex", timeout=60).failure
    assert failure is not None and failure.suggested_actions[0].startswith(
        "Allow Bash in the approver"
    )
    assert failure.blocked_on == "Bash denied by the approver"


def test_an_interrupted_turn_leaves_the_breaker_as_it_was() -> None:
    # like a cancelled run: no health signal either way; an open circuit's probe
    # that is interrupted leaves it open, and the next request probes again
    breaker = CircuitBreaker(threshold=2, cooldown=0)
    assert breaker.record("not_found", "not_found", "gone", 0.0, probe=False) == "trip"
    assert breaker.record("interrupted", "interrupted", "", 1.0, probe=False) == "neutral"
    assert breaker.consecutive == 1
    assert breaker.record("not_found", "not_found", "gone", 2.0, probe=False) == "trip"
    assert breaker.open
    assert breaker.admit(3.0) == (True, 0.0)
    assert breaker.record("interrupted", "interrupted", "", 3.0, probe=True) == "neutral"
    assert breaker.open and not breaker.probing


def test_a_refused_turn_is_a_failure_but_no_outage() -> None:
    # the backend answered (its CLI asked, our approver said no): like invalid_task,
    # it ends a streak of outage failures, and a probe it ends closes the circuit
    breaker = CircuitBreaker(threshold=2, cooldown=0)
    assert breaker.record("not_found", "not_found", "gone", 0.0, probe=False) == "trip"
    denied = ("permission_denied", "permission_denied", "Bash denied")
    assert breaker.record(*denied, 1.0, probe=False) == "other"
    assert breaker.consecutive == 0 and not breaker.open
    for now in (2.0, 3.0):
        breaker.record("not_found", "not_found", "gone", now, probe=False)
    assert breaker.open and breaker.admit(4.0) == (True, 0.0)
    assert breaker.record(*denied, 4.0, probe=True) == "other"
    assert not breaker.open
