"""`genesis chat` in a real pseudo-terminal, against the fake claude speaking
the control protocol (tests/fakes/fakecontrol.py): turns, approvals asked
inline (yes, no, always), Ctrl-C once (the turn) and twice (the session), the
prompt's own Ctrl-C and Ctrl-D, and that nothing of the session outlives it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.support import FakeCLI, marked_processes
from tests.terminal import Terminal, genesis

pytestmark = pytest.mark.timeout(90)

SESSION = "s-42"  # short: FAKE_CLI_SESSION looks like a secret by its name


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for terminal in opened:
        terminal.close()


def chat(terminals: list[Terminal], fake: FakeCLI, tmp_path: Path, *args: str) -> Terminal:
    env = {
        **fake.env(),
        "FAKE_CLI_SESSION": SESSION,
        "GENESIS_TRANSCRIPTS": str(tmp_path / "runs"),
        "GENESIS_RUN_LOG": str(tmp_path / "runs.jsonl"),
        "GENESIS_LEDGER": str(tmp_path / "ledger"),
    }
    argv = ["chat", "--backend", "claude", "--cli-path", fake.path, "--grace", "1", *args]
    terminal = Terminal(argv, env=env)
    terminals.append(terminal)
    assert terminal.wait_for("session open"), terminal.screen
    assert terminal.wait_for(">"), terminal.screen
    return terminal


def say(terminal: Terminal, line: str) -> None:
    terminal.send(line.encode() + b"\r")


def started(fake: FakeCLI) -> list[dict[str, Any]]:
    """The fake CLI's starts (one per process)."""
    return [r for r in fake.records() if "argv" in r]


def run_dirs(tmp_path: Path) -> list[Path]:
    base = tmp_path / "runs"
    return sorted(p for p in base.iterdir() if p.is_dir()) if base.exists() else []


