"""The gemini, opencode and qwen backends' commands, the run's settings overlay and the node
launch of qwen's real entry point (the real CLIs: ``test_real_cli_more.py``; their recorded
streams: ``test_recordings.py``)."""

from __future__ import annotations

import json
import os
import signal
import stat
from pathlib import Path

import pytest

from coding_genesis._cli.env import node_path_for
from coding_genesis._pipeline.attempt import Refusal, resolve_program
from coding_genesis._pipeline.overlay import materialized
from coding_genesis.backend import CommandSpec, NodeScript, node_launch
from coding_genesis.backends import GeminiBackend, OpencodeBackend, QwenBackend, get_backend
from coding_genesis.errors import ConfigError
from coding_genesis.request import Request
from tests.support import cli_request

PROMPT = "--yolo; rm -rf / `SCENARIO:text` $(id)\nsecond line"


def request(**kwargs: object) -> Request:
    return cli_request(prompt=PROMPT, cwd="/work/dir", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["gemini", "opencode", "qwen"])
def test_registered_and_prompt_only_on_stdin(name: str) -> None:
    backend = get_backend(name)
    spec = backend.build_command(request(model="m-1", resume="sess-1"))
    assert spec.stdin == PROMPT.encode()
    assert not any(PROMPT in a or "SCENARIO" in a for a in spec.args), spec.args
    assert backend.supports_resume is True
    assert "sess-1" in " ".join(spec.args) and "m-1" in spec.args
    assert backend.notes


def test_gemini_command() -> None:
    spec = GeminiBackend().build_command(request(permissions="full"))
    assert spec.args[:3] == ("--output-format", "stream-json", "--skip-trust")
    assert "--approval-mode=yolo" in spec.args
    # One process that exits on SIGTERM, instead of a relauncher that ignores it; the
    # working directory's settings unread (see test_setting_sources_per_backend).
    assert spec.env == {"GEMINI_CLI_NO_RELAUNCH": "true", "GEMINI_CLI_TRUST_WORKSPACE": "false"}
    assert "-p" not in spec.args and not spec.overlay
    read_only = GeminiBackend().build_command(request(permissions="read-only"))
    assert "--approval-mode=plan" in read_only.args
    assert GeminiBackend.permission_levels == {"read-only", "edit", "full"}


def test_gemini_reports_what_it_cannot_honor() -> None:
    spec = GeminiBackend().build_command(request(cli_max_retries=0, max_turns=3))
    assert len(spec.warnings) == 2
    assert "cli_max_retries not honored" in spec.warnings[0]
    assert "max_turns not honored" in spec.warnings[1]
    assert not spec.overlay  # gemini refuses a settings file outside root-owned directories


def test_opencode_command() -> None:
    backend = OpencodeBackend()
    spec = backend.build_command(request(cli_max_retries=1, max_turns=2))
    assert spec.args[:5] == ("run", "--format", "json", "--dir", "/work/dir")
    assert [w.split(":")[0] for w in spec.warnings] == [
        "opencode has no turn limit flag",
        "opencode's API retries cannot be capped",
    ]
    assert "OPENCODE_PERMISSION" not in spec.env  # the CLI's default permissions
    levels = {
        level: json.loads(
            backend.build_command(request(permissions=level)).env["OPENCODE_PERMISSION"]
        )
        for level in sorted(backend.permission_levels)
    }
    assert levels == {
        "edit": {"edit": "allow", "bash": "deny"},
        "full": {"edit": "allow", "bash": "allow", "webfetch": "allow"},
        "read-only": {"edit": "deny", "bash": "deny"},
    }
    assert backend.pdeath_signal == signal.SIGKILL  # it may ignore SIGTERM for 30 s
    assert any("cannot be capped" in note for note in backend.notes)


def test_qwen_command_and_retry_overlay() -> None:
    spec = QwenBackend().build_command(request(permissions="edit", max_turns=4, cli_max_retries=0))
    assert "--approval-mode=auto-edit" in spec.args and "--max-session-turns=4" in spec.args
    assert spec.env["QWEN_CODE_SYSTEM_SETTINGS_PATH"] == "{overlay}/settings.json"
    settings = json.loads(spec.overlay["settings.json"])
    assert settings == {"model": {"generationConfig": {"maxRetries": 0}}}
    assert spec.env["QWEN_CODE_NO_RELAUNCH"] == "true"  # one process: SIGTERM reaches the CLI
    plain = QwenBackend().build_command(request())
    assert not plain.overlay and "QWEN_CODE_SYSTEM_SETTINGS_PATH" not in plain.env


def test_overlay_is_private_and_removed(tmp_path: Path) -> None:
    spec = CommandSpec(
        args=("--settings={overlay}/a/s.json",),
        env={"X": "{overlay}/s.json", "Y": "plain"},
        overlay={"s.json": b'{"a": 1}', "a/s.json": b"{}"},
    )
    with materialized(spec) as ready:
        directory = Path(ready.env["X"]).parent
        assert ready.args == (f"--settings={directory}/a/s.json",)
        assert ready.env["Y"] == "plain"
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
        assert stat.S_IMODE((directory / "s.json").stat().st_mode) == 0o600
        assert (directory / "s.json").read_bytes() == b'{"a": 1}'
    assert not directory.exists()
    with materialized(CommandSpec(args=("a",))) as same:
        assert same.args == ("a",)


