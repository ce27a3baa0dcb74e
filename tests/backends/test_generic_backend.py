"""The generic backend: an argv template and a format we already read, in code or in TOML; the
prompt always on stdin.  Driven through fake executables speaking claude stream-json and codex
exec --json (tests/fakes/bin)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coding_genesis import (
    CodingGenesisAgent,
    GenericBackend,
    backends as registry,
    load_backends_file,
)
from coding_genesis.backends import register_backend
from coding_genesis.errors import ConfigError
from tests.support import FakeCLI, cli_request


@pytest.fixture(autouse=True)
def own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backends registered here do not outlive the test."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))


def claude_like(fake: FakeCLI, **settings: Any) -> GenericBackend:
    settings.setdefault("model_args", ["--model", "{model}"])
    settings.setdefault("resume_args", ["--resume={resume}"])
    return GenericBackend(
        "mycli",
        command=[fake.path, "-p", "--output-format", "stream-json", "--workdir={cwd}"],
        **settings,
    )


def argvs(fake: FakeCLI) -> list[list[str]]:
    return [r["argv"] for r in fake.records() if "argv" in r]


@pytest.mark.slow
def test_a_claude_stream_json_cli_runs_with_the_prompt_on_stdin(
    fake_claude: FakeCLI, tmp_path: Path
) -> None:
    backend = claude_like(fake_claude, max_turns_args=["--turns", "{max_turns}"])
    agent = CodingGenesisAgent(backend, env=fake_claude.env(), timeout=10, cwd=tmp_path)
    prompt = "--help me; $(rm -rf /) {model}"
    result = agent.run_sync(prompt, model="m1", max_turns=3, cli_max_retries=1)
    assert result["status"] == 0, result
    assert result["message"] == f"fake claude got: {prompt}"  # read on stdin
    assert result["session_id"]
    (argv,) = argvs(fake_claude)
    assert argv == [
        "-p",
        "--output-format",
        "stream-json",
        f"--workdir={tmp_path}",
        "--model",
        "m1",
        "--turns",
        "3",
    ]
    assert prompt not in " ".join(argv)
    assert result["warnings"] == ["cli_max_retries=1 not honored by mycli"]


def test_groups_without_a_value_are_left_out_and_resume_is_supported(
    fake_claude: FakeCLI,
) -> None:
    backend = claude_like(fake_claude)
    assert backend.supports_resume
    spec = backend.build_command(cli_request(prompt="p", cwd="/w", resume="s-1"))
    assert spec.args == ("-p", "--output-format", "stream-json", "--workdir=/w", "--resume=s-1")
    assert spec.stdin == b"p"
    plain = GenericBackend("plain", command=["plain"])
    assert not plain.supports_resume
    spec = plain.build_command(cli_request(prompt="p", cwd="/w", model="x", max_turns=2))
    assert spec.args == ()
    assert spec.warnings == (
        "max_turns=2 not honored by plain",
        "model='x' not honored by plain",
    )


@pytest.mark.slow
def test_permissions_only_where_the_template_says_how(fake_claude: FakeCLI) -> None:
    with pytest.raises(ConfigError, match="cannot enforce permissions='read-only'"):
        CodingGenesisAgent(claude_like(fake_claude), permissions="read-only")
    backend = claude_like(fake_claude, permission_args={"read-only": ["--mode", "plan"]})
    agent = CodingGenesisAgent(backend, env=fake_claude.env(), timeout=10, permissions="read-only")
    assert agent.run_sync("hi")["status"] == 0
    assert argvs(fake_claude)[0][-2:] == ["--mode", "plan"]
    assert agent.run_sync("hi", permissions="full")["status"] == 64


@pytest.mark.slow
def test_a_codex_json_cli(fake_codex: FakeCLI) -> None:
    backend = GenericBackend(
        "codexish", command=[fake_codex.path, "exec", "--json"], format="codex-json"
    )
    fake_codex.script([{"answer": "from codex"}])
    result = CodingGenesisAgent(backend, env=fake_codex.env(), timeout=10).run_sync("hi")
    assert result["status"] == 0, result
    assert result["message"] == "from codex"


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"command": ["cli", "--ask={prompt}"]}, "a {prompt} placeholder is refused"),
        (
            {"command": ["cli"], "model_args": ["-m", "{prompt}"]},
            "a {prompt} placeholder is refused",
        ),
        ({"command": ["cli", "{home}"]}, r"unknown placeholder \{home\}"),
        ({"command": []}, "must start with the program's name"),
        ({"command": ["{model}"]}, "must start with the program's name"),
        ({"command": "cli -p"}, "must be a list of strings"),
        ({"command": ["cli"], "format": "xml"}, "unknown format 'xml'"),
        ({"command": ["cli"], "permission_args": {"root": []}}, "unknown permission level"),
    ],
)
def test_bad_templates_are_clear_errors(settings: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        GenericBackend("bad", **settings)


TOML = """\
[backends.tomlcli]
command = ["{cli}", "-p", "--output-format", "stream-json"]
format = "claude-stream-json"
model_args = ["--model", "{{model}}"]
notes = ["reads claude stream-json"]
"""


def test_a_toml_file_of_backends(fake_claude: FakeCLI, tmp_path: Path) -> None:
    path = tmp_path / "backends.toml"
    path.write_text(TOML.format(cli=fake_claude.path))
    backends = load_backends_file(path)
    assert list(backends) == ["tomlcli"]
    backend = backends["tomlcli"]
    assert backend.notes == ("reads claude stream-json",)
    register_backend("tomlcli", lambda: backend)
    result = CodingGenesisAgent("tomlcli", env=fake_claude.env(), timeout=10).run_sync(
        "hello", model="m2"
    )
    assert result["status"] == 0 and result["message"] == "fake claude got: hello", result
    assert argvs(fake_claude)[0][-2:] == ["--model", "m2"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[backends.x]\ncommand = ['x']\nshell = true\n", "unknown key.s. shell"),
        ("[backends.x]\nformat = 'claude-stream-json'\n", "needs a command"),
        ("[other]\n", "must hold .backends.NAME. tables only"),
        ("[backends.x\n", "is not valid TOML"),
        ("[backends.x]\ncommand = ['x', '{prompt}']\n", "a {prompt} placeholder is refused"),
    ],
)
def test_a_bad_toml_file_names_the_file_and_the_mistake(
    text: str, says: str, tmp_path: Path
) -> None:
    path = tmp_path / "b.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=says) as exc:
        load_backends_file(path)
    assert str(path) in str(exc.value)
    with pytest.raises(ConfigError, match="cannot read backends file"):
        load_backends_file(tmp_path / "missing.toml")


@pytest.mark.slow
def test_genesis_run_reads_a_backends_file_only_when_told(
    fake_claude: FakeCLI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from coding_genesis._cli.main import main

    path = tmp_path / "backends.toml"
    path.write_text(TOML.format(cli=fake_claude.path).replace("tomlcli", "filecli"))
    for name, value in fake_claude.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GENESIS_TRANSCRIPTS", "off")
    monkeypatch.delenv("GENESIS_BACKENDS_FILE", raising=False)
    assert main(["run", "-q", "-b", "filecli", "hi"]) == 2  # not read implicitly
    assert "unknown backend 'filecli'" in capsys.readouterr().err
    assert main(["run", "-q", "--backends-file", str(path), "-b", "filecli", "hi"]) == 0
    assert capsys.readouterr().out.strip() == "fake claude got: hi"
    monkeypatch.setenv("GENESIS_BACKENDS_FILE", str(path))
    assert main(["run", "-q", "-b", "filecli", "again"]) == 0
    assert capsys.readouterr().out.strip() == "fake claude got: again"
    bad = tmp_path / "bad.toml"
    bad.write_text("[backends.x]\ncommand = ['x', '{prompt}']\n")
    assert main(["run", "-q", "--backends-file", str(bad), "-b", "x", "hi"]) == 2
    assert "{prompt} placeholder is refused" in capsys.readouterr().err
