"""The fake ``codex app-server`` (``tests/fakes/bin/codex app-server``, ``fake_app_server.py``),
driven by the real codec (``CodexControl``) through the recorder's session: each scenario does
what the fake's docstring promises, so session tests can rely on it."""

from __future__ import annotations

import json
import queue
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from coding_genesis.approval import Decision
from coding_genesis.control import PermissionAsk, TurnEnded
from coding_genesis.events import TextEvent, UsageEvent
from coding_genesis.usage import normalize_usage
from tests.fakes.real_cli import MARKER_ENV, clean_env, kill_marked
from tests.fakes.record_codex_control import Session
from tests.support import FAKE_BIN, cli_request

pytestmark = pytest.mark.timeout(30)


@dataclass
class Rig:
    session: Session
    record: Path

    def recorded(self, key: str) -> list[Any]:
        lines = [json.loads(line) for line in self.record.read_text().splitlines()]
        return [line[key] for line in lines if key in line]

    def texts(self) -> list[str]:
        return [e.text for e in self.session.events if isinstance(e, TextEvent)]

    def faults(self) -> list[str]:
        return [ln["note"]["fault"] for ln in self.session.lines if "fault" in ln.get("note", {})]


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    work = tmp_path / "work"
    work.mkdir()
    marker = f"fake-app-server-{uuid.uuid4().hex[:8]}"
    record = tmp_path / "record.jsonl"
    env = clean_env() | {
        MARKER_ENV: marker,
        "FAKE_CLI_RECORD": str(record),
        "FAKE_CLI_SESSION": "thread-1",
    }
    start = cli_request(cwd=str(work), approvals=True)
    session = Session(str(FAKE_BIN / "codex"), start, env, tmp_path / "stderr")
    try:
        assert session.open() == "thread-1"
        yield Rig(session, record)
    finally:
        session.release()
        kill_marked(marker)


def test_turns_answer_with_usage(rig: Rig) -> None:
    for prompt in ("hello", "again"):
        assert rig.session.turn(prompt, timeout=5) == TurnEnded("completed")
        assert rig.texts() == [f"fake codex got: {prompt}"]
        (usage,) = [e for e in rig.session.events if isinstance(e, UsageEvent)]
        assert usage.usage is not None
        tokens = normalize_usage(usage.usage)
        assert (tokens.input, tokens.output) == (10, 5)  # each turn its own, not the total
    assert rig.session.close() == 0
    # app-server's own arguments: only the safe start's override (every directory from the
    # working one up marked untrusted: a project's .codex/ is not read)
    ((flag, override),) = rig.recorded("app_server")
    assert flag == "-c" and override.startswith("projects={") and "untrusted" in override


@pytest.mark.slow
@pytest.mark.parametrize(
    ("decision", "ended", "said"),
    [
        (Decision.allow(), "completed", ["decision: accept"]),
        # once per call: the session's store, not codex, keeps "always"
        (Decision.allow(always=True), "completed", ["decision: accept"]),
        (Decision.deny(), "completed", ["decision: decline"]),
        (Decision.deny(end_turn=True), "interrupted", []),
    ],
)
def test_ask(rig: Rig, decision: Decision, ended: str, said: list[str]) -> None:
    asks: list[PermissionAsk] = []

    def decide(ask: PermissionAsk) -> Decision:
        asks.append(ask)
        return decision

    assert rig.session.turn("ASK rm -rf build", decide, timeout=5).how == ended
    (ask,) = asks
    assert (ask.request.kind, ask.request.command) == ("command", "rm -rf build")
    assert rig.texts() == said
    assert len(rig.recorded("decision")) == 1


@pytest.mark.parametrize("prompt", ["GARBAGE", "UNKNOWN_ID"])
def test_faults_then_the_answer(rig: Rig, prompt: str) -> None:
    assert rig.session.turn(prompt, timeout=5) == TurnEnded("completed")
    assert rig.faults()
    assert rig.texts() == [f"fake codex got: {prompt}"]


@pytest.mark.slow
def test_die(rig: Rig) -> None:
    with pytest.raises(EOFError):
        rig.session.turn("DIE", timeout=5)
    assert rig.session.proc.wait(5) == 3


@pytest.mark.slow
def test_silence(rig: Rig) -> None:
    with pytest.raises(queue.Empty):
        rig.session.turn("SILENCE", timeout=0.5)
    rig.session.write(rig.session.protocol.interrupt())
    with pytest.raises(queue.Empty):
        rig.session.finish(timeout=0.5)
    assert rig.session.close() == 0  # it still leaves when stdin closes


@pytest.mark.slow
def test_sleep_interrupted(rig: Rig) -> None:
    rig.session.begin("SLEEP 30")
    time.sleep(0.3)
    began = time.monotonic()
    rig.session.write(rig.session.protocol.interrupt())
    assert rig.session.finish(timeout=5) == TurnEnded("interrupted")
    assert time.monotonic() - began < 2
    assert rig.recorded("interrupted") == [True]
    assert rig.session.turn("after", timeout=5) == TurnEnded("completed")


@pytest.mark.slow
def test_sleep_steered(rig: Rig) -> None:
    rig.session.begin("SLEEP 1")
    time.sleep(0.3)
    rig.session.write(rig.session.protocol.steer("look here"))
    assert rig.session.finish(timeout=5) == TurnEnded("completed")
    assert rig.texts() == ["slept 1s; steered: look here"]


@pytest.mark.slow
def test_hang_ask(rig: Rig) -> None:
    rig.session.begin("HANG_ASK")
    with pytest.raises(queue.Empty):
        rig.session.finish(lambda ask: Decision.allow(), timeout=0.5)
    rig.session.write(rig.session.protocol.interrupt())
    assert rig.session.finish(timeout=5) == TurnEnded("interrupted")
