"""The redesign's contracts: no hidden side effects, configuration read in one
place, our own status codes only, checked options, typed results and events,
and the small defects found on the way, each with its test."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal

from coding_genesis import (
    AgentConfig,
    CodingGenesisAgent,
    ConfigError,
    ErrorCode,
    GenesisError,
    RunResult,
    Status,
    retry,
)
from coding_genesis.events import TextEvent
from coding_genesis.run_events import RunEvent
from tests.support import FakeCLI, present

ROOT = Path(__file__).parent.parent


def _clean_env(home: Path, **extra: str) -> dict[str, str]:
    """Only what a user's shell would have: no GENESIS_*, no XDG_* overrides."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), **extra}


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


LIBRARY_RUNS = textwrap.dedent(
    """
    from coding_genesis import CodingGenesisAgent, RetryPolicy
    agent = CodingGenesisAgent("failer", timeout=0.5, grace=0.2)
    assert agent.run_sync("hi")["status"] == 0
    assert agent.run_sync("/fail")["status"] == 1
    assert agent.run_sync("/timeout 5")["status"] == 124
    # A retry, without the rate limit's real 30 s wait.
    at_once = RetryPolicy.default().with_retries(1).with_category(
        "rate_limit", base_delay=0.01, use_retry_after=False
    )
    limited = agent.run_sync("/rate-limit", retry=at_once)
    assert limited["status"] == 1 and limited["attempts"] == 2, limited
    print("ok")
    """
)


@pytest.mark.slow
def test_the_library_writes_nothing_unless_asked(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", LIBRARY_RUNS],
        env={**_clean_env(home), "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"},
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    assert _files(home) == []  # no transcript, no run log, nothing under HOME
    assert _files(work) == []


@pytest.mark.slow
def test_the_genesis_command_records_runs_by_default(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {**_clean_env(home), "PYTHONPATH": str(ROOT)}

    def genesis(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "coding_genesis._cli.main", *args],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    run = genesis("run", "-b", "failer", "--json", "hello")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    runs = home / ".local" / "state" / "coding-genesis" / "runs"
    assert result["transcript"] == str(runs / result["run_id"])
    assert (home / ".local" / "state" / "coding-genesis" / "runs.jsonl").exists()
    show = genesis("show", "last")
    assert show.returncode == 0, show.stderr
    assert result["run_id"][:12] in show.stdout


@pytest.mark.slow
def test_files_we_write_are_private_even_with_a_permissive_umask(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    base = tmp_path / "runs"
    old = os.umask(0)
    try:
        result = fake.agent(transcripts=base, run_log=tmp_path / "log" / "runs.jsonl").run_sync(
            "hi"
        )
    finally:
        os.umask(old)
    run_dir = Path(present(result["transcript"]))
    for path in run_dir.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "log" / "runs.jsonl").stat().st_mode) == 0o600


@pytest.mark.slow
def test_a_clis_own_exit_code_is_never_mistaken_for_ours(
    tmp_path: Path, portal: BlockingPortal
) -> None:
    for code in (64, 69, 70, 75, 124, 126, 127, 130, 143, 145):
        (tmp_path / str(code)).mkdir()
        fake = FakeCLI(tmp_path / str(code), "claude")
        fake.script([{"init": True}, {"exit": code}])
        result = portal.call(fake.agent().run, "go")
        assert (result["status"], result["exit_code"], result["signal"]) == (1, code, None)
        assert result["error"] == "cli_error"


@pytest.mark.slow
def test_a_signal_we_did_not_send_stays_128_plus_n(tmp_path: Path, portal: BlockingPortal) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, {"kill_self": "SIGSEGV"}])
    result = portal.call(fake.agent().run, "go")
    assert (result["status"], result["signal"], result["error"]) == (128 + 11, "SIGSEGV", "killed")


def test_backend_options_are_checked_at_construction() -> None:
    with pytest.raises(ConfigError, match=r"unknown option\(s\) 'max_turnz'.*max_turns"):
        CodingGenesisAgent("claude", options={"max_turnz": 3})
    with pytest.raises(ConfigError, match="must be int"):
        CodingGenesisAgent("claude", options={"max_turns": "three"})
    with pytest.raises(ConfigError, match="valid options: config, profile, sandbox"):
        CodingGenesisAgent("codex", options={"max_turns": 3})
    with pytest.raises(ConfigError, match=r"unknown setting\(s\) 'timout'"):
        CodingGenesisAgent("failer", timout=3)  # type: ignore[call-arg]
    # Per call, the same check answers instead of raising (status 64).
    answer = CodingGenesisAgent("failer").run_sync("hi", options={"max_turnz": 3})
    assert answer["status"] == 64 and answer["error"] == "invalid_request"


def test_every_exception_we_raise_is_a_genesis_error() -> None:
    for bad in (
        lambda: CodingGenesisAgent("no-such-backend"),
        lambda: CodingGenesisAgent("failer", timeout=-1),
        lambda: CodingGenesisAgent("failer", cwd="/no/such/dir"),
        lambda: CodingGenesisAgent("failer", retry="sometimes"),  # type: ignore[arg-type]
        lambda: CodingGenesisAgent("failer", circuit_breaker="yes"),  # type: ignore[arg-type]
        lambda: AgentConfig(stop_signals=(999,)),
    ):
        with pytest.raises(GenesisError):
            bad()


