"""Record the real ``claude`` speaking its control protocol with :class:`ClaudeControl`.

    .venv/bin/python -m tests.fakes.record_claude_control [NAME ...]

Drives the claude CLI (``.tools``, or ``$GENESIS_CLAUDE_PATH``) over plain pipes against
:mod:`tests.fakes.model_server`, with the codec of
``coding_genesis/backends/claude_control.py`` and a scripted approver, and writes each exchange
to ``recordings/twoway/claude_<NAME>.jsonl``: one object per line, ``{"dir": ">", "t", "obj"}``
(written to claude), ``{"dir": "<", "t", "obj"}`` (read from it), ``{"dir": "#", "note"}`` (what
the recorder saw: the approver's decisions, timings, files, leftover processes).  ``t`` is
seconds since the process started; the temporary directory is rewritten to ``/srv/rec``.

Not a test of the process layer: the session machinery is not used here (Popen is fine).
"""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coding_genesis.approval import ApprovalRequest, Decision
from coding_genesis.backends.claude import ClaudeBackend
from coding_genesis.control import (
    ControlProtocol,
    HookCall,
    Incoming,
    Outgoing,
    PermissionAsk,
    ProtocolFault,
    Ready,
    Reply,
    TurnEnded,
)
from coding_genesis.hooks import HookInput, HookResult
from coding_genesis.request import Request
from tests.fakes.model_server import FakeModelServer
from tests.fakes.real_cli import claude_env, find_claude, kill_marked, marked_processes
from tests.support import cli_request

OUT = Path(__file__).parent / "recordings" / "twoway"
SRV = "/srv/rec"
Approver = Callable[[ApprovalRequest], Decision]
Hooker = Callable[[HookInput], HookResult]


def allow(request: ApprovalRequest) -> Decision:
    return Decision.allow(reason="recorder allows")


@dataclass
class Recording:
    tmp: str
    lines: list[dict[str, Any]] = field(default_factory=list)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def add(self, entry: dict[str, Any]) -> None:
        self.lines.append(entry)

    def note(self, text: str) -> None:
        print("  #", text)
        self.add({"dir": "#", "note": text})

    def stop(self) -> None:
        """Kill what a failed scenario left running."""
        for proc in self.processes:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()

    def save(self, name: str) -> None:
        OUT.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(_trimmed(line)) + "\n" for line in self.lines)
        (OUT / f"claude_{name}.jsonl").write_text(text.replace(self.tmp, SRV), encoding="utf-8")


