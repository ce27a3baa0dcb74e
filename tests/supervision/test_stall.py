"""Stall detection (issue 12): a silent *and* idle tree is stopped; a silent
but busy one is not.  Real processes (the fake CLI), short stall timeouts."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from coding_genesis import AgentConfig
from coding_genesis._failures.taxonomy import retry_verdict
from coding_genesis.errors import ConfigError
from coding_genesis.retry import DEFAULT_RETRIES, RetryPolicy
from coding_genesis.status import FailureCategory
from tests.support import FakeCLI, leaked_processes, present


@pytest.mark.slow
def test_silent_idle_cli_is_stopped_as_stalled(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path)
    fake.script([{"init": True}, {"sleep": 30}])
    started = time.monotonic()
    result = fake.agent(stall_timeout=1.5, timeout=20).run_sync("hi")
    took = time.monotonic() - started
    assert result["status"] == 124 and result["error"] == "stalled"
    assert result["stop_reason"] == "stalled"
    assert present(result["failure"])["category"] == "stalled"
    assert present(result["failure"])["retryable"] is True
    assert "stalled: no output on stdout or stderr for " in result["message"]
    assert "CPU seconds" in result["message"]
    assert 1.5 <= took < 6, took
    assert leaked_processes() == []


@pytest.mark.slow
def test_stderr_output_is_not_a_stall(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path)
    steps: list[dict[str, object]] = [{"init": True}]
    for _ in range(6):
        steps += [{"sleep": 0.4}, {"stderr": "still working"}]
    fake.script([*steps, {"result": "done"}])
    result = fake.agent(stall_timeout=1.0, timeout=20).run_sync("hi")
    assert result["status"] == 0, result["message"]


@pytest.mark.slow
def test_silent_busy_cli_is_not_stopped_before_its_wall_timeout(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path)
    fake.script([{"init": True}, {"busy": 30}])
    started = time.monotonic()
    result = fake.agent(stall_timeout=1.0, timeout=4).run_sync("hi")
    assert result["error"] == "timeout", result["message"]
    assert time.monotonic() - started >= 4
    fake.script([{"init": True}, {"busy": 2.5}, {"result": "computed"}])
    assert fake.agent(stall_timeout=1.0, timeout=20).run_sync("hi")["status"] == 0


@pytest.mark.slow
def test_stalled_run_is_retried_once_resuming_its_session(tmp_path: Path) -> None:
    """A CLI that hangs once: the stalled attempt is retried at once in its
    session, and the retry succeeds."""
    fake = FakeCLI(tmp_path)
    fake.script([{"init": True}, {"sleep": 30}])
    policy = RetryPolicy.default().with_category(FailureCategory.STALLED, base_delay=0.01)
    agent = fake.agent(stall_timeout=1.0, timeout=20, retry=policy)

    def hang_only_once(event: Any) -> None:
        if event.kind == "session":  # the first CLI has read its script: the next one answers
            fake.script([{"echo_prompt": True}])

    agent.subscribe(hang_only_once)
    result = agent.run_sync("hi")
    assert result["status"] == 0 and result["retry_count"] == 1, result["message"]
    (entry,) = result["retry_history"]
    assert entry["category"] == "stalled" and entry["action"] == "retry"
    second = [r["argv"] for r in fake.records() if "argv" in r][1]
    assert f"--resume={entry['session_id']}" in second
    fake.script([{"init": True}, {"sleep": 30}])  # one that always hangs: retried once only
    again = fake.agent(stall_timeout=1.0, timeout=20, retry=policy).run_sync("hi")
    assert again["error"] == "stalled" and again["retry_count"] == 1


def test_stalled_is_retryable_once_whatever_the_progress() -> None:
    assert DEFAULT_RETRIES[FailureCategory.STALLED] == 1
    assert retry_verdict(FailureCategory.STALLED, progress=False)[0] is True
    assert retry_verdict(FailureCategory.STALLED, progress=True)[0] is True


def test_stall_timeout_setting() -> None:
    assert AgentConfig().stall_timeout == 600.0
    assert AgentConfig(stall_timeout=None).supervisor().stall_timeout is None
    with pytest.raises(ConfigError):
        AgentConfig(stall_timeout=0)


@pytest.mark.slow
def test_runs_and_show_say_which_runs_stalled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from coding_genesis._cli.main import main

    fake = FakeCLI(tmp_path)
    fake.script([{"init": True}, {"sleep": 30}])
    runs = str(tmp_path / "runs")
    result = fake.agent(stall_timeout=1.0, transcripts=runs).run_sync("hi")
    assert result["error"] == "stalled"
    capsys.readouterr()
    assert main(["runs", "--json", "--transcript-dir", runs]) == 0
    [row] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["stalled"] is True and row["error"] == "stalled" and row["ended_by"] is None
    assert main(["show", result["run_id"], "--transcript-dir", runs]) == 0
    shown = capsys.readouterr().out
    assert "status    124 stalled" in shown and "silent and idle" in shown


@pytest.mark.slow
def test_genesis_run_stall_timeout_option(tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    fake = FakeCLI(tmp_path)
    fake.script([{"init": True}, {"sleep": 30}])
    env = {**os.environ, **fake.env(), "GENESIS_TRANSCRIPTS": "off", "GENESIS_RUN_LOG": "off"}
    argv = [sys.executable, "-m", "coding_genesis._cli.main", "run", "-b", "claude", "--json"]
    argv += ["--cli-path", fake.path, "--timeout", "20", "--stall-timeout", "1", "hi"]
    done = subprocess.run(argv, env=env, capture_output=True, timeout=60)
    result = json.loads(done.stdout)
    assert done.returncode == 124 == result["status"] and result["error"] == "stalled"
    off = subprocess.run(
        [*argv[:-3], "--stall-timeout", "off", "--timeout", "2", "hi"],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert json.loads(off.stdout)["error"] == "timeout"
