"""The REAL ``gemini``, ``opencode`` and ``qwen`` CLIs through ``CodingGenesisAgent`` against our
fake model server (Gemini v1beta and OpenAI chat completions, ``tests/fakes/MODEL_SERVER.md``),
and, for all five real CLIs, what a stop in the middle of a long shell tool leaves behind.

Each test skips, with the reason, only when its CLI is not installed (``real_*`` fixtures);
``.ci/run`` installs all five (qwen under the node 22 it installs first), so in CI they run.
As in ``test_real_cli.py``, the agent gets everything CLI-specific through its own ``env=`` /
``options=``, never through the test process's environment.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_genesis import CodingGenesisAgent
from tests.fakes.model_server import DEFAULT_TEXT, TOOL_DONE_PREFIX, FakeModelServer
from tests.fakes.real_cli import OPENCODE_BARE, QuickStart, gemini_env, opencode_env, qwen_env
from tests.real_cli.test_claude_codex import (
    SLEEP_COMMAND,
    SLEEP_PROMPTS,
    STOP_TIMEOUTS,
    Recorder,
    Rig,
    _gone,
    _run_watching_for_sleep,
    assert_nothing_left,
    explain,
    hermetic_env,
)
from tests.support import is_reaped

__all__ = ["hermetic_env"]  # the autouse fixture of test_real_cli, active here too

pytestmark = pytest.mark.timeout(120)

NEW = ("gemini", "opencode", "qwen")
ALL = ("claude", "codex", *NEW)
#: A model name makes gemini skip its model-router call (one request per turn).
GEMINI_MODEL = "gemini-2.5-flash"
#: The shell tool each CLI declares (and the fake model calls).
SHELL_TOOL = {"gemini": "run_shell_command", "opencode": "bash", "qwen": "run_shell_command"}
for _backend in NEW:
    SLEEP_PROMPTS.setdefault(_backend, f"SCENARIO:bash {SLEEP_COMMAND}")


@dataclass
class MoreRig(Rig):
    """:class:`tests.real_cli.test_claude_codex.Rig` for gemini, opencode and qwen.

    ``quick``: the test session's shared start-up state (compile cache, node 22, opencode's
    template ``HOME``). ``bare``: opencode without its built-in plugins, external plugins
    and skills, ``~/.claude`` and file watcher (:data:`OPENCODE_BARE`): never in a test of
    those or of a repository's settings."""

    gemini_settings: dict[str, Any] | None = None
    quick: QuickStart | None = None
    bare: bool = False

    def env(self, **extra: str) -> dict[str, str]:
        home = self.tmp / "home"
        if self.quick is not None:
            extra = {**self.quick.env(), **extra}
        if self.backend == "gemini":
            env = gemini_env(self.server.url, home, base_env={}, extra=extra)
            if self.gemini_settings:
                path = home / ".gemini" / "settings.json"
                doc = json.loads(path.read_text())
                path.write_text(json.dumps({**doc, **self.gemini_settings}))
            return env
        if self.backend == "opencode":
            if self.quick is not None:
                self.quick.copy_opencode_home(self.cli, home)
            if self.bare:
                extra = {**OPENCODE_BARE, **extra}
            return opencode_env(self.server.url, home, base_env={}, extra=extra)
        return qwen_env(self.server.url, home, base_env={}, extra=extra)

    def options(self, tools: bool) -> dict[str, Any]:
        # Without an approval mode, headless gemini and qwen do not offer the model their shell
        # tool at all; opencode's default permissions let it run `bash`.
        if tools and self.backend in ("gemini", "qwen"):
            return {"approval_mode": "yolo"}
        return {}

    def agent(self, **kwargs: Any) -> CodingGenesisAgent:
        agent = super().agent(**kwargs)
        if self.backend == "gemini":
            return CodingGenesisAgent(config=agent.config.replace(model=GEMINI_MODEL))
        return agent


def make_rig(
    backend: str,
    request: pytest.FixtureRequest,
    server: FakeModelServer,
    tmp: Path,
    *,
    bare: bool = False,
) -> Rig:
    """The rig of ``backend``; gemini, opencode and qwen start on the test session's
    shared start-up state, opencode ``bare`` if asked (see :class:`MoreRig`)."""
    cli = request.getfixturevalue(f"real_{backend}")  # skips when not installed
    if backend in NEW:
        quick = request.getfixturevalue("quick_start")
        return MoreRig(backend, cli, server, tmp, quick=quick, bare=bare)
    return Rig(backend, cli, server, tmp)


