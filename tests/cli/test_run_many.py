"""``genesis run-many`` as a user runs it: a real subprocess."""

from __future__ import annotations

import io
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from coding_genesis._cli.run_many import InOrder
from tests.support import interrupt_once_running, marked_processes

GENESIS = [sys.executable, "-m", "coding_genesis._cli.main"]


def run_many(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*GENESIS, "run-many", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.slow
def test_results_in_input_order_with_bad_lines_answered(tmp_path: Path) -> None:
    lines = [
        json.dumps({"prompt": "hello", "backend": "failer", "name": "first"}),
        json.dumps({"prompt": "/fail", "backend": "failer"}),
        "{not json",
        "",
        json.dumps(["a list"]),
        json.dumps({"prompt": "/rate-limit", "backend": "failer"}),
        # No backend: $GENESIS_BACKEND, else claude, as `genesis run` (issue 28); not installed.
        json.dumps({"prompt": "hello"}),
        json.dumps({"prompt": "/partial", "backend": "failer", "timeout": 10}),
        json.dumps({"prompt": "hello", "backend": "failer", "name": "last"}),
    ]
    batch = tmp_path / "batch.jsonl"
    batch.write_text("\n".join(lines) + "\n")
    done = run_many(str(batch), "--concurrency", "3")
    assert done.returncode == 1, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["index"] for r in results] == list(range(8))
    assert [(r["status"], r["error"]) for r in results] == [
        (0, None),
        (1, "cli_error"),
        (64, "invalid_request"),
        (64, "invalid_request"),
        (1, "cli_error"),
        (127, "not_found"),
        (1, "incomplete"),
        (0, None),
    ]
    assert (results[0]["agent"], results[7]["agent"]) == ("first", "last")
    assert results[2]["message"].startswith("line 3: invalid JSON")
    assert results[3]["message"] == "line 5: expected a JSON object, got list"
    assert "claude CLI not found" in results[5]["message"]
    progress = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert len(progress) == 8
    assert sorted(int(line.split("#")[1].split()[0]) for line in progress) == list(range(8))
    assert done.stderr.splitlines()[-1] == "genesis run-many: 2 succeeded, 6 failed"


@pytest.mark.slow
def test_all_successes_exit_zero_from_stdin() -> None:
    lines = "\n".join(json.dumps({"prompt": f"hello {i}", "backend": "failer"}) for i in range(5))
    done = run_many("-", "-q", stdin=lines)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert [json.loads(line)["index"] for line in done.stdout.splitlines()] == [0, 1, 2, 3, 4]


@pytest.mark.slow
def test_usage_errors(tmp_path: Path) -> None:
    missing = run_many(str(tmp_path / "missing.jsonl"))
    assert missing.returncode == 2  # a usage error, as in every command
    assert "cannot read" in missing.stderr
    bad = run_many("-", "--concurrency", "0", stdin="")
    assert bad.returncode == 2
    assert "expected a whole number >= 1, got '0'" in bad.stderr
    empty = run_many("-", stdin="\n\n")
    assert (empty.returncode, empty.stdout) == (0, "")


