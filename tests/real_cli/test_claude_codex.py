"""The REAL ``claude`` and ``codex`` CLIs, run through ``CodingGenesisAgent`` against our fake model
server (``tests/fakes/model_server.py``, scenarios in ``tests/fakes/MODEL_SERVER.md``).

Each test skips, with the reason, only when its CLI is not installed (``real_claude`` /
``real_codex`` fixtures: ``$GENESIS_*_PATH``, ``<repo>/.tools/node_modules/.bin``, ``PATH``);
``.ci/run`` installs both, so in CI they run.

The agent gets everything CLI-specific through its own ``env=`` / ``options=`` arguments, never
through the test process's environment: that is what a user of the library does, and it is what
proves that ``env=`` is applied after the backend strips inherited ``CLAUDE_CODE_*`` variables.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from coding_genesis import CodingGenesisAgent, Event, RunStartedEvent, retry
from coding_genesis._supervision.childenv import RUN_MARKER_ENV
from coding_genesis._util.redact import MASK
from coding_genesis.request import RetrySetting
from tests.fakes.model_server import (
    DEFAULT_TEXT,
    TOOL_DONE_PREFIX,
    FakeModelServer,
    sleep_command,
)
from tests.fakes.real_cli import (
    claude_env,
    clean_env,
    codex_env,
    write_codex_home,
)
from tests.support import is_reaped, marked_processes

pytestmark = pytest.mark.timeout(90)

#: Agent timeout for runs that should finish on their own (a real CLI takes ~1-3 s here).
RUN_TIMEOUT = 60.0
#: The long tool command, the same for every CLI. Not a bare ``sleep 600``: claude 2.1.330
#: refuses that ("Blocked: standalone sleep 600 ..."). It runs ``python3`` without asking because
#: the agent's ``options=`` allow Bash (``--allowedTools Bash``); without that claude 2.1.330
#: answers "This command requires approval".
SLEEP_COMMAND = sleep_command(600)
#: The process that command starts, as its command line reads.
SLEEP_ARGV = ["python3", "-c", "import time; time.sleep(600)"]
#: Agent timeouts that must stop a CLI in the middle of ``SLEEP_COMMAND``, tried in turn while the
#: CLI was too slow to even start the command before the timeout (a loaded machine). All stay
#: below the 30 s for which codex's exec_command waits on a command before it yields ("Process
#: running with session ID ..."; after that the fake model ends the turn and codex exits by
#: itself), and below the 120 s limit of claude's Bash tool.
STOP_TIMEOUTS = (8.0, 16.0, 24.0)
#: ``SLEEP_COMMAND`` through each CLI's shell tool (codex: ask for the longest yield).
SLEEP_PROMPTS = {
    "claude": f"SCENARIO:bash {SLEEP_COMMAND}",
    "codex": "SCENARIO:tool exec_command "
    + json.dumps({"cmd": SLEEP_COMMAND, "yield_time_ms": 30000}),
}


@pytest.fixture(autouse=True)
def hermetic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No real credential, endpoint or parent Claude Code session leaks in from the caller."""
    keep = clean_env(os.environ)
    for name in list(os.environ):
        if name not in keep:
            monkeypatch.delenv(name)


