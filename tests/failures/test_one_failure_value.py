"""One truth per failure: every failure the Process Failer, the fake CLIs and the
recordings can produce is analyzed once, and every view of it agrees —
``failure.retryable``, ``error_context.can_retry``, the report's "Retryable:"
line, whether ``RetryPolicy.default()`` retries it on a first attempt, the
escalation's actions, and what ``genesis run`` and ``genesis show`` print."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal

from coding_genesis import CodingGenesisAgent, retry
from coding_genesis.request import RetrySetting
from tests.support import RECORDINGS, FakeCLI, assert_one_truth, present

#: (prompt, agent timeout, expected category, expected retryable)
FAILER_FAILURES = [
    ("/fail", 10.0, "agent_error", True),
    ("/rate-limit", 10.0, "rate_limit", True),
    ("/timeout 30", 0.5, "timeout", False),  # no progress: not retried as-is
    ("/partial", 10.0, "partial", True),
    ("/fail-then-succeed 9", 10.0, "network", True),  # fails past the 3 retries
    ("/timeout soon", 10.0, "invalid_task", False),
]

#: Failures of a fake claude: (script, timeout, category, retryable).
FAKE_FAILURES: list[tuple[list[dict[str, Any]], float, str, bool]] = [
    (
        [{"init": True}, {"stderr": "Error: authentication failed"}, {"exit": 1}],
        10.0,
        "auth",
        False,
    ),
    ([{"init": True}, {"kill_self": "SIGKILL"}], 10.0, "agent_error", True),
    ([{"init": True}, {"exit": 0}], 10.0, "partial", True),
    ([{"init": True}, {"exit": 127}], 10.0, "unknown", False),  # its own 127: not "not found"
    (
        [
            {"init": True},
            {
                "emit": {
                    "type": "assistant",
                    "message": {
                        "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]
                    },
                }
            },
            {"hang": True},
        ],
        0.5,
        "timeout",
        True,  # progress was made: a retry with more time may help
    ),
]


def _failing_recordings() -> list[str]:
    return sorted(
        p.stem
        for p in RECORDINGS.glob("*.jsonl")
        if (RECORDINGS / f"{p.stem}.rc").read_text().strip() != "0"
        or p.stem.endswith(("_401", "_429", "_500", "stream_error"))
    )


@pytest.mark.slow
@pytest.mark.parametrize(("prompt", "timeout", "category", "retryable"), FAILER_FAILURES)
@pytest.mark.parametrize("policy", [None, "default"], ids=["one-attempt", "default-policy"])
def test_failer_failures_agree_in_every_view(
    prompt: str,
    timeout: float,
    category: str,
    retryable: bool,
    policy: RetrySetting,
    tmp_path: Path,
) -> None:
    agent = CodingGenesisAgent(
        "failer", timeout=timeout, retry=policy, options={"state_dir": str(tmp_path)}
    )
    with retry.testing():
        response = agent.run_sync(prompt)
    assert response["status"] != 0
    assert present(response["failure"])["category"] == category, present(response["failure"])[
        "reason"
    ]
    assert assert_one_truth(response) is retryable
    details = (response["data"] or {}).get("details")
    if details is not None:
        # Issue 28: the failer's own body says what the failure value says, from one table.
        assert details["retry_recommended"] is retryable, details
    if policy is not None:
        # The policy acted on that answer: retried what is retryable, not the rest.
        assert (response["retry_count"] > 0) is retryable
        assert all(e["retryable"] is retryable for e in response["retry_history"])


@pytest.mark.slow
@pytest.mark.parametrize(("script", "timeout", "category", "retryable"), FAKE_FAILURES)
def test_fake_cli_failures_agree_in_every_view(
    script: list[dict[str, Any]],
    timeout: float,
    category: str,
    retryable: bool,
    tmp_path: Path,
    portal: BlockingPortal,
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script(script)
    response = portal.call(fake.agent(timeout=timeout, grace=0.2).run, "go")
    assert response["failure"]["category"] == category, response["failure"]["reason"]
    assert assert_one_truth(response) is retryable


@pytest.mark.parametrize("name", _failing_recordings())
def test_recorded_failures_agree_in_every_view(name: str, tmp_path: Path) -> None:
    backend = name.split("_")[0]
    stdout = (RECORDINGS / f"{name}.jsonl").read_bytes()
    stderr = (RECORDINGS / f"{name}.stderr").read_text()
    rc = int((RECORDINGS / f"{name}.rc").read_text().strip())
    response = CodingGenesisAgent(backend).replay(stdout, returncode=rc, stderr=stderr)
    assert response["status"] != 0, name
    assert_one_truth(response)


def test_answers_without_a_run_agree_too(tmp_path: Path) -> None:
    missing = CodingGenesisAgent("claude", cli_path=str(tmp_path / "nope"))
    for _ in range(3):
        not_found = missing.run_sync("hi")
        assert not_found["error"] == "not_found"
        assert assert_one_truth(not_found) is False
    degraded = missing.run_sync("hi")
    assert degraded["error"] == "degraded" and degraded["status"] == 69
    assert_one_truth(degraded)
    invalid = CodingGenesisAgent("failer").run_sync("   ")
    assert invalid["error"] == "invalid_request"
    assert assert_one_truth(invalid) is False


@pytest.mark.slow
def test_genesis_run_and_genesis_show_print_the_same_answer(tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "GENESIS_TRANSCRIPTS": str(tmp_path / "runs"),
        "GENESIS_RUN_LOG": str(tmp_path / "runs.jsonl"),
        "GENESIS_FAILER_STATE_DIR": str(tmp_path / "failer"),
    }

    def genesis(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "coding_genesis._cli.main", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
            cwd=tmp_path,
        )

    for prompt, timeout, expected in (("/timeout 5", "0.5", "no"), ("/fail", "10", "yes")):
        # --retry-testing: the backoffs take no real time.
        run = genesis(
            "--retry-testing", "run", "-b", "failer", "-t", timeout, "--retries", "2", prompt
        )
        assert f"(retryable: {expected})" in run.stderr, run.stderr
        show = genesis("show", "last")
        assert show.returncode == 0, show.stderr
        assert f"Retryable: {expected.capitalize()}" in show.stdout, show.stdout
        shown = genesis("show", "last", "--json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["failure"]["retryable"] is (expected == "yes")
