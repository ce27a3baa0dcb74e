"""Record the REAL ``codex app-server`` driven by our codec (``CodexControl``)
against the fake model server: ``python -m tests.fakes.record_codex_control [NAME ...]``.

Each scenario writes ``recordings/twoway/codex_NAME.jsonl``, one object a line:
``{"dir": ">", "t": s, "msg": {...}}`` (we wrote it), ``{"dir": "<", ...}`` (codex
wrote it), ``{"dir": "#", "t": s, "note": {...}}`` (what the recorder measured:
a turn's end, the model requests, a process that outlived a turn).  ``t`` is
seconds since the process started; the run's temporary directory reads
``/srv/run``.  This script plays the session (plain pipes, ``subprocess.Popen``):
it writes what the codec says, answers each approval request as the scenario
decides and ends a turn at ``TurnEnded``.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from coding_genesis.approval import Decision
from coding_genesis.backend import Translator
from coding_genesis.backends.codex_control import CodexControl
from coding_genesis.control import (
    FORWARD,
    Outgoing,
    PermissionAsk,
    ProtocolFault,
    Ready,
    Reply,
    TurnEnded,
)
from coding_genesis.events import Event
from coding_genesis.options import Permissions
from coding_genesis.request import Request
from tests.fakes.model_server import FakeModelServer
from tests.fakes.real_cli import (
    MARKER_ENV,
    codex_env,
    find_codex,
    kill_marked,
    marked_processes,
    repo_root,
    write_codex_home,
)
from tests.support import cli_request

__all__ = ["OUT", "SCENARIOS", "Session", "main"]

OUT = Path(__file__).parent / "recordings" / "twoway"
#: How long one turn may take before the recorder gives up.
TURN_TIMEOUT = 60.0

Decide = Callable[[PermissionAsk], Decision]
#: Called with the session after each message of a running turn (to interrupt, steer).
During = Callable[["Session", dict[str, Any]], None]


class Session:
    """One ``codex app-server`` process (``program``: the real one or the fake) driven by
    one :class:`CodexControl`; ``events`` are the running turn's, from its translator."""

    def __init__(
        self,
        program: str,
        start: Request,
        env: dict[str, str],
        stderr: Path,
        server: FakeModelServer | None = None,
    ) -> None:
        self.protocol = CodexControl()
        self.server = server
        self.marker = env.get(MARKER_ENV, "")
        self.lines: list[dict[str, Any]] = []
        self.start = start
        self.events: list[Event] = []
        self._translator: Translator | None = None
        self._asked = 0  # the model requests before the running turn
        self._began = 0.0
        self.begun = self.protocol.begin(start)
        spec = self.begun.command
        self.t0 = time.monotonic()
        self._stderr = stderr.open("wb")
        self.proc = subprocess.Popen(
            [program, *spec.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            cwd=start.cwd,
        )
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @classmethod
    def real(cls, codex: str, server: FakeModelServer, tmp: Path, start: Request) -> Session:
        """The real codex, against ``server``, with a private ``CODEX_HOME`` under ``tmp``."""
        env = codex_env(
            write_codex_home(tmp / "codex_home", server.url),
            marker=f"codexctl-{uuid.uuid4().hex[:8]}",
        )
        node = repo_root() / ".tools" / "node_modules" / "node" / "bin"
        env["PATH"] = f"{node}{os.pathsep}{env.get('PATH', '')}"
        return cls(codex, start, env, tmp / "stderr", server)

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                obj = json.loads(raw)
            except ValueError:
                obj = {"unparsed": raw.decode("utf-8", "replace")}
            self.lines.append({"dir": "<", "t": self.now(), "msg": obj})
            self._inbox.put(obj)
        self._inbox.put(None)

    def note(self, **note: Any) -> None:
        self.lines.append({"dir": "#", "t": self.now(), "note": note})

    def write(self, objects: Iterable[Outgoing]) -> None:
        assert self.proc.stdin is not None
        for obj in objects:
            self.lines.append({"dir": ">", "t": self.now(), "msg": obj})
            self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def next_message(self, deadline: float) -> dict[str, Any]:
        obj = self._inbox.get(timeout=max(0.01, deadline - time.monotonic()))
        if obj is None:
            raise EOFError("codex app-server closed its stdout")
        return obj

    def open(self) -> str | None:
        self.write(self.begun.greeting)
        deadline = time.monotonic() + TURN_TIMEOUT
        while True:
            for meaning in self.protocol.receive(self.next_message(deadline)):
                if isinstance(meaning, Reply):
                    self.write(meaning.objects)
                elif isinstance(meaning, Ready):
                    return meaning.session_id
                elif isinstance(meaning, ProtocolFault):
                    raise RuntimeError(meaning.message)

    def turn(
        self,
        prompt: str,
        decide: Decide | None = None,
        during: During | None = None,
        timeout: float = TURN_TIMEOUT,
    ) -> TurnEnded:
        """One turn: the prompt written, approval requests answered, until it ends."""
        self.begin(prompt)
        return self.finish(decide, during, timeout)

    def begin(self, prompt: str) -> None:
        self._asked = len(self.server.model_requests()) if self.server else 0
        self._began = time.monotonic()
        self.write(self.protocol.begin_turn(prompt))
        self._translator = self.protocol.translator()
        self.events = []

    def finish(
        self,
        decide: Decide | None = None,
        during: During | None = None,
        timeout: float = TURN_TIMEOUT,
    ) -> TurnEnded:
        """Read until the running turn ends (``queue.Empty`` after ``timeout`` s of it)."""
        deadline = time.monotonic() + timeout
        while True:
            obj = self.next_message(deadline)
            for meaning in self.protocol.receive(obj):
                if meaning is FORWARD and self._translator is not None:
                    self.events.extend(self._translator.translate(obj))
                elif isinstance(meaning, Reply):
                    self.write(meaning.objects)
                elif isinstance(meaning, PermissionAsk):
                    decision = decide(meaning) if decide else Decision.deny(reason="no approver")
                    self.write(self.protocol.answer(meaning, decision))
                elif isinstance(meaning, ProtocolFault):
                    self.note(fault=meaning.message)
                elif isinstance(meaning, TurnEnded):
                    asked = len(self.server.model_requests()) if self.server else 0
                    self.note(
                        turn_ended=meaning.how,
                        message=meaning.message,
                        seconds=round(time.monotonic() - self._began, 3),
                        model_requests=asked - self._asked,
                    )
                    return meaning
            if during is not None:
                during(self, obj)

    def close(self) -> int:
        """stdin closed, the process awaited (killed after 5 s), its leftovers killed."""
        assert self.proc.stdin is not None
        self.write(self.protocol.closing())
        self.proc.stdin.close()
        began = time.monotonic()
        try:
            code = self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.note(exit_code=code, exit_seconds=round(time.monotonic() - began, 3))
        if self.marker:
            self.note(left_running=len(kill_marked(self.marker)))
        self.release()
        return code

    def release(self) -> None:
        """The process killed if it still runs, reaped, and our ends of its pipes closed."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._reader.join(5)  # it reads to EOF before its pipe is closed
        for pipe in (self.proc.stdin, self.proc.stdout, self._stderr):
            if pipe is not None and not pipe.closed:
                with contextlib.suppress(BrokenPipeError):  # a flush to a process gone
                    pipe.close()


def _save(name: str, tmp: Path, lines: list[dict[str, Any]]) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"codex_{name}.jsonl"
    text = "".join(json.dumps(line) + "\n" for line in lines)
    text = text.replace(str(tmp), "/srv/run").replace(tmp.name, "run")  # a git diff's a/tmpXYZ/...
    path.write_text(text, encoding="utf-8")
    return path


def _start(tmp: Path, **kw: Any) -> Request:
    work = tmp / "work"
    work.mkdir(parents=True, exist_ok=True)
    return cli_request(cwd=str(work), **kw)


def _allow(ask: PermissionAsk) -> Decision:
    return Decision.allow()


def _deny(ask: PermissionAsk) -> Decision:
    return Decision.deny("not this one")


def _deny_end(ask: PermissionAsk) -> Decision:
    return Decision.deny("stop here", end_turn=True)


def _one(
    codex: str,
    server: FakeModelServer,
    tmp: Path,
    prompts: list[tuple[str, Decide | None, During | None]],
    *,
    approvals: bool = False,
    permissions: Permissions | None = "edit",
) -> Session:
    session = Session.real(
        codex, server, tmp, _start(tmp, approvals=approvals, permissions=permissions)
    )
    session.open()
    for prompt, decide, during in prompts:
        session.turn(prompt, decide, during)
    session.close()
    return session


def two_turns(codex: str, server: FakeModelServer, tmp: Path) -> list[dict[str, Any]]:
    prompts: list[tuple[str, Decide | None, During | None]] = [
        ("SCENARIO:text First answer.", None, None),
        ("SCENARIO:text Second answer.", None, None),
    ]
    return _one(codex, server, tmp, prompts).lines


def command_approved(codex: str, server: FakeModelServer, tmp: Path) -> list[dict[str, Any]]:
    prompts: list[tuple[str, Decide | None, During | None]] = [
        ("SCENARIO:bash echo approved", _allow, None)
    ]
    return _one(codex, server, tmp, prompts, approvals=True).lines


def command_declined(codex: str, server: FakeModelServer, tmp: Path) -> list[dict[str, Any]]:
    prompts: list[tuple[str, Decide | None, During | None]] = [
        ("SCENARIO:bash touch declined.txt", _deny, None)
    ]
    session = _one(codex, server, tmp, prompts, approvals=True)
    session.note(file_made=(tmp / "work" / "declined.txt").exists())
    return session.lines


def command_declined_end_turn(
    codex: str, server: FakeModelServer, tmp: Path
) -> list[dict[str, Any]]:
    prompts: list[tuple[str, Decide | None, During | None]] = [
        ("SCENARIO:bash touch declined.txt", _deny_end, None),
        ("SCENARIO:text The session goes on.", None, None),
    ]
    return _one(codex, server, tmp, prompts, approvals=True).lines


def file_change_approved(codex: str, server: FakeModelServer, tmp: Path) -> list[dict[str, Any]]:
    prompts: list[tuple[str, Decide | None, During | None]] = [
        ("SCENARIO:write notes.txt hello from the patch", _allow, None)
    ]
    session = _one(codex, server, tmp, prompts, approvals=True)
    written = tmp / "work" / "notes.txt"
    session.note(
        file_made=written.exists(), content=written.read_text() if written.exists() else None
    )
    return session.lines


def file_change_moved(codex: str, server: FakeModelServer, tmp: Path) -> list[dict[str, Any]]:
    """One patch that moves a file out of the working directory (``*** Move to:``),
    deletes one and adds one: the changes codex announces for it, declined."""
    work, outside = tmp / "work", tmp / "outside"
    work.mkdir(parents=True, exist_ok=True)
    outside.mkdir()
    (work / "a.txt").write_text("hello\n")
    (work / "b.txt").write_text("bye\n")
    patch = (
        "*** Begin Patch\n*** Update File: a.txt\n"
        f"*** Move to: {outside / 'moved.txt'}\n@@\n-hello\n+moved\n"
        "*** Delete File: b.txt\n*** Add File: c.txt\n+new\n*** End Patch\n"
    )
    prompts: list[tuple[str, Decide | None, During | None]] = [
        ("SCENARIO:tool apply_patch " + json.dumps(patch), _deny, None)
    ]
    session = _one(codex, server, tmp, prompts, approvals=True)
    session.note(
        moved=(outside / "moved.txt").exists(),
        kept=sorted(p.name for p in work.iterdir()),
    )
    return session.lines


def _sleepers(marker: str) -> list[int]:
    """The ``time.sleep(600)`` processes of this run still alive."""
    found = []
    for pid in marked_processes(marker):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"time.sleep(600)" in cmdline and b"bash" not in cmdline.split(b"\0")[0]:
            found.append(pid)
    return found


def interrupt(codex: str, server: FakeModelServer, tmp: Path) -> list[dict[str, Any]]:
    """``turn/interrupt`` while the tool sleeps: how fast the turn ends, and
    whether the sleeping process outlives it."""
    state: dict[str, float] = {}

    def during(session: Session, obj: dict[str, Any]) -> None:
        item = obj.get("params", {}).get("item", {}) if isinstance(obj.get("params"), dict) else {}
        if "sent" in state or obj.get("method") != "item/started":
            return
        if item.get("type") != "commandExecution":
            return
        deadline = time.monotonic() + 5
        while not _sleepers(session.marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        session.note(sleeping=len(_sleepers(session.marker)))
        state["sent"] = time.monotonic()
        session.write(session.protocol.interrupt())

    session = Session.real(codex, server, tmp, _start(tmp, permissions="full"))
    session.open()
    session.turn("SCENARIO:sleep 600", None, during)
    session.note(
        interrupt_to_turn_end=round(time.monotonic() - state.get("sent", time.monotonic()), 3)
    )
    time.sleep(1.0)
    session.note(sleeping_after_turn=len(_sleepers(session.marker)))
    session.turn("SCENARIO:text Still here.")
    session.note(sleeping_after_next_turn=len(_sleepers(session.marker)))
    session.close()
    return session.lines


def interrupt_early(codex: str, server: FakeModelServer, tmp: Path) -> list[dict[str, Any]]:
    """``interrupt()`` before the turn id is known: the wish goes out through a Reply."""
    session = Session.real(codex, server, tmp, _start(tmp, permissions="full"))
    session.open()
    session.write(session.protocol.begin_turn("SCENARIO:sleep 600"))
    session.note(interrupt_before_turn_id=session.protocol.interrupt())
    deadline = time.monotonic() + TURN_TIMEOUT
    while True:
        obj = session.next_message(deadline)
        ended = False
        for meaning in session.protocol.receive(obj):
            if isinstance(meaning, Reply):
                session.write(meaning.objects)
            elif isinstance(meaning, TurnEnded):
                session.note(turn_ended=meaning.how, message=meaning.message)
                ended = True
        if ended:
            break
    session.close()
    return session.lines


def steer(codex: str, server: FakeModelServer, tmp: Path) -> list[dict[str, Any]]:
    """``turn/steer`` while a command runs: what the next model request holds."""
    steered: list[bool] = []

    def during(session: Session, obj: dict[str, Any]) -> None:
        if steered or obj.get("method") != "item/started":
            return
        params = obj.get("params")
        if isinstance(params, dict) and params.get("item", {}).get("type") == "commandExecution":
            steered.append(True)
            session.write(session.protocol.steer("SCENARIO:text Steered answer."))

    session = Session.real(codex, server, tmp, _start(tmp, permissions="full"))
    session.open()
    session.turn("SCENARIO:sleep 2", None, during)
    last = server.model_requests()[-1].body or {}
    items = last.get("input") if isinstance(last, dict) else None
    session.note(
        last_model_request=[
            {
                "type": item.get("type"),
                "role": item.get("role"),
                "text": json.dumps(item.get("content") or item.get("output"))[:200],
            }
            for item in (items if isinstance(items, list) else [])[-4:]
            if isinstance(item, dict)
        ]
    )
    session.close()
    return session.lines


def resume(codex: str, server: FakeModelServer, tmp: Path) -> list[dict[str, Any]]:
    """A thread closed with its process, resumed by ``thread/resume`` in a new one."""
    first = Session.real(codex, server, tmp, _start(tmp, permissions="edit"))
    thread = first.open()
    first.turn("SCENARIO:text Remember the word apple.")
    first.close()
    second = Session.real(codex, server, tmp, _start(tmp, permissions="edit", resume=thread))
    second.open()
    second.turn("SCENARIO:text I remember.")
    body = server.model_requests()[-1].body or {}
    items = body.get("input") if isinstance(body, dict) else None
    second.note(
        resumed=thread,
        history=[
            json.dumps(item.get("content"))[:120]
            for item in (items if isinstance(items, list) else [])
            if isinstance(item, dict) and item.get("role") in ("user", "assistant")
        ],
    )
    second.close()
    return [*first.lines, {"dir": "#", "t": 0.0, "note": {"process": 2}}, *second.lines]


SCENARIOS: dict[str, Callable[[str, FakeModelServer, Path], list[dict[str, Any]]]] = {
    "two_turns": two_turns,
    "command_approved": command_approved,
    "command_declined": command_declined,
    "command_declined_end_turn": command_declined_end_turn,
    "file_change_approved": file_change_approved,
    "file_change_moved": file_change_moved,
    "interrupt": interrupt,
    "interrupt_early": interrupt_early,
    "steer": steer,
    "resume": resume,
}


def main(argv: list[str]) -> int:
    codex = find_codex()
    if codex is None:
        print("codex not found (GENESIS_CODEX_PATH, .tools/node_modules/.bin, PATH)")
        return 2
    names = argv or list(SCENARIOS)
    for name in names:
        with FakeModelServer() as server, tempfile.TemporaryDirectory() as tmp:
            lines = SCENARIOS[name](codex, server, Path(tmp))
            print(_save(name, Path(tmp), lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