def more_rig(
    backend: str, request: pytest.FixtureRequest, server: FakeModelServer, tmp: Path
) -> MoreRig:
    """The bare :class:`MoreRig` of ``backend`` (the tests of the protocol)."""
    rig = make_rig(backend, request, server, tmp, bare=True)
    assert isinstance(rig, MoreRig), backend
    return rig


@pytest.fixture(params=NEW)
def rig(request: pytest.FixtureRequest, model_server: FakeModelServer, tmp_path: Path) -> Rig:
    return make_rig(request.param, request, model_server, tmp_path, bare=True)


@pytest.fixture(params=ALL)
def any_rig(request: pytest.FixtureRequest, model_server: FakeModelServer, tmp_path: Path) -> Rig:
    return make_rig(request.param, request, model_server, tmp_path, bare=True)


def model_calls(rig: Rig, prompt: str) -> list[Any]:
    """The requests that asked the model for the answer to ``prompt`` (not opencode's title
    call, nor qwen's background call after its answer)."""
    calls = [r for r in rig.server.model_requests() if prompt in json.dumps(r.body)]
    if rig.backend == "opencode":
        calls = [r for r in calls if isinstance(r.body, dict) and r.body.get("tools")]
    return calls


def assert_session(result: dict[str, Any], events: Recorder) -> str:
    sid = result["session_id"]
    assert isinstance(sid, str) and sid, explain(result, events)
    assert {e["session_id"] for e in events.of("session")} == {sid}, explain(result, events)
    return sid


# ------------------------------------------------------------------------------ the three new CLIs
#
# Each case is a coroutine with its own working directory and HOME (the CLIs keep sessions
# there), all of one CLI at once against one fake server: a CLI takes seconds to start, and
# the cases wait on it side by side instead of in turn.


class Case:
    """One agent of a rig of its own, its events, and the prompt it runs."""

    def __init__(self, rig: Rig, name: str, prompt: str, *, tools: bool = False) -> None:
        self.rig = rig
        self.prompt = prompt
        self.agent = rig.agent(tools=tools)
        self.events = Recorder(self.agent)

    async def run(self, prompt: str | None = None, **kwargs: Any) -> dict[str, Any]:
        return dict(await self.agent.run(prompt or self.prompt, **kwargs))

    def calls(self, prompt: str | None = None) -> list[Any]:
        return model_calls(self.rig, prompt or self.prompt)


async def plain_answer(case: Case) -> None:
    result = await case.run()
    events = case.events
    assert result["status"] == 0, explain(result, events)
    assert result["message"] == DEFAULT_TEXT
    assert result["tool_calls"] == 0 and result["tool_usage"] == {}
    assert result["backend"] == case.rig.backend and result["error"] is None
    assert result["completed"] is True and result["exit_code"] == 0
    assert "".join(e["text"] for e in events.of("text")) == DEFAULT_TEXT
    assert_session(result, events)
    assert result["usage"], explain(result)
    # The prompt reached the CLI on stdin (never in argv) and the model as the user's words.
    (started,) = events.of("run_started")
    assert case.prompt not in json.dumps(started)
    assert case.calls(), explain(result, events)
    assert case.agent.state.value == "READY"
    assert_nothing_left(events.run_id())


async def tool_call(case: Case) -> None:
    result = await case.run()
    events = case.events
    assert result["status"] == 0, explain(result, events)
    tool = SHELL_TOOL[case.rig.backend]
    assert result["tool_calls"] == 1 and result["tool_usage"] == {tool: 1}, explain(result)
    assert result["last_successful_tool"] == tool and result["failed_tools"] == []
    assert result["completed_steps"] == [f"Ran {tool}: echo hi"], explain(result)
    assert result["message"].startswith(TOOL_DONE_PREFIX), explain(result)
    assert "hi" in result["message"].removeprefix(TOOL_DONE_PREFIX).split(), explain(result)
    (call,) = events.of("tool_call")
    assert call["name"] == tool and call["input"]["command"] == "echo hi", call
    (tool_result,) = events.of("tool_result")
    assert tool_result["id"] == call["id"] and tool_result["is_error"] is False
    assert "hi" in tool_result["output"]
    assert_session(result, events)
    assert_nothing_left(events.run_id())


async def unauthorized(case: Case) -> None:
    result = await case.run()
    events = case.events
    assert result["status"] == 1 and result["is_error"] is True, explain(result, events)
    assert result["failure"]["category"] == "auth", explain(result)
    assert result["failure"]["retryable"] is False
    assert result["api_error_status"] == 401, explain(result)
    assert result["signal"] is None
    if case.rig.backend == "gemini":
        assert result["exit_code"] == 145  # 401 mod 256: gemini's own code, not a signal
    assert result["tool_calls"] == 0
    assert_session(result, events)
    assert {r.status for r in case.calls()} == {401}
    assert_nothing_left(events.run_id())