@dataclass
class Rig:
    """One CLI, one fake server, one working directory; builds agents wired to them."""

    backend: str
    cli: str
    server: FakeModelServer
    tmp: Path
    work: Path = field(init=False)

    def __post_init__(self) -> None:
        self.work = self.tmp / "work"
        self.work.mkdir()

    def env(self, **extra: str) -> dict[str, str]:
        """What the agent's ``env=`` gets: the CLI's settings for the fake server, nothing else."""
        if self.backend == "claude":
            # CLAUDE_CODE_MAX_RETRIES=1 keeps API-error runs short. The "quiet" settings also
            # switch off claude's side requests (which would otherwise take the fake's
            # "...once" failure in place of the main request).
            return claude_env(self.server.url, self.tmp / "home", base_env={}, extra=extra)
        home = write_codex_home(self.tmp / "codex_home", self.server.url)
        return codex_env(home, base_env={}, extra=extra)

    def options(self, tools: bool) -> dict[str, Any]:
        if not tools:
            return {}
        if self.backend == "claude":
            return {"allowed_tools": ["Bash"], "permission_mode": "acceptEdits"}
        return {"sandbox": "workspace-write"}

    def agent(
        self,
        *,
        tools: bool = False,
        timeout: float = RUN_TIMEOUT,
        env: dict[str, str] | None = None,
        stop_signals: tuple[int, ...] = (signal.SIGTERM,),
        retry: RetrySetting = None,
    ) -> CodingGenesisAgent:
        return CodingGenesisAgent(
            self.backend,
            cli_path=self.cli,
            cwd=self.work,
            timeout=timeout,
            grace=1.0,
            stop_signals=stop_signals,
            retry=retry,
            env=self.env() if env is None else env,
            options=self.options(tools),
        )

    def agent_with(self, **settings: Any) -> CodingGenesisAgent:
        """An agent with any settings: a 60 s timeout, a 2 s grace and this rig's
        CLI, directory and environment unless ``settings`` say otherwise."""
        defaults: dict[str, Any] = {"timeout": 60.0, "grace": 2.0}
        settings = {**defaults, **settings}
        settings["env"] = settings.get("env") or self.env()
        return CodingGenesisAgent(self.backend, cli_path=self.cli, cwd=self.work, **settings)

    def session_header(self) -> str:
        return "x-claude-code-session-id" if self.backend == "claude" else "session-id"


@pytest.fixture(params=["claude", "codex"])
def rig(request: pytest.FixtureRequest, model_server: FakeModelServer, tmp_path: Path) -> Rig:
    cli = request.getfixturevalue(f"real_{request.param}")  # skips when not installed
    return Rig(request.param, cli, model_server, tmp_path)


@pytest.fixture
def claude_rig(real_claude: str, model_server: FakeModelServer, tmp_path: Path) -> Rig:
    return Rig("claude", real_claude, model_server, tmp_path)


@pytest.fixture
def codex_rig(real_codex: str, model_server: FakeModelServer, tmp_path: Path) -> Rig:
    return Rig("codex", real_codex, model_server, tmp_path)


class Recorder:
    """Every event the agent publishes, as ``Event.to_dict()``."""

    def __init__(self, agent: CodingGenesisAgent) -> None:
        self.events: list[dict[str, Any]] = []
        self._unsubscribe = agent.subscribe(self._add)

    def _add(self, event: Event) -> None:
        self.events.append(event.to_dict())

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    def run_id(self) -> str:
        (started,) = self.of("run_started")
        return str(started["run_id"])


def run(agent: CodingGenesisAgent, prompt: str) -> tuple[dict[str, Any], Recorder]:
    events = Recorder(agent)
    result = dict(agent.run_sync(prompt))
    return result, events


def explain(result: Mapping[str, Any], events: Recorder | None = None) -> str:
    """Failure context: the response without its bulky parts, and the event types."""
    shown = {k: v for k, v in result.items() if k not in ("usage",)}
    text = json.dumps(shown, indent=1, default=str)[:4000]
    if events is not None:
        text += "\nevents: " + ", ".join(e["type"] for e in events.events)
    return text


def processes_of_run(run_id: str) -> list[psutil.Process]:
    """Live processes carrying the run's ``GENESIS_RUN_ID`` marker (including setsid escapees)."""
    return marked_processes([run_id], env_names=(RUN_MARKER_ENV,))


def assert_session_id(rig: Rig, result: dict[str, Any], events: Recorder) -> None:
    """``session_id`` is the id of the CLI's init / thread.started line, and the one it used."""
    sid = result["session_id"]
    assert isinstance(sid, str) and sid, explain(result, events)
    assert [e["session_id"] for e in events.of("session")] == [sid], explain(result, events)
    sent = {r.headers.get(rig.session_header()) for r in rig.server.model_requests()}
    assert sent == {sid}, (sent, sid)


