"""`genesis chat` with the REAL claude against the fake model server, in a
pseudo-terminal: a Bash call approved inline runs, one refused does not, and
closing the session leaves no process behind."""

from __future__ import annotations

import json

import psutil
import pytest

from tests.real_cli.test_claude_codex import Rig, claude_rig, hermetic_env
from tests.terminal import Terminal, terminals

__all__ = ["claude_rig", "hermetic_env", "terminals"]  # the fixtures, active here too

pytestmark = pytest.mark.timeout(120)


def test_chat_asks_inline_and_claude_runs_only_what_was_allowed(
    claude_rig: Rig, terminals: list[Terminal]
) -> None:
    rig = claude_rig
    env = {
        **rig.env(),
        "GENESIS_TRANSCRIPTS": str(rig.tmp / "runs"),
        "GENESIS_RUN_LOG": "off",
        "GENESIS_LEDGER": str(rig.tmp / "ledger"),
    }
    argv = ["chat", "--backend", "claude", "--cli-path", rig.cli, "--cwd", str(rig.work)]
    terminal = Terminal([*argv, "--grace", "2", "--timeout", "60"], env=env)
    terminals.append(terminal)
    assert terminal.wait_for("session open", 60), terminal.screen

    allowed = rig.work / "allowed.txt"
    terminal.send(f"SCENARIO:bash touch {allowed}\r".encode())
    assert terminal.wait_for(f"Allow Bash `touch {allowed}`?", 60), terminal.screen
    terminal.send(b"y\r")
    assert terminal.wait_for("The tool finished. Output:", 60), terminal.screen
    assert allowed.exists()

    refused = rig.work / "refused.txt"
    terminal.send(f"SCENARIO:bash touch {refused}\r".encode())
    assert terminal.wait_for(f"Allow Bash `touch {refused}`?", 60), terminal.screen
    terminal.send(b"n not that one\r")
    assert terminal.wait_for("The tool finished (tool reported an error)", 60), terminal.screen
    assert not refused.exists()

    terminal.send(b"\x04")
    assert terminal.wait(60) == 0
    screen = terminal.screen
    assert "genesis chat: session closed - 2 turns" in screen
    assert "Traceback" not in terminal.seen
    assert "state BUSY" not in screen  # the panel is off the screen between turns
    runs = [
        p
        for p in (rig.tmp / "runs").iterdir()
        if p.is_dir() and json.loads((p / "meta.json").read_text()).get("kind") != "session"
    ]
    assert len(runs) == 2  # each turn recorded like a `genesis run` (besides the session's own)
    assert at_home(env["HOME"]) == []  # claude and its tools are gone with the session


def at_home(home: str) -> list[psutil.Process]:
    """The live processes started with ``HOME=home`` (the rig's claude and what it ran)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("HOME") == home and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found
