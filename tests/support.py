"""Shared test helpers: fake CLIs, their scripts, and process-leak checks."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import psutil

from coding_genesis import CodingGenesisAgent, Decision, Event, Observer
from coding_genesis._supervision.childenv import RUN_MARKER_ENV
from coding_genesis._util.schema import OutputSchema
from coding_genesis.approval import ApprovalRequest
from coding_genesis.control import Opening
from coding_genesis.hooks import HookInput, HookResult
from coding_genesis.request import Request

#: Set in this test session's environment and inherited by every process it
#: starts, so leak checks never touch another session's processes.
SESSION_ENV = "GENESIS_TEST_SESSION"
SESSION_ID = os.environ.setdefault(SESSION_ENV, uuid.uuid4().hex)

FAKES = Path(__file__).parent / "fakes"

#: The keys of spec 003's error context, which every failed response carries.
CONTEXT_KEYS = {
    "failed_node",
    "error_type",
    "error_detail",
    "user_hint",
    "degraded_results",
    "available_data",
    "unavailable_data",
    "can_retry",
    "retry_suggestion",
}
FAKE_BIN = FAKES / "bin"
RECORDINGS = FAKES / "recordings"

T = TypeVar("T")


def present(value: T | None) -> T:
    """``value``, asserted present: a response's optional part (``usage``,
    ``worktree``, ``failure``...) that the test expects there."""
    assert value is not None, "expected a value, got None"
    return value


def _refuse(request: ApprovalRequest) -> Decision:
    return Decision.deny("no approver in this test")


def _observe(event: HookInput) -> HookResult:
    return HookResult()


def given_session(opening: Opening) -> str | None:
    """The conversation id a claude session's command gives the CLI
    (``--session-id=``; None when it resumes one): what its Ready names."""
    given = [a.split("=", 1)[1] for a in opening.command.args if a.startswith("--session-id=")]
    return given[0] if given else None


def cli_request(
    prompt: str = "",
    cwd: str = "/w",
    *,
    approvals: bool = False,
    hooks: Iterable[str] = (),
    hook_wait: float | None = None,
    output_schema: Mapping[str, Any] | None = None,
    **fields: Any,
) -> Request:
    """A request as a backend's command or a control protocol's codec is
    handed one, spelled as their tests need it: ``approvals`` gives it an
    approver (one that refuses), ``hooks`` a hook for each event named,
    ``hook_wait`` the hook and approval timeouts that make the CLI wait that
    long for one hook point; ``output_schema`` is taken as it is (a codec's
    test may give one the door would refuse); sequences become tuples."""
    if approvals:
        fields["approver"] = _refuse
    if hooks:
        fields["hooks"] = {event: (_observe,) for event in hooks}
    if hook_wait is not None:
        if approvals:
            fields["approval_timeout"] = 1.0
        fields["hook_timeout"] = hook_wait - 5.0 - (1.0 if approvals else 0.0)
    if output_schema is not None:
        fields["output_schema"] = OutputSchema(output_schema)
    for name in ("extra_args", "tools", "setting_sources", "stop_signals", "env_allow"):
        if isinstance(fields.get(name), list):
            fields[name] = tuple(fields[name])
    request = Request(prompt, cwd, **fields)
    assert hook_wait is None or request.hook_wait == hook_wait, request.hook_wait
    return request


class QuietObserver:
    """A run observer that does nothing: tests subclass it and override the
    hooks they probe (``start`` returns the observer itself)."""

    def start(self, run: Any) -> Any:
        return self

    def event(self, event: Any) -> None:
        pass

    def stdout(self, chunk: bytes) -> None:
        pass

    def flush(self) -> None:
        pass

    def response_fields(self) -> dict[str, Any]:
        return {}

    def finish(self, response: Any) -> None:
        pass


@dataclass
class FakeCLI:
    """One fake CLI set-up: its script file, its record file, its mark."""

    tmp: Path
    flavour: str = "claude"
    mark: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __post_init__(self) -> None:
        self.script_file = self.tmp / f"script-{self.mark}.json"
        self.record_file = self.tmp / f"record-{self.mark}.jsonl"
        self.script([{"echo_prompt": True}])

    @property
    def path(self) -> str:
        return str(FAKE_BIN / self.flavour)

    def script(self, steps: list[dict[str, Any]]) -> None:
        self.script_file.write_text(json.dumps(steps))

    def env(self) -> dict[str, str]:
        return {
            "FAKE_CLI_SCRIPT_FILE": str(self.script_file),
            "FAKE_CLI_RECORD": str(self.record_file),
            "FAKE_CLI_MARK": self.mark,
        }

    def records(self) -> list[dict[str, Any]]:
        if not self.record_file.exists():
            return []
        return [
            json.loads(line) for line in self.record_file.read_text().splitlines() if line.strip()
        ]

    def agent(self, **kwargs: Any) -> CodingGenesisAgent:
        kwargs.setdefault("grace", 0.5)
        kwargs.setdefault("timeout", 10.0)
        env = {**self.env(), **kwargs.pop("env", {})}
        return CodingGenesisAgent(self.flavour, cli_path=self.path, env=env, **kwargs)


class EventLog:
    """Subscribes to an agent and keeps its events as dicts."""

    def __init__(self, agent: CodingGenesisAgent) -> None:
        self.events: list[dict[str, Any]] = []
        self.unsubscribe = agent.subscribe(self._add)

    def _add(self, event: Event) -> None:
        self.events.append(event.to_dict())

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    def states(self) -> list[str]:
        return [e["state"] for e in self.of("state")]


class Ended(Observer):
    """The key of every session that ended (a pool closes each it opened)."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def session_ended(self, session: str, summary: Mapping[str, Any]) -> None:
        self.keys.append(session)


