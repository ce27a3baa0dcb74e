"""`genesis stats`: runs, failures, tokens and cost by backend, model and day, from the run log."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from coding_genesis._cli.main import main
from coding_genesis._observers.runlog import append_run, run_record, token_counts, usage_stats
from tests.support import FakeCLI

DAY = 86400.0


def stats_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["stats", *args, "--json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


@pytest.fixture
def logged(tmp_path: Path) -> Path:
    """Three real runs of fake CLIs logged to a fresh run log: claude twice
    (one answer, one failure), codex once."""
    log = tmp_path / "runs.jsonl"
    claude = FakeCLI(tmp_path, "claude")
    agent = claude.agent(run_log=log)
    claude.script([{"answer": "done"}])
    assert agent.run_sync("do it")["status"] == 0
    claude.script([{"init": True}, {"stderr": "Error: Invalid API key"}, {"exit": 1}])
    assert agent.run_sync("do it again")["is_error"]
    codex = FakeCLI(tmp_path, "codex")
    codex.script([{"answer": "done"}])
    assert codex.agent(run_log=log).run_sync("do it")["status"] == 0
    return log


@pytest.mark.slow
def test_stats_by_backend_from_real_runs(logged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stats = stats_json(capsys, "--log", str(logged))
    assert stats["runs"] == 3 and stats["failures"] == 1  # the failure view is unchanged
    usage = stats["usage"]
    assert usage["by"] == "backend"
    claude, codex = usage["groups"]["claude"], usage["groups"]["codex"]
    assert claude["runs"] == 2 and claude["failures"] == 1 and claude["failure_rate"] == 0.5
    assert claude["input_tokens"] == 3 and claude["output_tokens"] == 5
    assert claude["runs_with_cost"] == 1 and claude["cost_usd"] == pytest.approx(0.0001)
    assert codex["runs"] == 1 and codex["failures"] == 0
    assert codex["input_tokens"] == 3 and codex["output_tokens"] == 5
    assert codex["runs_with_cost"] == 0 and codex["cost_usd"] == 0.0  # codex reports none
    total = usage["total"]
    assert total["runs"] == 3 and total["failures"] == 1
    assert total["input_tokens"] == 6 and total["output_tokens"] == 10
    assert total["runs_with_usage"] == 2  # the failed run reported no usage

    assert main(["stats", "--log", str(logged)]) == 0
    text = capsys.readouterr().out
    assert "Usage by backend:" in text
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.startswith("  ")}
    assert rows["claude"][1:4] == ["2", "1", "(50%)"]
    assert rows["claude"][-3:] == ["$0.0001", "(1/2", "runs)"]
    assert rows["codex"][1:3] == ["1", "0"] and rows["codex"][-1] == "-"
    assert rows["total"][1] == "3"
    assert "(1 run(s) reported no token usage)" in text


@pytest.mark.slow
def test_stats_by_model(logged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    usage = stats_json(capsys, "--log", str(logged), "--by", "model")["usage"]
    assert usage["by"] == "model"
    assert sum(g["runs"] for g in usage["groups"].values()) == 3
    assert usage["groups"]["fake-model"]["output_tokens"] >= 5
    assert main(["stats", "--log", str(logged), "--by", "model"]) == 0
    assert "Usage by model:" in capsys.readouterr().out


def test_stats_by_day_and_since(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "runs.jsonl"
    now = time.time()
    day_ago = now - DAY - 60
    for ts, ok, usage, cost in (
        (now - 60, True, {"input_tokens": 10, "output_tokens": 2}, 0.5),
        (now - 120, False, None, None),
        (day_ago, True, {"input_tokens": 1, "cache_read_input_tokens": 1000}, 0.25),
        (now - 10 * DAY, True, {"input_tokens": 7}, 1.0),
    ):
        response = {
            "backend": "claude",
            "status": 0 if ok else 1,
            "is_error": not ok,
            "usage": usage,
            "cost_usd": cost,
        }
        append_run(log, run_record(response, now=ts))
    today = time.strftime("%Y-%m-%d", time.gmtime(now - 60))
    yesterday = time.strftime("%Y-%m-%d", time.gmtime(day_ago))

    usage = stats_json(capsys, "--log", str(log), "--since", "2d", "--by", "day")["usage"]
    assert usage["total"]["runs"] == 3  # the run of 10 days ago is outside the window
    groups = usage["groups"]
    assert today != yesterday
    assert list(groups) == sorted(groups) and set(groups) <= {today, yesterday}
    assert (
        groups[yesterday]["input_tokens"] == 1001 and groups[yesterday]["cache_read_tokens"] == 1000
    )
    assert groups[yesterday]["cost_usd"] == 0.25
    assert usage["total"]["cost_usd"] == 0.75
    assert usage["total"]["failures"] == 1

    everything = stats_json(capsys, "--log", str(log), "--since", "all", "--by", "day")["usage"]
    assert everything["total"]["runs"] == 4 and everything["total"]["cost_usd"] == 1.75
    assert main(["stats", "--log", str(log), "--since", "2d", "--by", "day"]) == 0
    text = capsys.readouterr().out
    assert "Usage by day:" in text and yesterday in text and "$0.7500" in text


def test_stats_on_no_records_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "none.jsonl"
    assert main(["stats", "--log", str(missing)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(f"No runs recorded in the last 1d (run log: {missing}).")
    assert "--since all" in captured.out and not captured.err
    stats = stats_json(capsys, "--log", str(missing), "--by", "day")
    assert stats["runs"] == 0 and stats["usage"]["total"]["runs"] == 0
    assert stats["usage"]["groups"] == {}


def test_stats_reads_old_records_without_usage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "runs.jsonl"
    old = {"v": 1, "t": time.time() - 5, "ok": True, "backend": "codex", "model": None}
    log.write_text(json.dumps(old) + "\n")
    usage = stats_json(capsys, "--log", str(log), "--by", "model")["usage"]
    assert usage["groups"] == {"unknown": usage["total"]}
    assert usage["total"]["runs"] == 1 and usage["total"]["runs_with_usage"] == 0
    assert usage["total"]["runs_with_cost"] == 0


def test_stats_argument_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["stats", "--by", "week"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'week'" in err and "backend" in err and "Traceback" not in err
    with pytest.raises(ValueError, match="by must be one of"):
        usage_stats("/nonexistent", by="week")


def test_run_record_keeps_token_counts_and_cost() -> None:
    response = {
        "backend": "claude",
        "status": 0,
        "usage": {
            "input_tokens": 4,
            "output_tokens": 9,
            "cache_read_input_tokens": 300,
            "cache_creation_input_tokens": 50,
        },
        "cost_usd": 0.012,
    }
    record = run_record(response, now=1_800_000_000.0)
    assert record["input_tokens"] == 354 and record["output_tokens"] == 9
    assert record["cache_read_tokens"] == 300 and record["cache_write_tokens"] == 50
    assert record["cost_usd"] == 0.012 and record["cost_source"] is None
    bare = run_record({"backend": "codex", "usage": None, "cost_usd": True})
    assert bare["input_tokens"] is None and bare["cost_usd"] is None
    assert token_counts({"input_tokens": 5, "cached_input_tokens": 4}) == {
        "input_tokens": 5,
        "cache_read_tokens": 4,
    }
