"""Failure monitoring: the run log every run appends to, its off switches,
and ``genesis stats`` / ``failure_stats`` over a time window."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal

from coding_genesis import CodingGenesisAgent
from coding_genesis._cli.env import run_log_path
from coding_genesis._cli.main import main
from coding_genesis._cli.stats import format_stats
from coding_genesis._observers.runlog import (
    append_run,
    failure_stats,
    parse_window,
    read_runs,
    run_record,
)

NOW = 1_800_000_000.0
HOUR = 3600.0


def test_the_suite_logs_to_a_temporary_file(private_run_log: Path) -> None:
    assert run_log_path() == private_run_log
    assert not str(private_run_log).startswith(str(Path.home() / ".local"))


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"GENESIS_RUN_LOG": "off"}, None),
        ({"GENESIS_RUN_LOG": "OFF"}, None),
        ({"GENESIS_RUN_LOG": "0"}, None),
        ({"GENESIS_RUN_LOG": "false"}, None),
        ({"GENESIS_RUN_LOG": "/x/runs.jsonl"}, Path("/x/runs.jsonl")),
        ({"XDG_STATE_HOME": "/state"}, Path("/state/coding-genesis/runs.jsonl")),
        ({"XDG_STATE_HOME": "relative/ignored", "HOME": "/h"}, None),  # spec: must be absolute
        (
            {"GENESIS_RUN_LOG": "", "XDG_STATE_HOME": "/state"},
            Path("/state/coding-genesis/runs.jsonl"),
        ),
    ],
)
def test_default_location(env: dict[str, str], expected: Path | None) -> None:
    # Where `genesis` logs runs: the CLI edge reads the environment, the library never.
    found = run_log_path(None, env)
    if env.get("XDG_STATE_HOME") == "relative/ignored":
        assert found == Path.home() / ".local" / "state" / "coding-genesis" / "runs.jsonl"
    else:
        assert found == expected


def test_resolve_option(tmp_path: Path, private_run_log: Path) -> None:
    assert run_log_path("off") is None
    assert run_log_path(None) == private_run_log
    assert run_log_path(str(tmp_path / "x.jsonl")) == tmp_path / "x.jsonl"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_each_run_appends_one_record(tmp_path: Path, portal: BlockingPortal) -> None:
    log = tmp_path / "state" / "runs.jsonl"
    agent = CodingGenesisAgent("failer", timeout=10, run_log=log)
    ok = portal.call(agent.run, "hello")
    failed = portal.call(agent.run, "/rate-limit")
    records = _lines(log)
    assert [r["run_id"] for r in records] == [ok["run_id"], failed["run_id"]]
    assert records[0]["ok"] is True and records[0]["category"] is None
    assert records[0]["message"] is None  # no answer is stored
    second = records[1]
    assert second["ok"] is False
    assert second["category"] == "rate_limit"
    assert second["retry_after_s"] == 30.0
    assert second["backend"] == "failer" and second["status"] == 1
    assert second["blocked_on"] == "API rate limit (HTTP 429)"
    assert "hello" not in log.read_text()  # no prompt is stored
    assert oct(log.stat().st_mode & 0o777) == oct(0o600)


@pytest.mark.slow
def test_env_var_moves_and_switches_off_the_log_of_genesis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    moved = tmp_path / "moved.jsonl"
    monkeypatch.setenv("GENESIS_RUN_LOG", str(moved))
    assert main(["run", "-q", "-b", "failer", "hello"]) == 0
    assert len(_lines(moved)) == 1
    monkeypatch.setenv("GENESIS_RUN_LOG", "off")
    assert main(["run", "-q", "-b", "failer", "hello"]) == 0
    assert len(_lines(moved)) == 1
    capsys.readouterr()


@pytest.mark.slow
def test_the_library_reads_no_run_log_variable(
    tmp_path: Path, portal: BlockingPortal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The library logs runs only when asked (run_log=PATH); the variable is the CLI's.
    moved = tmp_path / "moved.jsonl"
    monkeypatch.setenv("GENESIS_RUN_LOG", str(moved))
    portal.call(CodingGenesisAgent("failer", timeout=10).run, "hello")
    assert not moved.exists()


@pytest.mark.slow
def test_agent_option_switches_off_the_log(
    tmp_path: Path, portal: BlockingPortal, monkeypatch: pytest.MonkeyPatch
) -> None:
    moved = tmp_path / "moved.jsonl"
    monkeypatch.setenv("GENESIS_RUN_LOG", str(moved))
    portal.call(CodingGenesisAgent("failer", timeout=10, run_log=False).run, "hello")
    assert not moved.exists()


@pytest.mark.slow
def test_an_unwritable_log_never_fails_a_run(tmp_path: Path, portal: BlockingPortal) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    agent = CodingGenesisAgent("failer", timeout=10, run_log=blocker / "runs.jsonl")
    assert portal.call(agent.run, "hello")["status"] == 0
    assert portal.call(agent.run, "/fail")["failure"]["category"] == "agent_error"


def test_bad_run_log_option() -> None:
    from coding_genesis.errors import ConfigError

    with pytest.raises(ConfigError):
        CodingGenesisAgent("failer", run_log=42)  # type: ignore[arg-type]


def test_concurrent_appends_do_not_interleave(tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    record = {"t": NOW, "ok": False, "category": "network", "blocked_on": "x" * 3000}

    def write(n: int) -> None:
        for i in range(50):
            assert append_run(log, {**record, "run_id": f"{n}-{i}"})

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r["run_id"] for r in _lines(log)) == sorted(
        f"{n}-{i}" for n in range(4) for i in range(50)
    )


def test_rotation_keeps_the_previous_part_readable(tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    for i in range(10):
        append_run(log, {"t": NOW - i, "ok": True, "backend": "claude"}, max_bytes=200)
    assert (tmp_path / "runs.jsonl.1").exists()
    assert failure_stats(log, since_s=None, now=NOW)["runs"] == len(_lines(log)) + len(
        _lines(tmp_path / "runs.jsonl.1")
    )


def make_log(path: Path) -> None:
    records = [
        # (hours ago, backend, category or None for success, blocker)
        (1, "claude", None, None),
        (2, "claude", "rate_limit", "API rate limit (HTTP 429)"),
        (3, "claude", "rate_limit", "API rate limit (HTTP 429)"),
        (4, "codex", "network", "stream disconnected"),
        (5, "codex", None, None),
        (30, "claude", "auth", "Invalid API key"),  # outside a 24h window
    ]
    for hours, backend, category, blocker in records:
        response = {
            "run_id": f"r{hours}",
            "backend": backend,
            "status": 0 if category is None else 1,
            "is_error": category is not None,
            "failure": {"category": category, "blocked_on": blocker} if category else None,
        }
        append_run(path, run_record(response, now=NOW - hours * HOUR))
    with path.open("a") as fh:
        fh.write('not json\n{"no": "time"}\n\n')


def test_failure_stats(tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    make_log(log)
    stats = failure_stats(log, since_s=24 * HOUR, now=NOW)
    assert stats["runs"] == 5 and stats["failures"] == 3
    assert stats["failure_rate"] == 0.6
    assert stats["by_category"] == {
        "rate_limit": {"count": 2, "share": 0.6667, "rate": 0.4},
        "network": {"count": 1, "share": 0.3333, "rate": 0.2},
    }
    assert stats["by_backend"] == {
        "claude": {
            "runs": 3,
            "failures": 2,
            "failure_rate": 0.6667,
            "by_category": {"rate_limit": 2},
        },
        "codex": {"runs": 2, "failures": 1, "failure_rate": 0.5, "by_category": {"network": 1}},
    }
    assert stats["top_blockers"][0] == {"blocked_on": "API rate limit (HTTP 429)", "count": 2}
    assert stats["malformed_lines"] == 2

    everything = failure_stats(log, since_s=None, now=NOW)
    assert everything["runs"] == 6 and everything["by_category"]["auth"]["count"] == 1
    codex = failure_stats(log, since_s=24 * HOUR, backend="codex", now=NOW)
    assert codex["runs"] == 2 and list(codex["by_backend"]) == ["codex"]
    empty = failure_stats(tmp_path / "missing.jsonl", now=NOW)
    assert empty["runs"] == 0 and empty["failure_rate"] == 0.0
    assert [r["run_id"] for r in read_runs(log, since_s=2.5 * HOUR, now=NOW)] == ["r1", "r2"]


def test_format_stats(tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    make_log(log)
    text = format_stats(failure_stats(log, since_s=24 * HOUR, now=NOW))
    assert text.splitlines()[0] == "Runs in the last 1d: 5, failed: 3 (60.0%)"
    assert "  rate_limit      2   66.7% of failures   40.0% of runs" in text
    assert "  claude      3 runs, 2 failed (66.7%): rate_limit 2" in text
    assert "      2x API rate limit (HTTP 429)" in text


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("24h", 86400.0),
        ("30m", 1800.0),
        ("7d", 604800.0),
        ("1w", 604800.0),
        ("90", 90.0),
        ("all", None),
    ],
)
def test_parse_window(text: str, seconds: float | None) -> None:
    assert parse_window(text) == seconds


@pytest.mark.parametrize("text", ["", "yesterday", "-1h", "0", "5y"])
def test_bad_window(text: str) -> None:
    with pytest.raises(ValueError, match="window"):
        parse_window(text)


def test_genesis_stats_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "runs.jsonl"
    for category in ("timeout", "timeout", None):
        response = {
            "backend": "failer",
            "status": 1 if category else 0,
            "is_error": bool(category),
            "failure": {"category": category} if category else None,
        }
        append_run(log, run_record(response))
    monkeypatch.setenv("GENESIS_RUN_LOG", str(log))
    assert main(["stats", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["runs"] == 3 and stats["by_category"]["timeout"]["count"] == 2
    assert main(["stats", "--since", "30m", "--backend", "failer"]) == 0
    assert "failed: 2 (66.7%)" in capsys.readouterr().out
    assert main(["stats", "--max-rate", "0.5"]) == 1
    assert "ALERT: failure rate 66.7% is above 50%" in capsys.readouterr().err
    assert main(["stats", "--max-failures", "2"]) == 0
    monkeypatch.setenv("GENESIS_RUN_LOG", "off")
    assert main(["stats"]) == 2
    assert "switched off" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["stats", "--since", "yesterday"])
    assert "expected a time window" in capsys.readouterr().err


@pytest.mark.slow
def test_genesis_run_then_stats_as_processes(tmp_path: Path) -> None:
    """The installed entry points, end to end: two runs, then the stats."""
    env = {**os.environ, "GENESIS_RUN_LOG": str(tmp_path / "runs.jsonl")}
    cli = [sys.executable, "-m", "coding_genesis._cli.main"]
    for prompt, code in (("hello", 0), ("/fail", 1)):
        done = subprocess.run(
            [*cli, "run", "--backend", "failer", prompt],
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == code
    done = subprocess.run(
        [*cli, "stats", "--json"], env=env, capture_output=True, timeout=60, check=True
    )
    stats = json.loads(done.stdout)
    assert stats["runs"] == 2 and stats["by_category"] == {
        "agent_error": {"count": 1, "share": 1.0, "rate": 0.5}
    }


def test_cancelled_and_not_started_runs_are_counted_apart(tmp_path: Path) -> None:
    """Issue 28: a Ctrl-C'd run and a run a spent budget never started are no failures."""
    log = tmp_path / "runs.jsonl"
    endings = [
        ("ok", 0, None, None),
        ("failed", 1, "auth", "cli_error"),
        ("cancelled", 130, "cancelled", "cancelled"),
        ("budget", 1, "not_started", "budget_exceeded"),
        ("limit", 69, None, "usage_limit"),  # a record from before its category existed
        ("old-cancel", 130, "unknown", "cancelled"),
    ]
    for run_id, status, category, error in endings:
        response = {
            "run_id": run_id,
            "backend": "claude",
            "status": status,
            "is_error": status != 0,
            "error": error,
            "failure": {"category": category} if category else None,
        }
        append_run(log, run_record(response, now=NOW - 60))
    stats = failure_stats(log, since_s=None, now=NOW)
    assert stats["runs"] == 6 and stats["failures"] == 1
    assert stats["cancelled"] == 2 and stats["not_started"] == 2
    assert stats["by_category"] == {"auth": {"count": 1, "share": 1.0, "rate": 0.1667}}
    text = format_stats(stats)
    assert text.splitlines()[0] == (
        "Runs in all time: 6, failed: 1 (16.7%), cancelled: 2, not started: 2"
    )


def test_an_interrupted_turn_is_counted_apart_and_a_refused_one_is_a_failure(
    tmp_path: Path,
) -> None:
    """A turn the caller interrupted is no failure (with the cancelled runs); a turn
    the approver ended by a refusal failed, in its own category."""
    log = tmp_path / "runs.jsonl"
    for run_id, status, error in (
        ("interrupted", 130, "interrupted"),
        ("refused", 1, "permission_denied"),
    ):
        response = {
            "run_id": run_id,
            "backend": "codex",
            "status": status,
            "is_error": True,
            "error": error,
            "failure": {"category": error},
        }
        append_run(log, run_record(response, now=NOW - 60))
    stats = failure_stats(log, since_s=None, now=NOW)
    assert stats["runs"] == 2 and stats["failures"] == 1 and stats["cancelled"] == 1
    assert stats["by_category"] == {"permission_denied": {"count": 1, "share": 1.0, "rate": 0.5}}
