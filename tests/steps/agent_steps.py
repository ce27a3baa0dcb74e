"""Step definitions for the user's error-handling spec (spec 001).

Steps are synchronous (pytest-bdd does not await async steps); async agent
calls go through the anyio blocking portal fixture.  Every scenario drives a
real subprocess: the fake ``claude``/``codex`` executables in tests/fakes.
"""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import psutil
import pytest
from anyio.from_thread import BlockingPortal
from pytest_bdd import given, parsers, then, when

from coding_genesis import AgentState, CodingGenesisAgent, Event, RunResponse, RunStartedEvent
from tests.support import EventLog, FakeCLI, is_reaped


class World:
    """What a scenario has set up and observed."""

    def __init__(self, tmp_path: Path, portal: BlockingPortal) -> None:
        self.tmp_path = tmp_path
        self.portal = portal
        self.backend = "claude"
        self.kwargs: dict[str, Any] = {}
        self.steps: list[dict[str, Any]] = []
        self.exit_code: int | None = None
        self.agent: CodingGenesisAgent | None = None
        self.fake: FakeCLI | None = None
        self.log: EventLog | None = None
        self.response: dict[str, Any] | None = None
        self.future: Future[RunResponse] | None = None
        self.checked_timeout: float | None = None

    def build(self) -> CodingGenesisAgent:
        if self.agent is None:
            self.fake = FakeCLI(self.tmp_path, self.backend)
            self.agent = self.fake.agent(**self.kwargs)
            self.log = EventLog(self.agent)
        assert self.fake is not None
        steps = list(self.steps)
        if self.exit_code is not None:
            steps.append({"exit": self.exit_code})
        self.fake.script(steps)
        return self.agent

    def run(self, prompt: str = "do the task") -> dict[str, Any]:
        agent = self.build()
        self.response = self.portal.call(agent.run, prompt)
        return self.response

    def start(self, prompt: str = "do the task") -> None:
        agent = self.build()
        self.future = self.portal.start_task_soon(agent.run, prompt)
        deadline = time.monotonic() + 10
        while agent.state is not AgentState.BUSY:
            assert time.monotonic() < deadline, "the agent never became BUSY"
            time.sleep(0.005)

    def finish(self) -> dict[str, Any]:
        assert self.future is not None
        response = dict(self.future.result(timeout=30))
        self.response = response
        return response


@pytest.fixture
def world(tmp_path: Path, portal: BlockingPortal) -> World:
    return World(tmp_path, portal)


# -- Given ---------------------------------------------------------------


@given(parsers.parse("a CodingGenesisAgent with timeout {seconds:g} seconds"))
def agent_with_timeout(world: World, seconds: float) -> None:
    world.kwargs["timeout"] = seconds


@given(parsers.parse('a CodingGenesisAgent with backend "{backend}"'))
def agent_with_backend(world: World, backend: str) -> None:
    world.backend = backend


@given("a CodingGenesisAgent created with default parameters")
def agent_default(world: World) -> None:
    world.agent = CodingGenesisAgent()


@given(parsers.parse("a CodingGenesisAgent created with timeout {seconds:g}"))
def agent_custom_timeout(world: World, seconds: float) -> None:
    world.agent = CodingGenesisAgent(timeout=seconds)


@given(parsers.parse("the subprocess runs for longer than {seconds:g} seconds without completing"))
def runs_too_long(world: World, seconds: float) -> None:
    world.steps += [
        {"init": True},
        {"trap_sigterm": 143},
        {"sleep": seconds * 30},
        {"answer": "too late"},
    ]


@given(parsers.parse("the subprocess exits with return code {code:d}"))
def exits_with(world: World, code: int) -> None:
    world.exit_code = code


@given(parsers.parse('stderr contains "{text}"'))
def stderr_contains(world: World, text: str) -> None:
    world.steps.append({"stderr": text})


@given("the subprocess is killed by an external signal")
def killed_externally(world: World) -> None:
    world.steps += [{"init": True}, {"hang": True}]
    agent = world.build()
    pid: dict[str, int] = {}

    def killer(event: Event) -> None:
        if isinstance(event, RunStartedEvent):
            pid["cli"] = event.pid
        elif event.kind == "session" and "cli" in pid:
            os.kill(pid["cli"], signal.SIGKILL)

    agent.subscribe(killer)


@given(parsers.parse('the subprocess emits "{line}" on stdout'))
def emits_raw(world: World, line: str) -> None:
    world.steps += [{"init": True}, {"raw": line}]


@given("the subprocess then emits a valid result event")
def emits_result(world: World) -> None:
    world.steps.append({"result": "The task is done."})


@given("the subprocess emits: valid init, invalid line, valid text, invalid line, valid done")
def emits_mixed(world: World) -> None:
    world.steps += [
        {"emit": {"type": "thread.started", "thread_id": "thread-mixed-1"}},
        {"raw": "{this is not json"},
        {
            "emit": {
                "type": "item.completed",
                "item": {"id": "item_0", "type": "agent_message", "text": "Mixed text"},
            }
        },
        {"raw": "[1, 2, 3]"},
        {"emit": {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 2}}},
    ]


@given("the subprocess produced no stdout output")
def no_output(world: World) -> None:
    world.steps = [s for s in world.steps if "stderr" in s]


@given(parsers.parse('a CodingGenesisAgent in "BUSY" state due to a timed-out request'))
def busy_timed_out(world: World) -> None:
    world.kwargs["timeout"] = 1.0
    world.steps += [{"init": True}, {"hang": True}]
    world.start()
    assert world.agent is not None and world.agent.state is AgentState.BUSY


