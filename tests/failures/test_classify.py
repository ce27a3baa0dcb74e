"""The failure taxonomy and the classifier's rules, evidence by evidence."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from coding_genesis._failures.classify import classify, classify_exception
from coding_genesis._failures.retryafter import extract_retry_after
from coding_genesis._failures.taxonomy import (
    LAST_RESORT_MESSAGES,
    RETRY_SUGGESTIONS,
    SPEC_NAMES,
    USER_HINTS,
    category_from_name,
    retry_verdict,
)
from coding_genesis.backends import ClaudeBackend, CodexBackend, FailerBackend
from coding_genesis.errors import ConfigError, UnknownBackendError
from coding_genesis.events import CliRetryEvent, ErrorEvent
from coding_genesis.result import RunResult
from coding_genesis.retry import DEFAULT_RETRIES, RetryPolicy
from coding_genesis.status import FailureCategory

FAILURES_PAGE = Path(__file__).parents[2] / "docs" / "failures.md"


def test_every_category_has_names_and_texts() -> None:
    for table in (SPEC_NAMES, USER_HINTS, RETRY_SUGGESTIONS, LAST_RESORT_MESSAGES):
        assert set(table) == set(FailureCategory)
    assert all(text.strip() for text in LAST_RESORT_MESSAGES.values())


def test_retryability_is_one_table_decided_per_failure() -> None:
    # spec 002: timeout/network/rate_limit yes, validation/permission/not_found/unknown
    # no, internal "partial" (analyze and decide: we decided one retry); spec 004:
    # partial retryable, tool_error only after fixing the environment (not as-is),
    # a timeout only after progress.  Issue 12: a stall once, whatever the progress.
    # Issue 14: a failed verify once, resuming the session with the verify output.
    # Issue 27: an answer that does not match its output schema once, likewise.
    assert set(DEFAULT_RETRIES) == {
        FailureCategory.TIMEOUT,
        FailureCategory.STALLED,
        FailureCategory.NETWORK,
        FailureCategory.RATE_LIMIT,
        FailureCategory.AGENT_ERROR,
        FailureCategory.PARTIAL,
        FailureCategory.VERIFY_FAILED,
        FailureCategory.INVALID_OUTPUT,
    }
    for category in FailureCategory:
        retryable, why = retry_verdict(category, progress=True)
        assert retryable is (category in DEFAULT_RETRIES) and why
        policy = RetryPolicy.default().for_category(category)
        assert policy.max_retries == DEFAULT_RETRIES.get(category, 0)
    assert retry_verdict(FailureCategory.TIMEOUT, progress=False)[0] is False
    assert "no progress" in retry_verdict(FailureCategory.TIMEOUT, progress=False)[1]
    assert retry_verdict(FailureCategory.TOOL_ERROR, progress=True) == (
        False,
        "tool_error: the environment must be fixed first (a retry as-is fails the same way)",
    )


@pytest.mark.parametrize(
    ("name", "category"),
    [
        ("permission", FailureCategory.AUTH),  # spec 002
        ("validation", FailureCategory.INVALID_TASK),
        ("connection", FailureCategory.NETWORK),  # spec 003
        ("data", FailureCategory.INVALID_TASK),
        ("PARTIAL_SUCCESS", FailureCategory.PARTIAL),  # spec 004
        ("MISSING_CONTEXT", FailureCategory.MISSING_CONTEXT),
        ("RATE_LIMIT", FailureCategory.RATE_LIMIT),  # failer error codes
        ("AGENT_ERROR", FailureCategory.AGENT_ERROR),
        ("TRANSIENT_ERROR", FailureCategory.NETWORK),
        ("rate-limit", FailureCategory.RATE_LIMIT),
        ("bogus", None),
        (42, None),
    ],
)
def test_category_from_any_vocabulary(name: object, category: FailureCategory | None) -> None:
    assert category_from_name(name) is category


def test_docs_map_every_category() -> None:
    section = FAILURES_PAGE.read_text().split("## Failures", 1)[1].split("\n## ", 1)[0]
    for category in FailureCategory:
        assert re.search(rf"^\| `{category.value}` \|", section, re.M), category


# (evidence, category, reason starts with)
CASES: list[tuple[dict[str, Any], FailureCategory, str]] = [
    (
        {"error": "timeout", "message": "429 in the text"},
        FailureCategory.TIMEOUT,
        "runner: timeout",
    ),
    ({"error": "idle_timeout"}, FailureCategory.TIMEOUT, "runner"),
    ({"error": "stalled"}, FailureCategory.STALLED, "runner"),
    ({"error": "not_found"}, FailureCategory.MISSING, "runner"),
    ({"error": "not_executable"}, FailureCategory.TOOL_ERROR, "runner"),
    ({"error": "invalid_request"}, FailureCategory.INVALID_TASK, "runner"),
    ({"error": "cli_error", "api_error_status": 429}, FailureCategory.RATE_LIMIT, "API status 429"),
    ({"error": "cli_error", "api_error_status": 529}, FailureCategory.RATE_LIMIT, "API status"),
    ({"error": "cli_error", "api_error_status": 401}, FailureCategory.AUTH, "API status"),
    ({"error": "cli_error", "api_error_status": 403}, FailureCategory.AUTH, "API status"),
    ({"error": "cli_error", "api_error_status": 404}, FailureCategory.MISSING, "API status"),
    ({"error": "cli_error", "api_error_status": 400}, FailureCategory.INVALID_TASK, "API status"),
    ({"error": "cli_error", "api_error_status": 503}, FailureCategory.AGENT_ERROR, "API status"),
    ({"error": "cli_error", "backend_hint": "network"}, FailureCategory.NETWORK, "backend hint"),
    (
        {"error": "cli_error", "backend_hint": "nonsense", "message": "x"},
        FailureCategory.UNKNOWN,
        "no evidence",
    ),
    (
        {"error": "cli_error", "data": {"error_code": "RATE_LIMIT"}},
        FailureCategory.RATE_LIMIT,
        "error body",
    ),
    (
        {"error": "cli_error", "result_subtype": "error_max_turns"},
        FailureCategory.PARTIAL,
        "max turns",
    ),
    ({"error": "cli_error", "permission_denials": 2}, FailureCategory.AUTH, "2 permission denial"),
    (
        {"error": "cli_error", "message": "Error: authentication failed"},
        FailureCategory.AUTH,
        "text",
    ),
    (
        {"error": "cli_error", "stderr_tail": "connect ECONNREFUSED 127.0.0.1"},
        FailureCategory.NETWORK,
        "text",
    ),
    (
        {"error": "cli_error", "message": "stream disconnected before completion"},
        FailureCategory.NETWORK,
        "text",
    ),
    (
        {
            "error": "cli_error",
            "message": "API Error: Unable to connect to API (ConnectionRefused)",
        },
        FailureCategory.NETWORK,
        "text",
    ),
    (
        {"error": "cli_error", "last_tool_error": "Bash failed: ModuleNotFoundError: No module"},
        FailureCategory.TOOL_ERROR,
        "text",
    ),
    (
        {"error": "cli_error", "message": "bash: foo: command not found"},
        FailureCategory.TOOL_ERROR,
        "text",
    ),
    (
        {"error": "cli_error", "stderr_tail": "EACCES: permission denied"},
        FailureCategory.TOOL_ERROR,
        "text",
    ),
    (
        {"error": "cli_error", "message": "Cannot find 'the auth file' mentioned in prompt"},
        FailureCategory.MISSING_CONTEXT,
        "text",
    ),
    (
        {"error": "cli_error", "message": "No such file or directory: x.py"},
        FailureCategory.MISSING,
        "text",
    ),
    (
        {"error": "cli_error", "message": "Prompt is too long"},
        FailureCategory.CONTEXT_OVERFLOW,
        "text",
    ),
    (
        {"error": "cli_error", "api_error_status": 400, "message": "prompt is too long"},
        FailureCategory.CONTEXT_OVERFLOW,
        "API status",
    ),
    (
        {"error": "cli_error", "message": "context_length_exceeded"},
        FailureCategory.CONTEXT_OVERFLOW,
        "text",
    ),
    ({"error": "busy"}, FailureCategory.BUSY, "runner"),
    ({"error": "degraded"}, FailureCategory.DEGRADED, "runner"),
    ({"error": "cancelled"}, FailureCategory.CANCELLED, "runner"),
    ({"error": "usage_limit"}, FailureCategory.NOT_STARTED, "runner"),
    (
        {"error": "cli_error", "message": "Cannot both keep and delete: contradictory"},
        FailureCategory.INVALID_TASK,
        "text",
    ),
    (
        {"error": "cli_error", "message": "HTTP 502 Bad Gateway"},
        FailureCategory.AGENT_ERROR,
        "text",
    ),
    (
        {"error": "killed", "exit_code": -9, "message": "x"},
        FailureCategory.AGENT_ERROR,
        "killed by SIGKILL",
    ),
    (
        {"error": "killed", "exit_code": -15, "message": "x"},
        FailureCategory.AGENT_ERROR,
        "killed by SIGTERM",
    ),
    # An exit code above 128 is the CLI's own choice, not a signal (gemini exits
    # with the HTTP status mod 256): only how the process ended counts.
    # ... except the codes a CLI exits with when it stops itself on a
    # termination signal, which say what stopped it (status stays 1).
    (
        {"error": "cli_error", "exit_code": 137, "message": "x"},
        FailureCategory.AGENT_ERROR,
        "exited with code 137",
    ),
    (
        {"error": "cli_error", "exit_code": 143, "message": "x"},
        FailureCategory.AGENT_ERROR,
        "exited with code 143",
    ),
    (
        {"error": "cli_error", "exit_code": 145, "message": "x"},
        FailureCategory.UNKNOWN,
        "no evidence",
    ),
    (
        {"error": "cli_error", "exit_code": 143, "completed": True, "message": "x"},
        FailureCategory.UNKNOWN,
        "no",
    ),
    (
        {"error": "incomplete", "message": "exited before finishing"},
        FailureCategory.PARTIAL,
        "exited before",
    ),
    (
        {"error": "cli_error", "failed_tools": 1, "message": "x"},
        FailureCategory.TOOL_ERROR,
        "1 tool call",
    ),
    (
        {"error": "cli_error", "message": "exited with code 2"},
        FailureCategory.UNKNOWN,
        "no evidence",
    ),
    # Work done before the blocker: spec 004's PARTIAL_SUCCESS.
    (
        {"error": "cli_error", "failed_tools": 1, "files_modified": 2, "message": "x"},
        FailureCategory.PARTIAL,
        "1 tool call(s) failed, after changing 2 file(s)",
    ),
    # ... but an API verdict stays what it is.
    (
        {"error": "cli_error", "api_error_status": 500, "files_modified": 2},
        FailureCategory.AGENT_ERROR,
        "API",
    ),
]


@pytest.mark.parametrize(("evidence", "category", "reason"), CASES)
def test_classify(evidence: dict[str, Any], category: FailureCategory, reason: str) -> None:
    found = classify(**{"message": "", **evidence})
    assert found.category is category
    assert found.reason.startswith(reason), found.reason


def test_the_first_rule_with_a_verdict_decides() -> None:
    # A 429 status beats a backend hint, which beats the text.
    found = classify(
        error="cli_error",
        message="connection reset",
        api_error_status=429,
        backend_hint="auth",
    )
    assert found.category is FailureCategory.RATE_LIMIT
    found = classify(error="cli_error", message="connection reset", backend_hint="auth")
    assert found.category is FailureCategory.AUTH


@pytest.mark.parametrize(
    ("texts", "data", "seconds"),
    [
        ((), {"retry_after_seconds": 30}, 30.0),
        ((), {"retry_after_ms": 1500}, 1.5),
        ((), {"details": {"retry_after": "12"}}, 12.0),
        ((), {"retry_after_seconds": True}, None),
        ((), {"retry_after_seconds": -1}, None),
        (("API Error: 429 Rate limit exceeded. Retry after 30 seconds.",), None, 30.0),
        (("Retry-After: 12",), None, 12.0),
        (("retry_after=250ms",), None, 0.25),
        (("You've hit your usage limit. Try again in 2 hours 5 minutes.",), None, 7500.0),
        (("please retry in 45s",), None, 45.0),
        (("wait 1.5 minutes",), None, 90.0),
        (("Claude AI usage limit reached|1000003600",), None, 3600.0),
        (("limit resets at 1970-01-12T14:53:20Z",), None, 0.0),
        (("limit resets at 2001-09-09T01:46:40Z",), None, 0.0),
        (("Retry-After: Sun, 09 Sep 2001 01:46:40 GMT",), None, 0.0),
        (("try again in a moment",), None, None),
        (("nothing to see",), None, None),
    ],
)
def test_extract_retry_after(
    texts: tuple[str, ...], data: dict[str, Any] | None, seconds: float | None
) -> None:
    assert extract_retry_after(*texts, data=data, now=1_000_000_000.0) == seconds


def test_reset_times_in_the_future() -> None:
    now = 1_000_000_000.0
    assert extract_retry_after("resets at 2001-09-09T02:46:40Z", now=now) == 3600.0
    assert extract_retry_after("Retry-After: Sun, 09 Sep 2001 01:47:40 GMT", now=now) == 60.0


def test_claude_retry_delay_is_used_only_for_retryable_categories() -> None:
    limited = classify(error="cli_error", message="", api_error_status=429, retry_delay_s=8.5)
    assert limited.retry_after_s == 8.5
    denied = classify(error="cli_error", message="", api_error_status=401, retry_delay_s=8.5)
    assert denied.retry_after_s is None


class BrokenTimeout(Exception):
    pass


@pytest.mark.parametrize(
    ("exc", "category"),
    [
        # spec 003's own unit tests
        (TimeoutError("request timed out"), FailureCategory.TIMEOUT),
        (ConnectionError("refused"), FailureCategory.NETWORK),
        (Exception("429 rate limit"), FailureCategory.RATE_LIMIT),
        (Exception("something weird"), FailureCategory.UNKNOWN),
        # spec 004: PermissionError is a tool error ("Check file permissions")
        (PermissionError("Permission denied: /etc/config"), FailureCategory.TOOL_ERROR),
        (FileNotFoundError("no such file: claude"), FailureCategory.MISSING),
        (ModuleNotFoundError("No module named 'pytest'"), FailureCategory.TOOL_ERROR),
        (OSError(28, "No space left on device"), FailureCategory.TOOL_ERROR),
        (ValueError("invalid literal"), FailureCategory.INVALID_TASK),
        (KeyError("task"), FailureCategory.INVALID_TASK),
        (ConfigError("timeout must be a number"), FailureCategory.INVALID_TASK),
        (UnknownBackendError("unknown backend 'x'"), FailureCategory.MISSING),
        (BrokenTimeout("slow"), FailureCategory.TIMEOUT),
        (RuntimeError("Directus connection reset"), FailureCategory.NETWORK),
    ],
)
def test_classify_exception(exc: BaseException, category: FailureCategory) -> None:
    assert classify_exception(exc).category is category


def _result(**fields: Any) -> RunResult:
    return RunResult(
        **{"status": 1, "message": "", "is_error": True, "error": "cli_error", **fields}
    )


@pytest.mark.parametrize(
    ("fields", "hint"),
    [
        ({"message": "Invalid API key · Please run /login"}, "auth"),
        ({"message": "OAuth token has expired"}, "auth"),
        ({"message": "Claude AI usage limit reached|1767225600"}, "rate_limit"),
        ({"message": "API Error: Request timed out."}, "network"),
        ({"message": "API Error: Unable to connect to API (ConnectionRefused)"}, "network"),
        ({"message": "Prompt is too long"}, "context_overflow"),
        ({"message": "Invalid API key", "api_error_status": 401}, None),  # the status decides
        ({"message": "all good"}, None),
    ],
)
def test_claude_failure_hint(fields: dict[str, Any], hint: str | None) -> None:
    assert ClaudeBackend().failure_hint(_result(**fields)) == hint


@pytest.mark.parametrize(
    ("fields", "hint"),
    [
        (
            {
                "message": "We’re currently experiencing high demand, which may cause temporary errors."
            },
            "internal",
        ),
        ({"message": "exceeded retry limit, last status: 429 Too Many Requests"}, "rate_limit"),
        ({"message": "unexpected status 401 Unauthorized: Incorrect API key"}, "auth"),
        ({"message": "stream disconnected before completion"}, "network"),
        (
            {"message": "x", "cli_errors": ["Reconnecting... 1/5 (error sending request)"]},
            "network",
        ),
        ({"message": "You've hit your usage limit."}, "rate_limit"),
        ({"message": "all good"}, None),
    ],
)
def test_codex_failure_hint(fields: dict[str, Any], hint: str | None) -> None:
    assert CodexBackend().failure_hint(_result(**fields)) == hint


@pytest.mark.parametrize(
    ("code", "hint"),
    [
        ("AGENT_ERROR", "agent_error"),
        ("RATE_LIMIT", "rate_limit"),
        ("TRANSIENT_ERROR", "network"),
        ("X", None),
    ],
)
def test_failer_failure_hint(code: str, hint: str | None) -> None:
    assert FailerBackend().failure_hint(_result(data={"error_code": code})) == hint


def test_codex_translator_counts_its_own_retries() -> None:
    translator = CodexBackend().translator()
    events = translator.translate(
        {"type": "error", "message": "Reconnecting... 2/5 (unexpected status 401 Unauthorized)"}
    )
    assert [e.kind for e in events] == ["cli_retry", "error"]
    retry = events[0]
    assert isinstance(retry, CliRetryEvent)
    assert retry.attempt == 2
    assert retry.max_retries == 5
    assert retry.error_status == 401
    (plain,) = translator.translate({"type": "error", "message": "exceeded retry limit"})
    assert plain.kind == "error"
    assert isinstance(plain, ErrorEvent)
