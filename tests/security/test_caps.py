"""Finding 7: what a CLI can make us keep is capped, with clear markers; a
damaged or planted run directory is reported, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from coding_genesis._cli.main import main
from coding_genesis._pipeline.tally import MAX_PENDING, MAX_TOOL_NAMES, OTHER_TOOLS, RunTally
from coding_genesis.errors import ConfigError
from coding_genesis.events import ToolCallEvent, ToolResultEvent
from tests.support import FakeCLI, present


@pytest.mark.slow
def test_distinct_tool_names_and_unfinished_inputs_are_capped() -> None:
    tally = RunTally("/tmp")
    big = {"command": "x" * 1_000_000, **{f"k{i}": "v" for i in range(1000)}}
    for i in range(5 * MAX_PENDING):
        tally.add(ToolCallEvent(f"id{i}", f"Tool{i}-" + "n" * 500, big))
    assert tally.tool_calls == 5 * MAX_PENDING
    assert len(tally.tool_usage) == MAX_TOOL_NAMES + 1
    assert tally.tool_usage[OTHER_TOOLS] == 5 * MAX_PENDING - MAX_TOOL_NAMES
    assert sum(tally.tool_usage.values()) == tally.tool_calls
    assert all(len(name) <= 201 for name in tally.tool_usage)
    assert len(tally.pending) == MAX_PENDING
    _, kept, _started = next(iter(tally.pending.values()))
    assert len(kept) <= 16 and len(kept["command"]) <= 1025
    # The newest unfinished calls are the ones kept (and reported).
    assert "id4999" in tally.pending and "id0" not in tally.pending
    assert tally.unfinished_steps(stopped=False)[-1].startswith("Used Tool4999-")
    # A result still finds its call.
    tally.add(ToolResultEvent("id4999", "", False, "done"))
    assert "id4999" not in tally.pending


def test_the_raw_transcript_is_capped_and_says_where_it_stopped(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, {"stdout_flood": 300_000, "line": 200}, {"answer": "done"}])
    cap = 20_000
    result = fake.agent(transcripts=tmp_path / "runs", transcript_max_bytes=cap).run_sync("x")
    assert result["status"] == 0, result
    run_dir = Path(present(result["transcript"]))
    raw = (run_dir / "stdout.jsonl").read_bytes()
    assert 0 < len(raw) <= cap and raw.endswith(b"\n")
    warning = [w for w in result["warnings"] if "stopped being recorded" in w]
    assert warning and str(cap) in warning[0]
    stored = json.loads((run_dir / "result.json").read_text())
    assert stored["warnings"] == result["warnings"]
    events = (run_dir / "events.jsonl").read_text().splitlines()
    kinds = [json.loads(line)["type"] for line in events]
    assert "result" in kinds and kinds[-1] == "run_finished"  # every event, past the cap
    with pytest.raises(ConfigError, match="transcript_max_bytes"):
        fake.agent(transcript_max_bytes=0)


@pytest.fixture
def damaged(tmp_path: Path) -> Path:
    base = tmp_path / "runs"
    run = base / "abc123"
    run.mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({"run_id": "abc123", "started_ts": "x", "prompt": 5}))
    (run / "result.json").write_text(
        json.dumps({"status": "bad", "duration_s": "x", "tool_usage": [1], "tool_calls": "z"})
    )
    (run / "events.jsonl").write_text('{"type":"tool_call","name":5}\n[1]\n{"type":"text"}\n')
    return base


def test_show_reports_a_damaged_run_directory(
    damaged: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", "abc123", "--transcript-dir", str(damaged)]) == 1
    out, err = capsys.readouterr()
    assert "is damaged and cannot be shown" in err and "Traceback" not in err + out
    assert main(["runs", "--transcript-dir", str(damaged)]) == 0
    assert "abc123" in capsys.readouterr().out
    assert main(["runs", "--json", "--transcript-dir", str(damaged)]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == "abc123"


@pytest.mark.slow
def test_show_reads_bounded_amounts_of_a_huge_sparse_file(damaged: Path) -> None:
    run = damaged / "abc123"
    (run / "result.json").write_text(json.dumps({"status": 0, "message": "ok"}))
    with open(run / "events.jsonl", "wb") as fh:
        fh.truncate(1 << 30)  # 1 GiB of NUL bytes and no newline (sparse: no disk used)
    with open(run / "meta.json", "r+b") as fh:
        fh.truncate(1 << 30)  # a meta.json too big to be one: the run has none
    code = (
        "import sys\n"
        "from coding_genesis._cli.main import main\n"
        f"rc = main(['show', 'abc123', '--transcript-dir', {str(damaged)!r}])\n"
        # VmHWM: this process's own peak (ru_maxrss would carry the forking
        # pytest's peak across the exec)
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
        "print(hwm.split()[1], rc, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    rss_kib, rc = done.stderr.split()[-2:]
    assert "Traceback" not in done.stderr
    assert rc == "2" and "no readable meta.json" in done.stderr
    assert int(rss_kib) < 300 * 1024

    os.truncate(run / "meta.json", 0)
    (run / "meta.json").write_text(json.dumps({"run_id": "abc123"}))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    rss_kib, rc = done.stderr.split()[-2:]
    assert rc == "0", done.stderr
    assert int(rss_kib) < 300 * 1024, "show held the whole events.jsonl line"
