"""`genesis runs`, `show`, `doctor`, and help that teaches."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coding_genesis._cli.main import COMMANDS, main
from tests.support import FakeCLI, recorded_events

SECRET = "sk-ant-doctor-Xy7secret"


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """Two runs in a fresh transcript directory: one that worked, one that failed."""
    fake = FakeCLI(tmp_path, "claude")
    base = tmp_path / "runs"
    agent = fake.agent(transcripts=base, cwd=tmp_path)
    tool = {
        "type": "assistant",
        "message": {
            "content": [
                {"type": "tool_use", "id": "w1", "name": "Write", "input": {"file_path": "a.py"}}
            ]
        },
    }
    done = {
        "type": "user",
        "message": {"content": [{"type": "tool_result", "tool_use_id": "w1", "content": "ok"}]},
    }
    fake.script([{"init": True}, {"emit": tool}, {"emit": done}, {"answer": "wrote a.py"}])
    good = dict(agent.run_sync("write a.py\nwith a docstring"))
    fake.script(
        [
            {"init": True},
            {"stderr": "Error: 429 Too Many Requests"},
            {"result": "API Error: 429 rate limited", "is_error": True},
            {"exit": 1},
        ]
    )
    bad = dict(agent.run_sync("try again"))
    return base, good, bad


@pytest.mark.slow
def test_runs_lists_newest_first(
    recorded: tuple[Path, dict[str, Any], dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    base, good, bad = recorded
    assert main(["runs", "--transcript-dir", str(base), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["run_id"] for r in rows] == [bad["run_id"], good["run_id"]]
    assert rows[1]["prompt"] == "write a.py" and rows[1]["tool_calls"] == 1
    assert rows[0]["status"] == 1 and rows[0]["error"] == "cli_error"

    assert main(["runs", "--transcript-dir", str(base), "--failed", "--json"]) == 0
    assert [json.loads(x)["run_id"] for x in capsys.readouterr().out.splitlines()] == [
        bad["run_id"]
    ]

    assert main(["runs", "--transcript-dir", str(base)]) == 0
    table = capsys.readouterr().out
    assert table.index(bad["run_id"][:12]) < table.index(good["run_id"][:12])
    assert "write a.py" in table and "1 cli_error" in table


@pytest.mark.slow
def test_show_prints_summary_tools_and_failure_report(
    recorded: tuple[Path, dict[str, Any], dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    base, good, _ = recorded
    assert main(["show", good["run_id"][:8], "--transcript-dir", str(base)]) == 0
    out = capsys.readouterr().out
    assert f"run {good['run_id']}" in out
    assert "prompt    write a.py ..." in out
    assert "status    0 ok" in out
    assert "tools: 1 call(s) (Write)" in out
    assert "1. Write: a.py -> ok" in out
    assert "files modified: a.py" in out
    assert "failure report" not in out

    assert main(["show", "last", "--transcript-dir", str(base)]) == 0
    out = capsys.readouterr().out
    assert "status    1 cli_error" in out
    assert "failure report:" in out
    assert "Category: rate_limit" in out and "Retryable: Yes" in out
    assert "Suggested recovery actions:" in out
    assert "Error: 429 Too Many Requests" in out  # stderr tail


@pytest.mark.slow
def test_show_gives_the_recorded_files_back(
    recorded: tuple[Path, dict[str, Any], dict[str, Any]],
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    base, good, _ = recorded
    run_dir = base / good["run_id"]
    assert main(["show", "-2", "--json", "--transcript-dir", str(base)]) == 0
    assert json.loads(capsysbinary.readouterr().out) == good
    assert main(["show", "-2", "--events", "--transcript-dir", str(base)]) == 0
    shown = [json.loads(line) for line in capsysbinary.readouterr().out.splitlines()]
    assert shown == recorded_events(run_dir, stamps=True)
    types = [e["type"] for e in shown]
    assert types[:2] == ["state", "run_started"] and types[-1] == "run_finished"
    assert "tool_call" in types and "tool_result" in types and "result" in types
    assert main(["show", "-2", "--raw", "--transcript-dir", str(base)]) == 0
    assert capsysbinary.readouterr().out == (run_dir / "stdout.jsonl").read_bytes()


def test_show_and_runs_say_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", "zz-top", "--transcript-dir", str(tmp_path)]) == 2
    assert "expected hex digits" in capsys.readouterr().err
    assert main(["show", "abc", "--transcript-dir", str(tmp_path)]) == 2
    assert "no recorded run 'abc'" in capsys.readouterr().err
    assert main(["show", "last", "--transcript-dir", "off"]) == 2
    assert "transcripts are turned off" in capsys.readouterr().err
    assert main(["runs", "--transcript-dir", str(tmp_path / "empty")]) == 0
    assert "no recorded runs" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["runs", "-n", "0"])
    assert exc.value.code == 2
    assert "expected a whole number >= 1, got '0'" in capsys.readouterr().err


# -- doctor --------------------------------------------------------------------------


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["doctor", "--json", *args])
    return code, json.loads(capsys.readouterr().out)


def rows(report: dict[str, Any], backend: str) -> dict[str, dict[str, Any]]:
    return {c["check"]: c for c in report["checks"] if c["backend"] == backend}


@pytest.mark.slow
def test_doctor_finds_the_cli_and_its_version_and_never_prints_a_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    monkeypatch.setenv("FAKE_CLI_MARK", fake.mark)
    monkeypatch.setenv("FAKE_CLI_SCRIPT", json.dumps([{"raw": "9.9.9 (Fake Claude Code)"}]))
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.delenv("CLAUDECODE", raising=False)
    code, report = doctor(capsys, "-b", "claude", "--cli-path", fake.path)
    assert code == 0 and report["can_run"] == {"claude": True}
    checks = rows(report, "claude")
    assert checks["cli"]["status"] == "ok" and fake.path in checks["cli"]["detail"]
    assert checks["version"] == {
        "backend": "claude",
        "check": "version",
        "status": "ok",
        "detail": "9.9.9 (Fake Claude Code)",
        "fix": "",
    }
    assert checks["credentials"]["detail"] == "$ANTHROPIC_API_KEY is set"
    assert {c["check"] for c in report["checks"] if c["backend"] == "*"} == {
        "exposed env",  # issue 28: said once for every backend, not per backend
        "cleanup",
        "transcripts",
    }

    assert main(["doctor", "-b", "claude", "--cli-path", fake.path]) == 0
    table = capsys.readouterr().out
    assert "9.9.9 (Fake Claude Code)" in table
    assert SECRET not in table and SECRET not in json.dumps(report)


@pytest.mark.slow
def test_doctor_says_why_a_backend_cannot_run_with_a_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, report = doctor(capsys, "-b", "claude", "--cli-path", str(tmp_path / "no-claude"))
    assert code == 1 and report["can_run"] == {"claude": False}
    cli = rows(report, "claude")["cli"]
    assert cli["status"] == "FAIL" and "not found" in cli["detail"] and cli["fix"]

    fake = FakeCLI(tmp_path, "codex")
    monkeypatch.setenv("FAKE_CLI_MARK", fake.mark)
    monkeypatch.setenv("FAKE_CLI_SCRIPT", json.dumps([{"raw": "codex-cli 0.0.1"}]))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "missing-home"))
    code, report = doctor(capsys, "-b", "codex", "--cli-path", fake.path)
    assert code == 1
    env = rows(report, "codex")["environment"]
    assert env["status"] == "FAIL" and "mkdir -p" in env["fix"]

    assert main(["doctor", "-b", "codex", "--cli-path", fake.path]) == 1
    captured = capsys.readouterr()
    assert "FAIL" in captured.out and "cannot run: codex" in captured.err


@pytest.mark.slow
def test_doctor_reports_a_cli_that_hangs_or_fails_and_inherited_variables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    monkeypatch.setenv("FAKE_CLI_MARK", fake.mark)
    monkeypatch.setenv("CLAUDECODE", "1")
    monkeypatch.setenv("FAKE_CLI_SCRIPT", json.dumps([{"hang": True}]))
    code, report = doctor(capsys, "-b", "claude", "--cli-path", fake.path, "--timeout", "0.5")
    assert code == 1
    checks = rows(report, "claude")
    assert checks["version"]["status"] == "FAIL"
    assert "did not answer within 0.5s" in checks["version"]["detail"]
    assert checks["environment"]["status"] == "warn"
    assert "CLAUDECODE" in checks["environment"]["detail"]

    monkeypatch.setenv(
        "FAKE_CLI_SCRIPT", json.dumps([{"stderr": "error: unknown option"}, {"exit": 2}])
    )
    code, report = doctor(capsys, "-b", "claude", "--cli-path", fake.path)
    assert code == 1
    assert rows(report, "claude")["version"]["detail"] == (
        "`--version` exited with 2: error: unknown option"
    )


def test_doctor_checks_every_backend_by_default(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("GENESIS_CLAUDE_PATH", raising=False)
    for name in ("CLAUDE", "CODEX", "GEMINI", "OPENCODE", "QWEN"):
        monkeypatch.delenv(f"GENESIS_{name}_PATH", raising=False)
    monkeypatch.delenv("GENESIS_BACKEND", raising=False)
    code, report = doctor(capsys)
    assert code == 0  # issue 28: none named, and one (the failer) can run
    assert report["can_run"] == {
        "claude": False,
        "codex": False,
        "failer": True,
        "gemini": False,
        "opencode": False,
        "qwen": False,
    }
    assert main(["doctor", "-b", "failer"]) == 0
    capsys.readouterr()
    assert main(["doctor", "--strict"]) == 1  # any FAIL at all
    capsys.readouterr()
    monkeypatch.setenv("GENESIS_BACKEND", "claude")  # the one `genesis run` would use
    assert main(["doctor", "--json"]) == 1
    capsys.readouterr()
    assert main(["doctor", "--json", "-b", "failer"]) == 0  # --backend names it
    capsys.readouterr()
    assert main(["doctor", "--cli-path", "/x"]) == 2
    assert "--cli-path needs exactly one --backend" in capsys.readouterr().err


# -- help ----------------------------------------------------------------------------


def test_help_teaches_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    top = capsys.readouterr().out
    assert "examples:" in top and "status codes" in top
    for module in COMMANDS:
        name = module.replace("_", "-")
        assert f"genesis {name}" in top, name
        with pytest.raises(SystemExit):
            main([name, "--help"])
        text = capsys.readouterr().out
        assert "examples:" in text, name
        assert f"genesis {name}" in text, name


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["run", "--timeout", "-1", "x"], "expected a finite number of seconds > 0, got '-1'"),
        (["run", "--timeout", "soon", "x"], "expected a number of seconds, got 'soon'"),
        (["run"], "the following arguments are required: prompt"),
        (["rnu"], "unknown command 'rnu'; did you mean genesis run? (the commands: run, chat, "),
        (
            ["doctor", "-b", "gpt"],
            "invalid choice: 'gpt' (choose from 'claude', 'codex', 'failer', 'gemini', 'opencode', "
            "'qwen')",
        ),
        (["show"], "the following arguments are required: RUN"),
    ],
)
def test_argument_errors_say_what_is_allowed(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert says in capsys.readouterr().err


def test_doctor_reads_codex_credentials_as_codex_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28: the provider selected in $CODEX_HOME/config.toml reads its ``env_key``."""
    home = tmp_path / "codex"
    home.mkdir()
    (home / "config.toml").write_text(
        'model_provider = "house"\n[model_providers.house]\nenv_key = "HOUSE_KEY"\n'
    )
    monkeypatch.setenv("CODEX_HOME", str(home))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("HOUSE_KEY", SECRET)
    _, report = doctor(capsys, "-b", "codex")
    credentials = rows(report, "codex")["credentials"]
    assert credentials["status"] == "ok", credentials
    assert credentials["detail"] == "$HOUSE_KEY is set (provider house)"
    monkeypatch.delenv("HOUSE_KEY")
    _, report = doctor(capsys, "-b", "codex")
    credentials = rows(report, "codex")["credentials"]
    assert credentials["status"] == "warn" and "HOUSE_KEY" in credentials["detail"]
    assert "OPENAI_API_KEY" not in credentials["detail"] + credentials["fix"]
    assert SECRET not in json.dumps(report)