@given(parsers.parse('a CodingGenesisAgent in "BUSY" state due to a crashed subprocess'))
def busy_crashed(world: World) -> None:
    world.steps += [
        {"init": True},
        {"sleep": 0.3},
        {"stderr": "Segmentation fault (simulated)"},
        {"kill_self": "SIGSEGV"},
    ]
    world.start()
    assert world.agent is not None and world.agent.state is AgentState.BUSY


# -- When ----------------------------------------------------------------


@when("the timeout is reached")
@when("the agent processes the request")
def process_request(world: World) -> None:
    world.run()


@when("checking the timeout value")
def check_timeout(world: World) -> None:
    assert world.agent is not None
    world.checked_timeout = world.agent.timeout


@when("the timeout error is handled")
def timeout_handled(world: World) -> None:
    response = world.finish()
    assert response["error"] == "timeout"


@when("the crash error is handled")
def crash_handled(world: World) -> None:
    response = world.finish()
    assert response["error"] == "killed"
    assert response["status"] == 128 + signal.SIGSEGV


# -- Then ----------------------------------------------------------------


@then("the subprocess is terminated via SIGTERM")
def terminated_via_sigterm(world: World) -> None:
    assert world.response is not None and world.fake is not None
    assert world.response["signals_sent"][:1] == ["SIGTERM"]
    assert {"signal": "SIGTERM"}.items() <= next(
        r for r in world.fake.records() if "signal" in r
    ).items()
    assert world.response["exit_code"] == 143


@then("the subprocess is waited on to prevent zombie processes")
@then("no zombie process remains")
def no_zombie(world: World) -> None:
    assert world.response is not None
    pid = world.response["pid"]
    assert isinstance(pid, int)
    assert is_reaped(pid)
    for child in psutil.Process().children():
        assert child.status() != psutil.STATUS_ZOMBIE, f"zombie child {child.pid}"


@then(parsers.parse('the response contains key "{key}" with a non-zero value'))
def key_non_zero(world: World, key: str) -> None:
    assert world.response is not None
    assert isinstance(world.response[key], int) and world.response[key] != 0


@then(parsers.parse('the response contains key "{key}" with value {value:d}'))
def key_with_value(world: World, key: str, value: int) -> None:
    assert world.response is not None
    assert world.response[key] == value


@then(parsers.parse('the response contains key "{key}" with text containing "{text}"'))
def key_containing(world: World, key: str, text: str) -> None:
    assert world.response is not None
    assert text in world.response[key]


@then(parsers.parse('the response contains key "{key}" with an empty string or error message'))
def key_empty_or_error(world: World, key: str) -> None:
    assert world.response is not None
    message = world.response[key]
    assert isinstance(message, str)
    assert message == "" or "without producing any" in message
    assert world.response["error"] == "empty_output"
    assert world.response["completed"] is False


@then(parsers.parse('the agent transitions to "{state}" state, not "{other}"'))
@then(parsers.parse('the agent transitions to "{state}" state'))
def transitions_to(world: World, state: str, other: str | None = None) -> None:
    assert world.agent is not None and world.log is not None
    assert world.agent.state.value == state
    assert world.log.states()[-2:] == ["BUSY", state]
    if other is not None:
        assert other not in world.log.states()


@then("the response contains error information")
def error_information(world: World) -> None:
    assert world.response is not None
    assert world.response["error"] == "cli_error"
    assert world.response["exit_code"] == 1
    assert "authentication failed" in world.response["message"]
    assert "Error: authentication failed" in world.response["stderr_tail"]


@then("the malformed line is silently skipped")
def malformed_skipped(world: World) -> None:
    assert world.response is not None
    assert world.response["skipped_lines"] == 1


@then("the valid result event is processed normally")
def result_processed(world: World) -> None:
    assert world.response is not None and world.log is not None
    assert world.response["completed"] is True
    assert len(world.log.of("result")) == 1


@then("the response contains the result text")
def contains_result_text(world: World) -> None:
    assert world.response is not None
    assert world.response["message"] == "The task is done."


@then("the session_id is extracted from the init event")
def session_extracted(world: World) -> None:
    assert world.response is not None
    assert world.response["session_id"] == "thread-mixed-1"


@then("the text is extracted from the text event")
def text_extracted(world: World) -> None:
    assert world.response is not None
    assert world.response["message"] == "Mixed text"


@then(parsers.parse("the {count:d} invalid lines are silently skipped"))
def invalid_skipped(world: World, count: int) -> None:
    assert world.response is not None
    assert world.response["skipped_lines"] == count


@then("the response is successful")
def is_successful(world: World) -> None:
    assert world.response is not None
    assert world.response["status"] == 0
    assert world.response["error"] is None


@then(parsers.parse("the timeout is {seconds:g} seconds"))
def timeout_is(world: World, seconds: float) -> None:
    assert isinstance(world.checked_timeout, float)
    assert world.checked_timeout == seconds


@then(parsers.parse('the agent state is "{state}"'))
def state_is(world: World, state: str) -> None:
    assert world.agent is not None
    assert world.agent.state == AgentState(state)


@then(parsers.parse('a graph node event is published with state "{state}"'))
def graph_node_event(world: World, state: str) -> None:
    assert world.log is not None and world.agent is not None and world.response is not None
    last = world.log.of("state")[-1]
    assert last["state"] == state
    assert last["previous_state"] == "BUSY"
    assert last["node"] == world.agent.name
    assert last["run_id"] == world.response["run_id"]
    assert last["timestamp"]


@then("the agent can accept new requests")
def accepts_new_requests(world: World) -> None:
    assert world.agent is not None
    world.steps = [{"answer": "second request done"}]
    world.exit_code = None
    response = world.run("second request")
    assert response["status"] == 0
    assert response["message"] == "second request done"
    assert world.agent.state is AgentState.READY