def assert_nothing_left(run_id: str) -> None:
    assert not processes_of_run(run_id), [p.pid for p in processes_of_run(run_id)]


# ------------------------------------------------------------------------------ both CLIs


def test_plain_answer(rig: Rig) -> None:
    agent = rig.agent()
    result, events = run(agent, "SCENARIO:text")
    assert result["status"] == 0, explain(result, events)
    assert result["message"] == DEFAULT_TEXT
    assert result["tool_calls"] == 0 and result["tool_usage"] == {}
    assert result["backend"] == rig.backend and result["error"] is None
    assert result["completed"] is True and result["exit_code"] == 0
    assert_session_id(rig, result, events)
    assert [e["text"] for e in events.of("text")] == [DEFAULT_TEXT]
    assert len(rig.server.model_requests()) == 1
    assert agent.state.value == "READY"
    assert_nothing_left(events.run_id())


def test_tool_call(rig: Rig) -> None:
    agent = rig.agent(tools=True)
    result, events = run(agent, "SCENARIO:bash echo hi")
    assert result["status"] == 0, explain(result, events)
    tool = "Bash" if rig.backend == "claude" else "command_execution"
    assert result["tool_calls"] == 1 and result["tool_usage"] == {tool: 1}, explain(result)
    assert result["last_successful_tool"] == tool and result["failed_tools"] == []
    assert result["message"].startswith(TOOL_DONE_PREFIX), explain(result)
    output = result["message"].removeprefix(TOOL_DONE_PREFIX)
    assert "hi" in output.split(), explain(result)
    (call,) = events.of("tool_call")
    if rig.backend == "claude":
        assert call["input"]["command"] == "echo hi", call
    else:  # codex shows the shell it used: /bin/bash -lc 'echo hi'
        assert "echo hi" in call["input"]["command"], call
    (tool_result,) = events.of("tool_result")
    assert tool_result["id"] == call["id"] and tool_result["is_error"] is False
    assert_session_id(rig, result, events)
    assert len(rig.server.model_requests()) == 2  # the call, then the answer to its output
    assert_nothing_left(events.run_id())


@pytest.mark.parametrize(
    ("code", "category", "explains"),
    [
        # claude's 401 is stopped at its first retry event (issue 28): its words are those of
        # the event, ``authentication_failed``.
        (401, "auth", {"claude": "authentication_failed", "codex": "Incorrect API key"}),
        (429, "rate_limit", {"claude": "rate limit", "codex": "Too Many Requests"}),
    ],
)
def test_api_error(rig: Rig, code: int, category: str, explains: dict[str, str]) -> None:
    agent = rig.agent()
    result, events = run(agent, f"SCENARIO:{code}")
    assert result["status"] != 0 and result["is_error"] is True, explain(result, events)
    assert str(code) in result["message"], explain(result)
    assert explains[rig.backend] in result["message"], explain(result)
    assert result["failure"]["category"] == category, explain(result)
    assert result["tool_calls"] == 0
    assert_session_id(rig, result, events)
    statuses = [r.status for r in rig.server.model_requests()]
    assert statuses and set(statuses) == {code}, statuses
    if rig.backend == "claude" and code == 401:
        # Issue 28: stopped on the first retry event, before claude's second request.
        assert result["stopped_on"] == "auth" and result["cli_retries"] == 1, explain(result)
        assert len(statuses) == 1, explain(result)
        assert result["api_error_status"] == code
    elif rig.backend == "claude":
        # CLAUDE_CODE_MAX_RETRIES=1 (given through env=) reached the CLI: one retry, not ten.
        assert result["cli_retries"] == 1 and len(statuses) == 2, explain(result)
        assert result["api_error_status"] == code
    assert events.of("run_finished")[-1]["status"] == result["status"]
    assert_nothing_left(events.run_id())


