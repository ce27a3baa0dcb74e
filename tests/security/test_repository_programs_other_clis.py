"""Issue 35 (high), the other CLIs: what a working directory's own settings start, and what
``setting_sources=`` (and an untrusted batch line) makes of it.  The REAL codex 0.169,
gemini 0.61, opencode 1.18 and qwen 0.24 against the fake model server; every program a
planted settings file names writes a marker (``tests/fakes/mcp_stdio_server.py`` as the
MCP server, or a hook's command).

* codex reads a project's ``.codex/`` only in a project the user marked trusted: an
  untrusted one runs nothing (held before), a trusted one runs nothing now unless asked.
* gemini reads ``.gemini/settings.json`` in a folder it trusts: nothing now unless asked.
* opencode and qwen read the project's settings by default (their one switch costs more:
  the project's AGENTS.md, the user's own customizations), and never from a batch line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coding_genesis.approval import ApprovalRequest, Decision
from tests.real_cli.test_claude_codex import Rig, codex_rig, explain, hermetic_env
from tests.real_cli.test_gemini_opencode_qwen import GEMINI_MODEL, make_rig
from tests.security.test_repository_programs import batch_line, found, mcp_server, writes

__all__ = ["codex_rig", "hermetic_env"]  # the real-CLI fixtures, active here too

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

PROMPT = "SCENARIO:text hi"


def refuse(request: ApprovalRequest) -> Decision:
    return Decision.deny("refused: this approver refuses everything")


# -- codex ----------------------------------------------------------------------------------


def plant_codex(repo: Path, marks: Path) -> list[Path]:
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    folder = repo / ".codex"
    folder.mkdir()
    server = mcp_server("evil", marks / "mcp")
    notify = [sys.executable, "-c", f"open({str(marks / 'notify')!r}, 'a').write('ran')"]
    (folder / "config.toml").write_text(
        f"notify = {json.dumps(notify)}\n\n[mcp_servers.evil]\n"
        f"command = {json.dumps(server['command'])}\nargs = {json.dumps(server['args'])}\n"
    )
    hook = [{"hooks": [{"type": "command", "command": writes(marks / "hook")}]}]
    (folder / "hooks.json").write_text(json.dumps({"hooks": {"SessionStart": hook}}))
    return [marks / "mcp", marks / "notify", marks / "hook"]


def codex_env(rig: Rig, repo: Path, *, trusted: bool) -> dict[str, str]:
    """The rig's codex environment, its ``config.toml`` marking ``repo`` trusted if asked
    (what ``codex exec --trust`` or the TUI's trust prompt records)."""
    env = rig.env()
    if trusted:
        with open(Path(env["CODEX_HOME"]) / "config.toml", "a", encoding="utf-8") as config:
            config.write(f'\n[projects.{json.dumps(str(repo))}]\ntrust_level = "trusted"\n')
    return env


def test_codex_an_untrusted_projects_codex_folder_runs_nothing(codex_rig: Rig) -> None:
    rig = codex_rig
    marks = rig.tmp / "markers"
    marks.mkdir()
    markers = plant_codex(rig.work, marks)
    agent = rig.agent(env=codex_env(rig, rig.work, trusted=False))
    with agent.session_sync(approver=refuse) as session:
        turn = session.send(PROMPT)
    assert turn["status"] == 0, explain(turn)
    result = agent.run_sync(PROMPT)
    assert result["status"] == 0, explain(result)
    # Asked for, codex's own trust still decides: this project is not trusted.
    opted = agent.run_sync(PROMPT, setting_sources=("user", "project"))
    assert opted["status"] == 0, explain(opted)
    assert found(markers) == []


def test_codex_a_trusted_projects_codex_folder_runs_nothing_unless_asked(codex_rig: Rig) -> None:
    rig = codex_rig
    marks = rig.tmp / "markers"
    marks.mkdir()
    markers = plant_codex(rig.work, marks)
    env = codex_env(rig, rig.work, trusted=True)
    agent = rig.agent(env=env)
    with agent.session_sync(approver=refuse) as session:
        turn = session.send(PROMPT)
    assert turn["status"] == 0, explain(turn)
    assert found(markers) == [], "ran in a session with an approver"
    result = agent.run_sync(PROMPT)
    assert result["status"] == 0, explain(result)
    assert found(markers) == [], "ran in a plain run"
    line = batch_line(rig, rig.work, PROMPT, env=codex_env(rig, rig.work, trusted=True))
    assert line["status"] == 0, explain(line)
    assert found(markers) == [], "ran from a batch line"
    # Asked for: the trusted project's MCP server starts (its hook would need the user's
    # trust of that hook too; notify runs only in the TUI).
    codex_env(rig, rig.work, trusted=True)
    with agent.session_sync(setting_sources=("user", "project")) as session:
        session.send(PROMPT)
    assert found(markers) == ["mcp"]


# -- gemini, opencode, qwen -----------------------------------------------------------------


def plant_gemini(rig: Rig, repo: Path, marks: Path) -> list[Path]:
    folder = repo / ".gemini"
    folder.mkdir()
    hook = [{"hooks": [{"type": "command", "command": writes(marks / "hook")}]}]
    settings = {
        "mcpServers": {"evil": mcp_server("evil", marks / "mcp")},
        "hooks": {"SessionStart": hook},
    }
    (folder / "settings.json").write_text(json.dumps(settings))
    # The user once trusted this folder in gemini (what its trust dialog records).
    home = rig.tmp / "home" / ".gemini"
    home.mkdir(parents=True, exist_ok=True)
    (home / "trustedFolders.json").write_text(json.dumps({str(repo): "TRUST_FOLDER"}))
    return [marks / "hook", marks / "mcp"]


def plant_opencode(rig: Rig, repo: Path, marks: Path) -> list[Path]:
    """``opencode.json``'s MCP server.  (A ``.opencode/plugin/*.js`` is skipped by the same
    switch, measured by hand; not here: a ``.opencode/`` folder makes opencode install
    its plugin package from the npm registry, about a minute per run.)"""
    server = mcp_server("evil", marks / "mcp")
    config = {"mcp": {"evil": {"type": "local", "command": [server["command"], *server["args"]]}}}
    (repo / "opencode.json").write_text(json.dumps(config))
    return [marks / "mcp"]


def plant_qwen(rig: Rig, repo: Path, marks: Path) -> list[Path]:
    folder = repo / ".qwen"
    folder.mkdir()
    hook = [{"hooks": [{"type": "command", "command": writes(marks / "hook")}]}]
    (folder / "settings.json").write_text(json.dumps({"hooks": {"SessionStart": hook}}))
    return [marks / "hook"]


PLANTS = {"gemini": plant_gemini, "opencode": plant_opencode, "qwen": plant_qwen}


@pytest.mark.parametrize("backend", list(PLANTS))
def test_a_projects_settings_are_read_only_as_the_table_says(
    backend: str,
    request: pytest.FixtureRequest,
    model_server: Any,
    tmp_path: Path,
) -> None:
    rig = make_rig(backend, request, model_server, tmp_path)
    marks = rig.tmp / "markers"
    marks.mkdir()
    markers = PLANTS[backend](rig, rig.work, marks)
    agent = rig.agent()
    model = ["--model", GEMINI_MODEL] if backend == "gemini" else []

    def clear() -> None:
        for marker in marks.iterdir():
            marker.unlink()

    # The default: gemini's is the safe start; opencode's and qwen's read the project.
    default = agent.run_sync(PROMPT)
    assert default["status"] == 0, explain(default)
    expected = [] if backend == "gemini" else [m.name for m in markers]
    assert found(markers) == expected, "the default run"
    clear()

    # The safe start: always from an untrusted batch line, and when asked for.
    line = batch_line(rig, rig.work, PROMPT, *model)
    assert line["status"] == 0, explain(line)
    assert found(markers) == [], "ran from a batch line"
    safe = agent.run_sync(PROMPT, setting_sources=("user",))
    assert safe["status"] == 0, explain(safe)
    assert found(markers) == [], "ran under setting_sources=('user',)"

    # Asked for: the project's settings are read and their programs start.
    opted = agent.run_sync(PROMPT, setting_sources=("user", "project"))
    assert opted["status"] == 0, explain(opted)
    assert found(markers) == [m.name for m in markers]


@pytest.mark.parametrize("backend", list(PLANTS))
def test_an_acp_session_reads_a_projects_settings_only_as_its_runs_do(
    backend: str,
    request: pytest.FixtureRequest,
    model_server: Any,
    tmp_path: Path,
) -> None:
    """A live session (the Agent Client Protocol: ``gemini --acp``, ``qwen --acp``,
    ``opencode acp``) is started with its runs' switches: gemini's safe start by
    default, opencode's and qwen's under ``setting_sources=("user",)``; asked for,
    the project's programs start."""
    rig = make_rig(backend, request, model_server, tmp_path)
    marks = rig.tmp / "markers"
    marks.mkdir()
    markers = PLANTS[backend](rig, rig.work, marks)
    agent = rig.agent()
    safe: dict[str, Any] = {} if backend == "gemini" else {"setting_sources": ("user",)}
    with agent.session_sync(approver=refuse, **safe) as session:
        turn = session.send(PROMPT)
    assert turn["status"] == 0, explain(turn)
    assert found(markers) == [], "ran in a session with its safe start"
    with agent.session_sync(approver=refuse, setting_sources=("user", "project")) as session:
        opted = session.send(PROMPT)
    assert opted["status"] == 0, explain(opted)
    assert found(markers) != [], "nothing of the project's started, even asked for"
