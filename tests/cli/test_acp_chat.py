"""`genesis chat` and `genesis run --ask` on the ACP backends in a real pseudo-terminal,
against the fake ACP agent (tests/fakes/fake_acp.py): each permission request asked
inline (yes, no, always), every turn in one process, what ACP cannot do refused in
words, and nothing of the agent outliving the command."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from tests.support import FakeCLI, marked_processes
from tests.terminal import Terminal, terminals

__all__ = ["terminals"]  # the fixture, active here too

pytestmark = [pytest.mark.timeout(90), pytest.mark.slow]

FAKES = Path(__file__).resolve().parents[1] / "fakes" / "bin"


def environment(fake: FakeCLI, tmp_path: Path) -> dict[str, str]:
    return {
        **fake.env(),
        "GENESIS_TRANSCRIPTS": str(tmp_path / "runs"),
        "GENESIS_RUN_LOG": "off",
        "GENESIS_LEDGER": str(tmp_path / "ledger"),
    }


def ask(terminal: Terminal, command: str) -> None:
    """Send a prompt that makes the fake agent ask to run ``command``; wait for the question."""
    terminal.send(f'ASK execute {{"command": "{command}"}}\r'.encode())
    assert terminal.wait_below(f"Allow execute `{command}`?", "[t]ool (every execute call)"), (
        terminal.screen
    )


@pytest.mark.parametrize("flavour", ["gemini", "opencode"])
def test_chat_asks_each_permission_request_inline(
    flavour: str, tmp_path: Path, terminals: list[Terminal]
) -> None:
    fake = FakeCLI(tmp_path, flavour)
    argv = ["chat", "--backend", flavour, "--cli-path", fake.path, "--grace", "1"]
    terminal = Terminal(argv, env=environment(fake, tmp_path))
    terminals.append(terminal)
    assert terminal.wait_for(f"{flavour} session open"), terminal.screen

    ask(terminal, "echo hi")
    terminal.send(b"y\r")
    assert terminal.wait_below("`echo hi`?", "allowed allow_once"), terminal.screen
    assert terminal.wait_below("allowed allow_once", "genesis: ok"), terminal.screen

    ask(terminal, "rm x")
    terminal.send(b"n not that\r")
    assert terminal.wait_below("`rm x`?", "denied reject_once"), terminal.screen
    assert terminal.wait_below("denied reject_once", "genesis: ok"), terminal.screen

    ask(terminal, "ls")
    terminal.send(b"a\r")  # always: kept by the session; the agent gets its allow-once option
    assert terminal.wait_below("`ls`?", "allowed allow_once"), terminal.screen
    assert terminal.wait_below("allowed allow_once", "genesis: ok"), terminal.screen
    terminal.send(b'ASK execute {"command": "ls"}\r')
    assert terminal.wait_below('"command": "ls"}', "genesis: ok"), terminal.screen
    assert terminal.screen.count("Allow execute `ls`?") == 1, terminal.screen  # not asked again
    ask(terminal, "pwd")
    terminal.send(b"t\r")  # tool: every call of its kind for the rest of the session
    assert terminal.wait_below("`pwd`?", "genesis: ok"), terminal.screen
    terminal.send(b'ASK execute {"command": "whoami"}\r')
    assert terminal.wait_below('"command": "whoami"}', "genesis: ok"), terminal.screen
    assert "Allow execute `whoami`" not in terminal.seen

    assert terminal.wait_below("transcript: genesis show", ">"), terminal.screen
    terminal.send(b"\x04")
    assert terminal.wait() == 0, terminal.screen
    assert "genesis chat: session closed - 6 turns" in terminal.screen, terminal.screen
    assert "Traceback" not in terminal.seen
    starts = [r for r in fake.records() if r.get("received") == "initialize"]
    assert len(starts) == 1  # every turn in one process
    assert marked_processes([fake.mark]) == []


def test_run_ask_on_an_acp_backend(tmp_path: Path, terminals: list[Terminal]) -> None:
    fake = FakeCLI(tmp_path, "qwen")
    argv = ["run", "--ask", "--backend", "qwen", "--cli-path", fake.path, "--grace", "1"]
    terminal = Terminal([*argv, 'ASK execute {"command": "make"}'], env=environment(fake, tmp_path))
    terminals.append(terminal)
    assert terminal.wait_below("Allow execute `make`?", "[t]ool (every execute call)"), (
        terminal.screen
    )
    terminal.send(b"y\r")
    assert terminal.wait() == 0, terminal.screen
    assert "allowed allow_once" in terminal.screen and "genesis: ok" in terminal.screen
    assert marked_processes([fake.mark]) == []


def test_chat_refuses_what_the_acp_agent_cannot_do_in_words(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "gemini")
    terminal = Terminal(
        ["chat", "--backend", "gemini", "--cli-path", fake.path, "--resume", "some-session"],
        env=environment(fake, tmp_path),
    )
    try:
        assert terminal.wait() == 2, terminal.screen
        screen = terminal.screen.replace("\n", "")
    finally:
        terminal.close()
    assert "backend 'gemini' cannot resume a session over its two-way protocol" in screen
    assert "Traceback" not in terminal.seen
    assert fake.records() == []  # refused before the agent started


def generic_backend(fake: FakeCLI, tmp_path: Path) -> Path:
    """A backends file naming the fake qwen as a generic ACP agent ``myagent``."""
    path = tmp_path / "backends.toml"
    path.write_text(
        "[backends.myagent]\n"
        'format = "acp"\n'
        f'command = ["{FAKES / "qwen"}", "--acp"]\n'
        'modes = { "read-only" = "plan", edit = "auto-edit", full = "yolo" }\n'
        'ask_mode = "default"\n'
    )
    return path


@pytest.mark.parametrize("command", ["chat", "run"])
def test_chat_and_run_ask_on_the_generic_acp_backend(
    command: str, tmp_path: Path, terminals: list[Terminal]
) -> None:
    fake = FakeCLI(tmp_path, "qwen")
    path = generic_backend(fake, tmp_path)
    argv = [command, "--backends-file", str(path), "--backend", "myagent", "--grace", "1"]
    if command == "run":
        argv = [*argv, "--ask", 'ASK execute {"command": "make"}']
    terminal = Terminal(argv, env=environment(fake, tmp_path))
    terminals.append(terminal)
    if command == "chat":
        assert terminal.wait_for("myagent session open"), terminal.screen
        ask(terminal, "make")
    else:
        assert terminal.wait_below("Allow execute `make`?", "[t]ool (every execute call)"), (
            terminal.screen
        )
    terminal.send(b"y\r")
    assert terminal.wait_below("`make`?", "allowed allow_once"), terminal.screen
    assert terminal.wait_below("allowed allow_once", "genesis: ok"), terminal.screen
    if command == "chat":
        assert terminal.wait_below("transcript: genesis show", ">"), terminal.screen
        terminal.send(b"/exit\r")
    assert terminal.wait() == 0, terminal.screen
    assert "Traceback" not in terminal.seen
    assert marked_processes([fake.mark]) == []


def sleepers(mark: str) -> list[psutil.Process]:
    """The fake agent's ``time.sleep`` tools (they carry its mark)."""
    found = []
    for proc in marked_processes([mark]):
        try:
            if "time.sleep" in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def test_ctrl_c_once_cancels_the_acp_turn_and_the_session_goes_on(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    fake = FakeCLI(tmp_path, "opencode")
    argv = ["chat", "--backend", "opencode", "--cli-path", fake.path, "--grace", "1"]
    terminal = Terminal(argv, env=environment(fake, tmp_path))
    terminals.append(terminal)
    assert terminal.wait_for("opencode session open"), terminal.screen
    terminal.send(b"SLEEP 600\r")
    deadline = time.monotonic() + 20
    while not sleepers(fake.mark) and time.monotonic() < deadline:
        terminal.wait_for("never shown", 0.1)
    assert sleepers(fake.mark), terminal.screen

    terminal.send(b"\x03")  # session/cancel: the agent kills its tool and ends the turn
    assert terminal.wait_for("failure: interrupted"), terminal.screen
    deadline = time.monotonic() + 5
    while sleepers(fake.mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sleepers(fake.mark) == []

    terminal.send(b"still there?\r")
    assert terminal.wait_for("fake opencode got: still there?"), terminal.screen
    assert terminal.wait_below("still there?", "genesis: ok"), terminal.screen
    terminal.send(b"\x04")
    assert terminal.wait() == 0, terminal.screen
    received = [r.get("received") for r in fake.records()]
    assert received.count("initialize") == 1 and "session/cancel" in received
    assert marked_processes([fake.mark]) == []