def test_one_frozen_config_object() -> None:
    config = AgentConfig(backend="failer", timeout=5, retry="default")
    agent = CodingGenesisAgent(config=config)
    assert agent.config is config and agent.timeout == 5
    assert agent.config.supervisor().timeout == 5
    with pytest.raises(AttributeError):
        config.timeout = 1  # type: ignore[misc]
    faster = CodingGenesisAgent(config=config, timeout=1)
    assert faster.config.timeout == 1 and faster.config.retry == config.retry
    assert config.replace(grace=0.5).grace == 0.5


@pytest.mark.slow
def test_the_response_is_typed_with_a_documented_dict(tmp_path: Path) -> None:
    agent = CodingGenesisAgent("failer")
    response = agent.run_sync("/fail")
    typed = agent.last_result
    assert isinstance(typed, RunResult) and typed.to_dict() == response
    assert typed.error is ErrorCode.CLI_ERROR and response["error"] == "cli_error"
    assert (
        typed.failure is not None
        and typed.failure.retryable is present(response["failure"])["retryable"]
    )
    with pytest.raises(ValueError, match="no_such_field"):
        RunResult(status=0, message="", no_such_field=1)  # type: ignore[call-arg]
    assert set(Status) >= {Status.OK, Status.FAILED, Status.USAGE, Status.TIMEOUT}


@pytest.mark.slow
def test_events_are_typed_one_class_per_kind() -> None:
    agent = CodingGenesisAgent("failer")
    seen: list[Any] = []
    agent.subscribe(seen.append)
    agent.run_sync("hello")
    kinds = {type(event).__name__ for event in seen}
    assert {"StateEvent", "RunStartedEvent", "TextEvent", "RunFinishedEvent"} <= kinds
    text = next(e for e in seen if isinstance(e, TextEvent))
    assert text.to_dict()["type"] == "text" and text.to_dict()["text"] == text.text
    assert all(isinstance(e, RunEvent) for e in seen)  # the union covers every kind


@pytest.mark.slow
def test_the_duration_counts_every_attempt_of_a_retried_run(tmp_path: Path) -> None:
    policy = retry.RetryPolicy.default().with_category("network", base_delay=0.3)
    agent = CodingGenesisAgent("failer", retry=policy, options={"state_dir": str(tmp_path)})
    result = agent.run_sync("/fail-then-succeed 2")  # real (short) waits: 0.3 s, 0.6 s
    assert result["status"] == 0 and result["attempts"] == 3
    attempts = sum(entry["duration_s"] for entry in result["retry_history"])
    assert result["duration_s"] >= attempts + 0.9


@pytest.mark.slow
def test_the_default_backend_is_claude_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from coding_genesis._cli.main import main

    assert CodingGenesisAgent().backend_name == "claude"
    monkeypatch.delenv("GENESIS_BACKEND", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no claude here
    assert main(["run", "--json", "fix the test"]) == 127
    assert json.loads(capsys.readouterr().out)["backend"] == "claude"
    monkeypatch.setenv("GENESIS_BACKEND", "failer")
    assert main(["run", "-q", "hello"]) == 0
    capsys.readouterr()


def test_usage_errors_exit_2_in_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from coding_genesis._cli.main import main

    bad = [
        ["run"],
        ["run", "-b", "no-such-backend", "hi"],
        ["run", "--timeout", "-3", "hi"],
        ["run-many", str(tmp_path / "missing.jsonl")],
        ["show"],
        ["replay"],
        ["stats", "--since", "a-while"],
        ["doctor", "--backend", "no-such-backend"],
        ["no-such-command"],
    ]
    for argv in bad:
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own usage errors
            code = int(exc.code or 0)
        assert code == 2, argv
    capsys.readouterr()
    # A request refused by the agent is its status, not a usage error.
    assert main(["run", "-b", "failer", "   "]) == 64
    capsys.readouterr()


def test_stats_groups_failures_that_differ_by_a_timestamp(tmp_path: Path) -> None:
    from coding_genesis._observers.runlog import append_run, failure_stats, run_record

    log = tmp_path / "runs.jsonl"
    for when in ("2026-11-24T05:45:41Z", "2026-11-24T06:10:02.5Z", "2026-11-25T00:00:00Z"):
        response = {
            "run_id": when,
            "status": 1,
            "is_error": True,
            "backend": "claude",
            "failure": {"category": "rate_limit", "blocked_on": f"limited until {when}"},
        }
        append_run(log, run_record(response))
    stats = failure_stats(log, since_s=None)
    assert stats["top_blockers"] == [{"blocked_on": "limited until <time>", "count": 3}]


JQ_EXAMPLE = re.compile(
    r"genesis run --events (?:-b|--backend) failer \"([^\"]+)\" \| "
    r"jq -c 'select\(\.type ?== ?\"(\w+)\"\)[^']*'"
)


@pytest.mark.slow
def test_the_jq_examples_on_the_failer_print_something() -> None:
    from coding_genesis._cli.run import EXAMPLES

    texts = {"docs/cli.md": (ROOT / "docs" / "cli.md").read_text(), "genesis run --help": EXAMPLES}
    found = [(where, m) for where, text in texts.items() for m in JQ_EXAMPLE.finditer(text)]
    assert {where for where, _ in found} == set(texts), "each shows a jq example on the failer"
    for where, match in found:
        prompt, kind = match.groups()
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "coding_genesis._cli.main",
                "run",
                "--events",
                "-b",
                "failer",
                prompt,
            ],
            env={**os.environ, "GENESIS_TRANSCRIPTS": "off", "GENESIS_RUN_LOG": "off"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        types = [json.loads(line)["type"] for line in run.stdout.splitlines()]
        assert kind in types, (where, match.group(0), types)