def test_file_write(rig: Rig) -> None:
    agent = rig.agent(tools=True)
    result, events = run(agent, "SCENARIO:write sub/out.txt hello file")
    assert result["status"] == 0, explain(result, events)
    assert result["files_modified"] == ["sub/out.txt"], explain(result)
    assert (rig.work / "sub" / "out.txt").read_text() == "hello file\n"
    tool = "Write" if rig.backend == "claude" else "file_change"
    assert result["tool_usage"] == {tool: 1}, explain(result)
    assert result["message"].startswith(TOOL_DONE_PREFIX)
    assert_session_id(rig, result, events)
    assert_nothing_left(events.run_id())


# ------------------------------------------------------------------------------ CLI's own retries


def test_claude_recovers_from_one_429_by_itself(claude_rig: Rig) -> None:
    """Issue 5: the CLI retried internally and succeeded. With our retry policy on, the response
    reports the CLI's retry and the agent does not retry on top of it."""
    agent = claude_rig.agent(retry="default")
    with retry.testing() as clock:  # a retry of ours would not wait for real (and is recorded)
        result, events = run(agent, "SCENARIO:429once")
    assert result["status"] == 0, explain(result, events)
    assert result["message"] == DEFAULT_TEXT
    assert result["cli_retries"] >= 1, explain(result, events)
    (cli_retry,) = events.of("cli_retry")
    assert cli_retry["error_status"] == 429
    assert [r.status for r in claude_rig.server.model_requests()] == [429, 200]
    # coding-genesis did not retry on top of the CLI's own recovery: one attempt, one process.
    assert result.get("retry_count", 0) == 0, explain(result)
    assert result["attempts"] == 1 and result["retry_history"] == []
    assert [e["phase"] for e in events.of("attempt")] == ["started", "finished"]
    assert len(events.of("run_started")) == 1 and clock.sleeps == []
    assert_session_id(claude_rig, result, events)


def test_codex_recovers_from_one_429_by_itself(codex_rig: Rig) -> None:
    agent = codex_rig.agent()
    result, events = run(agent, "SCENARIO:429once")
    assert result["status"] == 0, explain(result, events)
    assert result["message"] == DEFAULT_TEXT
    # codex reports its reconnect as an `error` line, which is not fatal.
    assert any("Reconnecting" in e for e in result["cli_errors"]), explain(result)
    assert [r.status for r in codex_rig.server.model_requests()] == [429, 200]
    assert len(events.of("run_started")) == 1
    assert result.get("retry_count", 0) == 0, explain(result)


# ------------------------------------------------------------------------------ whole-tree stop


@dataclass
class Sleeper:
    pid: int
    create_time: float
    sid: int
    cli_sid: int


def is_sleeper(cmdline: list[str]) -> bool:
    """``SLEEP_ARGV``, whatever path ``python3`` was resolved to (a pyenv shim execs the real
    interpreter by its full path, e.g. ``/root/.pyenv/versions/3.11.7/bin/python3``)."""
    return (
        len(cmdline) == len(SLEEP_ARGV)
        and os.path.basename(cmdline[0]).startswith("python3")
        and cmdline[1:] == SLEEP_ARGV[1:]
    )


def _find_sleeper(run_id: str, cli_pid: int) -> Sleeper | None:
    for proc in processes_of_run(run_id):
        try:
            if is_sleeper(proc.cmdline()):
                return Sleeper(
                    proc.pid, proc.create_time(), os.getsid(proc.pid), os.getsid(cli_pid)
                )
        except (psutil.Error, OSError):
            continue
    return None


def _gone(sleeper: Sleeper) -> bool:
    try:
        proc = psutil.Process(sleeper.pid)
        alive = proc.create_time() == sleeper.create_time and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        alive = False
    return not alive and is_reaped(sleeper.pid)


