"""Approvals from the command line: `genesis run --ask` with and without a
terminal, the approver flags of `genesis run` and `genesis run-many`, and a
batch line that names an approver (refused), against the fake claude speaking
the control protocol."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import FakeCLI, marked_processes
from tests.terminal import Terminal, genesis, terminals

__all__ = ["terminals"]  # the fixture, active here too

pytestmark = [pytest.mark.timeout(90), pytest.mark.slow]


def environment(fake: FakeCLI, tmp_path: Path) -> dict[str, str]:
    return {
        **fake.env(),
        "FAKE_CLI_SESSION": "s-42",
        "GENESIS_CLAUDE_PATH": fake.path,
        "GENESIS_TRANSCRIPTS": str(tmp_path / "runs"),
        "GENESIS_RUN_LOG": "off",
        "GENESIS_LEDGER": str(tmp_path / "ledger"),
    }


def run_json(fake: FakeCLI, tmp_path: Path, prompt: str, *flags: str) -> dict[str, Any]:
    proc = genesis(
        ["run", "--json", "--backend", "claude", "--grace", "1", prompt, *flags],
        env=environment(fake, tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def test_run_ask_on_a_terminal_asks_each_call(tmp_path: Path, terminals: list[Terminal]) -> None:
    fake = FakeCLI(tmp_path, "claude")
    prompt = 'ASK Write {"file_path": "notes.txt", "content": "hi"}'
    terminal = Terminal(
        ["run", "--ask", "--backend", "claude", "--grace", "1", prompt],
        env=environment(fake, tmp_path),
    )
    terminals.append(terminal)
    assert terminal.wait_for("Allow Write `notes.txt`? [y]es (this call once)")
    terminal.send(b"y\r")
    assert terminal.wait() == 0
    assert "allowed Write" in terminal.screen and "notes.txt" in terminal.screen
    assert "genesis: ok" in terminal.screen
    assert marked_processes([fake.mark]) == []


def test_run_ask_refused_tells_the_model_why(tmp_path: Path, terminals: list[Terminal]) -> None:
    fake = FakeCLI(tmp_path, "claude")
    terminal = Terminal(
        ["run", "--ask", "--backend", "claude", "--grace", "1", 'ASK Bash {"command": "make"}'],
        env=environment(fake, tmp_path),
    )
    terminals.append(terminal)
    assert terminal.wait_for("Allow Bash `make`?"), terminal.screen
    terminal.send(b"n not now\r")
    assert terminal.wait() == 0
    assert "denied Bash: not now" in terminal.screen


def test_run_ask_without_a_terminal_is_a_usage_error(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    proc = genesis(["run", "--ask", "--backend", "claude", "hi"], env=environment(fake, tmp_path))
    assert proc.returncode == 2
    assert b"genesis run: error: --ask asks on the terminal, and stdin is not one" in proc.stderr
    assert b"--approve-tools" in proc.stderr
    assert [r for r in fake.records() if "argv" in r] == []  # nothing started


def test_run_flags_allow_deny_and_leave_the_rest_denied(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    flags = ("--approve-tools", "Bash", "--deny-commands", "git push*", "rm -rf *")
    allowed = run_json(fake, tmp_path, 'ASK Bash {"command": "echo hi"}', *flags)
    assert allowed["message"] == 'allowed Bash {"command": "echo hi"}'
    assert allowed["approvals"][0]["source"] == "approver"
    denied = run_json(fake, tmp_path, 'ASK Bash {"command": "cd x && git push origin"}', *flags)
    assert denied["message"].startswith("denied Bash: denied: the command matches 'git push*'")
    unsettled = run_json(fake, tmp_path, 'ASK Read {"file_path": "/x"}', *flags)
    assert unsettled["approvals"][0]["source"] == "unsettled"
    assert (
        unsettled["message"] == "denied Read: denied: no approver settled this request: Read (read)"
    )


def test_run_writes_under(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    inside = str(tmp_path / "out" / "a.txt")
    flags = ("--writes-under", str(tmp_path / "out"))
    ok = run_json(fake, tmp_path, f'ASK Write {{"file_path": "{inside}", "content": "x"}}', *flags)
    assert ok["message"].startswith("allowed Write")
    no = run_json(fake, tmp_path, 'ASK Write {"file_path": "/etc/x", "content": "x"}', *flags)
    assert no["message"].startswith("denied Write: denied: writing '/etc/x' is not allowed")


def test_run_rejects_an_empty_pattern(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    proc = genesis(
        ["run", "--backend", "claude", "hi", "--deny-commands", ""],
        env=environment(fake, tmp_path),
    )
    assert proc.returncode == 2
    assert b"genesis run: error: deny_commands:" in proc.stderr


@pytest.mark.parametrize("trusted", [False, True])
def test_run_many_takes_the_approver_from_the_flags_never_from_a_line(
    tmp_path: Path, trusted: bool
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    lines = [
        {"prompt": 'ASK Bash {"command": "echo hi"}', "backend": "claude"},
        {"prompt": 'ASK Bash {"command": "git push"}', "backend": "claude"},
        {"prompt": "hi", "backend": "claude", "approve_tools": ["Bash"]},
        {"prompt": "hi", "backend": "claude", "approver": "allow everything"},
    ]
    batch = tmp_path / "batch.jsonl"
    batch.write_text("".join(json.dumps(line) + "\n" for line in lines))
    argv = ["run-many", str(batch), "--approve-tools", "Bash", "--deny-commands", "git push*"]
    proc = genesis(
        [*argv, *(["--trusted-input"] if trusted else [])], env=environment(fake, tmp_path)
    )
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["index"] for r in results] == [0, 1, 2, 3]
    assert results[0]["message"] == 'allowed Bash {"command": "echo hi"}'
    assert results[1]["message"].startswith("denied Bash: denied: the command matches")
    for result, field in ((results[2], "approve_tools"), (results[3], "approver")):
        assert result["status"] == 64
        assert (
            f"refused field(s) {field}: an approver comes only from the command line"
            in (result["message"])
        )
    assert proc.returncode == 1
