"""`genesis chat` and `genesis run --ask` over the Agent Client Protocol with the REAL
gemini and opencode against the fake model server, in a pseudo-terminal: a shell call
approved inline runs, one refused does not, and nothing of the agent outlives the
command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.model_server import FakeModelServer
from tests.real_cli.test_acp import hermetic_env
from tests.real_cli.test_chat import at_home
from tests.real_cli.test_gemini_opencode_qwen import GEMINI_MODEL, MoreRig, more_rig
from tests.terminal import Terminal, terminals

__all__ = ["hermetic_env", "terminals"]  # the fixtures, active here too

pytestmark = pytest.mark.timeout(180)


def environment(rig: MoreRig) -> dict[str, str]:
    return {
        **rig.env(),
        "GENESIS_TRANSCRIPTS": str(rig.tmp / "runs"),
        "GENESIS_RUN_LOG": "off",
        "GENESIS_LEDGER": str(rig.tmp / "ledger"),
    }


def turns(rig: MoreRig) -> list[Path]:
    """The turns' run directories (the session's own directory is not a turn)."""
    return [
        p
        for p in (rig.tmp / "runs").iterdir()
        if p.is_dir() and json.loads((p / "meta.json").read_text()).get("kind") != "session"
    ]


def test_chat_asks_inline_and_gemini_runs_only_what_was_allowed(
    request: pytest.FixtureRequest,
    model_server: FakeModelServer,
    tmp_path: Path,
    terminals: list[Terminal],
) -> None:
    rig = more_rig("gemini", request, model_server, tmp_path)  # skips when not installed
    env = environment(rig)
    argv = ["chat", "--backend", "gemini", "--cli-path", rig.cli, "--cwd", str(rig.work)]
    terminal = Terminal(
        [*argv, "--model", GEMINI_MODEL, "--grace", "2", "--timeout", "90"], env=env
    )
    terminals.append(terminal)
    assert terminal.wait_for("gemini session open", 90), terminal.screen

    allowed = rig.work / "allowed.txt"
    terminal.send(f"SCENARIO:bash touch {allowed}\r".encode())
    assert terminal.wait_below(f"touch {allowed}", "[n]o:", 90), terminal.screen
    terminal.send(b"y\r")
    assert terminal.wait_below(f"touch {allowed}", "genesis: ok", 90), terminal.screen
    assert allowed.exists()

    refused = rig.work / "refused.txt"
    terminal.send(f"SCENARIO:bash touch {refused}\r".encode())
    assert terminal.wait_below(f"touch {refused}", "[n]o:", 90), terminal.screen
    terminal.send(b"n not that one\r")
    assert terminal.wait_below(f"touch {refused}", "genesis: ok", 90), terminal.screen
    assert not refused.exists()

    assert terminal.wait_below("transcript: genesis show", ">", 30), terminal.screen
    terminal.send(b"\x04")
    assert terminal.wait(60) == 0, terminal.screen
    screen = terminal.screen
    assert "genesis chat: session closed - 2 turns" in screen, screen
    assert "Traceback" not in terminal.seen
    assert len(turns(rig)) == 2  # each turn recorded like a `genesis run`
    assert at_home(env["HOME"]) == []  # gemini and its tools are gone with the session


def test_run_ask_on_opencode_asks_each_call(
    request: pytest.FixtureRequest,
    model_server: FakeModelServer,
    tmp_path: Path,
    terminals: list[Terminal],
) -> None:
    rig = more_rig("opencode", request, model_server, tmp_path)  # skips when not installed
    env = environment(rig)
    made = rig.work / "made.txt"
    argv = ["run", "--ask", "--backend", "opencode", "--cli-path", rig.cli, "--cwd", str(rig.work)]
    prompt = f"SCENARIO:bash touch {made}"
    terminal = Terminal([*argv, "--grace", "2", "--timeout", "90", prompt], env=env)
    terminals.append(terminal)
    assert terminal.wait_below(f"Allow execute `touch {made}`?", "[n]o:", 90), terminal.screen
    terminal.send(b"y\r")
    assert terminal.wait(90) == 0, terminal.screen
    assert made.exists()
    assert "genesis: ok" in terminal.screen, terminal.screen
    assert "Traceback" not in terminal.seen
    assert at_home(env["HOME"]) == []
