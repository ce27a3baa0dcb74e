"""Finding 5: least privilege.  ``inherit_env=False`` (``genesis run
--clean-env``) gives the CLI a minimal environment, its backend's declared
needs, an allow-list and ``env=``; the default still inherits everything, and
``genesis doctor`` says which credentials a run would expose."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coding_genesis._cli.main import main
from coding_genesis.errors import ConfigError
from tests.support import SESSION_ENV, FakeCLI

UNRELATED = {
    "AWS_SECRET_ACCESS_KEY": "aws-secret-value-123",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
    "OTHER_SERVICE_TOKEN": "other-token-value-1",
}


def child_env(fake: FakeCLI, **kwargs: Any) -> list[str]:
    fake.script([{"init": True}, {"answer_env": True}])
    result = fake.agent(**kwargs).run_sync("x")
    assert result["status"] == 0, result
    names: list[str] = json.loads(result["message"])
    return names


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in UNRELATED.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-needed-value")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://example.invalid")
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("MY_TOOL_SETTING", "1")


def test_the_default_inherits_everything(tmp_path: Path, environ: None) -> None:
    names = child_env(FakeCLI(tmp_path, "claude"))
    assert set(UNRELATED) <= set(names)


def test_a_clean_env_passes_only_what_is_needed(tmp_path: Path, environ: None) -> None:
    fake = FakeCLI(tmp_path, "claude")
    names = set(
        child_env(
            fake,
            inherit_env=False,
            env_allow=["MY_TOOL_*", SESSION_ENV],
            env={"EXPLICIT": "yes"},
        )
    )
    assert not set(UNRELATED) & names
    assert {"PATH", "HOME", "LANG", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"} <= names
    assert {"MY_TOOL_SETTING", "EXPLICIT", *fake.env()} <= names


@pytest.mark.slow
def test_codex_gets_its_own_needs_only(tmp_path: Path, environ: None, monkeypatch: Any) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-needed")
    names = set(child_env(FakeCLI(tmp_path, "codex"), inherit_env=False))
    assert "OPENAI_API_KEY" in names and "ANTHROPIC_API_KEY" not in names


def test_settings_are_checked() -> None:
    from coding_genesis import CodingGenesisAgent

    with pytest.raises(ConfigError, match="inherit_env"):
        CodingGenesisAgent("failer", inherit_env="no")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="env_allow"):
        CodingGenesisAgent("failer", env_allow="PATH")


@pytest.mark.slow
def test_genesis_run_clean_env(
    tmp_path: Path, environ: None, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, {"answer_env": True}])
    for name, value in fake.env().items():
        monkeypatch.setenv(name, value)
    argv = ["run", "-b", "claude", "--cli-path", fake.path, "--transcript-dir", "off", "--json"]
    allow = ["--allow-env", "FAKE_CLI_*", "--allow-env", SESSION_ENV]
    assert main([*argv, "--clean-env", *allow, "x"]) == 0
    names = set(json.loads(json.loads(capsys.readouterr().out)["message"]))
    assert not set(UNRELATED) & names and "ANTHROPIC_API_KEY" in names
    assert main([*argv, "x"]) == 0
    assert set(UNRELATED) <= set(json.loads(json.loads(capsys.readouterr().out)["message"]))


def test_doctor_lists_the_exposed_credentials(environ: None, capsys: Any) -> None:
    assert main(["doctor", "--json", "-b", "failer"]) == 0
    report = json.loads(capsys.readouterr().out)
    (row,) = [c for c in report["checks"] if c["check"] == "exposed env"]
    assert row["status"] == "warn"
    assert "AWS_SECRET_ACCESS_KEY" in row["detail"] and "OTHER_SERVICE_TOKEN" in row["detail"]
    assert "SSH_AUTH_SOCK" in row["detail"]  # not a secret value, but it grants access
    assert "--clean-env" in row["fix"]
    assert "aws-secret-value-123" not in json.dumps(report)


@pytest.mark.slow
@pytest.mark.parametrize("inherit", [True, False])
def test_the_cli_sees_its_working_directory_in_pwd(tmp_path: Path, inherit: bool) -> None:
    """Not the runner's directory; ``env=`` still has the last word."""
    fake = FakeCLI(tmp_path, "claude")
    work = tmp_path / "work"
    work.mkdir()
    fake.script([{"record_env": ["PWD"]}, {"init": True}, {"answer": "ok"}])
    assert fake.agent(cwd=str(work), inherit_env=inherit).run_sync("x")["status"] == 0
    assert fake.agent(cwd=str(work), env={"PWD": "/elsewhere"}).run_sync("x")["status"] == 0
    assert [r["env"]["PWD"] for r in fake.records() if "env" in r] == [str(work), "/elsewhere"]
