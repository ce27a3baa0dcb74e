"""`genesis chat` in a real pseudo-terminal, against the fake claude speaking
the control protocol (tests/fakes/fakecontrol.py): turns, approvals asked
inline (yes, no, always), Ctrl-C once (the turn) and twice (the session), the
prompt's own Ctrl-C and Ctrl-D, and that nothing of the session outlives it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.support import FakeCLI, marked_processes
from tests.terminal import Terminal, genesis, terminals

__all__ = ["terminals"]  # the fixture, active here too

pytestmark = [pytest.mark.timeout(90), pytest.mark.slow]

SESSION = "s-42"  # short: FAKE_CLI_SESSION looks like a secret by its name


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


def failer_chat(
    terminals: list[Terminal], tmp_path: Path, transcripts: str, *args: str
) -> Terminal:
    """`genesis chat` with the embedded failer in ``tmp_path``, its session open."""
    env = {
        "GENESIS_TRANSCRIPTS": transcripts,
        "GENESIS_RUN_LOG": str(tmp_path / "runs.jsonl"),
        "GENESIS_LEDGER": str(tmp_path / "ledger"),
        "GENESIS_FAILER_STATE_DIR": str(tmp_path / "state"),
    }
    argv = ["chat", "--backend", "failer", "--cwd", str(tmp_path), "--grace", "1", *args]
    terminal = Terminal(argv, env=env)
    terminals.append(terminal)
    assert terminal.wait_for("session open"), terminal.screen
    return terminal


def say(terminal: Terminal, line: str) -> None:
    terminal.send(line.encode() + b"\r")


def started(fake: FakeCLI) -> list[dict[str, Any]]:
    """The fake CLI's starts (one per process)."""
    return [r for r in fake.records() if "argv" in r]


def run_dirs(tmp_path: Path) -> list[Path]:
    """The turns' run directories (the session's own directory is not a run)."""
    base = tmp_path / "runs"
    if not base.exists():
        return []
    return sorted(
        p
        for p in base.iterdir()
        if p.is_dir() and json.loads((p / "meta.json").read_text()).get("kind") != "session"
    )


