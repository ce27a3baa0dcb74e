"""Round three, finding 3: 8-bit C1 controls (U+009B CSI, U+009D OSC) and
bidi overrides pass JSON unescaped; on a terminal, ``--json`` and
``--events`` escape them (the same JSON value), the human-readable output
drops them, and into a pipe the JSON stays byte-exact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coding_genesis._util.display import json_for_terminal, printable
from tests.support import FakeCLI
from tests.terminal import Terminal, genesis

#: An 8-bit OSC title change and an 8-bit CSI screen clear (each after a
#: marker), bidi overrides and isolates.
C1 = "before\x9d0;PWNED\x9c\x9b2Jafter"
BIDI = "x\u202eevil\u202c \u2066iso\u2069 \u200e\u200f\u061c"
TEXT = f"{C1} {BIDI}"
UNSAFE = [chr(c) for c in (*range(0x80, 0xA0), 0x202A, 0x202E, 0x2066, 0x2069, 0x200E, 0x061C)]


def fake_run(tmp_path: Path) -> FakeCLI:
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, {"answer": TEXT}])
    return fake


def test_printable_drops_bidi_controls_and_json_for_terminal_escapes() -> None:
    assert printable(BIDI) == "xevil iso "
    assert printable(C1) == "before0;PWNED2Jafter"
    data = json.dumps({"t": "".join(UNSAFE) + "ünï ✓"}, ensure_ascii=False).encode()
    escaped = json_for_terminal(data)
    assert json.loads(escaped) == json.loads(data)  # the same JSON value
    assert all(c.encode() not in escaped for c in UNSAFE)
    assert b"\\u009b" in escaped and b"\\u202e" in escaped and "ünï ✓".encode() in escaped


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["--json", "--events", "text"])
def test_a_terminal_keeps_its_title_and_screen(tmp_path: Path, mode: str) -> None:
    fake = fake_run(tmp_path)
    args = ["run", "-b", "claude", "--cli-path", fake.path, "--transcript-dir", "off", "-q"]
    term = Terminal(
        [*args, *([mode] if mode != "text" else []), "go"],
        env={**fake.env(), "GENESIS_RUN_LOG": str(tmp_path / "runs.jsonl")},
        rows=200,  # the whole response fits: a clear would show
    )
    try:
        assert term.wait(60) == 0
    finally:
        term.close()
    screen = term._screen
    assert screen.title == "", f"the title changed to {screen.title!r}"
    assert "before" in term.screen, "the screen was cleared"
    assert "after" in term.screen
    for char in UNSAFE:
        assert char not in term.raw.decode("utf-8", "replace"), repr(char)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["--json", "--events"])
def test_into_a_pipe_the_json_is_exact(tmp_path: Path, mode: str) -> None:
    fake = fake_run(tmp_path)
    proc = genesis(
        ["run", "-b", "claude", "--cli-path", fake.path, "--transcript-dir", "off", mode, "go"],
        env={**fake.env(), "GENESIS_RUN_LOG": str(tmp_path / "runs.jsonl")},
    )
    assert proc.returncode == 0, proc.stderr
    assert TEXT.encode() in proc.stdout  # unescaped, byte for byte
    last = json.loads(proc.stdout.splitlines()[-1] if mode == "--events" else proc.stdout)
    assert last["message"] == TEXT
