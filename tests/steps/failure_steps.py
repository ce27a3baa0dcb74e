"""Step definitions for tests/features/failures.feature.

Synchronous steps; agent runs go through the anyio blocking portal.  Every
run is a real subprocess: the embedded failer or the fake claude/codex CLIs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal
from pytest_bdd import given, parsers, then, when

from coding_genesis import CodingGenesisAgent
from coding_genesis._failures.report import format_failure_report, parse_failure_report
from coding_genesis.result import ChildFailure
from coding_genesis.status import FailureCategory
from tests.support import CONTEXT_KEYS, RECORDINGS, FakeCLI, assert_one_truth


class FailureWorld:
    def __init__(self, tmp_path: Path, portal: BlockingPortal) -> None:
        self.tmp_path = tmp_path
        self.portal = portal
        self.agent: CodingGenesisAgent | None = None
        self.response: dict[str, Any] | None = None
        self.record: ChildFailure | None = None
        self.parsed: ChildFailure | None = None
        self.report = ""

    def run(self, prompt: str) -> dict[str, Any]:
        assert self.agent is not None
        response = dict(self.portal.call(self.agent.run, prompt))
        self.response = response
        return response

    @property
    def failure(self) -> dict[str, Any]:
        assert self.response is not None
        failure = self.response["failure"]
        assert failure is not None, f"no failure record: {self.response['message']}"
        return dict(failure)


@pytest.fixture
def fworld(tmp_path: Path, portal: BlockingPortal) -> FailureWorld:
    return FailureWorld(tmp_path, portal)


# -- Given -------------------------------------------------------------------


@given(parsers.parse("a failer agent with timeout {seconds:g} seconds"))
def failer_agent(fworld: FailureWorld, seconds: float) -> None:
    state = fworld.tmp_path / "failer-state"
    fworld.agent = CodingGenesisAgent(
        "failer", timeout=seconds, grace=0.5, options={"state_dir": str(state)}
    )


def _fake(fworld: FailureWorld, cli: str, steps: list[dict[str, Any]], **kwargs: Any) -> None:
    fake = FakeCLI(fworld.tmp_path, cli)
    fake.script(steps)
    fworld.agent = fake.agent(**kwargs)


@given(parsers.re(r'a fake "(?P<cli>\w+)" CLI that exits 1 with stderr "(?P<text>[^"]*)"'))
def fake_exits_with_stderr(fworld: FailureWorld, cli: str, text: str) -> None:
    _fake(fworld, cli, [{"init": True}, {"stderr": text}, {"exit": 1}])


@given(parsers.re(r'a fake "(?P<cli>\w+)" CLI that is killed by (?P<sig>SIG\w+)'))
def fake_killed(fworld: FailureWorld, cli: str, sig: str) -> None:
    _fake(fworld, cli, [{"init": True}, {"kill_self": sig}])


@given(parsers.re(r'a fake "(?P<cli>\w+)" CLI that hangs past the timeout'))
def fake_hangs(fworld: FailureWorld, cli: str) -> None:
    _fake(fworld, cli, [{"init": True}, {"hang": True}], timeout=1.0)


@given(parsers.re(r'a fake "(?P<cli>\w+)" CLI that exits 0 before its result event'))
def fake_incomplete(fworld: FailureWorld, cli: str) -> None:
    _fake(fworld, cli, [{"init": True}, {"raw": '{"type": "assistant", "message": {"content": ['}])


@given(parsers.re(r'a fake "(?P<cli>\w+)" CLI that replays the "(?P<name>\w+)" recording'))
def fake_replays(fworld: FailureWorld, cli: str, name: str) -> None:
    steps: list[dict[str, Any]] = [{"recording": str(RECORDINGS / f"{name}.jsonl")}]
    stderr = (RECORDINGS / f"{name}.stderr").read_text()
    if stderr:
        steps.append({"stderr": stderr.removesuffix("\n")})
    steps.append({"exit": int((RECORDINGS / f"{name}.rc").read_text())})
    _fake(fworld, cli, steps)


@given("a claude agent whose CLI does not exist")
def missing_cli(fworld: FailureWorld) -> None:
    fworld.agent = CodingGenesisAgent("claude", cli_path=str(fworld.tmp_path / "nope" / "claude"))


@given("a failure record with the message", target_fixture="odd_message")
def odd_record(fworld: FailureWorld, docstring: str) -> str:
    fworld.record = ChildFailure(
        category=FailureCategory.PARTIAL,
        message=docstring,
        session_id="child-<xyz>",
        duration=12.5,
        completed_steps=["Ran Bash: echo 'a, b' > x", "Wrote ✓ check.md"],
        blocked_on="ImportError in tests:\ncannot import 'bcrypt'",
        suggested_retry=True,
        suggested_actions=[
            "Install bcrypt: pip install bcrypt",
            "• Retry tests after installation",
        ],
        tool_usage={"Bash": 3, "Write": 1},
        last_successful_tool="Write",
        exit_code=1,
        reason="text: 'ImportError'",
    )
    return docstring


@given(parsers.re(r"the record modified the files (?P<names>.+)"))
def record_files(fworld: FailureWorld, names: str) -> None:
    assert fworld.record is not None
    files = re.findall(r'"([^"]*)"', names)
    fworld.record = fworld.record.model_copy(update={"files_modified": files})
    assert fworld.record.files_modified == ["a,b.py", "ünïcødé/файл.py", " spaced "]


# -- When --------------------------------------------------------------------


@when(parsers.parse('the failer processes "{prompt}"'))
def failer_processes(fworld: FailureWorld, prompt: str) -> None:
    fworld.run(prompt)


@when("the fake CLI's agent processes a request")
def fake_processes(fworld: FailureWorld) -> None:
    fworld.run("do the task")


@when("the record is written as a failure report and read back")
def write_and_read(fworld: FailureWorld) -> None:
    assert fworld.record is not None
    fworld.report = format_failure_report(fworld.record)
    fworld.parsed = parse_failure_report(fworld.report)


# -- Then --------------------------------------------------------------------


@then(parsers.parse('the failure category is "{category}"'))
def category_is(fworld: FailureWorld, category: str) -> None:
    assert fworld.response is not None
    assert fworld.response["status"] != 0
    assert fworld.response["is_error"] is True
    assert fworld.failure["category"] == category, fworld.failure["reason"]


@then(parsers.parse('the failure is retryable "{retryable}", in every view of it'))
def retryability(fworld: FailureWorld, retryable: str) -> None:
    assert fworld.response is not None
    assert assert_one_truth(fworld.response) is (retryable == "yes")


@then(parsers.parse('the response carries an error context of type "{category}"'))
def error_context(fworld: FailureWorld, category: str) -> None:
    assert fworld.response is not None and fworld.agent is not None
    context = fworld.response["error_context"]
    assert set(context) >= CONTEXT_KEYS
    assert context["error_type"] == category
    assert context["failed_node"] == fworld.agent.name
    assert context["can_retry"] is fworld.failure["retryable"]
    assert context["user_hint"] and context["retry_suggestion"]


@then("the failure report round-trips to the same record")
def report_round_trips(fworld: FailureWorld) -> None:
    assert fworld.response is not None
    parsed = parse_failure_report(fworld.response["failure_report"])
    assert parsed.to_dict() == {**fworld.failure, "stderr_tail": ""}


@then("the response message is not empty")
def message_not_empty(fworld: FailureWorld) -> None:
    assert fworld.response is not None
    assert fworld.response["message"].strip()


@then("the response is a success without failure record")
def success(fworld: FailureWorld) -> None:
    assert fworld.response is not None
    assert fworld.response["status"] == 0, fworld.response["message"]
    assert fworld.response["failure"] is None
    assert fworld.response["error_context"] is None
    assert fworld.response["failure_report"] is None


@then(parsers.parse("the failure says to retry after {seconds:g} seconds"))
def retry_after(fworld: FailureWorld, seconds: float) -> None:
    assert fworld.failure["retry_after_s"] == seconds
    assert fworld.response is not None
    assert fworld.response["error_context"]["retry_after_s"] == seconds
    assert (
        fworld.response["error_context"]["retry_suggestion"] == f"Wait {seconds:g}s and try again."
    )


@then(parsers.parse('the failure report contains "{text}"'))
def report_contains(fworld: FailureWorld, text: str) -> None:
    assert fworld.response is not None
    assert text in fworld.response["failure_report"]


@then("the parsed record equals the original")
def parsed_equals(fworld: FailureWorld, odd_message: str) -> None:
    assert fworld.parsed == fworld.record
    assert fworld.parsed is not None and fworld.parsed.message == odd_message
    assert "\n" in odd_message


@then("the report has one line per modified-files list")
def files_one_line(fworld: FailureWorld) -> None:
    lines = [ln for ln in fworld.report.splitlines() if ln.startswith("Files modified: ")]
    assert lines == ["Files modified: a\\,b.py, ünïcødé/файл.py, \\u0020spaced\\u0020"]
