"""Step definitions for retry.feature and degraded.feature.

Every scenario runs real subprocesses (the embedded failer or the fake
claude); only the backoff waits and the cooldowns run in virtual time
(``coding_genesis.retry.testing``), so the suite never sleeps for them.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal
from pytest_bdd import given, parsers, then, when

from coding_genesis import (
    AgentState,
    AttemptEvent,
    CircuitBreaker,
    CodingGenesisAgent,
    Event,
    VirtualClock,
)
from coding_genesis.retry import RetryPolicy, testing
from tests.support import FAKE_BIN, EventLog, FakeCLI


class RetryWorld:
    """What a retry or degraded scenario has set up and observed."""

    def __init__(self, tmp_path: Path, portal: BlockingPortal) -> None:
        self.tmp_path = tmp_path
        self.portal = portal
        self.stack = contextlib.ExitStack()
        self.clock: VirtualClock | None = None
        self.agent: CodingGenesisAgent | None = None
        self.log: EventLog | None = None
        self.fake: FakeCLI | None = None
        self.policy: RetryPolicy | None = None
        self.prompt = "do the task"
        self.responses: list[dict[str, Any]] = []
        self.cli_path: Path | None = None
        self.breaker: CircuitBreaker | None = None
        self.backend = "claude"
        self.events_before = 0

    @property
    def response(self) -> dict[str, Any]:
        assert self.responses, "no request was made"
        return self.responses[-1]

    def failer(self, timeout: float = 10.0, **kwargs: Any) -> CodingGenesisAgent:
        state_dir = self.tmp_path / "failer-state"
        return self.adopt(
            CodingGenesisAgent(
                "failer",
                timeout=timeout,
                grace=0.5,
                options={"state_dir": str(state_dir)},
                **kwargs,
            )
        )

    def adopt(self, agent: CodingGenesisAgent) -> CodingGenesisAgent:
        self.agent = agent
        self.log = EventLog(agent)
        return agent

    def run(self, prompt: str | None = None, **kwargs: Any) -> dict[str, Any]:
        agent = self.agent
        assert agent is not None and self.log is not None
        self.events_before = len(self.log.events)

        async def go() -> dict[str, Any]:
            return dict(await agent.run(prompt or self.prompt, **kwargs))

        response: dict[str, Any] = self.portal.call(go)
        self.responses.append(response)
        return response

    def new_events(self) -> list[dict[str, Any]]:
        assert self.log is not None
        return self.log.events[self.events_before :]

    def attempts(self, phase: str) -> list[dict[str, Any]]:
        assert self.log is not None
        return [e for e in self.log.of("attempt") if e["phase"] == phase]

    def install_binary(self) -> None:
        """A real executable at the missing path, running the fake claude."""
        assert self.cli_path is not None
        self.cli_path.parent.mkdir(parents=True, exist_ok=True)
        self.cli_path.write_text(
            f"#!{sys.executable}\n"
            "import os, sys\n"
            f"os.execv(sys.executable, [sys.executable, {str(FAKE_BIN / 'claude')!r}, *sys.argv[1:]])\n"
        )
        self.cli_path.chmod(self.cli_path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def retry_world(tmp_path: Path, portal: BlockingPortal) -> Iterator[RetryWorld]:
    world = RetryWorld(tmp_path, portal)
    with world.stack:
        yield world


def _numbers(text: str) -> list[float]:
    return [float(part) for part in text.split(",") if part.strip()]


def _parse_iso(text: str) -> _dt.datetime:
    return _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


# -- Given ---------------------------------------------------------------


@given("virtual time for retries")
def virtual_time(retry_world: RetryWorld) -> None:
    retry_world.clock = retry_world.stack.enter_context(testing())


@given("a failer agent with the default retry policy")
def failer_default(retry_world: RetryWorld) -> None:
    retry_world.failer(retry=RetryPolicy.default())


@given(
    parsers.parse(
        "a failer agent with the default retry policy and a deadline of {seconds:g} seconds"
    )
)
def failer_deadline(retry_world: RetryWorld, seconds: float) -> None:
    retry_world.failer(retry=RetryPolicy.default(deadline=seconds))


@given(
    parsers.parse("a failer agent with timeout {seconds:g} seconds and the default retry policy")
)
def failer_timeout(retry_world: RetryWorld, seconds: float) -> None:
    retry_world.failer(timeout=seconds, retry=RetryPolicy.default())


@given("a failer agent without a retry policy")
def failer_without_policy(retry_world: RetryWorld) -> None:
    retry_world.failer()


@given(
    parsers.parse(
        "a fake claude agent with timeout {seconds:g} seconds and the default retry policy"
    )
)
def fake_claude_policy(retry_world: RetryWorld, seconds: float) -> None:
    retry_world.fake = FakeCLI(retry_world.tmp_path, "claude")
    retry_world.adopt(
        retry_world.fake.agent(timeout=seconds, grace=0.5, retry=RetryPolicy.default())
    )


@given("the first attempt calls a tool and then hangs")
def first_attempt_tool_then_hang(retry_world: RetryWorld) -> None:
    assert retry_world.fake is not None
    retry_world.fake.script(
        [
            {"init": True},
            {
                "emit": {
                    "type": "assistant",
                    "message": {
                        "role": "assistant",
                        "content": [
                            {
                                "type": "tool_use",
                                "id": "toolu_1",
                                "name": "Bash",
                                "input": {"command": "ls"},
                            }
                        ],
                    },
                }
            },
            {"hang": True},
        ]
    )


@given("the next attempt answers with the prompt it got")
def next_attempt_echoes(retry_world: RetryWorld) -> None:
    fake, agent = retry_world.fake, retry_world.agent
    assert fake is not None and agent is not None

    def rescript(event: Event) -> None:
        if isinstance(event, AttemptEvent) and event.phase == "started" and event.attempt == 2:
            fake.script([{"echo_prompt": True}])

    agent.subscribe(rescript)


@given(parsers.parse('every attempt fails with "{text}"'))
def every_attempt_fails(retry_world: RetryWorld, text: str) -> None:
    assert retry_world.fake is not None
    retry_world.fake.script([{"stderr": text}, {"exit": 1}])


@given(
    parsers.parse(
        "a claude agent whose binary is missing, with a breaker of {k:d} failures "
        "and {cooldown:g} seconds cooldown"
    )
)
def missing_binary(retry_world: RetryWorld, k: int, cooldown: float) -> None:
    retry_world.fake = FakeCLI(retry_world.tmp_path, "claude")
    retry_world.cli_path = retry_world.tmp_path / "not-yet-installed" / "claude"
    retry_world.adopt(
        CodingGenesisAgent(
            "claude",
            cli_path=str(retry_world.cli_path),
            env=retry_world.fake.env(),
            timeout=10.0,
            grace=0.5,
            circuit_breaker=CircuitBreaker(threshold=k, cooldown=cooldown),
        )
    )


@given(
    parsers.parse(
        'a claude agent whose every run fails with "{text}", with a breaker of {k:d} '
        "failures and {cooldown:g} seconds cooldown"
    )
)
def failing_auth(retry_world: RetryWorld, text: str, k: int, cooldown: float) -> None:
    retry_world.fake = FakeCLI(retry_world.tmp_path, "claude")
    retry_world.fake.script([{"stderr": text}, {"exit": 1}])
    retry_world.adopt(
        retry_world.fake.agent(circuit_breaker=CircuitBreaker(threshold=k, cooldown=cooldown))
    )


@given(
    parsers.parse(
        "a {backend} agent with a breaker of {k:d} failures and {cooldown:g} seconds cooldown"
    )
)
def agent_with_breaker(retry_world: RetryWorld, backend: str, k: int, cooldown: float) -> None:
    retry_world.backend = backend
    retry_world.breaker = CircuitBreaker(threshold=k, cooldown=cooldown)


@given(parsers.parse("every run ends in {failure}"))
def every_run_ends_in(retry_world: RetryWorld, failure: str) -> None:
    breaker = retry_world.breaker
    if retry_world.backend == "failer":
        assert failure == "a rate limit"
        retry_world.failer(circuit_breaker=breaker)
        retry_world.prompt = "/rate-limit"
        return
    fake = retry_world.fake = FakeCLI(retry_world.tmp_path, retry_world.backend)
    if failure == "a timeout":
        fake.script([{"init": True}, {"hang": True}])
        retry_world.adopt(fake.agent(timeout=0.3, grace=0.3, circuit_breaker=breaker))
    elif failure == "a crash":
        fake.script([{"init": True}, {"kill_self": "SIGSEGV"}])
        retry_world.adopt(fake.agent(circuit_breaker=breaker))
    else:
        raise AssertionError(f"unknown failure {failure!r}")


# -- When ----------------------------------------------------------------


@when(parsers.parse('the agent runs "{prompt}"'))
def agent_runs(retry_world: RetryWorld, prompt: str) -> None:
    retry_world.run(prompt)


@when(parsers.parse('the agent runs "{prompt}" with {n:d} retry for this call'))
def agent_runs_with_retry(retry_world: RetryWorld, prompt: str, n: int) -> None:
    retry_world.run(prompt, retry=n)


@when(parsers.parse("the agent runs {n:d} requests"))
def agent_runs_n(retry_world: RetryWorld, n: int) -> None:
    for _ in range(n):
        retry_world.run()


@when(parsers.parse("another request arrives {seconds:g} seconds later"))
def later_request(retry_world: RetryWorld, seconds: float) -> None:
    assert retry_world.clock is not None
    retry_world.clock.advance(seconds)
    retry_world.run()


@when("the binary is installed")
def binary_installed(retry_world: RetryWorld) -> None:
    retry_world.install_binary()


@when("the binary is removed")
def binary_removed(retry_world: RetryWorld) -> None:
    assert retry_world.cli_path is not None
    os.unlink(retry_world.cli_path)


# -- Then: retries ---------------------------------------------------------


@then(parsers.parse("the run succeeded on attempt {n:d}"))
def succeeded_on(retry_world: RetryWorld, n: int) -> None:
    response = retry_world.response
    assert response["status"] == 0, response["message"]
    assert response["error"] is None
    assert response["retry_count"] == n - 1
    assert len(response["retry_history"]) == n - 1
    assert [e["attempt"] for e in retry_world.attempts("started")] == list(range(1, n + 1))


@then(
    parsers.parse('the answer is the failer\'s success body "{message}" with retry_count {count:d}')
)
def failer_success_body(retry_world: RetryWorld, message: str, count: int) -> None:
    data = retry_world.response["data"]
    assert set(data) == {"status", "message", "retry_count", "timestamp"}
    assert data["status"] == "success"
    assert data["message"] == message
    assert data["retry_count"] == count
    assert _parse_iso(data["timestamp"]).tzinfo is not None


@then(
    parsers.parse(
        'the response has retry_count {count:d}, attempts {attempts:d} and a history of {n:d} "{category}" '
        'failures with action "{action}"'
    )
)
def history_of(
    retry_world: RetryWorld, count: int, attempts: int, n: int, category: str, action: str
) -> None:
    response = retry_world.response
    assert response["retry_count"] == count
    assert response["attempts"] == attempts
    history = response["retry_history"]
    assert [e["attempt"] for e in history] == list(range(1, n + 1))
    assert {e["category"] for e in history} == {category}
    assert {e["action"] for e in history} == {action}
    for entry in history:
        assert entry["error"] == "cli_error"
        assert "Simulated transient failure" in entry["message"]


@then(parsers.parse("the retries waited {seconds} seconds of virtual time"))
def retries_waited(retry_world: RetryWorld, seconds: str) -> None:
    assert retry_world.clock is not None
    expected = _numbers(seconds)
    assert retry_world.clock.sleeps == expected
    retried = [e for e in retry_world.response["retry_history"] if e["action"] == "retry"]
    assert [e["delay_s"] for e in retried] == expected
    for entry in retried:
        planned = _parse_iso(entry["scheduled_at"]) - _parse_iso(entry["at"])
        assert abs(planned.total_seconds() - entry["delay_s"]) < 0.002


@then("every retry resumed the session of the first attempt")
def resumed_first_session(retry_world: RetryWorld) -> None:
    response = retry_world.response
    first = response["retry_history"][0]["session_id"]
    assert isinstance(first, str) and first
    started = retry_world.attempts("started")
    assert started[0]["resume_session"] is None
    assert started[0]["continuation"] is False
    for event in started[1:]:
        assert event["resume_session"] == first
        assert event["continuation"] is True
    # The failer continues the session it is given.
    assert response["session_id"] == first


@then("every attempt was published as an event")
def attempts_published(retry_world: RetryWorld) -> None:
    response = retry_world.response
    finished = retry_world.attempts("finished")
    n = response["retry_count"] + 1
    assert [e["attempt"] for e in finished] == list(range(1, n + 1))
    assert [e["action"] for e in finished] == ["retry"] * (n - 1) + ["succeed"]
    for event in retry_world.log.of("attempt") if retry_world.log else ():
        assert event["run_id"] == response["run_id"]


@then(parsers.parse('the run failed with category "{category}" after {n:d} attempts'))
def failed_after(retry_world: RetryWorld, category: str, n: int) -> None:
    response = retry_world.response
    assert response["status"] != 0
    assert response["failure"]["category"] == category
    history = response["retry_history"]
    if retry_world.agent is not None and retry_world.agent.retry_policy is None:
        assert n == 1 and history == [] and response["retry_count"] == 0
        return
    assert len(history) == n
    assert response["retry_count"] == n - 1
    assert [e["action"] for e in history[:-1]] == ["retry"] * (n - 1)
    assert history[-1]["action"] in ("fail", "escalate")
    assert history[-1]["suggested_actions"]


@then(parsers.parse('the retry policy gave up with action "{action}" and no escalation'))
def gave_up_without_escalation(retry_world: RetryWorld, action: str) -> None:
    response = retry_world.response
    assert response["retry_history"][-1]["action"] == action
    assert response["escalation"] is None


@then(parsers.parse('the retry policy gave up with action "{action}"'))
def gave_up(retry_world: RetryWorld, action: str) -> None:
    response = retry_world.response
    last = response["retry_history"][-1]
    assert last["action"] == action
    assert last["delay_s"] is None and last["scheduled_at"] is None
    if action == "escalate":
        escalation = response["escalation"]
        assert escalation["category"] == response["failure"]["category"]
        assert escalation["reason"] == last["reason"]
        assert escalation["attempts"] == len(response["retry_history"])
    else:
        assert response["escalation"] is None


@then(parsers.parse("the attempts had timeouts {seconds} seconds"))
def attempt_timeouts(retry_world: RetryWorld, seconds: str) -> None:
    expected = _numbers(seconds)
    assert [e["timeout"] for e in retry_world.attempts("started")] == pytest.approx(expected)
    history = retry_world.response["retry_history"]
    assert [e["timeout_s"] for e in history] == pytest.approx(expected[: len(history)])


@then(parsers.parse('the escalation suggests "{text}" first'))
def escalation_suggests(retry_world: RetryWorld, text: str) -> None:
    response = retry_world.response
    assert response["escalation"]["suggested_actions"][0] == text
    assert "no progress" in response["retry_history"][-1]["reason"]
    assert response["retry_count"] == 0
    assert retry_world.clock is not None and retry_world.clock.sleeps == []


@then("the second attempt resumed the first session with a continuation prompt")
def second_attempt_resumed(retry_world: RetryWorld) -> None:
    assert retry_world.fake is not None
    argvs = [r["argv"] for r in retry_world.fake.records() if "argv" in r]
    assert len(argvs) == 2
    first_session = retry_world.response["retry_history"][0]["session_id"]
    assert not any(a.startswith("--resume") for a in argvs[0])
    assert f"--resume={first_session}" in argvs[1]
    history = retry_world.response["retry_history"]
    assert history[0]["tool_calls"] == 1
    assert history[0]["category"] == "timeout"


@then("the continuation prompt lists the tool used and the original request")
def continuation_prompt_content(retry_world: RetryWorld) -> None:
    message = retry_world.response["message"]
    prompt = message.removeprefix("fake claude got: ")
    assert prompt.startswith("Continue from previous attempt:\n\nAlready completed:\n")
    assert "✓ Used Bash 1 time\n" in prompt
    assert "Blocker encountered (timeout): claude timed out after 0.5s" in prompt
    assert prompt.endswith("Original request:\nRefactor the parser")


@then(parsers.parse("the escalation record has the spec's fields and {n:d} errors in its history"))
def escalation_fields(retry_world: RetryWorld, n: int) -> None:
    response = retry_world.response
    escalation = response["escalation"]
    assert escalation["id"].startswith("ESC-" + response["run_id"][:12] + "-")
    assert escalation["category"] == "agent_error"
    assert escalation["message"] == "Simulated agent failure for testing"
    assert escalation["attempts"] == n
    assert _parse_iso(escalation["created_at"]).tzinfo is not None
    assert [e["attempt"] for e in escalation["error_history"]] == list(range(1, n + 1))
    assert {e["category"] for e in escalation["error_history"]} == {"agent_error"}
    assert escalation["suggested_actions"] == response["failure"]["suggested_actions"]
    assert escalation["backend"] == "failer"
    assert escalation["session_id"] == response["session_id"]


@then("the last history entry says the deadline would be passed")
def deadline_reason(retry_world: RetryWorld) -> None:
    last = retry_world.response["retry_history"][-1]
    assert last["action"] == "fail"
    assert "retry deadline of 100s" in last["reason"]


@then("no attempt event was published")
def no_attempt_events(retry_world: RetryWorld) -> None:
    assert retry_world.log is not None
    assert retry_world.log.of("attempt") == []
    assert retry_world.response["retry_count"] == 0
    assert retry_world.response["retry_history"] == []


# -- Then: the circuit breaker ---------------------------------------------


@then(parsers.parse('every response has status {status:d} and error "{error}"'))
def every_response(retry_world: RetryWorld, status: int, error: str) -> None:
    assert retry_world.responses
    for response in retry_world.responses:
        assert (response["status"], response["error"]) == (status, error), response["message"]


@then(parsers.parse('the response has status {status:d} and error "{error}"'))
def last_response(retry_world: RetryWorld, status: int, error: str) -> None:
    assert (retry_world.response["status"], retry_world.response["error"]) == (status, error)


@then(parsers.parse('the agent is "{state}" because of "{text}"'))
def agent_state_because(retry_world: RetryWorld, state: str, text: str) -> None:
    agent = retry_world.agent
    assert agent is not None
    assert agent.state is AgentState(state)
    assert text in agent.state_reason


@then(parsers.parse('a state event announced "{state}" with a cooldown of {cooldown:g} seconds'))
def state_event(retry_world: RetryWorld, state: str, cooldown: float) -> None:
    assert retry_world.log is not None and retry_world.agent is not None
    event = retry_world.log.of("state")[-1]
    assert event["state"] == state
    assert event["previous_state"] == "BUSY"
    assert event["cooldown_s"] == cooldown
    assert event["category"] == "missing"
    assert event["consecutive_failures"] == retry_world.agent.consecutive_failures == 2
    assert event["reason"] == retry_world.agent.state_reason


@then(parsers.parse('it is answered at once with status {status:d} and error "{error}"'))
def answered_at_once(retry_world: RetryWorld, status: int, error: str) -> None:
    response = retry_world.response
    agent = retry_world.agent
    assert agent is not None
    assert (response["status"], response["error"]) == (status, error)
    assert "DEGRADED" in response["message"]
    assert response["failure"]["retry_after_s"] == pytest.approx(agent.cooldown_remaining, abs=1)
    assert response["failure"]["retry_after_s"] > 0
    # Nothing happened: no state change, no run.
    assert retry_world.new_events() == []
    assert agent.state is AgentState.DEGRADED


@then("no process was started for it")
def no_process_started(retry_world: RetryWorld) -> None:
    assert retry_world.fake is not None and retry_world.log is not None
    assert retry_world.fake.records() == []
    assert retry_world.log.of("run_started") == []
    assert retry_world.response["pid"] is None


@then("the probe succeeds")
def probe_succeeds(retry_world: RetryWorld) -> None:
    assert retry_world.log is not None and retry_world.fake is not None
    response = retry_world.response
    assert response["status"] == 0, response["message"]
    states = [(e["state"], e["reason"]) for e in retry_world.new_events() if e["type"] == "state"]
    assert states[0] == ("BUSY", "probe after cooldown")
    assert states[-1][0] == "READY"
    assert len(retry_world.fake.records()) > 0  # the installed binary really ran
    assert retry_world.agent is not None and retry_world.agent.consecutive_failures == 0


@then(parsers.parse('the agent never went "{state}"'))
def never_went(retry_world: RetryWorld, state: str) -> None:
    assert retry_world.log is not None
    assert state not in retry_world.log.states()
    assert len(retry_world.responses) == 3
