"""The fake claude's control protocol (tests/fakes/fakecontrol.py), driven by ClaudeControl
over pipes: each scenario the session tests rely on does what its docstring says."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from coding_genesis.approval import ApprovalRequest, Decision
from coding_genesis.backends.claude import ClaudeBackend
from coding_genesis.control import (
    FORWARD,
    Incoming,
    PermissionAsk,
    ProtocolFault,
    Ready,
    TurnEnded,
)
from tests.support import FAKE_BIN, cli_request

pytestmark = pytest.mark.slow


class Driver:
    """The fake claude with a ClaudeControl: every meaning kept, asks answered by ``decide``."""

    def __init__(self, tmp: Path, approvals: bool, decide: Callable[[ApprovalRequest], Decision]):
        self.proto = ClaudeBackend().control()
        self.decide = decide
        self.record = tmp / "record.jsonl"
        start = cli_request(cwd=str(tmp), approvals=approvals)
        env = {**os.environ, "FAKE_CLI_RECORD": str(self.record)}
        begun = self.proto.begin(start)
        args = begun.command.args
        (given,) = [a.split("=", 1)[1] for a in args if a.startswith("--session-id=")]
        self.proc = subprocess.Popen(
            [str(FAKE_BIN / "claude"), *args],
            cwd=tmp,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.raw: list[bytes] = []
        self.meanings: list[Incoming] = []
        self.texts: list[str] = []
        self.asks: list[PermissionAsk] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.write(begun.greeting)
        assert self.until(lambda m: isinstance(m, Ready)) == Ready(given)  # ours, at open

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                self.lines.put(json.loads(raw))
            except ValueError:
                self.raw.append(raw)
        self.lines.put(None)

    def write(self, objects: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> None:
        assert self.proc.stdin is not None
        for obj in objects:
            self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def until(self, stop: Callable[[Incoming], bool], timeout: float = 10) -> Incoming | None:
        while True:
            obj = self.lines.get(timeout=timeout)
            if obj is None:
                return None
            for meaning in self.proto.receive(obj):
                self.meanings.append(meaning)
                if meaning is FORWARD and obj.get("type") == "assistant":
                    blocks = obj["message"]["content"]
                    self.texts += [b["text"] for b in blocks if b.get("type") == "text"]
                if isinstance(meaning, PermissionAsk):
                    self.asks.append(meaning)
                    self.write(self.proto.answer(meaning, self.decide(meaning.request)))
                if stop(meaning):
                    return meaning

    def turn(self, prompt: str) -> Incoming | None:
        self.write(self.proto.begin_turn(prompt))
        return self.until(lambda m: isinstance(m, TurnEnded))

    def recorded(self, key: str) -> list[Any]:
        lines = self.record.read_text().splitlines()
        return [entry[key] for entry in map(json.loads, lines) if key in entry]


@pytest.fixture
def drive(tmp_path: Path) -> Iterator[Callable[..., Driver]]:
    started: list[Driver] = []

    def start(approvals: bool = True, decide: Any = lambda r: Decision.allow()) -> Driver:
        driver = Driver(tmp_path, approvals, decide)
        started.append(driver)
        return driver

    yield start
    for driver in started:
        if driver.proc.poll() is None:
            driver.proc.kill()
        driver.proc.wait(5)
        driver.reader.join(5)
        for pipe in (driver.proc.stdin, driver.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(BrokenPipeError):
                    pipe.close()


def test_text_turns_and_an_approved_ask_with_changed_input(drive: Any) -> None:
    d = drive(decide=lambda r: Decision.allow({**r.input, "content": "changed"}))
    assert d.turn("hello") == TurnEnded("completed")
    assert d.turn('ASK Write {"file_path": "a.txt", "content": "x"}') == TurnEnded("completed")
    (ask,) = d.asks
    assert ask.request.kind == "write" and ask.request.paths == ("a.txt",)
    assert d.texts == [
        "fake claude got: hello",
        'allowed Write {"content": "changed", "file_path": "a.txt"}',
    ]
    assert d.proto.closing() == []
    assert d.proc.stdin is not None
    d.proc.stdin.close()
    assert d.proc.wait(5) == 0


@pytest.mark.parametrize("approvals", [True, False])
def test_a_refusal_and_one_that_ends_the_turn(drive: Any, approvals: bool) -> None:
    denials = iter([Decision.deny("not this"), Decision.deny("stop", end_turn=True)])
    d = drive(approvals, decide=lambda r: next(denials))
    assert d.turn('ASK Bash {"command": "ls"}') == TurnEnded("completed")
    assert d.texts == ["denied Bash: not this"]
    assert d.turn('ASK Bash {"command": "ls"}') == TurnEnded("interrupted", "stop")
    reason = d.asks[0].request.reason
    assert reason == (None if approvals else "the fake CLI asks")
    assert d.proc.stdin is not None
    d.proc.stdin.close()
    assert d.proc.wait(5) == (0 if approvals else 1)  # the last result an error: exit 1


def test_garbage_and_an_unknown_id_are_faults_and_the_turn_ends(drive: Any) -> None:
    d = drive()
    assert d.turn("GARBAGE") == TurnEnded("completed")
    assert d.raw == [b"this is not json\n"]
    assert d.turn("UNKNOWN_ID") == TurnEnded("completed")
    faults = [m for m in d.meanings if isinstance(m, ProtocolFault)]
    assert len(faults) == 3
    assert "never sent" in faults[2].message


def test_die_exits_mid_turn(drive: Any) -> None:
    d = drive()
    d.write(d.proto.begin_turn("DIE"))
    assert d.until(lambda m: isinstance(m, TurnEnded)) is None
    assert d.proc.wait(5) == 3


def test_silence_keeps_running(drive: Any) -> None:
    d = drive()
    d.write(d.proto.begin_turn("SILENCE"))
    d.write(d.proto.interrupt())
    assert d.proc.stdin is not None
    d.proc.stdin.close()
    with pytest.raises(queue.Empty):
        d.until(lambda m: isinstance(m, TurnEnded), timeout=0.5)
    assert d.proc.poll() is None


def test_sleep_is_interrupted_and_its_child_killed(drive: Any) -> None:
    d = drive()
    assert d.turn("SLEEP 0.1") == TurnEnded("completed")
    d.write(d.proto.begin_turn("SLEEP 60"))
    deadline = time.monotonic() + 5
    while len(d.recorded("child")) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    child = d.recorded("child")[-1]
    asked = time.monotonic()
    d.write(d.proto.interrupt())
    assert d.until(lambda m: isinstance(m, TurnEnded)) == TurnEnded("interrupted")
    assert time.monotonic() - asked < 2
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # killed and reaped
    assert d.turn("still here") == TurnEnded("completed")


def test_hang_ask_ignores_the_answer_until_an_interrupt(drive: Any) -> None:
    d = drive()
    d.write(d.proto.begin_turn("HANG_ASK"))
    with pytest.raises(queue.Empty):
        d.until(lambda m: isinstance(m, TurnEnded), timeout=0.5)
    (ask,) = d.asks
    d.write(d.proto.interrupt())
    assert d.until(lambda m: isinstance(m, TurnEnded)) == TurnEnded("interrupted")
    assert d.proto.answer(ask, Decision.allow()) == []  # claude cancelled the question
