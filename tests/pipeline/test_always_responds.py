"""Spec 003, "the agent always responds": whatever goes wrong, ``run()``
answers with a dict whose message is not empty and which carries a failure
record, an error context and a failure report.  Hostile cases on purpose."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal

from coding_genesis import CodingGenesisAgent, Event, RunResponse
from coding_genesis._failures.report import parse_failure_report
from coding_genesis._failures.taxonomy import LAST_RESORT_MESSAGES
from coding_genesis.backend import CommandSpec
from coding_genesis.backends import ClaudeBackend
from coding_genesis.request import Request
from coding_genesis.status import FailureCategory
from tests.support import CONTEXT_KEYS, FakeCLI


def assert_answered(response: Mapping[str, Any], category: str) -> dict[str, Any]:
    """A coherent failed response of ``category``; returns its failure record."""
    assert response["status"] != 0
    assert response["is_error"] is True
    assert response["message"].strip()
    failure = response["failure"]
    assert failure["category"] == category, failure["reason"]
    assert failure["message"].strip()
    assert failure["suggested_actions"]
    context = response["error_context"]
    assert set(context) >= CONTEXT_KEYS
    assert context["error_type"] == category
    assert context["user_hint"] and context["retry_suggestion"]
    parsed = parse_failure_report(response["failure_report"])
    assert parsed.category.value == category
    return dict(failure)


def tool_use(tool_id: str, name: str, **tool_input: Any) -> dict[str, Any]:
    return {
        "emit": {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}],
            },
        }
    }


def tool_result(tool_id: str, content: str, is_error: bool = False) -> dict[str, Any]:
    return {
        "emit": {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": tool_id,
                        "content": content,
                        "is_error": is_error,
                    }
                ],
            },
        }
    }


# -- the binary ------------------------------------------------------------


def test_missing_binary(tmp_path: Path, portal: BlockingPortal) -> None:
    agent = CodingGenesisAgent("claude", cli_path=str(tmp_path / "no-such-claude"))
    failure = assert_answered(portal.call(agent.run, "hi"), "missing")
    assert failure["suggested_retry"] is False
    assert failure["suggested_actions"][0].startswith("Install it with `npm install -g")


def test_binary_not_on_path(tmp_path: Path, portal: BlockingPortal, monkeypatch: Any) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("GENESIS_CODEX_PATH", raising=False)
    response = portal.call(CodingGenesisAgent("codex").run, "hi")
    assert_answered(response, "missing")
    assert "npm install -g @openai/codex" in response["failure"]["suggested_actions"][0]


def test_binary_not_executable(tmp_path: Path, portal: BlockingPortal) -> None:
    script = tmp_path / "claude"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(stat.S_IRUSR | stat.S_IWUSR)
    failure = assert_answered(
        portal.call(CodingGenesisAgent("claude", cli_path=str(script)).run, "hi"), "tool_error"
    )
    assert "Check file permissions" in failure["suggested_actions"]


def test_directory_as_binary(tmp_path: Path, portal: BlockingPortal) -> None:
    agent = CodingGenesisAgent("claude", cli_path=str(tmp_path))
    assert_answered(portal.call(agent.run, "hi"), "tool_error")


# -- the request -----------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "overrides"),
    [
        (None, {}),
        (b"bytes", {}),
        (123, {}),
        ("", {}),
        ("   \n", {}),
        ("a\0b", {}),
        ("\ud800", {}),
        ("hi", {"timeout": "abc"}),
        ("hi", {"timeout": -1}),
        ("hi", {"timeout": float("nan")}),
        ("hi", {"timeout": True}),
        ("hi", {"cwd": "/no/such/dir"}),
        ("hi", {"resume": "--dangerously-skip-permissions"}),
    ],
)
def test_invalid_requests_answer(
    prompt: Any, overrides: dict[str, Any], fake_claude: FakeCLI, portal: BlockingPortal
) -> None:
    agent = fake_claude.agent()
    response = portal.call(lambda: agent.run(prompt, **overrides))
    failure = assert_answered(response, "invalid_task")
    assert response["status"] == 64
    assert failure["suggested_retry"] is False
    assert fake_claude.records() == []  # nothing was started


def test_options_of_the_wrong_type(fake_claude: FakeCLI, portal: BlockingPortal) -> None:
    # Options are checked with the request now: a bad one is an invalid request
    # (status 64), no longer a crash inside the backend (status 70).
    agent = fake_claude.agent()

    async def bad() -> RunResponse:
        return await agent.run("hi", options=[1, 2])  # type: ignore[arg-type]

    response = portal.call(bad)
    assert_answered(response, "invalid_task")
    assert response["status"] == 64
    assert "options must be a mapping" in response["message"]
    unknown = portal.call(lambda: agent.run("hi", options={"max_turnz": 3}))
    assert unknown["status"] == 64
    assert "'max_turnz'" in unknown["message"] and "max_turns" in unknown["message"]


@pytest.mark.slow
def test_busy_agent_answers(fake_claude: FakeCLI, portal: BlockingPortal) -> None:
    fake_claude.script([{"init": True}, {"sleep": 0.5}, {"answer": "done"}])
    agent = fake_claude.agent()
    first = portal.start_task_soon(agent.run, "first")
    deadline = time.monotonic() + 10
    while agent.state.value != "BUSY":
        assert time.monotonic() < deadline, "the agent never became BUSY"
        time.sleep(0.005)
    busy = portal.call(agent.run, "second")
    assert first.result(timeout=10)["status"] == 0
    assert_answered(busy, "busy")  # issue 28: its own name, no longer invalid_task
    assert busy["status"] == 75
    assert busy["failure"]["retryable"] is False


# -- what the CLI does -------------------------------------------------------


def test_whitespace_error_text_gets_a_last_resort_message(
    fake_claude: FakeCLI, portal: BlockingPortal
) -> None:
    fake_claude.script([{"init": True}, {"result": "  \n ", "is_error": True}, {"exit": 1}])
    response = portal.call(fake_claude.agent().run, "hi")
    assert_answered(response, "unknown")
    assert response["message"] == LAST_RESORT_MESSAGES[FailureCategory.UNKNOWN]
    assert response["failure"]["message"] == response["message"]


def test_garbage_then_crash(fake_claude: FakeCLI, portal: BlockingPortal) -> None:
    fake_claude.script(
        [
            {"raw_hex": "ff00fe0a7b7b7b0a"},
            {"stderr": "Segmentation fault"},
            {"kill_self": "SIGSEGV"},
        ]
    )
    response = portal.call(fake_claude.agent().run, "hi")
    failure = assert_answered(response, "agent_error")
    assert failure["reason"] == "killed by SIGSEGV before its result"
    assert response["skipped_lines"] >= 1


@pytest.mark.slow
def test_timeout_with_progress_suggests_a_doubled_timeout(
    fake_claude: FakeCLI, portal: BlockingPortal
) -> None:
    fake_claude.script(
        [
            {"init": True},
            tool_use("t1", "Write", file_path="src/app.py", content="x"),
            tool_result("t1", "File created"),
            tool_use("t2", "Bash", command="sleep 100"),
            {"hang": True},
        ]
    )
    response = portal.call(fake_claude.agent(timeout=1.0).run, "hi")
    failure = assert_answered(response, "timeout")
    assert failure["suggested_retry"] is True
    assert failure["suggested_actions"] == [
        "Retry with timeout=2s",
        "Break task into smaller subtasks",
    ]
    assert failure["completed_steps"] == ["Wrote src/app.py"]
    assert failure["files_modified"] == ["src/app.py"]
    assert failure["blocked_on"] == "Time limit insufficient (while: Ran Bash: sleep 100)"
    assert failure["last_successful_tool"] == "Write"
    assert failure["tool_usage"] == {"Write": 1, "Bash": 1}
    assert "Retryable: Yes" in response["failure_report"]


@pytest.mark.slow
def test_a_tool_killed_by_our_stop_is_what_the_run_was_doing(
    fake_claude: FakeCLI, portal: BlockingPortal
) -> None:
    """The real claude, on SIGTERM, reports its running tool as failed (exit 137)."""
    fake_claude.script(
        [
            {"init": True},
            tool_use("t1", "Bash", command="sleep 60"),
            tool_result("t1", "Exit code 137", is_error=True),
            {"hang": True},
        ]
    )
    response = portal.call(fake_claude.agent(timeout=1.0).run, "hi")
    failure = assert_answered(response, "timeout")
    assert response["unfinished_steps"] == ["Ran Bash: sleep 60"]
    assert failure["blocked_on"] == "Time limit insufficient (while: Ran Bash: sleep 60)"
    assert failure["completed_steps"] == []


@pytest.mark.slow
def test_timeout_without_progress_suggests_breaking_the_task_up(
    fake_claude: FakeCLI, portal: BlockingPortal
) -> None:
    fake_claude.script([{"init": True}, {"hang": True}])
    response = portal.call(lambda: fake_claude.agent(timeout=5.0).run("hi", timeout=0.5))
    failure = assert_answered(response, "timeout")
    assert failure["suggested_retry"] is False
    assert failure["suggested_actions"][0] == "Break task into smaller subtasks"
    assert "Retry with timeout=1s" in failure["suggested_actions"]
    assert response["error_context"]["can_retry"] is False
    assert "<retryable>false</retryable>" in response["failure_report"]


def test_tool_error_names_the_missing_module(fake_claude: FakeCLI, portal: BlockingPortal) -> None:
    fake_claude.script(
        [
            {"init": True},
            tool_use("t1", "Bash", command="pytest"),
            tool_result("t1", "ModuleNotFoundError: No module named 'pytest'", is_error=True),
            {
                "emit": {
                    "type": "result",
                    "subtype": "error_during_execution",
                    "is_error": True,
                    "errors": ["the tests could not run"],
                }
            },
            {"exit": 1},
        ]
    )
    failure = assert_answered(portal.call(fake_claude.agent().run, "hi"), "tool_error")
    assert failure["blocked_on"] == "Bash failed: ModuleNotFoundError: No module named 'pytest'"
    assert "Run: pip install pytest" in failure["suggested_actions"]


def test_max_turns_is_partial(fake_claude: FakeCLI, portal: BlockingPortal) -> None:
    fake_claude.script(
        [
            {"init": True},
            tool_use("t1", "Edit", file_path="a.py", old_string="x", new_string="y"),
            tool_result("t1", "ok"),
            {
                "emit": {
                    "type": "result",
                    "subtype": "error_max_turns",
                    "is_error": False,
                    "num_turns": 3,
                    "errors": ["Reached maximum number of turns (3)"],
                }
            },
        ]
    )
    response = portal.call(fake_claude.agent().run, "hi")
    assert (response["status"], response["error"]) == (1, "max_turns"), response
    failure = assert_answered(response, "partial")
    assert failure["completed_steps"] == ["Edited a.py"]
    assert failure["suggested_actions"][0].startswith("Complete remaining work")


# -- a hostile backend ---------------------------------------------------------


class Hostile(ClaudeBackend):
    """A backend that breaks in the place a test chooses."""

    def __init__(self, where: str, program: Sequence[str] = ()) -> None:
        self.where = where
        self.program = program

    def default_program(self) -> Sequence[str] | None:
        return tuple(self.program) or None

    def build_command(self, request: Request) -> CommandSpec:
        if self.where == "build_command":
            raise RuntimeError("build_command exploded")
        return super().build_command(request)

    def failure_hint(self, result: Any) -> str | None:
        if self.where == "failure_hint":
            raise RuntimeError("hint exploded")
        return super().failure_hint(result)

    def install_hint(self) -> str:
        if self.where == "install_hint":
            raise RuntimeError("install_hint exploded")
        return super().install_hint()


@pytest.mark.parametrize(
    ("where", "category"),
    [("build_command", "agent_error"), ("failure_hint", "auth"), ("install_hint", "unknown")],
)
def test_a_hostile_backend_still_gets_an_answer(
    where: str, category: str, fake_claude: FakeCLI, portal: BlockingPortal
) -> None:
    fake_claude.script([{"init": True}, {"stderr": "Error: authentication failed"}, {"exit": 1}])
    agent = CodingGenesisAgent(
        Hostile(where, [fake_claude.path]), env=fake_claude.env(), grace=0.5, timeout=10
    )
    failure = assert_answered(portal.call(agent.run, "hi"), category)
    if where == "install_hint":
        # the analysis itself broke: the minimal record still answers
        assert failure["reason"] == "failure analysis failed: RuntimeError"


def test_subscribers_that_raise_do_not_break_the_answer(
    fake_claude: FakeCLI, portal: BlockingPortal
) -> None:
    fake_claude.script([{"init": True}, {"stderr": "connect ECONNREFUSED"}, {"exit": 1}])
    agent = fake_claude.agent()

    def explode(event: Event) -> None:
        raise RuntimeError("subscriber exploded")

    agent.subscribe(explode)
    assert_answered(portal.call(agent.run, "hi"), "network")


def test_run_sync_answers_too(fake_claude: FakeCLI) -> None:
    fake_claude.script([{"init": True}, {"stderr": "HTTP 429 Too Many Requests"}, {"exit": 1}])
    response = fake_claude.agent().run_sync("hi")
    assert_answered(response, "rate_limit")
    assert os.environ["GENESIS_RUN_LOG"]  # the suite never logs to the real home


def test_run_finished_event_names_the_category(
    fake_claude: FakeCLI, portal: BlockingPortal
) -> None:
    from tests.support import EventLog

    fake_claude.script([{"init": True}, {"stderr": "HTTP 429 Too Many Requests"}, {"exit": 1}])
    agent = fake_claude.agent()
    log = EventLog(agent)
    portal.call(agent.run, "hi")
    (finished,) = log.of("run_finished")
    assert finished["category"] == "rate_limit"
    assert finished["error"] == "cli_error"