async def resume(case: Case) -> None:
    first = await case.run()
    assert first["status"] == 0, explain(first, case.events)
    assert first["message"] == "first answer", explain(first, case.events)
    sid = assert_session(first, case.events)
    case.events = Recorder(case.agent)
    second = "SCENARIO:text second answer"
    result = await case.run(second, resume=sid)
    events = case.events
    assert result["status"] == 0, explain(result, events)
    assert result["message"] == "second answer"
    assert result["session_id"] == sid, explain(result, events)
    # The CLI continued its own session: the model saw the first turn again.
    (call, *_) = case.calls(second)
    assert case.prompt in json.dumps(call.body), call.body
    assert_nothing_left(events.run_id())


def test_text_tool_401_and_resume(rig: Rig, tmp_path: Path) -> None:
    """A plain answer, a shell-tool round trip, a 401 and a resumed session, side by side."""

    def case(name: str, prompt: str, *, tools: bool = False) -> Case:
        (tmp_path / name).mkdir()
        own = make_rig_like(rig, tmp_path / name)
        return Case(own, name, prompt, tools=tools)

    checks = [
        (plain_answer, case("text", "SCENARIO:text")),
        (tool_call, case("tool", "SCENARIO:bash echo hi", tools=True)),
        (unauthorized, case("401", "SCENARIO:401")),
        (resume, case("resume", "SCENARIO:text first answer")),
    ]

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for check, one in checks:
                tg.start_soon(check, one)

    anyio.run(main)


def make_rig_like(rig: Rig, tmp: Path) -> Rig:
    return dataclasses.replace(rig, tmp=tmp)


# ------------------------------------------------------------------------------ all five CLIs


def test_timeout_mid_tool_stops_the_whole_tree(any_rig: Rig) -> None:
    """Our timeout stops the CLI while its shell tool runs ``SLEEP_COMMAND`` (gemini's and
    opencode's shell tools run it in a session of their own); nothing of the run is left.
    (``test_real_cli.py`` covers claude and codex with more stop-signal variants.)"""
    rig = any_rig
    # opencode takes 8 s or more to start its tool on a loaded machine.
    timeouts = (16.0, 24.0, 32.0) if rig.backend == "opencode" else STOP_TIMEOUTS
    for timeout in timeouts:
        agent = rig.agent(tools=True, timeout=timeout)
        result, events, sleeper = _run_watching_for_sleep(agent, SLEEP_PROMPTS[rig.backend])
        assert result["status"] == 124, explain(result, events)
        assert result["stop_reason"] == "timeout" and result["error"] == "timeout"
        assert_nothing_left(events.run_id())
        assert is_reaped(result["pid"])
        if sleeper is not None:
            break
    else:
        pytest.fail(f"the CLI never started `{SLEEP_COMMAND}` within {timeouts} s")
    assert result["tool_calls"] >= 1 or rig.backend == "opencode", explain(result, events)
    assert _gone(sleeper), f"{SLEEP_COMMAND} (pid {sleeper.pid}) survived the run"


def test_sigterm_without_a_result_is_a_failure(any_rig: Rig) -> None:
    """Someone else SIGTERMs the CLI in the middle of the tool: whatever it does then (gemini
    exits 0 without its result line, qwen 130, claude 143, opencode may ignore it until our
    timeout), the run is a failure, not a success, and nothing of it is left."""
    rig = any_rig
    agent = rig.agent(tools=True, timeout=45.0)
    result, events, sleeper = _run_watching_for_sleep(
        agent, SLEEP_PROMPTS[rig.backend], sigterm=True
    )
    assert sleeper is not None, f"the CLI never started `{SLEEP_COMMAND}`: " + explain(result)
    assert result["status"] != 0 and result["is_error"] is True, explain(result, events)
    assert result["completed"] is False, explain(result)
    assert result["failure"] is not None, explain(result)
    if rig.backend == "gemini":
        # gemini's answer to SIGTERM: exit 0 and no result line.
        assert result["exit_code"] == 0 and result["error"] == "incomplete", explain(result)
    if rig.backend == "qwen":
        # One process (its relaunch off): it cancels its tool and exits 130 by itself.
        assert result["exit_code"] == 130 and result["signal"] is None, explain(result)
    assert_nothing_left(events.run_id())
    assert _gone(sleeper), f"{SLEEP_COMMAND} (pid {sleeper.pid}) survived the run"