@pytest.mark.slow
def test_doctor_states_a_warning_once_and_fits_80_columns(tmp_path: Path) -> None:
    """Issue 28: the exposed-credentials warning once (not per backend); at 80 columns no line
    is longer, and no text is wrapped one to three words a line."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "COLUMNS": "80",
        "ANTHROPIC_API_KEY": SECRET,
        "OPENAI_API_KEY": SECRET,
        "GENESIS_TRANSCRIPTS": "off",
    }
    done = subprocess.run(
        [sys.executable, "-m", "coding_genesis._cli.main", "doctor"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr  # the failer can run
    lines = done.stdout.splitlines()
    assert lines and all(len(line) <= 80 for line in lines), [x for x in lines if len(x) > 80]
    assert sum("exposed env" in line for line in lines) == 1
    assert SECRET not in done.stdout
    # A paragraph (a check's detail, or its fix) goes on while the next line is indented
    # deeper than a check's row: each of its lines but the last holds more than three words
    # (or the next word would not have fitted on it: a long path or name).
    for line, following in itertools.pairwise(lines):
        continues = following.startswith(" " * 21) and not following.strip().startswith("fix:")
        if continues and line.startswith("  "):
            words = line.split()
            text = words[2:] if not line.startswith(" " * 21) else words
            next_word = following.split()[0]
            assert len(text) > 3 or len(line) + 1 + len(next_word) > 80, (line, following)


@pytest.mark.slow
def test_doctor_says_what_a_live_session_can_do_and_reads_a_backends_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = Path(__file__).resolve().parents[1] / "fakes" / "bin" / "qwen"
    backends = tmp_path / "backends.toml"
    backends.write_text(
        "[backends.myagent]\n"
        'format = "acp"\n'
        f'command = ["{fake}", "--acp"]\n'
        'modes = { "read-only" = "plan" }\n'
        'ask_mode = "default"\n'
        "[backends.oneway]\n"
        f'command = ["{fake}", "-p"]\n'
    )
    import coding_genesis.backends as registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))  # the file's: this test's
    monkeypatch.delenv("GENESIS_BACKEND", raising=False)
    monkeypatch.setenv("GENESIS_BACKENDS_FILE", str(backends))
    code, report = doctor(capsys)
    assert code == 0 and report["can_run"]["myagent"] is True
    sessions = {c["backend"]: c["detail"] for c in report["checks"] if c["check"] == "sessions"}
    assert sessions["myagent"].startswith("over the Agent Client Protocol; approver=: yes")
    assert (
        "tools=: yes, over MCP; steer: no; modes: read-only=plan; asks in mode default"
        in sessions["myagent"]
    )
    assert "resume: refused (gemini 0.61's session/load fails" in sessions["gemini"]
    assert "OPENCODE_CONFIG_CONTENT" in sessions["opencode"]
    assert sessions["codex"].startswith("over codex app-server; approver=: yes")
    assert sessions["failer"].startswith("over claude stream-json control; approver=: yes")
    assert sessions["oneway"].startswith("none: one-shot runs only")
    backends.write_text('[backends.bad]\nformat = "acp"\ncommand = ["x", "{prompt}"]\n')
    assert main(["doctor", "--json"]) == 2
    assert "no placeholders" in capsys.readouterr().err
