"""`genesis run --max-cost` and friends, `genesis run-many` with a shared
budget, and budgets and cost in `genesis show`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from coding_genesis._cli.main import main
from tests.observers.test_metering import message, streaming_script
from tests.support import FakeCLI
from tests.tree_support import assert_tree_gone


@pytest.mark.slow
def test_run_max_cost_stops_and_show_tells_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeCLI(tmp_path)
    fake.script(streaming_script())
    for name, value in fake.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GENESIS_RUN_LOG", "off")
    base = tmp_path / "runs"
    code = main(
        [
            "run",
            "--backend",
            "claude",
            "--cli-path",
            fake.path,
            "--grace",
            "0.5",
            "--transcript-dir",
            str(base),
            "--max-cost",
            "0.03",
            "--json",
            "--quiet",
            "work",
        ]
    )
    result = json.loads(capsys.readouterr().out)
    assert code == 1
    assert result["error"] == "budget_exceeded"
    assert result["budget"]["exceeded"]["limit"] == "max_cost_usd"
    assert result["cost_source"] == "computed"
    assert_tree_gone(fake)

    assert main(["show", "last", "--transcript-dir", str(base)]) == 0
    out = capsys.readouterr().out
    assert "status    1 budget_exceeded" in out
    assert "usage: 4000 tokens (in 2000, out 2000, cache read 0, cache write 0)" in out
    # Issue 28: money in fixed decimals with its currency, the CLI's flags by name, and
    # "shared" only for a budget given to more than one agent or batch.
    assert "0.0360 USD (computed)" in out
    assert "budget: stopped - --max-cost 0.0300 USD" in out
    assert "budget exceeded: --max-cost 0.0300 USD (used 0.0360 USD, 0.0060 USD over)" in out
    assert "shared" not in out
    assert "Category: budget_exceeded" in out


def test_run_rejects_bad_budget_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "--backend", "failer", "--max-tokens", "-5", "hi"])
    assert exc.value.code == 2
    assert "--max-tokens" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", "--backend", "failer", "--max-tokens", "10", "--budget-warn-at", "2", "hi"])


@pytest.mark.slow
def test_run_many_shares_one_budget_across_the_batch(tmp_path: Path) -> None:
    fakes = [FakeCLI(tmp_path) for _ in range(6)]
    lines = []
    for fake in fakes:
        fake.script(
            [{"init": True}]
            + [s for n in range(1, 4) for s in (message(n), {"sleep": 0.3})]
            + [{"result": "done"}]
        )
        lines.append(
            json.dumps(
                {
                    "prompt": "work",
                    "backend": "claude",
                    "cli_path": fake.path,
                    "env": fake.env(),
                    "grace": 0.5,
                    "timeout": 20,
                }
            )
        )
    batch = tmp_path / "batch.jsonl"
    batch.write_text("\n".join(lines) + "\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "coding_genesis._cli.main",
            "run-many",
            str(batch),
            "--trusted-input",
            "--concurrency",
            "2",
            "--max-cost",
            "0.05",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"GENESIS_TRANSCRIPTS": "off", "GENESIS_RUN_LOG": "off", **_path_env()},
    )
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(results) == 6, done.stderr
    outcomes = {r["budget"]["outcome"] for r in results}
    assert outcomes == {"stopped", "not_started"}, [r["message"] for r in results]
    assert all(r["error"] == "budget_exceeded" for r in results)
    assert "budget_exceeded" in done.stderr
    # Issue 28: the summary tells the runs the budget stopped from those it never started.
    stopped = sum(r["budget"]["outcome"] == "stopped" for r in results)
    assert done.stderr.splitlines()[-1] == (
        f"genesis run-many: 0 succeeded, 0 failed, {stopped} stopped, {6 - stopped} not started"
    )
    assert "shared budget exceeded" in done.stderr  # one budget for the whole batch
    for fake in fakes:
        assert_tree_gone(fake)


def _path_env() -> dict[str, str]:
    import os

    keep = ("PATH", "HOME", "LANG", "GENESIS_TEST_SESSION", "TMPDIR")
    return {k: v for k, v in os.environ.items() if k in keep}