def marked_processes(
    markers: Iterable[str] = (), env_names: Iterable[str] = (RUN_MARKER_ENV, "FAKE_CLI_MARK")
) -> list[psutil.Process]:
    """Processes of this test session carrying one of our markers (not us, not our ancestors)."""
    wanted = set(markers)
    names = tuple(env_names)
    me = os.getpid()
    ancestors = {p.pid for p in psutil.Process(me).parents()}
    found = []
    for proc in psutil.process_iter():
        if proc.pid == me or proc.pid in ancestors:
            continue
        try:
            if proc.uids().real != os.getuid():
                continue
            env = proc.environ()
        except (psutil.Error, OSError):
            continue
        if env.get(SESSION_ENV) != SESSION_ID:
            continue
        for name in names:
            value = env.get(name)
            if value is not None and (not wanted or value in wanted):
                found.append(proc)
                break
    return found


def zombie_children() -> list[psutil.Process]:
    out = []
    for child in psutil.Process().children():
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                out.append(child)
        except psutil.Error:
            continue
    return out


def leaked_processes(wait: float = 1.0) -> list[str]:
    """Describe processes of runs still around after ``wait`` seconds (then kill them)."""
    deadline = time.monotonic() + wait
    while True:
        procs = marked_processes()
        zombies = zombie_children()
        if (not procs and not zombies) or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    described = []
    for proc in procs:
        try:
            described.append(f"{proc.pid} {proc.status()} {' '.join(proc.cmdline())[:120]}")
            proc.send_signal(signal.SIGKILL)
        except psutil.Error:
            continue
    for zombie in zombies:
        described.append(f"{zombie.pid} zombie child")
        with contextlib.suppress(ChildProcessError):
            os.waitpid(zombie.pid, os.WNOHANG)
    return described


def is_reaped(pid: int) -> bool:
    """True when ``pid`` is no unreaped child of ours and is not a zombie."""
    try:
        _done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    else:
        return False  # it was our child and still waiting to be reaped (or running)
    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE or proc.ppid() != os.getpid()
    except psutil.NoSuchProcess:
        return True


async def poll_until(predicate: Callable[[], bool], limit: float = 30.0) -> bool:
    """Check ``predicate`` every 50 ms for up to ``limit`` seconds (the process
    table has no event to wait on); return its last value."""
    import anyio

    with anyio.move_on_after(limit):
        while not predicate():  # noqa: ASYNC110 - polling the process table
            await anyio.sleep(0.05)
    return predicate()


#: Set on a Ray cluster started by a test: every Ray process inherits it.
RAY_MARK_ENV = "GENESIS_TEST_RAY_MARK"