def _trimmed(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry with the long lists of claude's initialize answer (its slash
    commands, agents, models: 18 KB) cut to their first two items."""
    obj = entry.get("obj")
    if not isinstance(obj, dict) or not isinstance(obj.get("response"), dict):
        return entry
    response: dict[str, Any] = obj["response"]
    answer = response.get("response")
    if not isinstance(answer, dict) or not isinstance(answer.get("commands"), list):
        return entry
    cut = {k: v[:2] if isinstance(v, list) else v for k, v in answer.items()}
    return {**entry, "obj": {**obj, "response": {**response, "response": cut}}}


class Session:
    """One claude process driven with a protocol, every line recorded."""

    def __init__(
        self,
        rec: Recording,
        server: FakeModelServer,
        start: Request,
        approver: Approver = allow,
        marker: str = "genesis-rec",
        hooker: Hooker | None = None,
    ) -> None:
        self.rec, self.approver, self.hooker = rec, approver, hooker
        self.proto: ControlProtocol = ClaudeBackend().control()
        begun = self.proto.begin(start)
        spec = begun.command
        claude = find_claude()
        if claude is None:
            raise SystemExit("no claude CLI (set GENESIS_CLAUDE_PATH)")
        env = claude_env(server.url, Path(rec.tmp) / "home", marker=marker)
        env.update(spec.env)
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [claude, *spec.args],
            cwd=start.cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        rec.processes.append(self.proc)
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.session_id: str | None = None
        self.write(begun.greeting)
        self.until(lambda m: isinstance(m, Ready | ProtocolFault))

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                obj = json.loads(raw)
            except ValueError:
                obj = {"unparsed": raw.decode("utf-8", "replace")}
            self.lines.put(obj if isinstance(obj, dict) else {"unparsed": obj})
        self.lines.put(None)

    def write(self, objects: Sequence[Outgoing]) -> None:
        assert self.proc.stdin is not None
        for obj in objects:
            self.rec.add({"dir": ">", "t": self.now(), "obj": obj})
            self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def until(self, stop: Callable[[Incoming], bool], timeout: float = 60) -> Incoming | None:
        """Read, record and act on claude's lines until a meaning ``stop`` accepts."""
        deadline = time.monotonic() + timeout
        while True:
            obj = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            if obj is None:
                self.rec.note(f"claude closed stdout at {self.now()} s")
                return None
            self.rec.add({"dir": "<", "t": self.now(), "obj": obj})
            if obj.get("type") == "system" and isinstance(obj.get("session_id"), str):
                self.session_id = obj["session_id"]
            for meaning in self.proto.receive(obj):
                if isinstance(meaning, PermissionAsk):
                    decision = self.approver(meaning.request)
                    self.rec.note(
                        f"ask {meaning.request.tool} ({meaning.request.kind}, "
                        f"reason {meaning.request.reason!r}): {decision.option.value}"
                        + (" end_turn" if decision.end_turn else "")
                        + (" with new input" if decision.input is not None else "")
                    )
                    self.write(self.proto.answer(meaning, decision))
                elif isinstance(meaning, HookCall):
                    self._hook(meaning)
                elif isinstance(meaning, Reply):
                    self.write(meaning.objects)
                if isinstance(meaning, ProtocolFault | TurnEnded):
                    self.rec.note(f"{meaning!r} at {self.now()} s")
                if stop(meaning):
                    return meaning

    def _hook(self, call: HookCall) -> None:
        """The hooker's answer (what claude can apply of it), then the approver's."""
        result = self.hooker(call.input) if self.hooker is not None else HookResult()
        self.rec.note(f"hook {call.input.event} {call.input.tool or ''}: {result!r}")
        self.write(self.proto.answer_hook(call, result))
        if call.ask is not None and not result.block:
            request = call.ask.request
            if result.input is not None:
                request = ApprovalRequest(**{**_fields(request), "input": result.input})
            decision = self.approver(request)
            self.rec.note(f"ask {request.tool} after the hooks: {decision.option.value}")
            self.write(self.proto.answer(call.ask, decision))

    def turn(self, prompt: str, timeout: float = 60) -> Incoming | None:
        self.write(self.proto.begin_turn(prompt))
        return self.until(lambda m: isinstance(m, TurnEnded | ProtocolFault), timeout)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.write(self.proto.closing())
        self.proc.stdin.close()
        rc = self.proc.wait(20)
        while self.lines.get(timeout=5) is not None:
            pass
        assert self.proc.stderr is not None
        err = self.proc.stderr.read().decode("utf-8", "replace").strip()
        self.rec.note(f"stdin closed: exit {rc}" + (f", stderr {err[:300]!r}" if err else ""))


# -- the scenarios ----------------------------------------------------------------------


def _start(rec: Recording, **kw: Any) -> Request:
    work = Path(rec.tmp) / "work"
    work.mkdir(exist_ok=True)
    return cli_request(cwd=str(work), **kw)


def two_turns(rec: Recording, server: FakeModelServer) -> None:
    s = Session(rec, server, _start(rec))
    s.turn("SCENARIO:text first answer")
    s.turn("SCENARIO:text second answer")
    s.close()


def _write(rec: Recording, server: FakeModelServer, approver: Approver, name: str) -> None:
    s = Session(rec, server, _start(rec, approvals=True), approver)
    s.turn(f"SCENARIO:write {name} hello")
    path = Path(rec.tmp) / "work" / name
    content = path.read_text() if path.exists() else None
    rec.note(f"{name} after the turn: {content!r}")
    s.turn("SCENARIO:text the session goes on")
    s.close()


def write_approved(rec: Recording, server: FakeModelServer) -> None:
    _write(rec, server, allow, "approved.txt")


def write_refused(rec: Recording, server: FakeModelServer) -> None:
    _write(rec, server, lambda r: Decision.deny("no writes here"), "refused.txt")


def write_end_turn(rec: Recording, server: FakeModelServer) -> None:
    _write(rec, server, lambda r: Decision.deny("stop right there", end_turn=True), "ended.txt")


def write_changed_input(rec: Recording, server: FakeModelServer) -> None:
    def change(request: ApprovalRequest) -> Decision:
        return Decision.allow({**request.input, "content": "changed by the approver\n"})

    _write(rec, server, change, "changed.txt")


def echo(rec: Recording, server: FakeModelServer) -> None:
    s = Session(rec, server, _start(rec, approvals=True))
    s.turn("SCENARIO:bash echo hi")
    s.close()


def ask_without_approvals(rec: Recording, server: FakeModelServer) -> None:
    """No hook: claude asks (can_use_tool) only for what its rules do not allow."""
    asked: list[str] = []

    def deny(request: ApprovalRequest) -> Decision:
        asked.append(request.tool)
        end = len(asked) > 1
        return Decision.deny("not without an approver", end_turn=end)

    s = Session(rec, server, _start(rec, permissions="edit"), deny)
    s.turn("SCENARIO:bash echo unasked")
    s.turn("SCENARIO:sleep 1")
    s.turn("SCENARIO:sleep 2")
    s.close()


