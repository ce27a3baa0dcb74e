"""The REAL claude speaking its control protocol with ``ClaudeControl`` (the scenarios of
``tests/fakes/record_claude_control.py``, run afresh, nothing saved): what the recordings in
``tests/fakes/recordings/twoway`` show still holds for the installed claude."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes import record_claude_control as rec
from tests.fakes.model_server import FakeModelServer

pytestmark = pytest.mark.timeout(90)


def _notes(name: str, tmp_path: Path, server: FakeModelServer) -> list[str]:
    recording = rec.Recording(str(tmp_path))
    try:
        rec.SCENARIOS[name](recording, server)
    finally:
        recording.stop()
    return [line["note"] for line in recording.lines if line["dir"] == "#"]


def test_a_plain_echo_reaches_the_approver(
    real_claude: str, model_server: FakeModelServer, tmp_path: Path
) -> None:
    notes = _notes("echo", tmp_path, model_server)
    assert notes[0] == "ask Bash (command, reason None): allow_once"
    assert notes[1].startswith("TurnEnded(how='completed'")


def test_a_refusal_ends_the_turn_and_the_session_goes_on(
    real_claude: str, model_server: FakeModelServer, tmp_path: Path
) -> None:
    notes = _notes("write_end_turn", tmp_path, model_server)
    assert notes[1].startswith("TurnEnded(how='interrupted', message='stop right there')")
    assert notes[2] == "ended.txt after the turn: None"
    assert notes[3].startswith("TurnEnded(how='completed'")


def test_changed_input_is_what_runs(
    real_claude: str, model_server: FakeModelServer, tmp_path: Path
) -> None:
    notes = _notes("write_changed_input", tmp_path, model_server)
    assert "changed.txt after the turn: 'changed by the approver\\n'" in notes


def test_an_interrupt_stops_the_tool_and_the_next_turn_works(
    real_claude: str, model_server: FakeModelServer, tmp_path: Path
) -> None:
    notes = _notes("interrupt", tmp_path, model_server)
    assert "sleeping python running: True" in notes[1]
    assert notes[2].startswith("TurnEnded(how='interrupted'")
    assert "sleeping python alive 1 s after the turn's end: False" in notes
    assert notes[-2].startswith("TurnEnded(how='completed'")
    assert notes[-1] == "stdin closed: exit 0"
