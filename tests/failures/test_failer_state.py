"""The Process Failer's state (issue 28): ``/fail-then-succeed`` keeps its counters in a private
directory under the temporary directory (not ``~/.local/state``), which survives between the
retry processes of one request, loses a key's counter when that key succeeds and a counter
nobody touched for 24 hours; its ``retry_recommended`` comes from the one retry table."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coding_genesis.backends.failer import ERROR_CATEGORIES, FAILER_SCRIPT, RETRYABLE_CODES
from coding_genesis.retry import DEFAULT_RETRIES


def failer(prompt: str, tmp: Path, *args: str) -> dict[str, object]:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp / "home"), "TMPDIR": str(tmp)}
    done = subprocess.run(
        [sys.executable, FAILER_SCRIPT, *args],
        input=prompt,
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    last = json.loads(done.stdout.splitlines()[-1])
    assert last["type"] == "result"
    return dict(json.loads(last["result"]))


@pytest.mark.slow
def test_counters_live_in_a_private_temporary_directory(tmp_path: Path) -> None:
    state = tmp_path / f"coding-genesis-failer-{os.getuid()}"
    key = "--request-key=one"
    assert failer("/fail-then-succeed 2", tmp_path, key)["status"] == "error"
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    (counter,) = state.iterdir()
    assert stat.S_IMODE(counter.stat().st_mode) == 0o600
    # The next process of the same request sees the count (the state survives it).
    second = failer("/fail-then-succeed 2", tmp_path, key)
    assert second["status"] == "error" and second["details"]["attempt"] == 2  # type: ignore[index]
    assert failer("/fail-then-succeed 2", tmp_path, key)["status"] == "success"
    assert list(state.iterdir()) == []  # the key succeeded: its counter is gone
    assert not (tmp_path / "home" / ".local").exists()  # nothing under the home directory


@pytest.mark.slow
def test_a_counter_untouched_for_a_day_is_dropped(tmp_path: Path) -> None:
    state = tmp_path / f"coding-genesis-failer-{os.getuid()}"
    failer("/fail-then-succeed 5", tmp_path, "--request-key=old")
    (stale,) = state.iterdir()
    day_ago = time.time() - 24 * 3600 - 60
    os.utime(stale, (day_ago, day_ago))
    failer("/fail-then-succeed 5", tmp_path, "--request-key=new")
    assert stale.name not in {p.name for p in state.iterdir()}
    assert len(list(state.iterdir())) == 1


def test_a_state_directory_of_someone_else_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / f"coding-genesis-failer-{os.getuid()}")
    done = subprocess.run(
        [sys.executable, FAILER_SCRIPT],
        input="/fail-then-succeed 1",
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "TMPDIR": str(tmp_path)},
        timeout=30,
        check=False,
    )
    assert done.returncode != 0 and "refusing it" in done.stderr
    assert list((tmp_path / "elsewhere").iterdir()) == []


@pytest.mark.slow
def test_retry_recommended_is_read_from_the_one_table(tmp_path: Path) -> None:
    assert set(RETRYABLE_CODES) == {
        c for c, cat in ERROR_CATEGORIES.items() if cat in DEFAULT_RETRIES
    }
    for prompt, code in (("/fail", "AGENT_ERROR"), ("/rate-limit", "RATE_LIMIT")):
        # Run on its own (no $GENESIS_FAILER_RETRYABLE): the table of the package it ships in.
        body = failer(prompt, tmp_path)
        assert body["error_code"] == code
        assert body["details"]["retry_recommended"] is (code in RETRYABLE_CODES)  # type: ignore[index]
    invalid = failer("/timeout soon", tmp_path)
    assert invalid["details"]["retry_recommended"] is False  # type: ignore[index]