@pytest.mark.parametrize("name", ["../escape", "/abs", "a/../../b", ""])
def test_overlay_paths_stay_inside(name: str) -> None:
    spec = CommandSpec(args=(), overlay={name: b"x"})
    with pytest.raises(ConfigError), materialized(spec):
        pass


def _fake_node(path: Path, version: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho {version}\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def qwen_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An npm install of qwen: its wrapper bin, its cli.js, node 22 beside it, node 20 on PATH."""
    modules = tmp_path / "tools" / "node_modules"
    package = modules / "@qwen-code" / "qwen-code"
    package.mkdir(parents=True)
    (package / "package.json").write_text('{"name": "@qwen-code/qwen-code"}')
    (package / "cli.js").write_text("// the real CLI\n")
    (package / "cli-entry.js").write_text("#!/usr/bin/env node\n")
    (package / "cli-entry.js").chmod(0o755)
    (modules / ".bin").mkdir()
    os.symlink("../@qwen-code/qwen-code/cli-entry.js", modules / ".bin" / "qwen")
    _fake_node(modules / "node" / "bin" / "node", "v22.23.3")
    old = _fake_node(tmp_path / "path" / "node", "v20.20.2")
    monkeypatch.setenv("PATH", f"{old.parent}{os.pathsep}/usr/bin:/bin")
    return modules


def test_qwen_runs_its_real_entry_point_under_node_22(qwen_install: Path) -> None:
    wrapper = str(qwen_install / ".bin" / "qwen")
    argv = resolve_program(QwenBackend(), (wrapper,))
    script = qwen_install / "@qwen-code" / "qwen-code" / "cli.js"
    # node 20 on PATH is skipped for the node 22 installed beside the package.
    assert argv == [str(qwen_install / "node" / "bin" / "node"), "--expose-gc", str(script)]


def test_qwen_node_given(qwen_install: Path, tmp_path: Path) -> None:
    wrapper = str(qwen_install / ".bin" / "qwen")
    node = _fake_node(tmp_path / "n24" / "node", "v24.1.0")
    argv = resolve_program(QwenBackend(), (wrapper,), str(node))
    assert argv == [str(node), "--expose-gc", str(qwen_install / "@qwen-code/qwen-code/cli.js")]
    refused = resolve_program(QwenBackend(), (wrapper,), str(tmp_path / "path" / "node"))
    assert isinstance(refused, Refusal)
    assert refused.message.endswith(
        "needs node >= 22; " + str(tmp_path / "path/node") + " is node 20"
    )


def test_qwen_without_a_recent_node_is_refused(qwen_install: Path) -> None:
    (qwen_install / "node" / "bin" / "node").unlink()
    refused = resolve_program(QwenBackend(), (str(qwen_install / ".bin" / "qwen"),))
    assert isinstance(refused, Refusal) and refused.error.value == "not_found"
    assert "needs node >= 22" in refused.message and "GENESIS_QWEN_NODE" in refused.message


def test_other_programs_run_as_given(tmp_path: Path) -> None:
    """A program that is not the package's bin (a fake CLI, a wrapper of one's own) is not
    touched, nor is an explicit multi-part cli_path."""
    fake = _fake_node(tmp_path / "qwen", "fake")
    assert resolve_program(QwenBackend(), (str(fake),)) == [str(fake)]
    assert resolve_program(QwenBackend(), (str(fake), "x")) == [str(fake), "x"]
    spec = NodeScript(package="@qwen-code/qwen-code", script="cli.js")
    assert node_launch(str(fake), spec, None) is None


def test_node_variable_is_read_by_the_commands_only() -> None:
    assert node_path_for("qwen", {"GENESIS_QWEN_NODE": "/opt/node22/bin/node"}) == (
        "/opt/node22/bin/node"
    )
    assert node_path_for("qwen", {}) is None
    assert node_path_for("claude", {"GENESIS_QWEN_NODE": "/x"}) is None


def test_setting_sources_per_backend() -> None:
    """What each CLI is told for ``setting_sources`` (the real CLIs behind it:
    tests/security/test_repository_programs.py): without "project" the working
    directory's settings are not read; the default is that on gemini, and the
    CLI's own on opencode and qwen, whose one switch costs more (documented)."""
    gemini = GeminiBackend()
    assert gemini.build_command(request()).env["GEMINI_CLI_TRUST_WORKSPACE"] == "false"
    both = request(setting_sources=("user", "project"))
    assert gemini.build_command(both).env["GEMINI_CLI_TRUST_WORKSPACE"] == "true"
    opencode, qwen = OpencodeBackend(), QwenBackend()
    user = request(setting_sources=("user",))
    assert opencode.build_command(user).env["OPENCODE_DISABLE_PROJECT_CONFIG"] == "1"
    assert "OPENCODE_DISABLE_PROJECT_CONFIG" not in opencode.build_command(request()).env
    assert "OPENCODE_DISABLE_PROJECT_CONFIG" not in opencode.build_command(both).env
    assert qwen.build_command(user).env["QWEN_CODE_SAFE_MODE"] == "1"
    assert "QWEN_CODE_SAFE_MODE" not in qwen.build_command(request()).env
    assert "QWEN_CODE_SAFE_MODE" not in qwen.build_command(both).env
    for backend in (gemini, opencode, qwen):
        assert backend.setting_sources == (("user",), ("user", "project"))
        assert backend.repository_files