@pytest.mark.parametrize(
    "stop_signals",
    [
        pytest.param((signal.SIGTERM,), id="SIGTERM-grace-SIGKILL"),
        # The CLI gets no chance to clean up its tools: only our whole-tree stop can find them.
        pytest.param((), id="SIGKILL-only"),
    ],
)
def test_timeout_mid_tool_stops_the_whole_tree(rig: Rig, stop_signals: tuple[int, ...]) -> None:
    """Issue 3: the CLI is stopped by our timeout while its shell tool runs ``SLEEP_COMMAND`` in a
    session of its own; afterwards no process of the run exists."""
    for timeout in STOP_TIMEOUTS:
        agent = rig.agent(tools=True, timeout=timeout, stop_signals=stop_signals)
        result, events, sleeper = _run_watching_for_sleep(agent, SLEEP_PROMPTS[rig.backend])
        # Whatever the CLI had reached, our timeout stopped it and nothing of the run is left.
        assert result["status"] == 124, explain(result, events)
        assert "timed out" in result["message"], explain(result)
        assert result["stop_reason"] == "timeout" and result["error"] == "timeout"
        assert agent.state.value == "READY"
        assert_nothing_left(events.run_id())
        assert is_reaped(result["pid"])
        if sleeper is not None:
            break
        # The CLI had not started the command yet (a loaded machine): give it longer.
    else:
        pytest.fail(f"the CLI never started `{SLEEP_COMMAND}` within {STOP_TIMEOUTS} s")

    expected = [signal.Signals(s).name for s in stop_signals]
    assert result["signals_sent"][: len(expected)] == expected, explain(result)
    if not stop_signals:
        assert result["signals_sent"][0] == "SIGKILL" and result["signal"] == "SIGKILL"
    assert result["tool_calls"] >= 1, explain(result, events)
    calls = events.of("tool_call")
    assert calls and SLEEP_COMMAND in calls[0]["input"]["command"], calls
    if rig.backend == "claude":
        # Claude's Bash tool runs the command under setsid: out of the CLI's session and group.
        assert sleeper.sid != sleeper.cli_sid, sleeper
    assert _gone(sleeper), f"{SLEEP_COMMAND} (pid {sleeper.pid}) survived the run"


def _run_watching_for_sleep(
    agent: CodingGenesisAgent, prompt: str, *, sigterm: bool = False
) -> tuple[dict[str, Any], Recorder, Sleeper | None]:
    """Run ``prompt`` while polling for the run's ``SLEEP_ARGV`` process (by its run marker);
    with ``sigterm``, send the CLI a SIGTERM of our own (not the agent's) once it is found."""
    events = Recorder(agent)
    seen: list[Sleeper] = []

    async def main() -> dict[str, Any]:
        spawned = anyio.Event()
        started: dict[str, Any] = {}

        def on_event(event: Event) -> None:
            if isinstance(event, RunStartedEvent):
                started.update(run_id=event.run_id, pid=event.pid)
                spawned.set()

        async def watch() -> None:
            await spawned.wait()
            while not seen:
                found = await anyio.to_thread.run_sync(
                    _find_sleeper, started["run_id"], started["pid"]
                )
                if found is not None:
                    seen.append(found)
                    if sigterm:
                        os.kill(started["pid"], signal.SIGTERM)
                    return
                await anyio.sleep(0.1)

        agent.subscribe(on_event)
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            result = dict(await agent.run(prompt))
            tg.cancel_scope.cancel()
        return result

    result = anyio.run(main)
    return result, events, seen[0] if seen else None


# ------------------------------------------------------------------------------ claude environment


