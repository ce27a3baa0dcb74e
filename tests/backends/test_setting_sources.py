"""``setting_sources=``: which settings a CLI reads, checked once, refused in one wording
by a backend that cannot be told, and mapped to each CLI's flags (what the real CLIs
then run or do not: tests/security/test_repository_programs.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis.backends import ClaudeBackend, CodexBackend, get_backend
from coding_genesis.config import AgentConfig
from coding_genesis.errors import AgentUsageError, ConfigError
from coding_genesis.request import Request
from tests.support import cli_request


def request(**fields: Any) -> Request:
    return cli_request(prompt="p", cwd="/tmp", **fields)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("user", "must be a sequence of 'user', 'project', 'local'"),
        (("user", "global"), "must name one or more of"),
        ((), "must name one or more of"),
        (42, "must be a sequence"),
    ],
)
def test_a_bad_value_is_a_config_error(value: Any, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        AgentConfig(setting_sources=value)


def test_kept_in_one_order_without_repeats() -> None:
    config = AgentConfig(setting_sources=["local", "user", "local"])
    assert config.setting_sources == ("user", "local")
    assert AgentConfig().setting_sources is None


def test_a_backend_that_cannot_be_told_refuses_in_one_wording() -> None:
    with pytest.raises(ConfigError) as at_construction:
        CodingGenesisAgent("failer", setting_sources=("user",))
    said = str(at_construction.value)
    assert said == (
        "backend 'failer' cannot be told which settings to read: "
        "setting_sources=('user',) cannot be used"
    )
    agent = CodingGenesisAgent("failer")
    result = agent.run_sync("hello", setting_sources=["user"])
    assert (result["status"], result["error"]) == (64, "invalid_request")
    assert result["message"] == said
    with pytest.raises(ConfigError, match="it can read: user; user \\+ project"):
        CodingGenesisAgent("codex", setting_sources=("project",))


def test_a_session_refuses_it_the_same_way() -> None:
    agent = CodingGenesisAgent("codex")
    with (
        pytest.raises((ConfigError, AgentUsageError)) as refused,
        agent.session_sync(setting_sources=("user", "local")),
    ):
        pass
    assert "cannot be told to read exactly setting_sources=('user', 'local')" in str(refused.value)


def test_claude_reads_the_users_settings_alone_by_default() -> None:
    args = ClaudeBackend().build_command(request()).args
    assert "--setting-sources=user" in args and "--strict-mcp-config" in args
    local = ClaudeBackend().build_command(request(setting_sources=("user", "local"))).args
    assert "--setting-sources=user,local" in local and "--strict-mcp-config" in local
    project = ClaudeBackend().build_command(request(setting_sources=("user", "project"))).args
    # The project's .mcp.json is then trusted: its servers load.
    assert "--setting-sources=user,project" in project and "--strict-mcp-config" not in project


def test_claude_sessions_start_the_same_way() -> None:
    protocol = ClaudeBackend().control()
    args = protocol.command(cli_request(cwd="/tmp")).args
    assert "--setting-sources=user" in args and "--strict-mcp-config" in args
    opted = protocol.command(cli_request(cwd="/tmp", setting_sources=("project",))).args
    assert "--setting-sources=project" in opted and "--strict-mcp-config" not in opted


def test_codex_marks_the_working_directory_and_above_untrusted(tmp_path: Any) -> None:
    work = tmp_path / "repo" / "sub"
    work.mkdir(parents=True)
    args = CodexBackend().build_command(cli_request(prompt="p", cwd=str(work))).args
    override = args[args.index("-c") + 1]
    for path in (work, work.parent, tmp_path, "/"):
        assert f'"{path}"={{trust_level="untrusted"}}' in override
    both = cli_request(prompt="p", cwd=str(work), setting_sources=("user", "project"))
    assert not any(a.startswith("projects=") for a in CodexBackend().build_command(both).args)


@pytest.mark.parametrize("name", ["claude", "codex", "gemini", "opencode", "qwen"])
def test_each_cli_names_the_repository_files_it_loads(name: str) -> None:
    backend = get_backend(name)
    assert backend.repository_files
    assert all(f.source in ("project", "local") for f in backend.repository_files)
    assert backend.default_setting_sources is not None
    assert backend.default_setting_sources in backend.setting_sources


SECURITY_PAGE = Path(__file__).parents[2] / "docs" / "security.md"
SECURITY_TESTS = Path(__file__).parents[1] / "security"


def table_rows() -> dict[str, str]:
    """docs/security.md's "Repository files" table: backend -> its row."""
    rows = {}
    for line in SECURITY_PAGE.read_text().splitlines():
        match = re.match(r"^\| `(\w+)` \| (.*) \|$", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


@pytest.mark.parametrize("name", ["claude", "codex", "gemini", "opencode", "qwen"])
def test_the_security_table_names_each_file_a_cli_loads(name: str) -> None:
    row = table_rows()[name]
    for entry in get_backend(name).repository_files:
        assert f"`{entry.path}`" in row, f"{name}: {entry.path} is not in docs/security.md"


def test_the_tests_the_security_table_names_exist() -> None:
    from tests.security.test_repository_programs import KINDS

    named = set(re.findall(r"`(test_\w+)", " ".join(table_rows().values())))
    kinds = set(re.findall(r"`\[(\w+)\]", " ".join(table_rows().values())))
    sources = " ".join(p.read_text() for p in SECURITY_TESTS.glob("test_repository_*.py"))
    assert named and all(f"def {test}(" in sources for test in named), named
    assert kinds == set(KINDS)
