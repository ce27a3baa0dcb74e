"""Finding 7 (unbounded growth), run-many: no run directory for a request that
never started, and results kept in order with bounded memory (see also
tests/cli/test_run_many.py for the spill file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import interrupt_once_running, marked_processes

pytestmark = pytest.mark.slow

GENESIS = [sys.executable, "-m", "coding_genesis._cli.main"]


def write_batch(tmp_path: Path, lines: list[str]) -> Path:
    batch = tmp_path / "batch.jsonl"
    batch.write_text("\n".join(lines) + "\n")
    return batch


def test_no_run_directory_for_a_request_that_never_started(tmp_path: Path) -> None:
    transcripts = tmp_path / "transcripts"
    lines = [
        "{not json",
        json.dumps({"prompt": "x", "backend": "failer", "env": {"A": "1"}}),
        json.dumps({"prompt": "", "backend": "failer"}),
        json.dumps({"prompt": "x", "backend": "no-such-backend"}),
        json.dumps({"prompt": "x", "backend": "failer", "timeout": -1}),
        json.dumps({"prompt": "hello", "backend": "failer"}),
        json.dumps({"prompt": "/fail", "backend": "failer"}),
    ]
    done = subprocess.run(
        [*GENESIS, "run-many", str(write_batch(tmp_path, lines)), "-q", "-j", "3"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "GENESIS_TRANSCRIPTS": str(transcripts)},
    )
    assert done.returncode == 1, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["index"] for r in results] == list(range(len(lines)))
    assert [r["status"] for r in results[:5]] == [64] * 5, results
    assert all(r.get("transcript") is None for r in results[:5])
    started = {r["run_id"] for r in results[5:]}
    assert all(r["transcript"] == str(transcripts / r["run_id"]) for r in results[5:])
    assert {p.name for p in transcripts.iterdir()} == started


def test_no_run_directory_for_a_request_cancelled_before_it_started(tmp_path: Path) -> None:
    transcripts = tmp_path / "transcripts"
    lines = [json.dumps({"prompt": "/timeout 60", "backend": "failer"}) for _ in range(4)]
    proc = subprocess.Popen(
        [*GENESIS, "run-many", str(write_batch(tmp_path, lines)), "-j", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "GENESIS_TRANSCRIPTS": str(transcripts)},
    )
    out, err = interrupt_once_running(proc, 2)
    assert proc.returncode == 130, err
    # Issue 28: every request is answered (here: cancelled), in order, after the stop.
    results = [json.loads(line) for line in out.splitlines()]
    assert [(r["index"], r["error"]) for r in results] == [(i, "cancelled") for i in range(4)]
    assert marked_processes() == []
    # Two runs started, two never did: two run directories.
    assert len(list(transcripts.iterdir())) == 2
