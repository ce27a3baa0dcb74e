"""`genesis run` in a real pseudo-terminal: the live panel, and Ctrl-C."""

from __future__ import annotations

import json
import termios
from pathlib import Path
from typing import Any

import pytest

from tests.support import FakeCLI, marked_processes
from tests.terminal import Terminal, terminals

__all__ = ["terminals"]  # the fixture, active here too

pytestmark = pytest.mark.slow

# Shorter than the redactor's minimum: FAKE_CLI_SESSION looks like a secret by its name.
SESSION = "s-42"


def tool_use(tool_id: str, command: str) -> dict[str, Any]:
    return {
        "type": "assistant",
        "session_id": SESSION,
        "message": {
            "content": [
                {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command}}
            ]
        },
    }


def tool_result(tool_id: str) -> dict[str, Any]:
    return {
        "type": "user",
        "message": {"content": [{"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}]},
    }


def start(
    terminals: list[Terminal], fake: FakeCLI, tmp_path: Path, *args: str, prompt: str = "go"
) -> Terminal:
    env = {**fake.env(), "FAKE_CLI_SESSION": SESSION, "GENESIS_TRANSCRIPTS": str(tmp_path / "runs")}
    terminal = Terminal(
        ["run", "--backend", "claude", "--cli-path", fake.path, "--grace", "0.5", *args, prompt],
        env=env,
    )
    terminals.append(terminal)
    return terminal


def test_the_live_panel_shows_what_the_run_is_doing(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    retry = {
        "type": "system",
        "subtype": "api_retry",
        "attempt": 1,
        "max_retries": 10,
        "retry_delay_ms": 500,
        "error_status": 429,
    }
    fake.script(
        [
            {"init": True},
            {"emit": tool_use("t1", "pytest -q tests")},
            {"emit": retry},
            {
                "emit": {
                    "type": "assistant",
                    "message": {
                        "content": [{"type": "text", "text": "Looking at it\nAll green so far"}]
                    },
                }
            },
            {"sleep": 1.2},
            {"emit": tool_result("t1")},
            {"answer": "Finished the job"},
        ]
    )
    terminal = start(terminals, fake, tmp_path, "--timeout", "90")
    assert terminal.wait_for("All green so far"), terminal.screen
    assert terminal.wait_for("CLI retries 1 (last: API retry 1/10 (HTTP 429))"), terminal.screen
    screen = terminal.screen
    assert "genesis claude" in screen
    assert "/ 01:30" in screen  # elapsed against the timeout
    assert "state BUSY" in screen
    assert f"session {SESSION}" in screen
    assert "tool calls 1 (Bash)" in screen
    assert "running Bash: pytest -q tests" in screen
    assert "\x1b[" in terminal.raw.decode("utf-8", "replace")  # drawn, not printed plainly

    assert terminal.wait() == 0
    assert "Finished the job" in terminal.screen
    assert "genesis: ok" in terminal.screen
    assert "transcript: genesis show" in terminal.screen


def test_ctrl_c_stops_the_whole_tree_says_what_was_done_and_exits_130(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script(
        [
            {"init": True},
            {"emit": tool_use("t1", "sleep 600")},
            # A tool process in its own session that ignores SIGTERM, like real CLIs leave.
            {"grandchild": {"setsid": True, "ignore_sigterm": True, "hold_stdout": True}},
            {"hang": True},
        ]
    )
    # A grace long enough that the stopping phase (the grandchild sits out its
    # SIGTERM) is on the screen when the second Ctrl-C comes, however loaded the machine.
    terminal = start(terminals, fake, tmp_path, "--grace", "3")
    assert terminal.wait_for("running Bash: sleep 600"), terminal.screen
    # The grandchild says so once it ignores SIGTERM ("child" is written by the CLI
    # before the grandchild's Python has started: a Ctrl-C then would kill it at once).
    assert _records_when(fake, "grandchild"), "grandchild never started"
    assert marked_processes([fake.mark])  # the CLI and its grandchild are running

    terminal.send(b"\x03")
    # An impatient second Ctrl-C while the grandchild sits out its SIGTERM grace
    # must not cut the cleanup short.
    assert terminal.wait_for("stopping the process tree"), terminal.screen
    terminal.send(b"\x03")
    assert terminal.wait() == 130
    screen = terminal.screen
    assert "genesis run: stopped by Ctrl-C after" in screen
    assert "process tree stopped" in screen
    assert "so far: 1 tool call (Bash)" in screen  # issue 28: singular and plural
    assert f"session {SESSION}" in screen
    assert "was running: Bash: sleep 600" in screen
    assert "Traceback" not in screen
    assert marked_processes([fake.mark]) == []  # nothing left, not even the grandchild

    (run_dir,) = (tmp_path / "runs").iterdir()
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == 130 and result["tool_calls"] == 1


def _records_when(fake: FakeCLI, key: str, timeout: float = 10) -> list[dict[str, Any]]:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        records = [r for r in fake.records() if key in r]
        if records:
            return [{key: r[key]} for r in records]
        time.sleep(0.02)
    return []


def test_quiet_draws_no_panel_on_a_terminal(tmp_path: Path, terminals: list[Terminal]) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, {"sleep": 0.5}, {"answer": "quiet answer"}])
    terminal = start(terminals, fake, tmp_path, "--quiet")
    assert terminal.wait() == 0
    assert "quiet answer" in terminal.screen
    assert "tool calls" not in terminal.screen
    assert "genesis: ok" not in terminal.screen


def test_keys_typed_during_a_run_are_not_drawn_into_the_panel(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    """The kernel would echo them where the cursor is, into the panel, which
    then redraws a line too low and leaves its top behind; the echo is back
    on for the shell afterwards."""
    fake = FakeCLI(tmp_path, "claude")
    fake.script(
        [
            {"init": True},
            {"emit": tool_use("t1", "make")},
            {"sleep": 1.2},
            {"emit": tool_result("t1")},
            {"answer": "built"},
        ]
    )
    terminal = start(terminals, fake, tmp_path, "--timeout", "90")
    assert terminal.wait_for("running Bash: make"), terminal.screen
    terminal.send(b"ls -l\r")
    assert terminal.wait() == 0
    screen = terminal.screen
    assert "built" in screen and "genesis: ok" in screen
    assert "state BUSY" not in screen  # no panel left behind
    assert "ls -l" not in terminal.seen  # typed for the shell, never drawn
    assert termios.tcgetattr(terminal.master)[3] & termios.ECHO  # echo back on


def test_a_run_in_the_background_leaves_the_terminals_modes_alone(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    """`genesis run ... &`: the panel is drawn, but the terminal's modes are
    the shell's; changing them from a background job would stop it (SIGTTOU)."""
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, {"sleep": 0.5}, {"answer": "done in the background"}])
    env = {**fake.env(), "FAKE_CLI_SESSION": SESSION, "GENESIS_TRANSCRIPTS": str(tmp_path / "runs")}
    argv = ["run", "--backend", "claude", "--cli-path", fake.path, "--timeout", "60", "go"]
    terminal = Terminal(argv, env=env, background=True)
    terminals.append(terminal)
    assert terminal.wait() == 0  # 125: it was stopped
    assert "done in the background" in terminal.screen
    assert "genesis: ok" in terminal.screen


def test_budget_and_cost_read_once_as_a_terminal_shows_them(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    """Issue 28: a single agent's budget stop is no "shared budget"; money in fixed decimals with
    its currency (never ``7e-05`` nor ``0.0030549999999999996``); counts in the singular or
    plural; the command line's flags by name."""
    from tests.observers.test_metering import streaming_script

    fake = FakeCLI(tmp_path, "claude")
    fake.script(streaming_script())
    env = {**fake.env(), "FAKE_CLI_SESSION": SESSION, "GENESIS_TRANSCRIPTS": str(tmp_path / "runs")}
    terminal = Terminal(
        ["run", "-b", "claude", "--cli-path", fake.path, "--budget-tool-calls", "1", "go"],
        env=env,
        cols=220,  # one line each: the assertions read whole lines
    )
    terminals.append(terminal)
    assert terminal.wait() == 1, terminal.screen
    screen = terminal.screen
    said = "budget exceeded: --budget-tool-calls 1 (used 2 tool calls, 1 tool call over)"
    assert said in screen, screen
    assert "budget: stopped - --budget-tool-calls 1 - " + said in screen
    assert "shared" not in screen
    assert "tool calls over" not in screen and "tool call(s)" not in screen
    assert "e-0" not in screen and "99999" not in screen
    assert " USD" in screen  # the cost, with its currency
    assert "max_tool_calls=" not in screen and "prices=" not in screen
