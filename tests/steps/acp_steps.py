"""Step definitions of tests/features/acp.feature: live sessions over the Agent Client
Protocol on the fake ACP agent (``bin/gemini --acp``, ``bin/qwen --acp``, ``bin/opencode acp``:
the conformance kit's fake, each flavour naming its options and reporting usage as the real
agent does).  Steps are synchronous: the session's coroutines go through the anyio blocking
portal fixture.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import psutil
import pytest
from anyio.from_thread import BlockingPortal
from pytest_bdd import given, parsers, then, when

from coding_genesis import (
    ApprovalRequest,
    CodingGenesisAgent,
    Decision,
    Event,
    RunResult,
    RunStartedEvent,
    Session,
    load_backends_file,
)
from coding_genesis.events import ToolCallEvent

FAKES = Path(__file__).resolve().parents[1] / "fakes" / "bin"


class AcpWorld:
    """What an ACP scenario set up and saw."""

    def __init__(self, tmp_path: Path, portal: BlockingPortal) -> None:
        self.tmp_path = tmp_path
        self.portal = portal
        self.record = tmp_path / "record.jsonl"
        self.backend: Any = None
        self.settings: dict[str, Any] = {
            "cwd": str(tmp_path),
            "timeout": 20,
            "grace": 1.0,
            "ledger": False,
            "env": {"FAKE_CLI_RECORD": str(self.record)},
        }
        self.asked: list[ApprovalRequest] = []
        self.session: Session | None = None
        self.key = ""
        self._open: AbstractContextManager[Session] | None = None
        self.results: list[RunResult] = []
        self.pids: list[int] = []
        self.tool_started = False
        #: Why building the agent was refused (None: it was not).
        self.refusal: Exception | None = None

    def approve(self, decide: Callable[[ApprovalRequest], Decision]) -> None:
        def approver(request: ApprovalRequest) -> Decision:
            self.asked.append(request)
            return decide(request)

        self.settings["approver"] = approver

    def agent(self) -> CodingGenesisAgent:
        agent = CodingGenesisAgent(
            self.backend, cli_path=str(FAKES / self.backend), **self.settings
        )
        agent.subscribe(self._hear)
        return agent

    def _hear(self, event: Event) -> None:
        if isinstance(event, RunStartedEvent):
            self.pids.append(event.pid)
        elif isinstance(event, ToolCallEvent):
            self.tool_started = True

    def open(self) -> None:
        self._open = self.portal.wrap_async_context_manager(self.agent().session())
        self.session = self._open.__enter__()
        self.key = self.session.key

    def close(self) -> None:
        if self._open is not None:
            self._open.__exit__(None, None, None)
            self._open = None

    def send(self, prompt: str) -> RunResult:
        assert self.session is not None, "no ACP session is open"
        result: RunResult = self.portal.call(self.session.send_result, prompt)
        self.results.append(result)
        return result

    @property
    def last(self) -> RunResult:
        assert self.results, "no ACP turn was answered"
        return self.results[-1]

    def recorded(self, what: str) -> list[dict[str, Any]]:
        """What the fake agent recorded of what it received or chose."""
        if not self.record.exists():
            return []
        entries = [json.loads(line) for line in self.record.read_text().splitlines()]
        return [e for e in entries if what in e]

    def left(self, sleeping: bool = False) -> list[int]:
        found = []
        for proc in psutil.process_iter():
            try:
                if proc.environ().get("GENESIS_RUN_ID") != self.key or proc.status() == "zombie":
                    continue
                if not sleeping or "time.sleep" in " ".join(proc.cmdline()):
                    found.append(proc.pid)
            except psutil.Error:
                continue
        return found


@pytest.fixture
def acp(tmp_path: Path, portal: BlockingPortal) -> Iterator[AcpWorld]:
    world = AcpWorld(tmp_path, portal)
    yield world
    world.close()


def _quoted(text: str) -> list[str]:
    return json.loads(f"[{text}]")  # type: ignore[no-any-return]


# -- Given ---------------------------------------------------------------


@given(parsers.parse('the ACP agent "{flavour}"'))
def acp_agent(acp: AcpWorld, flavour: str) -> None:
    acp.backend = flavour


@given(parsers.parse('the ACP agent "{flavour}" whose approver refuses, then allows'))
def refuses_then_allows(acp: AcpWorld, flavour: str) -> None:
    acp.backend = flavour
    acp.approve(lambda r: Decision.deny("not yet") if not acp.results else Decision.allow())


@given(parsers.parse('the ACP agent "{flavour}" whose approver allows always'))
def allows_always(acp: AcpWorld, flavour: str) -> None:
    acp.backend = flavour
    acp.approve(lambda r: Decision.allow(always=True))


@given(parsers.parse('the ACP agent "{flavour}" whose approver allows everything'))
def allows_everything(acp: AcpWorld, flavour: str) -> None:
    acp.backend = flavour
    acp.approve(lambda r: Decision.allow())


@given(parsers.parse('the ACP agent "{flavour}" answering protocol version {version:d}'))
def other_version(acp: AcpWorld, flavour: str, version: int) -> None:
    acp.backend = flavour
    acp.settings["env"]["FAKE_ACP_VERSION"] = str(version)


@given(
    parsers.parse('a backends file whose ACP entry "{name}" runs the fake qwen with its mode ids')
)
def acp_backends_file(acp: AcpWorld, name: str) -> None:
    path = acp.tmp_path / "backends.toml"
    path.write_text(
        f"[backends.{name}]\n"
        'format = "acp"\n'
        f'command = ["{FAKES / "qwen"}", "--acp"]\n'
        f'env = {{ FAKE_CLI_RECORD = "{acp.record}" }}\n'
        'modes = { "read-only" = "plan", edit = "auto-edit", full = "yolo" }\n'
        'ask_mode = "default"\n'
    )
    acp.backend = load_backends_file(path)[name]


# -- When ----------------------------------------------------------------


@when("an ACP session is opened")
def open_acp_session(acp: AcpWorld) -> None:
    acp.open()


@when(parsers.re(r"the ACP session is sent (?P<quote>[\"'])(?P<prompt>.+)(?P=quote)$"))
def send_acp(acp: AcpWorld, prompt: str) -> None:
    acp.send(prompt)


@when(parsers.parse('the ACP session is sent "{prompt}" and interrupted once the tool runs'))
def send_and_interrupt(acp: AcpWorld, prompt: str) -> None:
    assert acp.session is not None
    running: Future[RunResult] = acp.portal.start_task_soon(acp.session.send_result, prompt)
    deadline = time.monotonic() + 20
    while not (acp.tool_started and acp.left(sleeping=True)):
        assert time.monotonic() < deadline, "the tool never started"
        assert not running.done(), running.result()
        time.sleep(0.02)
    acp.portal.call(acp.session.interrupt)
    acp.results.append(running.result(timeout=20))


@when(parsers.re(r"\"(?P<name>[\w.-]+)\" runs (?P<quote>[\"'])(?P<prompt>.+)(?P=quote)$"))
def run_backend(acp: AcpWorld, name: str, prompt: str) -> None:
    assert acp.backend.name == name
    agent = CodingGenesisAgent(acp.backend, cwd=str(acp.tmp_path), timeout=20, ledger=False)
    acp.results.append(acp.portal.call(agent.run_result, prompt))


@when(
    parsers.re(
        r"\"(?P<name>[\w.-]+)\" runs (?P<quote>[\"'])(?P<prompt>.+)(?P=quote) "
        r"with an approver allowing everything$"
    )
)
def run_backend_approved(acp: AcpWorld, name: str, prompt: str) -> None:
    assert acp.backend.name == name
    agent = CodingGenesisAgent(
        acp.backend, cwd=str(acp.tmp_path), timeout=20, ledger=False, approver=lambda r: True
    )
    acp.results.append(acp.portal.call(agent.run_result, prompt))


# -- Then ----------------------------------------------------------------


@then("every ACP turn answered with status 0")
def every_turn_ok(acp: AcpWorld) -> None:
    assert acp.results and all(r.status == 0 for r in acp.results), acp.results


@then(parsers.parse("the ACP turn answered with status {status:d}"))
def turn_status(acp: AcpWorld, status: int) -> None:
    assert acp.last.status == status, acp.last


@then(parsers.parse('the ACP turn answered with status {status:d} and error "{error}"'))
def turn_failed(acp: AcpWorld, status: int, error: str) -> None:
    assert acp.last.status == status and acp.last.error == error, acp.last


@then(parsers.parse('the last ACP answer is "{text}"'))
def last_answer(acp: AcpWorld, text: str) -> None:
    assert acp.last.message == text, acp.last


@then(parsers.parse('the last ACP message holds "{text}"'))
def last_message_holds(acp: AcpWorld, text: str) -> None:
    assert text in acp.last.message, acp.last


@then("every ACP turn was answered by one process, under the session id of session/new")
def one_process(acp: AcpWorld) -> None:
    assert len(acp.pids) == len(acp.results) and len(set(acp.pids)) == 1, acp.pids
    assert {r.pid for r in acp.results} == set(acp.pids), acp.results
    assert acp.session is not None and acp.session.session_id
    assert {r.session_id for r in acp.results} == {acp.session.session_id}
    prompts = [e for e in acp.recorded("received") if e["received"] == "session/prompt"]
    assert [p["params"]["sessionId"] for p in prompts] == [acp.session.session_id] * len(
        acp.results
    )


@then("the agent was asked for protocol version 1 with no file system and no terminal")
def initialized(acp: AcpWorld) -> None:
    (init,) = [e for e in acp.recorded("received") if e["received"] == "initialize"]
    assert init["params"]["protocolVersion"] == 1
    assert init["params"]["clientCapabilities"] == {
        "fs": {"readTextFile": False, "writeTextFile": False},
        "terminal": False,
    }


@then(parsers.parse("the ACP answers were {answers}"))
def answers_were(acp: AcpWorld, answers: str) -> None:
    assert [r.message for r in acp.results] == _quoted(answers), acp.results


@then(parsers.parse("the ACP approver was asked {n:d} times"))
def approver_asked(acp: AcpWorld, n: int) -> None:
    assert len(acp.asked) == n, acp.asked


@then(parsers.parse("the agent was answered the options {options}"))
def options_chosen(acp: AcpWorld, options: str) -> None:
    chosen = [e["chosen"] for e in acp.recorded("chosen")]
    assert chosen == _quoted(options), chosen


@then(parsers.parse("the ACP approvals were settled by {sources}"))
def approvals_settled(acp: AcpWorld, sources: str) -> None:
    records = [a for r in acp.results for a in r.approvals]
    assert [a["source"] for a in records] == _quoted(sources), records
    assert all(a["allowed"] is True for a in records), records


@then(parsers.parse('the agent got "{method}"'))
def agent_got(acp: AcpWorld, method: str) -> None:
    assert method in [e["received"] for e in acp.recorded("received")]


@then("no sleeping tool of the ACP session is left")
def no_sleeper(acp: AcpWorld) -> None:
    assert acp.left(sleeping=True) == []


@then("no process of the ACP session is left")
def nothing_left(acp: AcpWorld) -> None:
    acp.close()
    deadline = time.monotonic() + 10
    while acp.left():
        assert time.monotonic() < deadline, acp.left()
        time.sleep(0.05)


@then("the ACP session is closed")
def session_closed(acp: AcpWorld) -> None:
    assert acp.session is not None and acp.session.closed


@then(parsers.parse("ACP turn {n:d} answered with status {status:d}, skipping {lines:d} lines"))
def turn_skipped(acp: AcpWorld, n: int, status: int, lines: int) -> None:
    result = acp.results[n - 1]
    assert result.status == status and result.skipped_lines == lines, result


@then(parsers.parse('ACP turn {n:d} answered with status {status:d}, warning "{text}"'))
def turn_warned(acp: AcpWorld, n: int, status: int, text: str) -> None:
    result = acp.results[n - 1]
    assert result.status == status and any(text in w for w in result.warnings), result


@then(parsers.parse('ACP turn {n:d} answered with status {status:d}, saying "{text}"'))
def turn_said(acp: AcpWorld, n: int, status: int, text: str) -> None:
    result = acp.results[n - 1]
    assert result.status == status and text in result.message, result


@then(parsers.parse('the run answered with status {status:d}, saying "{text}"'))
def run_said(acp: AcpWorld, status: int, text: str) -> None:
    assert acp.last.status == status and acp.last.message == text, acp.last


@then(parsers.parse('each run set the agent to the mode "{mode}"'))
def mode_set(acp: AcpWorld, mode: str) -> None:
    """With an approver, and without one or a level too (never the agent's own)."""
    assert [e["mode"] for e in acp.recorded("mode")] == [mode] * len(acp.results)