@pytest.mark.parametrize("where", ["env-argument", "parent-environment"])
def test_api_key_never_reported(
    claude_rig: Rig, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The key reaches the CLI (its Bash tool even echoes it back), but no response field and
    no published event carries it."""
    secret = f"sk-ant-genesis-test-{uuid.uuid4().hex}"
    env = claude_rig.env()
    if where == "env-argument":
        env["ANTHROPIC_API_KEY"] = secret
    else:
        del env["ANTHROPIC_API_KEY"]
        monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    agent = claude_rig.agent(tools=True, env=env)
    result, events = run(agent, "SCENARIO:bash echo key=$ANTHROPIC_API_KEY")
    assert result["status"] == 0, explain(result, events)
    # The tool printed the key; it was masked, not dropped: the test would catch a leak.
    assert result["message"] == f"{TOOL_DONE_PREFIX}key={MASK}", explain(result)
    (tool_result,) = events.of("tool_result")
    assert MASK in tool_result["output"]
    assert secret not in json.dumps(result, default=str)
    for event in events.events:
        assert secret not in json.dumps(event, default=str), event
    assert agent.last_result is not None
    assert secret not in agent.last_result.model_dump_json()


@dataclass
class CliEnv:
    """The CLI process's environment, read from /proc as soon as it was spawned."""

    environ: dict[str, str] = field(default_factory=dict)

    def capture(self, agent: CodingGenesisAgent) -> None:
        def on_event(event: Event) -> None:
            if not isinstance(event, RunStartedEvent):
                return
            proc = psutil.Process(event.pid)
            # Right after exec, /proc/PID/environ can still read empty for an instant (the
            # kernel sets the new image's environment up after the exec has been reported).
            deadline = time.monotonic() + 2.0
            while RUN_MARKER_ENV not in self.environ and time.monotonic() < deadline:
                self.environ = proc.environ()
                time.sleep(0.001)

        agent.subscribe(on_event)


@pytest.fixture
def parent_claude_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller runs inside a Claude Code session: its variables are inherited."""
    monkeypatch.setenv("CLAUDECODE", "1")
    monkeypatch.setenv("CLAUDE_CODE_ENTRYPOINT", "cli")
    monkeypatch.setenv("CLAUDE_CODE_SSE_PORT", "41234")
    # User configuration, not session identity: it is kept (visible in the API request).
    monkeypatch.setenv("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "77")
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "7")


def test_inherited_claude_session_variables_are_stripped_user_config_kept(
    claude_rig: Rig, parent_claude_session: None
) -> None:
    agent = claude_rig.agent()
    cli_env = CliEnv()
    cli_env.capture(agent)
    result, events = run(agent, "SCENARIO:text")
    assert result["status"] == 0, explain(result, events)
    assert result["message"] == DEFAULT_TEXT
    assert cli_env.environ, "the CLI's environment was not captured"
    assert "CLAUDECODE" not in cli_env.environ
    assert "CLAUDE_CODE_ENTRYPOINT" not in cli_env.environ
    assert "CLAUDE_CODE_SSE_PORT" not in cli_env.environ
    assert cli_env.environ.get("CLAUDE_CODE_MAX_OUTPUT_TOKENS") == "77"
    (request,) = claude_rig.server.model_requests()
    assert request.body["max_tokens"] == 77  # the user's own setting reached the CLI


def test_env_argument_is_applied_after_the_strip(
    claude_rig: Rig, parent_claude_session: None
) -> None:
    env = claude_rig.env(CLAUDE_CODE_MAX_OUTPUT_TOKENS="55")
    agent = claude_rig.agent(env=env)
    cli_env = CliEnv()
    cli_env.capture(agent)
    result, events = run(agent, "SCENARIO:text")
    assert result["status"] == 0, explain(result, events)
    assert result["message"] == DEFAULT_TEXT
    assert "CLAUDECODE" not in cli_env.environ
    assert cli_env.environ.get("CLAUDE_CODE_MAX_RETRIES") == "1"  # env=, not the parent's 7
    assert cli_env.environ.get("CLAUDE_CODE_MAX_OUTPUT_TOKENS") == "55"
    (request,) = claude_rig.server.model_requests()
    assert request.body["max_tokens"] == 55
