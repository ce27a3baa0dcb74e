"""Fail fast on evidence (issue 28): a CLI's own retry or error event that proves a failure no
retry can fix stops the tree at once, with that category and the CLI's words; what a retry can
fix is left to the CLI.  Each kind of evidence through a fake CLI that then hangs (a real CLI
would go on retrying for minutes)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal

from coding_genesis import CodingGenesisAgent
from coding_genesis.backend import FATAL_STATUSES, fatal_evidence
from coding_genesis.backends import ClaudeBackend
from coding_genesis.events import CliRetryEvent, ErrorEvent
from coding_genesis.status import FailureCategory
from tests.support import FakeCLI, marked_processes

#: A hanging CLI is given this long: a stop on evidence comes well before.
TIMEOUT = 30.0


def claude_retry(status: int | None, error: str) -> dict[str, Any]:
    return {
        "emit": {
            "type": "system",
            "subtype": "api_retry",
            "attempt": 1,
            "max_retries": 10,
            "retry_delay_ms": 500,
            "error_status": status,
            "error": error,
        }
    }


def run_hanging(
    tmp: Path, flavour: str, evidence: dict[str, Any], portal: BlockingPortal
) -> tuple[dict[str, Any], float, FakeCLI]:
    fake = FakeCLI(tmp, flavour)
    fake.script([{"init": True}, evidence, {"hang": True}])
    agent = fake.agent(timeout=TIMEOUT)
    started = time.monotonic()
    result = dict(portal.call(agent.run, "hi"))
    return result, time.monotonic() - started, fake


@pytest.mark.parametrize(
    ("status", "words", "category"),
    [
        (401, "authentication_failed", "auth"),
        (403, "permission_error", "auth"),
        (400, "invalid_request", "invalid_task"),
        (404, "not_found_error: model: claude-nope", "missing"),
        (400, "Prompt is too long: 210000 tokens > 200000 maximum", "context_overflow"),
        (None, "Claude AI usage limit reached|4102444800", "rate_limit"),  # resets in 2100
    ],
)
def test_claude_retry_evidence_stops_at_once(
    status: int | None, words: str, category: str, tmp_path: Path, portal: BlockingPortal
) -> None:
    result, took, fake = run_hanging(tmp_path, "claude", claude_retry(status, words), portal)
    assert took < 10.0, result
    assert result["status"] == 1 and result["error"] == "cli_error", result
    assert result["stopped_on"] == category
    assert result["failure"]["category"] == category, result["failure"]
    if category == "rate_limit":  # retryable, but not before the reset, after the deadline
        assert result["failure"]["retry_at"].startswith("2100-01-01"), result["failure"]
    else:
        assert result["failure"]["retryable"] is False
    assert result["failure"]["reason"] == f"stopped on the CLI's own evidence: {category}"
    assert words in result["message"], result["message"]  # the CLI's words
    assert result["stop_reason"] == "requested" and result["cli_retries"] == 1
    assert result["error_context"]["error_type"] == category
    assert marked_processes([fake.mark]) == []


def test_codex_reconnecting_on_401_stops_at_once(tmp_path: Path, portal: BlockingPortal) -> None:
    line = "Reconnecting... 1/5 (unexpected status 401 Unauthorized: Incorrect API key provided)"
    result, took, _ = run_hanging(
        tmp_path, "codex", {"emit": {"type": "error", "message": line}}, portal
    )
    assert took < 10.0 and result["status"] == 1, result
    assert result["failure"]["category"] == "auth"
    assert "Incorrect API key provided" in result["message"]
    assert "(HTTP 401)" in result["message"]


def test_a_cli_ending_by_itself_is_left_to_end(tmp_path: Path, portal: BlockingPortal) -> None:
    """The evidence and the CLI's own terminal event in one chunk: the CLI is ending by itself
    and its answer says more than our stop would (claude with its retries capped, opencode's
    fatal error line).  The category is the same."""
    fake = FakeCLI(tmp_path, "opencode")
    line = {
        "type": "error",
        "error": {"name": "APIError", "data": {"message": "Unauthorized", "statusCode": 401}},
    }
    fake.script([{"init": True}, {"emit": line}, {"exit": 1}])
    result = portal.call(fake.agent(timeout=TIMEOUT).run, "hi")
    assert result["exit_code"] == 1 and result["signal"] is None, result
    assert result["stopped_on"] is None and result["stop_reason"] is None
    assert result["failure"]["category"] == "auth"
    assert result["message"] == "Unauthorized"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("status", "words"),
    [
        (429, "rate_limit"),  # a rate limit: the CLI's retries may fix it
        (529, "overloaded_error"),
        (500, "api_error"),
        (None, "Connection error."),
    ],
)
def test_what_a_retry_can_fix_is_left_to_the_cli(
    status: int | None, words: str, tmp_path: Path, portal: BlockingPortal
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, claude_retry(status, words), {"sleep": 0.3}, {"answer": "ok"}])
    result = portal.call(fake.agent(timeout=TIMEOUT).run, "hi")
    assert result["status"] == 0 and result["message"] == "ok", result
    assert result["cli_retries"] == 1 and result["stopped_on"] is None


@pytest.mark.slow
def test_a_usage_limit_that_resets_before_the_deadline_is_waited_for(
    tmp_path: Path, portal: BlockingPortal
) -> None:
    soon = int(time.time()) + 5  # within the 30 s timeout
    fake = FakeCLI(tmp_path, "claude")
    fake.script(
        [
            {"init": True},
            claude_retry(429, f"Claude AI usage limit reached|{soon}"),
            {"sleep": 0.3},
            {"answer": "ok"},
        ]
    )
    result = portal.call(fake.agent(timeout=TIMEOUT).run, "hi")
    assert result["status"] == 0 and result["stopped_on"] is None, result


def test_a_non_fatal_error_line_is_not_evidence(tmp_path: Path, portal: BlockingPortal) -> None:
    # codex prints a non-fatal error item for an unknown model's metadata, then works.
    fake = FakeCLI(tmp_path, "codex")
    item = {"type": "error", "message": "Model metadata for `x` not found; unauthorized defaults"}
    fake.script(
        [{"init": True}, {"emit": {"type": "item.completed", "item": item}}, {"answer": "ok"}]
    )
    result = portal.call(fake.agent(timeout=TIMEOUT).run, "hi")
    assert result["status"] == 0 and result["message"] == "ok", result


@pytest.mark.slow
def test_the_hook_is_the_backends(tmp_path: Path, portal: BlockingPortal) -> None:
    """A backend decides what proves a failure (``Backend.fatal_evidence``): one that calls a
    retry event with "quota" in it fatal stops the run, one that never does waits."""

    class Strict(ClaudeBackend):
        def fatal_evidence(self, event: CliRetryEvent | ErrorEvent) -> FailureCategory | None:
            if isinstance(event, CliRetryEvent) and "quota" in (event.error or ""):
                return FailureCategory.AUTH
            return None

    class Lenient(ClaudeBackend):
        def fatal_evidence(self, event: CliRetryEvent | ErrorEvent) -> FailureCategory | None:
            return None

    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, claude_retry(None, "quota project"), {"hang": True}])
    strict = CodingGenesisAgent(
        Strict(), cli_path=fake.path, env=fake.env(), timeout=TIMEOUT, grace=0.5
    )
    result = portal.call(strict.run, "hi")
    assert result["stopped_on"] == "auth" and result["failure"]["category"] == "auth"

    fake.script([{"init": True}, claude_retry(401, "authentication_failed"), {"answer": "ok"}])
    lenient = CodingGenesisAgent(
        Lenient(), cli_path=fake.path, env=fake.env(), timeout=TIMEOUT, grace=0.5
    )
    assert portal.call(lenient.run, "hi")["status"] == 0


def test_the_default_evidence_table() -> None:
    assert fatal_evidence(CliRetryEvent(1, 10, 401, None)) is FailureCategory.AUTH
    assert fatal_evidence(CliRetryEvent(1, 10, 429, "rate_limit")) is None
    assert fatal_evidence(CliRetryEvent(1, 10, 400, "prompt is too long")) is (
        FailureCategory.CONTEXT_OVERFLOW
    )
    # An error event is not evidence by default: a fatal one comes with the CLI's own end.
    assert fatal_evidence(ErrorEvent("401 Unauthorized", fatal=False)) is None
    assert fatal_evidence(ErrorEvent("401 Unauthorized", fatal=True)) is None
    assert set(FATAL_STATUSES) == {400, 401, 403, 404, 413, 422}