def test_turns_and_approvals_yes_no_always_in_one_process(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    terminal = chat(terminals, fake, tmp_path, "--deny-commands", "rm -rf *")

    say(terminal, "hello there")
    assert terminal.wait_for("fake claude got: hello there"), terminal.screen
    assert terminal.wait_for("genesis: ok"), terminal.screen

    say(terminal, 'ASK Bash {"command": "echo hi"}')
    # each answer says its scope: this call once, this exact command or every call of
    # the tool for the rest of the session, or a refusal
    assert terminal.wait_for(
        "Allow Bash `echo hi`? [y]es (this command once) / [a]lways (this exact Bash command)"
        " / [t]ool (every Bash call) / [n]o:"
    ), terminal.screen
    say(terminal, "y")
    assert terminal.wait_for('allowed Bash {"command": "echo hi"}'), terminal.screen

    say(terminal, 'ASK Write {"file_path": "/etc/passwd", "content": "x"}')
    assert terminal.wait_for("Allow Write `/etc/passwd`?"), terminal.screen
    assert "[a]lways (these paths)" in terminal.screen
    say(terminal, "n write under ./out instead")
    assert terminal.wait_for("denied Write: write under ./out instead"), terminal.screen
    # The answer is echoed as typed (the keys are hidden only while the panel is up).
    assert "[n]o: n write under ./out instead" in terminal.screen.replace("\n", "")

    # A flag settles first: nobody is asked.
    say(terminal, 'ASK Bash {"command": "rm -rf /tmp/x"}')
    assert terminal.wait_for("denied Bash: denied: the command matches 'rm -rf *'"), terminal.screen

    say(terminal, 'ASK Bash {"command": "ls"}')
    assert terminal.wait_for("Allow Bash `ls`?"), terminal.screen
    say(terminal, "perhaps")
    assert terminal.wait_for("answer y, a, t or n"), terminal.screen
    say(terminal, "a")
    assert terminal.wait_for('allowed Bash {"command": "ls"}'), terminal.screen
    say(terminal, 'ASK Bash {"command": "ls"}')  # always: that exact command, not asked again
    assert terminal.wait_for("allowed Bash: ls (always, for this session)"), terminal.screen
    lines = terminal.screen.splitlines()
    asks = [i for i, line in enumerate(lines) if line == '> ASK Bash {"command": "ls"}']
    assert len(asks) == 2, terminal.screen
    # the second time: settled at once, no question in between
    assert lines[asks[1] + 1].strip() == "allowed Bash: ls (always, for this session)"
    # "always" covered `ls` only: another command of the same tool is asked; "tool"
    # then covers every call of it
    say(terminal, 'ASK Bash {"command": "pwd"}')
    assert terminal.wait_for("Allow Bash `pwd`?"), terminal.screen
    say(terminal, "t")
    assert terminal.wait_for('allowed Bash {"command": "pwd"}'), terminal.screen
    say(terminal, 'ASK Bash {"command": "whoami"}')
    assert terminal.wait_for("allowed Bash: whoami (always, for this session)"), terminal.screen
    assert "Allow Bash `whoami`" not in terminal.seen

    say(terminal, "/exit")
    assert terminal.wait() == 0
    assert "genesis chat: session closed - 8 turns" in terminal.screen
    assert f"genesis chat --resume {SESSION}" in terminal.screen
    assert "Traceback" not in terminal.seen
    assert len(started(fake)) == 1  # every turn in one process
    assert len(run_dirs(tmp_path)) == 8  # each turn recorded like a `genesis run`
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
    # every shipped CLI holds sessions now: a generic one of a backends file does not
    backends = tmp_path / "backends.toml"
    backends.write_text('[backends.oneway]\ncommand = ["oneway", "-p"]\n')
    terminal = Terminal(
        ["chat", "--backends-file", str(backends), "--backend", "oneway"],
        env={"GENESIS_TRANSCRIPTS": "off"},
    )
    terminals.append(terminal)
    assert terminal.wait() == 2
    screen = "".join(terminal.screen.splitlines())  # the message, unwrapped from 80 columns
    assert "genesis chat: error: backend 'oneway' has no two-way protocol" in screen
    assert "claude" in screen and "codex" in screen and "gemini" in screen


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


def test_a_question_between_turns_is_asked_in_place_of_the_prompt(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    """A background task of the CLI comes back after its turn and asks: chat asks
    where it can be answered (the prompt's read gives way), the typed answer never
    becomes a prompt, and the CLI's own turn is shown and recorded."""
    fake = FakeCLI(tmp_path, "claude")
    terminal = chat(terminals, fake, tmp_path)

    say(terminal, 'LATER 1 ASK Bash {"command": "make"}')
    assert terminal.wait_for("genesis: ok"), terminal.screen
    assert terminal.wait_for("Allow Bash `make`?"), terminal.screen
    say(terminal, "y")
    assert terminal.wait_for("the CLI worked by itself (turn 2)"), terminal.screen
    assert terminal.wait_for('allowed Bash {"command": "make"}'), terminal.screen
    say(terminal, "TEXT and now")
    assert terminal.wait_for("fake claude got: TEXT and now"), terminal.screen
    say(terminal, "/exit")
    assert terminal.wait() == 0
    prompts = [
        r["stdin"]["message"]["content"]
        for r in fake.records()
        if isinstance(r.get("stdin"), dict) and r["stdin"].get("type") == "user"
    ]
    assert prompts == ['LATER 1 ASK Bash {"command": "make"}', "TEXT and now"]  # no "y"
    assert "genesis chat: session closed - 3 turns" in terminal.screen
    assert len(run_dirs(tmp_path)) == 3
    assert "Traceback" not in terminal.seen


def test_chat_with_the_failer_asks_about_its_write_offline(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    # No credentials, no fake on PATH: the embedded failer plays claude's side.
    terminal = failer_chat(terminals, tmp_path, "off")
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


def test_chat_streams_the_answer_as_written_and_prints_it_once(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    """chat opens its session with partial=True where the CLI can (the failer writes
    claude's stream_event pieces): the panel follows the text, the answer is printed
    once, whole."""
    terminal = failer_chat(terminals, tmp_path, str(tmp_path / "runs"))
    say(terminal, "hello")
    assert terminal.wait_for("responding normally"), terminal.screen
    say(terminal, "/exit")
    assert terminal.wait() == 0
    assert terminal.screen.count("No failure mode specified, responding normally") == 1
    assert "Traceback" not in terminal.seen
    (own,) = [
        p
        for p in (tmp_path / "runs").iterdir()
        if json.loads((p / "meta.json").read_text()).get("kind") == "session"
    ]
    stdout = (own.parent / run_dirs(tmp_path)[0].name / "stdout.jsonl").read_text()
    assert '"stream_event"' in stdout  # the CLI was told --include-partial-messages


def test_model_and_permissions_switch_the_next_turns_and_a_refusal_is_words(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    """/model NAME and /permissions LEVEL are chat's own (never sent to the
    model): the next turn asks the CLI for them (its control requests, in the
    turn's stdin.jsonl) and they hold after; a switch the CLI cannot make is
    that turn's refusal in the check's words, and the chat goes on."""
    terminal = failer_chat(terminals, tmp_path, str(tmp_path / "runs"))
    say(terminal, "/help")
    assert terminal.wait_for("/permissions LEVEL"), terminal.screen
    say(terminal, "/model m-b")
    assert terminal.wait_for("model m-b asked of the next turn"), terminal.screen
    say(terminal, "hello")
    assert terminal.wait_for("responding normally"), terminal.screen
    say(terminal, "/permissions maybe")
    assert terminal.wait_for("takes a LEVEL (read-only, edit, full); nothing switched")
    say(terminal, "/permissions read-only")
    assert terminal.wait_for("permissions read-only asked"), terminal.screen
    say(terminal, "second")
    say(terminal, "third")
    say(terminal, "/exit")
    assert terminal.wait() == 0
    assert "Traceback" not in terminal.seen
    runs = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert [r["model"] for r in runs] == ["m-b"] * 3, runs
    asked = [
        [
            json.loads(line).get("request", {})
            for line in (d / "stdin.jsonl").read_text().splitlines()
        ]
        for d in sorted(
            run_dirs(tmp_path), key=lambda d: json.loads((d / "meta.json").read_text())["turn"]
        )
    ]
    switches = [
        [r.get("subtype") for r in turn if r.get("subtype", "").startswith("set_")]
        for turn in asked
    ]
    assert switches == [["set_model"], ["set_permission_mode"], []], asked
    assert any(r.get("subtype") == "set_model" and r.get("model") == "m-b" for r in asked[0])

    closed = tmp_path / "read-only"
    closed.mkdir()
    terminal = failer_chat(terminals, closed, "off", "--permissions", "read-only")
    say(terminal, "/permissions edit")
    assert terminal.wait_for("permissions edit asked"), terminal.screen
    say(terminal, "/write w.txt x")
    assert terminal.wait_for("[status 64: invalid_request]"), terminal.screen
    assert "opened with permissions='read-only' to 'edit'" in terminal.seen.replace("\r\n", "")
    say(terminal, "hello")
    assert terminal.wait_for("responding normally"), terminal.screen
    say(terminal, "/exit")
    assert terminal.wait() == 0
    assert not (closed / "w.txt").exists() and "Traceback" not in terminal.seen
