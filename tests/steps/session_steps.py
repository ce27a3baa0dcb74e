"""Step definitions of the two-way features: live sessions, approvals, hooks, the
caller's functions as tools and structured output (tests/features/sessions.feature,
approvals.feature, hooks.feature, host_tools.feature, structured_output.feature).

Every scenario runs on the embedded failer, which speaks claude's control protocol
(its backend's ``control()`` is claude's codec) and makes the tool calls its prompt
names, or, where it says so, on the fake ACP agent (``tests/fakes/fake_acp.py``).  Steps are synchronous: the session's coroutines go through the anyio
blocking portal fixture.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from anyio.from_thread import BlockingPortal
from pydantic import BaseModel
from pytest_bdd import given, parsers, then, when

from coding_genesis import (
    ApprovalRequest,
    CodingGenesisAgent,
    Decision,
    Event,
    HookInput,
    HookResult,
    RunResponse,
    RunResult,
    RunStartedEvent,
    Session,
    tool,
)
from coding_genesis.events import ToolCallEvent
from tests.support import FAKE_BIN, marked_processes


class Review(BaseModel):
    verdict: str
    issues: list[str]


class Live:
    """What a two-way scenario set up and saw."""

    def __init__(self, tmp_path: Path, portal: BlockingPortal) -> None:
        self.tmp_path = tmp_path
        self.portal = portal
        self.backend = "failer"
        self.settings: dict[str, Any] = {
            "cwd": str(tmp_path),
            "timeout": 30,
            "grace": 1.0,
            "ledger": str(tmp_path / "ledger"),
            "options": {"state_dir": str(tmp_path / "failer-state")},
        }
        self.hooks: dict[str, Any] = {}
        self.tools: list[Any] = []
        self.asked: list[ApprovalRequest] = []
        self.called: list[str] = []
        self.agent: CodingGenesisAgent | None = None
        self.session: Session | None = None
        self._open: AbstractContextManager[Session] | None = None
        self.responses: list[RunResponse] = []
        self.session_ids: list[str | None] = []
        self.pids: list[int] = []
        self.tool_calls = 0
        self.result: RunResult | None = None

    def approve(self, decide: Callable[[ApprovalRequest], Any]) -> None:
        async def approver(request: ApprovalRequest) -> Any:
            self.asked.append(request)
            answer = decide(request)
            return await answer if hasattr(answer, "__await__") else answer

        self.settings["approver"] = approver

    def build(self) -> CodingGenesisAgent:
        if self.agent is None:
            extra: dict[str, Any] = {}
            if self.hooks:
                extra["hooks"] = self.hooks
            if self.tools:
                extra["tools"] = self.tools
            self.agent = CodingGenesisAgent(self.backend, **self.settings, **extra)
            self.agent.subscribe(self._hear)
        return self.agent

    def _hear(self, event: Event) -> None:
        if isinstance(event, RunStartedEvent):
            self.pids.append(event.pid)
        elif isinstance(event, ToolCallEvent):
            self.tool_calls += 1

    def open(self, **options: Any) -> Session:
        self.close()
        self._open = self.portal.wrap_async_context_manager(self.build().session(**options))
        self.session = self._open.__enter__()
        return self.session

    def close(self) -> None:
        if self._open is not None:
            assert self.session is not None
            self.session_ids.append(self.session.session_id)
            self._open.__exit__(None, None, None)
            self._open = self.session = None

    def send(self, prompt: str) -> RunResponse:
        assert self.session is not None, "no session is open"
        response: RunResponse = self.portal.call(self.session.send, prompt)
        self.responses.append(response)
        return response

    @property
    def last(self) -> RunResponse:
        assert self.responses, "no turn was answered"
        return self.responses[-1]


@pytest.fixture
def live(tmp_path: Path, portal: BlockingPortal) -> Iterator[Live]:
    world = Live(tmp_path, portal)
    yield world
    world.close()


def said(response: RunResponse) -> str:
    """What the failer answered: the message of its JSON body."""
    body = json.loads(response["message"])
    assert isinstance(body, dict), response
    return str(body["message"])


# -- Given ---------------------------------------------------------------


@given("a two-way failer agent")
def failer_agent(live: Live) -> None:
    """The settings of every scenario (see :class:`Live`)."""


@given(parsers.parse('a fake ACP agent "{flavour}"'))
def fake_acp_agent(live: Live, flavour: str) -> None:
    live.backend = flavour
    del live.settings["options"]  # the failer's
    live.settings["cli_path"] = str(FAKE_BIN / flavour)


@given(parsers.parse('a fake ACP agent "{flavour}" whose approver allows everything'))
def fake_acp_agent_allowing(live: Live, flavour: str) -> None:
    fake_acp_agent(live, flavour)
    live.approve(lambda r: Decision.allow())


@given(parsers.parse('a two-way failer agent with permissions "{level}"'))
def failer_with_permissions(live: Live, level: str) -> None:
    live.settings["permissions"] = level


@given(
    parsers.parse('a two-way failer agent whose approver allows writes with the content "{text}"')
)
def approver_changes_writes(live: Live, text: str) -> None:
    def decide(request: ApprovalRequest) -> Decision:
        if request.kind == "write":
            return Decision.allow(input={**request.input, "content": text})
        return Decision.allow()

    live.approve(decide)


@given(parsers.parse('a two-way failer agent whose approver refuses commands saying "{message}"'))
def approver_refuses(live: Live, message: str) -> None:
    live.approve(lambda r: Decision.deny(message) if r.kind == "command" else Decision.allow())


@given(
    parsers.parse(
        'a two-way failer agent whose approver refuses commands and ends the turn saying "{message}"'
    )
)
def approver_ends_turn(live: Live, message: str) -> None:
    live.approve(lambda r: Decision.deny(message, end_turn=True))


@given("a two-way failer agent whose approver allows always")
def approver_always(live: Live) -> None:
    live.approve(lambda r: Decision.allow(always=True))


@given("a two-way failer agent whose approver allows everything")
def approver_allows(live: Live) -> None:
    live.approve(lambda r: Decision.allow())


@given(
    parsers.parse(
        "a two-way failer agent whose approver never answers, "
        "with an approval timeout of {seconds:g} seconds"
    )
)
def approver_silent(live: Live, seconds: float) -> None:
    async def never(request: ApprovalRequest) -> Decision:
        await anyio.sleep(3600)
        return Decision.allow()

    live.approve(never)
    live.settings["approval_timeout"] = seconds


@given(parsers.parse('a two-way failer agent whose approver raises "{text}"'))
def approver_raises(live: Live, text: str) -> None:
    def broken(request: ApprovalRequest) -> Decision:
        raise RuntimeError(text)

    live.approve(broken)


@given(parsers.parse('a pre_tool hook that blocks commands holding "{needle}" saying "{message}"'))
def hook_blocks(live: Live, needle: str, message: str) -> None:
    def hook(point: HookInput) -> HookResult | None:
        if needle in str(point.input.get("command", "")):
            return HookResult(block=True, message=message)
        return None

    live.hooks["pre_tool"] = hook


@given(parsers.parse('a pre_tool hook that makes every command "{command}"'))
def hook_changes(live: Live, command: str) -> None:
    live.hooks["pre_tool"] = lambda point: HookResult(input={**point.input, "command": command})


@given(parsers.parse('a post_tool hook that adds the context "{context}"'))
def hook_context(live: Live, context: str) -> None:
    live.hooks["post_tool"] = lambda point: HookResult(context=context)


@given(parsers.parse('a turn_end hook that blocks once saying "{message}"'))
def hook_keeps_going(live: Live, message: str) -> None:
    seen: list[HookInput] = []

    def hook(point: HookInput) -> HookResult | None:
        seen.append(point)
        return HookResult(block=True, message=message) if len(seen) == 1 else None

    live.hooks["turn_end"] = hook


@given(parsers.parse('a pre_compact hook that blocks saying "{message}"'))
def hook_no_compaction(live: Live, message: str) -> None:
    live.hooks["pre_compact"] = lambda point: HookResult(block=True, message=message)


@given(parsers.parse('the caller\'s function "{name}"'))
def host_function(live: Live, name: str) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        live.called.append("add")
        return a + b

    @tool
    def divide(a: int, b: int) -> float:
        """Divide a by b."""
        live.called.append("divide")
        return a / b

    live.tools.append({"add": add, "divide": divide}[name])


# -- When ----------------------------------------------------------------


@when("a session is opened")
def open_session(live: Live) -> None:
    live.open()


@when("a session is opened for a Review")
def open_session_for_review(live: Live) -> None:
    live.open(output_schema=Review)


@when("a session is opened that resumes the last one")
def open_resumed(live: Live) -> None:
    assert live.session_ids and live.session_ids[-1], "no earlier session to resume"
    live.open(resume=live.session_ids[-1])


@when(parsers.parse('a session is opened that resumes "{session_id}"'))
def open_resumed_unknown(live: Live, session_id: str) -> None:
    live.open(resume=session_id)


@when("the session is closed")
def close_session(live: Live) -> None:
    live.close()


@when(parsers.re(r"the session is sent (?P<quote>[\"'])(?P<prompt>.+)(?P=quote)$"))
def send(live: Live, prompt: str) -> None:
    live.send(prompt)


@when(
    parsers.re(
        r'a turn sets (?P<option>model|permissions) "(?P<value>[^"]+)" and sends "(?P<prompt>[^"]+)"$'
    )
)
def send_with(live: Live, prompt: str, option: str, value: str) -> None:
    """One turn with its own option (``send(..., model=...)``)."""
    assert live.session is not None, "no session is open"
    own: dict[str, Any] = {option: value}
    send = functools.partial(live.session.send, prompt, **own)
    live.responses.append(live.portal.call(send))


@when(parsers.re(r"a turn asks for a Review and sends '(?P<prompt>[^']+)'$"))
def send_for_review(live: Live, prompt: str) -> None:
    """One turn with its own output schema (``send(..., output_schema=Review)``)."""
    assert live.session is not None, "no session is open"
    send = functools.partial(live.session.send, prompt, output_schema=Review)
    live.responses.append(live.portal.call(send))


@then(parsers.parse("the outputs of the turns were {values}"))
def turn_outputs(live: Live, values: str) -> None:
    assert [r["output"] for r in live.responses] == json.loads(values), live.responses


@then(parsers.parse('the turns ran on the models "{models}"'))
def turn_models(live: Live, models: str) -> None:
    assert [r["model"] for r in live.responses] == models.split(", "), live.responses


@when(parsers.parse('the session is sent "{prompt}" and interrupted once the command runs'))
def send_and_interrupt(live: Live, prompt: str) -> None:
    assert live.session is not None
    before = live.tool_calls
    running: Future[RunResponse] = live.portal.start_task_soon(live.session.send, prompt)
    deadline = time.monotonic() + 20
    while not (live.tool_calls > before and _sleepers()):
        assert time.monotonic() < deadline, "the command never started"
        assert not running.done(), running.result()
        time.sleep(0.02)
    live.portal.call(live.session.interrupt)
    live.responses.append(running.result(timeout=20))


@when(parsers.re(r"a run asks (?P<quote>[\"'])(?P<prompt>.+)(?P=quote) for a Review$"))
def run_for_review(live: Live, prompt: str) -> None:
    run = functools.partial(live.build().run_result, prompt, output_schema=Review)
    live.result = live.portal.call(run)


def _sleepers() -> list[psutil.Process]:
    found = []
    for proc in marked_processes():
        try:
            if proc.name() == "sleep" and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


# -- Then ----------------------------------------------------------------


@then("every turn answered with status 0")
def every_turn_ok(live: Live) -> None:
    assert live.responses and all(r["status"] == 0 for r in live.responses), live.responses


@then(parsers.parse("the turn answered with status {status:d}"))
def turn_status(live: Live, status: int) -> None:
    assert live.last["status"] == status, live.last


@then(parsers.parse('the turn answered with status {status:d} and error "{error}"'))
def turn_failed(live: Live, status: int, error: str) -> None:
    assert live.last["status"] == status and live.last["error"] == error, live.last


@then(parsers.parse("the turns were numbered {numbers}"))
def turn_numbers(live: Live, numbers: str) -> None:
    wanted = [int(n) for n in numbers.split(", ")]
    assert [r["turn"] for r in live.responses] == wanted, live.responses


@then(parsers.parse('the last answer says "{text}"'))
def last_answer(live: Live, text: str) -> None:
    assert said(live.last) == text, live.last


@then(parsers.parse('the agent answered "{text}"'))
def agent_answered(live: Live, text: str) -> None:
    assert live.last["message"] == text, live.last


@then(parsers.parse("the last turn took {n:d} attempts"))
def last_attempts(live: Live, n: int) -> None:
    assert live.last["attempts"] == n, live.last


@then(parsers.parse("the last output is {value}"))
def last_output(live: Live, value: str) -> None:
    assert live.last["output"] == json.loads(value), live.last


@then(parsers.parse('the hook\'s record says "{text}"'))
def hook_record_says(live: Live, text: str) -> None:
    assert [h["not_applied"] for h in live.last["hooks"]] == [text], live.last["hooks"]


@then(parsers.parse('the last answer starts with "{text}"'))
def last_answer_starts(live: Live, text: str) -> None:
    assert said(live.last).startswith(text), live.last


@then(parsers.parse('the last answer\'s message holds "{text}"'))
def last_message_holds(live: Live, text: str) -> None:
    assert text in live.last["message"], live.last


@then("every turn was answered by one process, under one session id")
def one_process(live: Live) -> None:
    assert len(live.pids) == len(live.responses) and len(set(live.pids)) == 1, live.pids
    assert live.session is not None
    ids = {r["session_id"] for r in live.responses}
    assert ids == {live.session.session_id} and None not in ids, ids


@then(parsers.parse('no "{name}" process of the session is left'))
def none_left(live: Live, name: str) -> None:
    deadline = time.monotonic() + 5
    while _sleepers():
        assert time.monotonic() < deadline, _sleepers()
        time.sleep(0.05)


@then("both sessions had one session id")
def same_session(live: Live) -> None:
    live.close()
    assert len(live.session_ids) == 2 and len(set(live.session_ids)) == 1, live.session_ids


@then(parsers.parse('"{name}" holds "{text}"'))
def file_holds(live: Live, name: str, text: str) -> None:
    assert (live.tmp_path / name).read_text().strip() == text


@then(parsers.parse('"{name}" does not exist'))
def file_absent(live: Live, name: str) -> None:
    assert not (live.tmp_path / name).exists()


@then(parsers.parse('the approvals of the turn were "{decision}" by "{source}"'))
def approvals_were(live: Live, decision: str, source: str) -> None:
    records = live.last["approvals"]
    assert [(a["decision"], a["source"]) for a in records] == [(decision, source)], records


@then(parsers.parse('the approval\'s error holds "{text}"'))
def approval_error(live: Live, text: str) -> None:
    (record,) = live.last["approvals"]
    assert text in str(record.get("error")), record


@then(parsers.parse("the approver was asked {n:d} time"))
@then(parsers.parse("the approver was asked {n:d} times"))
def approver_asked(live: Live, n: int) -> None:
    assert len(live.asked) == n, live.asked


@then(parsers.parse("the hooks of the turn were {pairs}"))
def hooks_were(live: Live, pairs: str) -> None:
    wanted = re.findall(r'"(\w+)" "(\w+)"', pairs)
    seen = [(h["event"], h["outcome"]) for h in live.last["hooks"]]
    assert seen == wanted, live.last["hooks"]


@then(parsers.parse('the turn made {n:d} tool call, named "{name}"'))
def tool_call_made(live: Live, n: int, name: str) -> None:
    assert live.last["tool_calls"] == n, live.last
    assert live.last["tool_usage"] == {name: n}, live.last


@then(parsers.parse('the function "{name}" was never called'))
def never_called(live: Live, name: str) -> None:
    assert name not in live.called, live.called


@then(parsers.parse('the output is a Review whose verdict is "{verdict}"'))
def output_review(live: Live, verdict: str) -> None:
    assert live.result is not None
    assert isinstance(live.result.output, Review), live.result
    assert live.result.output.verdict == verdict


@then(parsers.parse('the result failed with error "{error}" after {n:d} attempts'))
def result_failed(live: Live, error: str, n: int) -> None:
    assert live.result is not None
    assert live.result.error == error and live.result.attempts == n, live.result


@then(parsers.parse('its message names "{place}"'))
def message_names(live: Live, place: str) -> None:
    assert live.result is not None and place in live.result.message, live.result
