"""The command line forgives and tells the truth (issue 45): "did you mean" for a misspelt
option or command, a bad value in one line, help texts that are true, a missing default CLI
named with its fix, a piped run that says where it was recorded, reports and stats rendered
for people, chat's own commands, advice that fits the failure, an ignored option said, and
words that mean one thing each."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from coding_genesis._cli.backends import builtin_names
from coding_genesis._cli.run_many import _progress
from coding_genesis.retry import RetryPolicy
from coding_genesis.status import FailureCategory
from tests.terminal import Terminal, genesis

pytestmark = pytest.mark.timeout(90)


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "GENESIS_TRANSCRIPTS": str(tmp_path / "runs"),
        "GENESIS_RUN_LOG": str(tmp_path / "runs.jsonl"),
        "GENESIS_LEDGER": "off",
        "GENESIS_FAILER_STATE_DIR": str(tmp_path / "failer"),
        **extra,
    }


@pytest.mark.slow
def test_a_misspelt_option_gets_did_you_mean_and_the_command_s_usage() -> None:
    done = genesis(["run", "--backnd", "failer", "hello"])
    err = done.stderr.decode()
    assert done.returncode == 2
    assert err.startswith("usage: genesis run ")  # the command's usage, not the top level's
    assert err.rstrip().endswith(
        "genesis run: error: unknown option --backnd; did you mean --backend?"
    )
    assert "hello" not in err.splitlines()[-1]  # the prompt is not called unrecognized
    many = genesis(["run-many", "--concurency", "2", "x.jsonl"])
    assert many.returncode == 2
    assert "did you mean --concurrency?" in many.stderr.decode()


def test_a_misspelt_command_gets_did_you_mean() -> None:
    done = genesis(["rnu", "hello"])
    assert done.returncode == 2
    err = done.stderr.decode()
    assert "genesis: error: unknown command 'rnu'; did you mean genesis run?" in err
    assert "(the commands: run, chat, run-many, " in err  # and every command is named


@pytest.mark.slow
def test_a_bad_value_is_one_line() -> None:
    done = genesis(["run", "-b", "failer", "--timeout", "abc", "hello"])
    assert done.returncode == 2
    assert done.stderr.decode().splitlines() == [
        "genesis run: error: argument --timeout/-t: expected a number of seconds, got 'abc' "
        "(see genesis run --help)"
    ]
    choice = genesis(["run", "-b", "failer", "--permissions", "edt", "hello"])
    assert "did you mean edit?" in choice.stderr.decode() and len(choice.stderr.splitlines()) == 1
    words = genesis(["run", "-b", "failer", "two", "words"])
    assert "unexpected argument 'words' (a prompt of several words needs quotes)" in (
        words.stderr.decode()
    )


@pytest.mark.slow
def test_help_texts_are_true() -> None:
    many = genesis(["run-many", "--help"]).stdout.decode()
    assert "2 for a usage error" in many and "64 for a usage error" not in many
    assert genesis(["run-many", "--no-such-flag", "x.jsonl"]).returncode == 2  # as it says
    top = genesis(["--help"]).stdout.decode()
    described = top.split("\n\n")[1]
    assert set(builtin_names()) == {"claude", "codex", "failer", "gemini", "opencode", "qwen"}
    assert all(name in described for name in builtin_names()), described


@pytest.mark.slow
def test_a_missing_default_cli_is_named_with_the_fix(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GENESIS_", "CLAUDE"))}
    env |= env_for(tmp_path, PATH=str(tmp_path / "empty-bin"))
    (tmp_path / "empty-bin").mkdir()
    done = genesis(["run", "hello"], env=env)
    err = done.stderr.decode()
    assert done.returncode == 127
    assert "no --backend was given, so the default (claude) ran" in err
    assert 'genesis run --backend failer "hello"' in err
    explicit = genesis(["run", "-b", "claude", "hello"], env=env)
    assert explicit.returncode == 127 and "no --backend was given" not in explicit.stderr.decode()


@pytest.mark.slow
def test_a_piped_run_says_where_it_was_recorded(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    done = genesis(["run", "-b", "failer", "hello"], env=env)
    assert done.returncode == 0
    assert json.loads(done.stdout)["status"] == "success"  # stdout: the answer alone
    (line,) = done.stderr.decode().splitlines()
    found = re.fullmatch(r"transcript: genesis show ([0-9a-f]{12})", line)
    assert found, line
    shown = genesis(["show", found[1]], env=env)
    assert shown.returncode == 0 and b"prompt    hello" in shown.stdout


@pytest.mark.slow
def test_show_and_stats_render_for_people(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    assert genesis(["run", "-b", "failer", "/fail"], env=env).returncode == 1
    shown = genesis(["show", "last"], env=env).stdout.decode()
    assert "<task_metadata>" not in shown and "</" not in shown
    assert "  Metadata:\n    session id: " in shown and "    failure category: agent_error" in shown
    # A record of a log written before the rename: its category and blocker as they were.
    log = tmp_path / "runs.jsonl"
    record = json.loads(log.read_text().splitlines()[0])
    record |= {
        "category": "not_found",
        "blocked_on": '{"status": "error", "error_code": "AGENT_ERROR", "error_message": '
        '"Simulated agent failure for testing", "timestamp": "2026-01-01T00:00:00Z"}',
    }
    with log.open("a") as fh:
        fh.write(json.dumps(record) + "\n")
    stats = genesis(["stats"], env=env).stdout.decode()
    blockers = stats.split("Top blockers:\n", 1)[1].split("\n\n", 1)[0]
    assert blockers.splitlines() == ["      2x Simulated agent failure for testing (AGENT_ERROR)"]
    assert "  missing " in stats and "not_found" not in stats and "{" not in blockers


@pytest.mark.slow
def test_the_doctor_says_what_it_passes_on(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "GENESIS_"))}
    env |= {"CLAUDE_CODE_MAX_RETRIES": "3"}
    out = genesis(["doctor", "--backend", "claude"], env=env).stdout.decode()
    found = re.search(r"environment\s+(.*?)\n(?:  \S|\S)", out, re.S)  # its wrapped lines
    assert found, out
    said = " ".join(found[1].split())
    assert said.startswith("not inside another Claude Code session")
    assert "passed on as your configuration: CLAUDE_CODE_MAX_RETRIES" in said
    assert "no CLAUDECODE / CLAUDE_CODE_* inherited" not in out


@pytest.mark.slow
def test_chat_handles_its_own_commands(tmp_path: Path) -> None:
    argv = ["chat", "--backend", "failer", "--cwd", str(tmp_path), "--grace", "1"]
    terminal = Terminal(argv, env=env_for(tmp_path, GENESIS_TRANSCRIPTS="off"))
    try:
        assert terminal.wait_for("session open"), terminal.screen
        terminal.send(b"/help\r")
        assert terminal.wait_for("/clear         clear the screen"), terminal.screen
        terminal.send(b"/clear\r")
        terminal.send(b"/history\r")  # a turn: the failer says what it was sent before
        assert terminal.wait_for("0 earlier prompts in this conversation"), terminal.screen
        terminal.send(b"/exit\r")
        assert terminal.wait() == 0
        assert "Traceback" not in terminal.seen
    finally:
        terminal.close()


@pytest.mark.slow
def test_advice_fits_the_failure(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"prompt": "hi", "backend": "nosuch"}) + "\n")
    done = genesis(["run-many", str(tasks), "-q"], env=env)
    (result,) = [json.loads(line) for line in done.stdout.splitlines()]
    actions = result["failure"]["suggested_actions"]
    assert actions[0].startswith("Fix the request: unknown backend 'nosuch'")
    assert "Break into simpler, well-defined tasks" not in actions


@pytest.mark.slow
def test_an_ignored_option_is_said_and_a_reported_zero_is_zero(tmp_path: Path) -> None:
    done = genesis(["run", "-b", "failer", "--model", "opus", "/fail"], env=env_for(tmp_path))
    err = done.stderr.decode()
    assert "warning: the failer has no model: model='opus' is ignored" in err
    assert "usage: 0 tokens (in 0, out 0, cache read 0, cache write 0)" in err
    assert "tokens unknown" not in err


def test_run_many_progress_calls_endings_what_they_are() -> None:
    def result(status: int, error: str, category: str) -> dict[str, object]:
        return {"index": 3, "status": status, "error": error, "message": "why"}.copy() | {
            "failure": {"category": category}
        }

    assert _progress(result(130, "cancelled", "cancelled"), 1, 9).startswith("[1/9] #3 cancelled:")
    assert _progress(result(69, "usage_limit", "not_started"), 2, 9).startswith(
        "[2/9] #3 not started:"
    )
    assert _progress(result(1, "budget_exceeded", "budget_exceeded"), 3, 9).startswith(
        "[3/9] #3 stopped:"
    )
    assert _progress(result(1, "cli_error", "agent_error"), 4, 9).startswith("[4/9] #3 failed:")


def test_category_words_are_not_status_words_and_old_ones_still_read() -> None:
    from coding_genesis.status import ErrorCode

    errors = {code.value for code in ErrorCode}
    categories = {c.value for c in FailureCategory}
    # A category word that is also an error word names the same ending (e.g. timeout).
    assert "internal" in errors and "not_found" in errors
    assert not {"internal", "not_found"} & categories
    assert FailureCategory("internal") is FailureCategory.AGENT_ERROR
    assert FailureCategory("not_found") is FailureCategory.MISSING
    assert FailureCategory["INTERNAL"] is FailureCategory.AGENT_ERROR  # the old member name
    policy = RetryPolicy.default()
    assert policy.for_category("internal") == policy.for_category("agent_error")