@pytest.mark.slow
def test_ctrl_c_stops_every_tree(tmp_path: Path) -> None:
    batch = tmp_path / "slow.jsonl"
    batch.write_text(
        "\n".join(json.dumps({"prompt": "/timeout 60", "backend": "failer"}) for _ in range(3))
    )
    proc = subprocess.Popen(
        [*GENESIS, "run-many", str(batch), "-j", "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = interrupt_once_running(proc, 3)
    assert proc.returncode == 130, err
    # Issue 28: every result so far is printed (here: each run cancelled), then the summary.
    results = [json.loads(line) for line in out.splitlines()]
    assert [r["index"] for r in results] == [0, 1, 2]
    assert {(r["status"], r["error"], r["failure"]["category"]) for r in results} == {
        (130, "cancelled", "cancelled")
    }
    assert err.splitlines()[-1] == (
        "genesis run-many: 0 succeeded, 0 failed, 3 cancelled (stopped by Ctrl-C)"
    )
    assert marked_processes() == []


def slow_first_batch(tmp_path: Path, quick: int = 3) -> Path:
    """A first request that takes a second, then ``quick`` ones that finish at once."""
    lines = [json.dumps({"prompt": "/timeout 1", "backend": "failer", "timeout": 30})]
    lines += [json.dumps({"prompt": f"hello {i}", "backend": "failer"}) for i in range(quick)]
    batch = tmp_path / "batch.jsonl"
    batch.write_text("\n".join(lines) + "\n")
    return batch


def run_many_in(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``genesis run-many`` with its temporary files under ``tmp``."""
    tmp.mkdir(exist_ok=True)
    return subprocess.run(
        [*GENESIS, "run-many", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "TMPDIR": str(tmp)},
    )


def spill_dirs(tmp: Path) -> list[Path]:
    """The private directories of run-many spill files left under ``tmp``."""
    return list(tmp.glob("genesis-run-many-*"))


def finish_order(stderr: str) -> list[int]:
    return [int(line.split("#")[1].split()[0]) for line in stderr.splitlines() if line[:1] == "["]


@pytest.mark.slow
def test_order_kept_when_later_requests_finish_first(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    done = run_many_in(tmp, str(slow_first_batch(tmp_path)), "-j", "4")
    assert done.returncode == 0, done.stderr
    assert finish_order(done.stderr)[-1] == 0, "the later requests finished first"
    assert [json.loads(line)["index"] for line in done.stdout.splitlines()] == [0, 1, 2, 3]
    assert spill_dirs(tmp) == [], "the spill file and its directory are gone"


@pytest.mark.slow
def test_unordered_prints_in_completion_order(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    done = run_many_in(tmp, str(slow_first_batch(tmp_path)), "-j", "4", "--unordered")
    assert done.returncode == 0, done.stderr
    printed = [json.loads(line)["index"] for line in done.stdout.splitlines()]
    assert printed == finish_order(done.stderr)
    assert printed[-1] == 0 and sorted(printed) == [0, 1, 2, 3]
    assert spill_dirs(tmp) == []
    assert "--unordered" in run_many_in(tmp, "--help").stdout


def test_waiting_results_are_in_the_file_not_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    out = io.BytesIO()
    in_order = InOrder(out)
    count = 2000
    lines = {i: json.dumps({"index": i, "text": "x" * 500}).encode() + b"\n" for i in range(count)}
    for i in range(count - 1, 0, -1):  # every result but the first finishes first
        in_order.add(i, lines[i])
    assert out.getvalue() == b""
    assert in_order.directory is not None
    assert Path(in_order.directory).parent == tmp_path
    spill = [Path(in_order.directory) / name for name in os.listdir(in_order.directory)]
    assert len(spill) == 1
    assert stat.S_IMODE(os.stat(in_order.directory).st_mode) == 0o700
    assert stat.S_IMODE(spill[0].stat().st_mode) == 0o600
    assert spill[0].stat().st_size == sum(len(lines[i]) for i in range(1, count))
    # In memory: one (offset, length) pair of ints per waiting result, no body.
    assert len(in_order.waiting) == count - 1
    assert all(
        isinstance(v, tuple) and len(v) == 2 and all(type(n) is int for n in v)
        for v in in_order.waiting.values()
    )
    in_order.add(0, lines[0])
    assert out.getvalue() == b"".join(lines[i] for i in range(count))
    assert in_order.waiting == {}
    assert spill[0].stat().st_size == 0, "emptied once nothing waits"
    directory = in_order.directory
    in_order.close()
    assert not os.path.exists(directory)


@pytest.mark.slow
def test_ctrl_c_deletes_the_spill_file(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    lines = [json.dumps({"prompt": "/timeout 60", "backend": "failer"})]
    lines += [json.dumps({"prompt": "hello", "backend": "failer"}) for _ in range(3)]
    batch = tmp_path / "batch.jsonl"
    batch.write_text("\n".join(lines) + "\n")
    proc = subprocess.Popen(
        [*GENESIS, "run-many", str(batch), "-j", "4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    try:
        deadline = time.monotonic() + 30
        waiting: list[Path] = []
        while time.monotonic() < deadline:
            waiting = [f for d in tmp.glob("genesis-run-many-*") for f in d.iterdir()]
            # All three quick results wait (not one while the next has yet to start).
            if waiting and waiting[0].read_bytes().count(b"\n") == 3:
                break
            time.sleep(0.05)
        assert waiting, "the quick results wait in the spill file"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    # Issue 28: the quick results that waited are printed too, in input order.
    results = [json.loads(line) for line in out.splitlines()]
    assert [(r["index"], r["status"]) for r in results] == [(0, 130), (1, 0), (2, 0), (3, 0)]
    assert spill_dirs(tmp) == []


@pytest.mark.slow
def test_flags_and_environment_give_the_lines_their_defaults(tmp_path: Path) -> None:
    """Issue 28: --backend, --model, --timeout... for the lines that do not set them, and
    $GENESIS_BACKEND as `genesis run` reads it; a line's own setting wins."""
    lines = [
        json.dumps({"prompt": "hello"}),
        json.dumps({"prompt": "/timeout 5", "timeout": 0.5}),  # its own timeout wins
        json.dumps({"prompt": "/timeout 5"}),  # --timeout 30: long enough
    ]
    batch = tmp_path / "batch.jsonl"
    batch.write_text("\n".join(lines) + "\n")
    done = run_many(str(batch), "--backend", "failer", "--timeout", "30", "--model", "m-1")
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["backend"], r["status"]) for r in results] == [
        ("failer", 0),
        ("failer", 124),
        ("failer", 0),
    ], done.stderr
    assert results[1]["timeout_s"] == 0.5 and results[2]["timeout_s"] == 30
    assert done.stderr.splitlines()[-1] == "genesis run-many: 2 succeeded, 1 failed"
    env = {**os.environ, "GENESIS_BACKEND": "failer"}
    from_env = subprocess.run(
        [*GENESIS, "run-many", "-", "-q"],
        input=json.dumps({"prompt": "hello"}),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert from_env.returncode == 0, from_env.stderr
    assert json.loads(from_env.stdout)["backend"] == "failer"
