"""`genesis chat` and `genesis run --ask` warn when the working directory holds files the
CLI would start programs from (a person answers the questions; what those files start is
never asked about), say which, and whether this run reads them (the fake claude speaking
the control protocol)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coding_genesis._cli.repository import repository_warning
from coding_genesis.backends import get_backend
from tests.cli.test_approval_flags import terminals
from tests.support import FakeCLI
from tests.terminal import Terminal, genesis

__all__ = ["terminals"]  # the fixture, active here too

pytestmark = pytest.mark.timeout(90)


def hostile(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / ".claude").mkdir(parents=True)
    (repo / ".claude" / "settings.json").write_text('{"hooks": {}}')
    (repo / ".mcp.json").write_text('{"mcpServers": {}}')
    return repo


def environment(fake: FakeCLI, tmp_path: Path) -> dict[str, str]:
    return {
        **fake.env(),
        "GENESIS_CLAUDE_PATH": fake.path,
        "GENESIS_TRANSCRIPTS": "off",
        "GENESIS_RUN_LOG": "off",
        "GENESIS_LEDGER": str(tmp_path / "ledger"),
    }


@pytest.mark.slow
def test_run_ask_names_the_files_and_says_they_are_not_read(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    fake, repo = FakeCLI(tmp_path, "claude"), hostile(tmp_path)
    terminal = Terminal(
        ["run", "--ask", "--backend", "claude", "--cwd", str(repo), "hello"],
        env=environment(fake, tmp_path),
        cols=300,
    )
    terminals.append(terminal)
    assert terminal.wait() == 0, terminal.seen
    seen = terminal.seen
    assert f"genesis run: warning: {repo} holds files claude starts programs from:" in seen
    assert ".claude/settings.json: hooks" in seen and ".mcp.json: MCP servers" in seen
    assert "not read (--setting-sources project would read it)" in seen
    assert ".claude/agents" not in seen  # only what is there


@pytest.mark.slow
def test_chat_warns_before_the_first_prompt(tmp_path: Path, terminals: list[Terminal]) -> None:
    fake, repo = FakeCLI(tmp_path, "claude"), hostile(tmp_path)
    terminal = Terminal(
        ["chat", "--backend", "claude", "--cwd", str(repo), "--setting-sources", "user,project"],
        env=environment(fake, tmp_path),
        cols=300,
    )
    terminals.append(terminal)
    assert terminal.wait_for("READ (--setting-sources names project)"), terminal.seen
    assert "genesis chat: warning:" in terminal.seen
    terminal.send(b"/exit\r")
    assert terminal.wait() == 0, terminal.seen


@pytest.mark.slow
def test_a_run_without_a_person_asked_says_nothing_of_it(tmp_path: Path) -> None:
    fake, repo = FakeCLI(tmp_path, "claude"), hostile(tmp_path)
    done = genesis(
        ["run", "--backend", "claude", "--cwd", str(repo), "hello"],
        env=environment(fake, tmp_path),
    )
    assert done.returncode == 0, done.stderr
    assert b"starts programs from" not in done.stderr


def test_the_warning_follows_each_backends_own_table(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".codex").mkdir(parents=True)
    (repo / "opencode.json").write_text("{}")
    codex = repository_warning(get_backend("codex"), str(repo), None)
    assert codex is not None and ".codex: config.toml" in codex and "not read" in codex
    # opencode reads its project's settings by default; ("user",) turns that off.
    opencode = repository_warning(get_backend("opencode"), str(repo), None)
    assert opencode is not None and "opencode.json" in opencode and ": READ" in opencode
    assert "not read" in (repository_warning(get_backend("opencode"), str(repo), ("user",)) or "")
    assert repository_warning(get_backend("claude"), str(repo), None) is None