def interrupt(rec: Recording, server: FakeModelServer) -> None:
    marker = f"genesis-rec-{time.time_ns()}"
    s = Session(rec, server, _start(rec, approvals=True), marker=marker)
    s.write(s.proto.begin_turn("SCENARIO:sleep 600"))
    s.until(lambda m: isinstance(m, PermissionAsk))
    deadline = time.monotonic() + 15
    sleepers: list[int] = []
    while time.monotonic() < deadline and not sleepers:
        sleepers = [p for p in marked_processes(marker) if b"time.sleep" in _cmdline(p)]
        time.sleep(0.1)
    rec.note(f"sleeping python running: {bool(sleepers)} at {s.now()} s")
    asked = time.monotonic()
    s.write(s.proto.interrupt())
    s.until(lambda m: isinstance(m, TurnEnded | ProtocolFault))
    rec.note(f"turn ended {time.monotonic() - asked:.2f} s after the interrupt")
    time.sleep(1)
    alive = [p for p in sleepers if p in marked_processes(marker)]
    rec.note(f"sleeping python alive 1 s after the turn's end: {bool(alive)}")
    s.turn("SCENARIO:text after the interrupt")
    s.close()
    kill_marked(marker)


def _fields(request: ApprovalRequest) -> dict[str, Any]:
    return {name: getattr(request, name) for name in request.__dataclass_fields__}


def hooks(rec: Recording, server: FakeModelServer) -> None:
    """Every hook point: a changed command with context, a refused one (the
    approver not asked), a failed one, a turn's end kept going once, a
    compaction refused then let through."""
    ends: list[str] = []

    def hooker(hook: HookInput) -> HookResult:
        command = str(hook.input.get("command", ""))
        if hook.event == "pre_tool" and command.startswith("rm "):
            return HookResult(block=True, message="no rm here")
        if hook.event == "pre_tool" and command == "echo hi":
            return HookResult(input={**hook.input, "command": "echo changed"}, context="PRE-CTX")
        if hook.event == "post_tool":
            return HookResult(context=f"POST-CTX error={hook.error is not None}")
        if hook.event == "turn_end" and not ends:
            ends.append(hook.answer or "")
            return HookResult(block=True, message="SCENARIO:text kept going")
        if hook.event == "pre_compact" and hook.trigger == "manual" and len(ends) == 1:
            ends.append("compact refused")
            return HookResult(block=True, message="not now")
        return HookResult()

    events = frozenset({"pre_tool", "post_tool", "turn_end", "pre_compact"})
    start = _start(rec, approvals=True, hooks=events, hook_wait=95.0)
    s = Session(rec, server, start, hooker=hooker)
    s.turn("SCENARIO:bash echo hi")
    s.turn("SCENARIO:bash rm -rf x")
    s.turn("SCENARIO:bash ls /nonexistent-genesis-dir")
    s.turn("/compact")
    s.turn("/compact")
    last = server.model_requests()[-1].body.get("messages", [])
    rec.note(f"the compaction asked the model with {len(last)} messages")
    s.close()


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def resume(rec: Recording, server: FakeModelServer) -> None:
    first = Session(rec, server, _start(rec))
    first.turn("SCENARIO:text remember this")
    first.close()
    rec.note(f"second process: --resume={first.session_id}")
    second = Session(rec, server, _start(rec, resume=first.session_id))
    second.turn("SCENARIO:text resumed")
    messages = server.model_requests()[-1].body.get("messages", [])
    rec.note(f"the resumed turn sent {len(messages)} messages to the model")
    second.close()


def resume_unknown(rec: Recording, server: FakeModelServer) -> None:
    s = Session(rec, server, _start(rec, resume="0f0f0f0f-0000-4000-8000-000000000000"))
    s.close()


SCENARIOS: dict[str, Callable[[Recording, FakeModelServer], None]] = {
    "two_turns": two_turns,
    "write_approved": write_approved,
    "write_refused": write_refused,
    "write_end_turn": write_end_turn,
    "write_changed_input": write_changed_input,
    "echo": echo,
    "ask_without_approvals": ask_without_approvals,
    "interrupt": interrupt,
    "resume": resume,
    "resume_unknown": resume_unknown,
    "hooks": hooks,
}


def main(names: Sequence[str]) -> int:
    for name in names or SCENARIOS:
        print(name)
        with tempfile.TemporaryDirectory(prefix="genesis-rec-") as tmp, FakeModelServer() as srv:
            rec = Recording(tmp)
            try:
                SCENARIOS[name](rec, srv)
            finally:
                rec.stop()
            rec.save(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