def test_turns_and_approvals_yes_no_always_in_one_process(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    terminal = chat(terminals, fake, tmp_path, "--deny-commands", "rm -rf *")

    say(terminal, "hello there")
    assert terminal.wait_for("fake claude got: hello there"), terminal.screen
    assert terminal.wait_for("genesis: ok"), terminal.screen

    say(terminal, 'ASK Bash {"command": "echo hi"}')
    assert terminal.wait_for("Allow Bash `echo hi`? [y]es / [n]o / [a]lways for this session:")
    say(terminal, "y")
    assert terminal.wait_for('allowed Bash {"command": "echo hi"}'), terminal.screen

    say(terminal, 'ASK Write {"file_path": "/etc/passwd", "content": "x"}')
    assert terminal.wait_for("Allow Write `/etc/passwd`?"), terminal.screen
    say(terminal, "n write under ./out instead")
    assert terminal.wait_for("denied Write: write under ./out instead"), terminal.screen
    # The answer is echoed as typed (the keys are hidden only while the panel is up).
    assert "[a]lways for this session: n write under ./out instead" in terminal.screen

    # A flag settles first: nobody is asked.
    say(terminal, 'ASK Bash {"command": "rm -rf /tmp/x"}')
    assert terminal.wait_for("denied Bash: denied: the command matches 'rm -rf *'"), terminal.screen

    say(terminal, 'ASK Bash {"command": "ls"}')
    assert terminal.wait_for("Allow Bash `ls`?"), terminal.screen
    say(terminal, "perhaps")
    assert terminal.wait_for("answer y, n"), terminal.screen
    say(terminal, "a")
    assert terminal.wait_for('allowed Bash {"command": "ls"}'), terminal.screen
    say(terminal, 'ASK Bash {"command": "pwd"}')  # always: not asked again
    assert terminal.wait_for('allowed Bash {"command": "pwd"}'), terminal.screen
    assert "Allow Bash `pwd`" not in terminal.seen
    assert "allowed Bash `pwd` (always, for this session)" in terminal.screen

    say(terminal, "/exit")
    assert terminal.wait() == 0
    assert "genesis chat: session closed - 6 turns" in terminal.screen
    assert f"genesis chat --resume {SESSION}" in terminal.screen
    assert "Traceback" not in terminal.seen
    assert len(started(fake)) == 1  # every turn in one process
    assert len(run_dirs(tmp_path)) == 6  # each turn recorded like a `genesis run`
    assert marked_processes([fake.mark]) == []


def test_ctrl_c_once_interrupts_the_turn_and_the_session_goes_on(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    terminal = chat(terminals, fake, tmp_path)
    say(terminal, "SLEEP 60")
    assert terminal.wait_for("running Bash"), terminal.screen
    children = [r["child"] for r in fake.records() if "child" in r]
    assert children and psutil.pid_exists(children[0])

    begun = time.monotonic()
    terminal.send(b"\x03")
    assert terminal.wait_for("[interrupted]"), terminal.screen
    assert time.monotonic() - begun < 10
    assert terminal.wait_for("failure: interrupted"), terminal.screen
    deadline = time.monotonic() + 5
    while psutil.pid_exists(children[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    gone = not psutil.pid_exists(children[0])
    assert gone or psutil.Process(children[0]).status() == psutil.STATUS_ZOMBIE

    # The prompt again; a new line clears the Ctrl-C: the session goes on.
    say(terminal, "still there?")
    assert terminal.wait_for("fake claude got: still there?"), terminal.screen
    terminal.send(b"\x04")  # Ctrl-D closes the session
    assert terminal.wait() == 0
    assert len(started(fake)) == 1
    assert marked_processes([fake.mark]) == []


def test_ctrl_c_twice_in_a_turn_closes_the_session_and_exits_130(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    terminal = chat(terminals, fake, tmp_path)
    say(terminal, "SLEEP 60")
    assert terminal.wait_for("running Bash"), terminal.screen
    assert marked_processes([fake.mark])
    terminal.send(b"\x03")
    assert terminal.wait_for("interrupting the turn"), terminal.screen
    terminal.send(b"\x03")
    assert terminal.wait() == 130
    assert "genesis chat: Ctrl-C: closing the session" in terminal.screen
    assert "Traceback" not in terminal.seen
    assert marked_processes([fake.mark]) == []


def test_ctrl_c_at_the_prompt_clears_the_line_and_a_second_one_leaves(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    terminal = chat(terminals, fake, tmp_path)
    terminal.send(b"half a prompt")
    assert terminal.wait_for("half a prompt"), terminal.screen
    terminal.send(b"\x03")
    assert terminal.wait_for("Ctrl-C again to leave"), terminal.screen
    time.sleep(0.2)
    terminal.send(b"\x03")
    assert terminal.wait() == 130
    assert started(fake)  # the session was open
    assert not [r for r in fake.records() if "stdin" in r and r["stdin"].get("type") == "user"]
    assert marked_processes([fake.mark]) == []


def test_ctrl_c_during_a_question_interrupts_the_turn_and_withdraws_it(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    terminal = chat(terminals, fake, tmp_path)
    say(terminal, 'ASK Bash {"command": "make deploy"}')
    assert terminal.wait_for("Allow Bash `make deploy`?"), terminal.screen
    terminal.send(b"\x03")
    assert terminal.wait_for("(no answer: Bash denied)"), terminal.screen
    assert terminal.wait_for("[interrupted]"), terminal.screen
    # The next prompt reads a prompt, not an answer to the withdrawn question.
    say(terminal, "y")
    assert terminal.wait_for("fake claude got: y"), terminal.screen
    terminal.send(b"\x04")
    assert terminal.wait() == 0
    assert marked_processes([fake.mark]) == []


def test_chat_needs_a_terminal_and_a_two_way_backend(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    env = {**fake.env(), "GENESIS_TRANSCRIPTS": "off", "GENESIS_RUN_LOG": "off"}
    piped = genesis(["chat", "--backend", "claude", "--cli-path", fake.path], env=env)
    assert piped.returncode == 2
    assert b"genesis chat: error: stdin is not a terminal" in piped.stderr
    assert started(fake) == []


def test_chat_names_the_backends_that_can_hold_a_session(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    terminal = Terminal(["chat", "--backend", "gemini"], env={"GENESIS_TRANSCRIPTS": "off"})
    terminals.append(terminal)
    assert terminal.wait() == 2
    screen = terminal.screen
    assert "genesis chat: error: backend 'gemini' has no two-way protocol" in screen
    assert "claude" in screen and "codex" in screen


def test_a_cli_that_dies_ends_the_session_with_its_turns_status(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    terminal = chat(terminals, fake, tmp_path)
    say(terminal, "DIE")
    assert terminal.wait() == 1
    screen = terminal.screen
    assert "[status 1: incomplete]" in screen
    assert "the CLI's process ended; the session is closed" in screen
    assert marked_processes([fake.mark]) == []


def test_keys_typed_during_a_turn_are_not_drawn_into_the_panel_and_make_the_next_prompt(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    """The kernel echoes a key where the cursor is: into the panel, which then
    redraws one line too low and leaves its top behind.  Typed ahead, a line is
    shown at the next prompt and sent; an unfinished one is finished there."""
    fake = FakeCLI(tmp_path, "claude")
    terminal = chat(terminals, fake, tmp_path)
    say(terminal, "SLEEP 1.5")
    assert terminal.wait_for("running Bash"), terminal.screen
    say(terminal, "typed ahead")  # a whole line, while the panel is drawn
    terminal.send(b"half")  # and the start of another
    time.sleep(0.3)
    assert terminal.wait_for("fake claude got: typed ahead", 30), terminal.screen
    terminal.send(b" done\r")
    assert terminal.wait_for("fake claude got: half done"), terminal.screen
    say(terminal, "SLEEP 1")
    assert terminal.wait_for("running Bash"), terminal.screen
    terminal.send(b"\x04")  # Ctrl-D typed during a turn: the session closes after it
    assert terminal.wait() == 0
    assert "genesis chat: session closed - 4 turns" in terminal.screen
    screen = terminal.screen
    assert "state BUSY" not in screen  # no panel left behind
    assert not [line for line in screen.splitlines() if line.startswith("tool calls")]
    assert "> typed ahead\n" in screen  # shown at the prompt, as if echoed there
    assert "> half done\n" in screen
    assert screen.count("typed ahead") == 2  # the prompt, the answer: never in the panel
    # Never drawn while the panel was up.
    first = "time.sleep(1.5)"
    assert [f for f in terminal.frames if first in f]
    assert not [f for f in terminal.frames if first in f and "typed ahead" in f]
    sent = [r["stdin"] for r in fake.records() if "stdin" in r]
    prompts = [s["message"]["content"] for s in sent if s.get("type") == "user"]
    assert prompts == ["SLEEP 1.5", "typed ahead", "half done", "SLEEP 1"]
    assert len(started(fake)) == 1


def test_chat_with_the_failer_asks_about_its_write_offline(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    # No credentials, no fake on PATH: the embedded failer plays claude's side.
    env = {
        "GENESIS_TRANSCRIPTS": "off",
        "GENESIS_RUN_LOG": str(tmp_path / "runs.jsonl"),
        "GENESIS_LEDGER": str(tmp_path / "ledger"),
        "GENESIS_FAILER_STATE_DIR": str(tmp_path / "state"),
    }
    argv = ["chat", "--backend", "failer", "--cwd", str(tmp_path), "--grace", "1"]
    terminal = Terminal(argv, env=env)
    terminals.append(terminal)
    assert terminal.wait_for("session open"), terminal.screen
    say(terminal, "/write notes.txt hello")
    assert terminal.wait_for("Allow Write"), terminal.screen
    say(terminal, "y")
    assert terminal.wait_for("wrote 6 bytes to notes.txt"), terminal.screen
    assert (tmp_path / "notes.txt").read_text() == "hello\n"
    say(terminal, "/bash rm -rf nothing-here")
    assert terminal.wait_for("Allow Bash `rm -rf nothing-here`?"), terminal.screen
    say(terminal, "n not here")
    assert terminal.wait_for("Bash was refused: not here"), terminal.screen
    say(terminal, "/exit")
    assert terminal.wait() == 0
    assert "Traceback" not in terminal.seen
