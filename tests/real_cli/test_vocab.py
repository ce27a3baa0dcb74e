"""The option vocabulary through the REAL ``claude`` and ``codex`` CLIs, against the fake model
server: where an option's effect is observable, it is observed (a read-only run cannot write, an
edit run can, a turn limit stops the run, a retry cap bounds the requests the server sees).

Skips only when a CLI is not installed (``.ci/run`` installs both)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from coding_genesis import CodingGenesisAgent
from tests.fakes.model_server import FakeModelServer
from tests.fakes.real_cli import claude_env, codex_env, write_codex_home
from tests.real_cli.test_claude_codex import hermetic_env

__all__ = ["hermetic_env"]  # the autouse fixture of test_real_cli applies here too

pytestmark = pytest.mark.timeout(120)


def agent_for(
    backend: str, cli: str, server: FakeModelServer, tmp: Path, **settings: Any
) -> tuple[CodingGenesisAgent, Path]:
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    if backend == "claude":
        env = claude_env(server.url, tmp / "home", base_env={})
        # The cap under test comes from cli_max_retries=, not from the test's environment.
        env.pop("CLAUDE_CODE_MAX_RETRIES")
    else:
        env = codex_env(write_codex_home(tmp / "codex_home", server.url), base_env={})
    agent = CodingGenesisAgent(
        backend, cli_path=cli, cwd=work, timeout=60.0, grace=1.0, env=env, **settings
    )
    return agent, work


def shown(result: Mapping[str, Any]) -> str:
    return json.dumps({k: v for k, v in result.items() if k != "usage"}, default=str)[:3000]


@pytest.fixture(params=["claude", "codex"])
def cli(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param, request.getfixturevalue(f"real_{request.param}")


def test_read_only_refuses_a_write(
    cli: tuple[str, str], model_server: FakeModelServer, tmp_path: Path
) -> None:
    backend, path = cli
    agent, work = agent_for(backend, path, model_server, tmp_path, permissions="read-only")
    result = agent.run_sync("SCENARIO:write out.txt hello")
    assert result["status"] == 0, shown(result)
    assert not (work / "out.txt").exists(), shown(result)
    # The refusal comes back to the model as the tool's outcome (claude 2.1.330 says the tool
    # "is disabled for this session"; older versions and codex say "not enabled"/"read-only").
    refusals = ("not enabled", "read-only", "is disabled for this session")
    assert any(word in result["message"] for word in refusals), shown(result)


def test_edit_allows_a_write(
    cli: tuple[str, str], model_server: FakeModelServer, tmp_path: Path
) -> None:
    backend, path = cli
    agent, work = agent_for(backend, path, model_server, tmp_path, permissions="edit")
    result = agent.run_sync("SCENARIO:write out.txt hello")
    assert result["status"] == 0, shown(result)
    assert (work / "out.txt").read_text() == "hello\n"


def test_claude_full_runs_a_command_without_asking(
    real_claude: str, model_server: FakeModelServer, tmp_path: Path
) -> None:
    agent, work = agent_for("claude", real_claude, model_server, tmp_path, permissions="full")
    result = agent.run_sync('SCENARIO:bash python3 -c \'open("made.txt", "w").write("x")\'')
    assert result["status"] == 0, shown(result)
    assert (work / "made.txt").read_text() == "x", shown(result)


def test_claude_max_turns_stops_the_run(
    real_claude: str, model_server: FakeModelServer, tmp_path: Path
) -> None:
    agent, _ = agent_for("claude", real_claude, model_server, tmp_path, max_turns=1)
    result = agent.run_sync("SCENARIO:bash echo hi")
    assert result["status"] == 1, shown(result)
    assert result["error"] == "max_turns", shown(result)  # not a mere cli_error
    assert result["result_subtype"] == "error_max_turns"
    assert len(model_server.model_requests()) == 1


def test_claude_cli_max_retries_caps_its_api_retries(
    real_claude: str, model_server: FakeModelServer, tmp_path: Path
) -> None:
    agent, _ = agent_for("claude", real_claude, model_server, tmp_path, cli_max_retries=0)
    result = agent.run_sync("SCENARIO:429")
    assert result["status"] == 1, shown(result)
    assert result["api_error_status"] == 429
    assert result["cli_retries"] == 0
    assert [r.status for r in model_server.model_requests()] == [429]


def test_codex_cli_max_retries_caps_its_named_providers_retries(
    real_codex: str, model_server: FakeModelServer, tmp_path: Path
) -> None:
    agent, _ = agent_for(
        "codex",
        real_codex,
        model_server,
        tmp_path,
        cli_max_retries=2,
        options={"config": {"model_provider": "fake"}},
    )
    result = agent.run_sync("SCENARIO:429")
    assert result["status"] == 1, shown(result)
    assert result["cli_retries"] == 2, shown(result)
    assert [r.status for r in model_server.model_requests()] == [429, 429, 429]


def test_codex_reports_max_turns_as_not_honored(
    real_codex: str, model_server: FakeModelServer, tmp_path: Path
) -> None:
    agent, _ = agent_for("codex", real_codex, model_server, tmp_path, max_turns=2)
    result = agent.run_sync("SCENARIO:text all good")
    assert result["status"] == 0, shown(result)
    assert result["message"] == "all good"
    assert "max_turns=2 not honored: codex has no turn limit" in result["warnings"]


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory outside every root codex's workspace-write sandbox lets a command write to
    (the working directory, /tmp, $TMPDIR)."""
    if not os.path.isdir("/var/tmp") or not os.access("/var/tmp", os.W_OK):
        pytest.skip("no writable /var/tmp")
    path = Path(tempfile.mkdtemp(prefix="genesis-outside-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize(("level", "written"), [("edit", False), ("full", True)])
def test_codex_edit_keeps_commands_in_the_workspace_full_does_not(
    real_codex: str,
    model_server: FakeModelServer,
    tmp_path: Path,
    outside: Path,
    level: str,
    written: bool,
) -> None:
    agent, _ = agent_for("codex", real_codex, model_server, tmp_path, permissions=level)
    target = outside / "x.txt"
    result = agent.run_sync(f"SCENARIO:bash touch {target}")
    assert result["status"] == 0, shown(result)
    assert target.exists() is written, shown(result)
    if not written:
        assert "Read-only file system" in result["message"], shown(result)
