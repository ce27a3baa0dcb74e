"""The real claude and codex CLIs (installed by .ci/run into .tools/), run by
a ``CodingGenesisAgent`` against the fake model server on 127.0.0.1: each
failure the server provokes comes back with the right category.

Skipped, with a reason, when the real CLIs are not installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal

from coding_genesis import CodingGenesisAgent
from coding_genesis._failures.report import parse_failure_report
from tests.fakes.model_server import FakeModelServer, sleep_command
from tests.fakes.plugin import model_server, real_claude, real_codex  # noqa: F401
from tests.fakes.real_cli import claude_env, codex_env, write_codex_home


def claude_agent(
    path: str, server: FakeModelServer, tmp: Path, **kwargs: Any
) -> CodingGenesisAgent:
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    env = claude_env(server.url, tmp / "home", max_retries=1, api_timeout_ms=10_000)
    return CodingGenesisAgent(
        "claude", cli_path=path, cwd=work, env=env, grace=1.0, run_log=False, **kwargs
    )


def codex_agent(path: str, server: FakeModelServer, tmp: Path, **kwargs: Any) -> CodingGenesisAgent:
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    home = write_codex_home(tmp / "codex_home", server.url, request_max_retries=1)
    return CodingGenesisAgent(
        "codex",
        cli_path=path,
        cwd=work,
        env=codex_env(home),
        grace=1.0,
        run_log=False,
        options={"sandbox": "workspace-write"},
        **kwargs,
    )


def check_failure(response: dict[str, Any], category: str) -> dict[str, Any]:
    assert response["status"] != 0, response["message"]
    failure: dict[str, Any] = response["failure"]
    assert failure["category"] == category, (failure["reason"], response["message"])
    assert response["error_context"]["error_type"] == category
    parsed = parse_failure_report(response["failure_report"]).to_dict()
    assert parsed == {**failure, "stderr_tail": ""}
    return failure


@pytest.mark.parametrize(
    ("scenario", "category"),
    [("429", "rate_limit"), ("401", "auth"), ("500", "agent_error")],
)
def test_claude_api_errors(
    scenario: str,
    category: str,
    real_claude: str,  # noqa: F811
    model_server: FakeModelServer,  # noqa: F811
    tmp_path: Path,
    portal: BlockingPortal,
) -> None:
    agent = claude_agent(real_claude, model_server, tmp_path, timeout=90)
    response = portal.call(agent.run, f"SCENARIO:{scenario}")
    check_failure(response, category)
    assert response["api_error_status"] == int(scenario)


def test_claude_recovers_by_itself(
    real_claude: str,  # noqa: F811
    model_server: FakeModelServer,  # noqa: F811
    tmp_path: Path,
    portal: BlockingPortal,
) -> None:
    agent = claude_agent(real_claude, model_server, tmp_path, timeout=90)
    response = portal.call(agent.run, "SCENARIO:429once")
    assert response["status"] == 0, response["message"]
    assert response["cli_retries"] >= 1
    assert response["failure"] is None


def test_claude_timeout_mid_tool(
    real_claude: str,  # noqa: F811
    model_server: FakeModelServer,  # noqa: F811
    tmp_path: Path,
    portal: BlockingPortal,
) -> None:
    agent = claude_agent(
        real_claude, model_server, tmp_path, timeout=12, options={"allowed_tools": ["Bash"]}
    )
    # A Python sleep: claude 2.1.330 refuses a bare `sleep 60` as a Bash command, and runs
    # python3 without asking only because allowed_tools lets it.
    response = portal.call(agent.run, "SCENARIO:sleep 60")
    failure = check_failure(response, "timeout")
    assert failure["suggested_retry"] is True  # a tool call was made
    assert failure["suggested_actions"][0] == "Retry with timeout=24s"
    # claude reports its Bash tool killed by our SIGTERM ("Exit code 137") before it exits
    step = f"Ran Bash: {sleep_command(60)}"
    assert response["unfinished_steps"] == [step]
    assert failure["blocked_on"] == f"Time limit insufficient (while: {step})"


def test_claude_write_is_relative_progress(
    real_claude: str,  # noqa: F811
    model_server: FakeModelServer,  # noqa: F811
    tmp_path: Path,
    portal: BlockingPortal,
) -> None:
    agent = claude_agent(
        real_claude, model_server, tmp_path, timeout=90, options={"allowed_tools": ["Write"]}
    )
    response = portal.call(agent.run, "SCENARIO:write notes/out.txt hello")
    assert response["status"] == 0, response["message"]
    assert response["files_modified"] == ["notes/out.txt"]
    assert response["completed_steps"] == ["Wrote notes/out.txt"]


@pytest.mark.parametrize(
    ("scenario", "category"),
    [("429", "rate_limit"), ("401", "auth"), ("500", "agent_error"), ("stream_error", "network")],
)
def test_codex_api_errors(
    scenario: str,
    category: str,
    real_codex: str,  # noqa: F811
    model_server: FakeModelServer,  # noqa: F811
    tmp_path: Path,
    portal: BlockingPortal,
) -> None:
    agent = codex_agent(real_codex, model_server, tmp_path, timeout=90)
    response = portal.call(agent.run, f"SCENARIO:{scenario}")
    check_failure(response, category)
