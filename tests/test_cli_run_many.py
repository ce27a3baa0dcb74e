"""``genesis run-many`` as a user runs it: a real subprocess."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support import marked_processes

GENESIS = [sys.executable, "-m", "coding_genesis.cli"]


def run_many(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*GENESIS, "run-many", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_results_in_input_order_with_bad_lines_answered(tmp_path: Path) -> None:
    lines = [
        json.dumps({"prompt": "hello", "backend": "failer", "name": "first"}),
        json.dumps({"prompt": "/fail", "backend": "failer"}),
        "{not json",
        "",
        json.dumps(["a list"]),
        json.dumps({"prompt": "/rate-limit", "backend": "failer"}),
        json.dumps({"prompt": "hello"}),  # no backend
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
        (64, "invalid_request"),
        (1, "incomplete"),
        (0, None),
    ]
    assert (results[0]["agent"], results[7]["agent"]) == ("first", "last")
    assert results[2]["message"].startswith("line 3: invalid JSON")
    assert results[3]["message"] == "line 5: expected a JSON object, got list"
    assert "backend" in results[5]["message"]
    progress = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert len(progress) == 8
    assert sorted(int(line.split("#")[1].split()[0]) for line in progress) == list(range(8))
    assert done.stderr.splitlines()[-1] == "genesis run-many: 2 succeeded, 6 failed"


def test_all_successes_exit_zero_from_stdin() -> None:
    lines = "\n".join(json.dumps({"prompt": f"hello {i}", "backend": "failer"}) for i in range(5))
    done = run_many("-", "-q", stdin=lines)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert [json.loads(line)["index"] for line in done.stdout.splitlines()] == [0, 1, 2, 3, 4]


def test_usage_errors(tmp_path: Path) -> None:
    missing = run_many(str(tmp_path / "missing.jsonl"))
    assert missing.returncode == 2  # a usage error, as in every command
    assert "cannot read" in missing.stderr
    bad = run_many("-", "--concurrency", "0", stdin="")
    assert bad.returncode == 2
    assert "positive integer" in bad.stderr
    empty = run_many("-", stdin="\n\n")
    assert (empty.returncode, empty.stdout) == (0, "")


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
    try:
        deadline = time.monotonic() + 30
        while len(marked_processes()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(marked_processes()) == 3
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "cancelled after 0/3 runs" in err
    assert out == ""
    assert marked_processes() == []
