"""Finding 4: escape sequences in the CLI's text, tool names or stderr never
reach a person's terminal; the JSON outputs stay exact."""

from __future__ import annotations

import io
import json
import re
import stat
from pathlib import Path
from typing import Any

import pytest

from coding_genesis._cli.main import main
from coding_genesis._observers.progress import ProgressView, RunTracker
from coding_genesis._util.display import printable
from coding_genesis.events import SessionEvent, TextEvent, ToolCallEvent
from tests.support import FakeCLI

#: OSC 52 clipboard write, a title change, a screen clear, C1 CSI, BEL, CR, DEL.
EVIL = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;pwned\x07\x1b[2J\x9b31m\rX\x7f\x08"
#: Any C0 control but newline and tab, DEL, or a C1 control.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def assert_clean(text: str) -> None:
    found = CONTROL.findall(text)
    assert not found, f"control characters reached the terminal: {found!r}"


def test_printable_strips_c0_c1_but_keeps_newline_and_tab() -> None:
    assert printable(f"a{EVIL}\tb\nc") == "a]52;c;cm0gLXJmIH4=]0;pwned[2J31mX\tb\nc"
    assert printable("plain ünïcode ✓") == "plain ünïcode ✓"
    assert printable(3) == "3"
    assert_clean(printable("".join(map(chr, range(0x100)))))


def evil_script(fake: FakeCLI) -> None:
    tool = {
        "type": "assistant",
        "message": {
            "content": [
                {"type": "text", "text": f"thinking {EVIL}"},
                {"type": "tool_use", "id": "t1", "name": f"Bash{EVIL}", "input": {"command": EVIL}},
            ]
        },
    }
    fake.script(
        [
            {"init": True},
            {"emit": tool},
            {"stderr": f"warn {EVIL}"},
            {"answer": f"answer {EVIL}"},
        ]
    )


@pytest.fixture
def evil_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[Path, str, str]:
    fake = FakeCLI(tmp_path, "claude")
    evil_script(fake)
    for name, value in fake.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GENESIS_RUN_LOG", str(tmp_path / "runs.jsonl"))
    base = tmp_path / "runs"
    argv = ["run", "-b", "claude", "--cli-path", fake.path, "--transcript-dir", str(base)]
    assert main([*argv, "go"]) == 0
    out, err = capsys.readouterr()
    return base, out, err


def test_genesis_run_text_output_is_clean_json_is_exact(
    evil_run: tuple[Path, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    base, out, err = evil_run
    assert "answer " in out
    assert_clean(out)
    assert_clean(err)
    assert main(["show", "last", "--json", "--transcript-dir", str(base)]) == 0
    stored = json.loads(capsys.readouterr().out)
    assert stored["message"] == f"answer {EVIL}"  # JSON keeps the exact text


@pytest.mark.parametrize(
    "argv",
    [
        ["show", "last"],
        ["runs"],
        ["replay", "last"],
    ],
    ids=["show", "runs", "replay"],
)
def test_views_of_a_recorded_run_are_clean(
    evil_run: tuple[Path, str, str], argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    base, _, _ = evil_run
    main([*argv, "--transcript-dir", str(base)])
    out, err = capsys.readouterr()
    assert out or err
    assert_clean(out)
    assert_clean(err)


def test_stats_is_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "runs.jsonl"
    entry: dict[str, Any] = {
        "ts": 9e9,
        "backend": f"claude{EVIL}",
        "status": 1,
        "error": "cli_error",
        "category": f"cat{EVIL}",
        "blocked_on": f"blocked{EVIL}",
    }
    log.write_text(json.dumps(entry) + "\n")
    main(["stats", "--log", str(log)])
    out, err = capsys.readouterr()
    assert_clean(out)
    assert_clean(err)


def test_run_many_progress_is_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = tmp_path / "batch.jsonl"
    batch.write_text(json.dumps({"prompt": "x", "backend": "failer", "cli_path": EVIL}) + "\n")
    assert main(["run-many", str(batch)]) == 1
    out, err = capsys.readouterr()
    assert "refused" in err
    assert_clean(err)
    assert json.loads(out)["status"] == 64


def test_live_panel_is_clean() -> None:
    from rich.console import Console

    tracker = RunTracker("claude", 60)
    tracker.on_event(SessionEvent(session_id=f"s{EVIL}", model=f"m{EVIL}"))
    tracker.on_event(ToolCallEvent("t1", f"Bash{EVIL}", {"command": EVIL}))
    tracker.on_event(TextEvent(f"hello {EVIL}"))
    buffer = io.StringIO()
    console = Console(file=buffer, width=200, force_terminal=True)
    console.print(ProgressView(tracker, console).render())
    assert "Bash" in buffer.getvalue()
    # The panel itself moves the cursor (CSI); no OSC, BEL, C1 or CR from the CLI.
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buffer.getvalue())
    assert_clean(shown)
    for line in tracker.summary_lines():
        assert_clean(line)


def test_doctor_is_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli = tmp_path / "claude"
    cli.write_text(f"#!/bin/sh\nprintf '%s\\n' '1.0 {EVIL.replace(chr(39), '')}'\n")
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    main(["doctor", "--backend", "claude", "--cli-path", str(cli)])
    out, err = capsys.readouterr()
    assert "1.0" in out
    assert_clean(out)
    assert_clean(err)