def wait_ended(procs: Iterable[psutil.Process], limit: float = 30.0) -> list[str]:
    """Wait until each process has ended, reaping those that became our zombies;
    describe (and kill) any still running after ``limit`` seconds.

    A test process that ran an agent is a child subreaper, so the processes of a
    Ray cluster it started (workers outliving their raylet) end up as its children.
    """
    pending = list(procs)
    deadline = time.monotonic() + limit
    while pending:
        still = []
        for proc in pending:
            try:
                status = proc.status()
                ours = proc.ppid() == os.getpid()
            except psutil.Error:
                continue  # gone (and reaped by someone)
            if status == psutil.STATUS_ZOMBIE:
                if ours:
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(proc.pid, os.WNOHANG)
                        continue
                still.append(proc)
            else:
                still.append(proc)
        pending = still
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    described = []
    for proc in pending:
        with contextlib.suppress(psutil.Error):
            described.append(f"{proc.pid} {proc.status()} {' '.join(proc.cmdline())[:120]}")
            proc.kill()
    return described


#: Runs a command as a child subreaper and waits for every descendant it
#: inherits, so a command's orphans (a Ray cluster's) never become ours.
SUBREAPER_WRAPPER = """
import ctypes, os, subprocess, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
code = subprocess.call(sys.argv[1:])
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
sys.exit(code)
"""


def assert_one_truth(response: Mapping[str, Any]) -> bool:
    """Rule 4 of the redesign: for a failed response, ``failure.retryable``,
    ``error_context.can_retry``, the report's "Retryable:" line and whether
    ``RetryPolicy.default()`` retries it on a first attempt all agree (and
    ``suggested_actions`` is one list, the escalation's included).  Returns the
    one answer."""
    from coding_genesis._failures.report import parse_failure_report
    from coding_genesis.retry import Action, RetryPolicy

    failure = response["failure"]
    answer = failure["retryable"]
    assert isinstance(answer, bool), failure
    assert failure["retryable_reason"], failure
    assert failure["suggested_retry"] is answer
    assert response["error_context"]["can_retry"] is answer, response["error_context"]
    report = response["failure_report"]
    assert f"\nRetryable: {'Yes' if answer else 'No'}\n" in report, report
    assert f"<retryable>{'true' if answer else 'false'}</retryable>" in report
    record = parse_failure_report(report)
    assert record.retryable is answer
    decision = RetryPolicy.default().decide(record, retries_done=0, timeout_s=60.0)
    assert (decision.action is Action.RETRY) is answer, (failure, decision)
    escalation = response.get("escalation")
    if escalation is not None:
        assert escalation["suggested_actions"] == failure["suggested_actions"]
    for entry in response.get("retry_history") or ():
        if "suggested_actions" in entry:
            assert entry["suggested_actions"] == failure["suggested_actions"]
    return bool(answer)


def exits_within(pid: int, within: float) -> bool:
    """True once ``pid`` has exited (a zombie counts: it runs nothing) within the limit."""
    deadline = time.monotonic() + within
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def interrupt_once_running(proc: Any, runs: int, timeout: float = 30.0) -> tuple[str, str]:
    """Ctrl-C ``proc`` (a ``Popen`` with text pipes) once ``runs`` marked
    processes run; its (stdout, stderr).  It is killed if it outlives the test."""
    try:
        deadline = time.monotonic() + timeout
        while len(marked_processes()) < runs and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(marked_processes()) == runs
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return str(out), str(err)


def recorded_events(run_dir: Path, *, stamps: bool = False) -> list[dict[str, Any]]:
    """A transcript's events as ``genesis show --events`` gives them: the
    runner's own from events.jsonl, the CLI's decoded from the recorded stdout.
    Without ``stamps``, ``seq``/``ts``/``timestamp`` are left out (decoded
    events carry their attempt's seq and an estimated time: ``ts_estimated``)."""
    from coding_genesis._observers.records import read_run
    from coding_genesis.backends import translator_for

    record = read_run(run_dir)
    assert record is not None, f"{run_dir} is no run directory"
    out = []
    for event, estimated in record.timed_events(translator_for):
        d = event.to_dict()
        if not stamps:
            for key in ("seq", "ts", "timestamp"):
                d.pop(key, None)
        elif estimated:
            d["ts_estimated"] = True
        out.append(d)
    return out


class Scripted:
    """An approver answering with ``decisions`` in order (allow once they are
    used up), remembering each request it was asked (``asked``)."""

    def __init__(self, *decisions: Decision) -> None:
        self.asked: list[ApprovalRequest] = []
        self._left = iter(decisions)

    def __call__(self, request: ApprovalRequest) -> Decision:
        self.asked.append(request)
        return next(self._left, Decision.allow())
