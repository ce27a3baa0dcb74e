"""Every real CLI recording, replayed through the fake CLI and a real
``CodingGenesisAgent``, comes back with the right category and record.

The recordings (tests/fakes/recordings, copied from shared/recordings) are the
exact stdout, stderr and exit code of claude 2.1.197, codex 0.169.0, gemini
0.61.0, opencode 1.18.33 and qwen 0.24.4 against fake model servers.  The fake CLI copies the stdout bytes, writes the stderr,
and exits with the recorded code.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal

from coding_genesis._failures.report import parse_failure_report
from tests.support import CONTEXT_KEYS, RECORDINGS, FakeCLI

Check = Callable[[dict[str, Any]], None]

FAILURE_KEYS = {
    "category",
    "retryable",
    "reason",
    "retry_after_s",
    "message",
    "session_id",
    "duration",
    "completed_steps",
    "files_modified",
    "blocked_on",
    "suggested_retry",
    "retryable_reason",
    "suggested_actions",
    "tool_usage",
    "last_successful_tool",
    "exit_code",
    "stderr_tail",
    "retry_at",
}


def _claude_429(r: dict[str, Any]) -> None:
    assert r["api_error_status"] == 429
    assert r["cli_retries"] == 10
    # claude's own last announced back-off (retry_delay_ms 32258.05...)
    assert r["failure"]["retry_after_s"] == pytest.approx(32.258, abs=0.001)
    assert r["failure"]["suggested_retry"] is True
    assert r["failure"]["suggested_actions"][0].startswith("Wait 32.258s")
    assert r["error_context"]["retry_suggestion"] == "Wait 32.258s and try again."


def _claude_401(r: dict[str, Any]) -> None:
    assert r["failure"]["suggested_retry"] is False
    assert r["failure"]["retryable"] is False
    assert r["error_context"]["can_retry"] is False
    assert "Check the API key or login of the claude CLI" in r["failure"]["suggested_actions"]
    assert r["message"] == "Invalid API key · Fix external API key"


def _claude_500(r: dict[str, Any]) -> None:
    assert r["failure"]["reason"] == "API status 500"
    # spec 002's "partial" for internal errors is a category default; the
    # failure's own answer is decided: one retry after a pause.
    assert r["failure"]["retryable"] is True


def _sigterm(r: dict[str, Any]) -> None:
    # claude caught the SIGTERM and exited 143 by itself: the process was not
    # killed by a signal (status 1, no "signal"), but the code says what stopped it.
    assert r["exit_code"] == 143 and r["status"] == 1 and r["signal"] is None
    assert r["completed"] is False
    assert r["failure"]["reason"] == (
        "exited with code 143 before its result, as a CLI stopped by SIGTERM does"
    )
    assert r["unfinished_steps"] == ["Ran Bash: sleep 30 && echo slept"]
    assert r["failure"]["completed_steps"] == []
    assert r["failure"]["tool_usage"] == {"Bash": 1}


def _recovered(r: dict[str, Any]) -> None:
    assert r["cli_retries"] == 1
    assert r["message"] == "Hello from the fake model."


def _denied(r: dict[str, Any]) -> None:
    assert r["permission_denials"] == 1
    assert r["denied_tools"] == ["Bash"]
    assert "permission denied for tool call(s): Bash" in r["warnings"]
    assert r["failed_tools"] == ["Bash"]
    assert r["completed_steps"] == []


def _bash_allowed(r: dict[str, Any]) -> None:
    assert r["permission_denials"] == 0
    assert r["completed_steps"] == ["Ran Bash: touch made_by_bash.txt && echo made"]
    assert r["last_successful_tool"] == "Bash"


def _claude_write(r: dict[str, Any]) -> None:
    # Recorded in another directory: the path stays absolute.
    path = "/srv/acceptance/.tmp/wd_claude_write/fake_written.txt"
    assert r["files_modified"] == [path]
    assert r["completed_steps"] == [f"Wrote {path}"]


def _codex_write(r: dict[str, Any]) -> None:
    path = "/srv/acceptance/.tmp/wd_codex_write_workspace/fake_written.txt"
    assert r["files_modified"] == [path]
    assert r["completed_steps"] == [f"Created {path}"]


def _codex_shell(r: dict[str, Any]) -> None:
    assert r["completed_steps"] == ["Ran command_execution: echo hi"]


def _codex_shell_fail(r: dict[str, Any]) -> None:
    assert r["failed_tools"] == ["command_execution"]
    assert r["last_tool_error"] == "command_execution failed: oops"
    assert r["completed_steps"] == []


def _unknown_model(r: dict[str, Any]) -> None:
    assert any("Model metadata for `gpt-fake` not found" in e for e in r["cli_errors"])


def _codex_retried(count: int, status: int | None) -> Check:
    def check(r: dict[str, Any]) -> None:
        assert r["cli_retries"] == count
        assert r["api_error_status"] == status
        assert r["result_subtype"] == "turn.failed"

    return check


def _stream_error(r: dict[str, Any]) -> None:
    assert r["cli_retries"] == 5
    assert r["failure"]["blocked_on"] == (
        "stream disconnected before completion: The model failed (fake)."
    )
    assert r["failure"]["suggested_retry"] is True


def _text(r: dict[str, Any]) -> None:
    assert r["message"] == "Hello from the fake model."
    assert r["cli_retries"] == 0


def _shell_tool(tool: str, output: str) -> Check:
    def check(r: dict[str, Any]) -> None:
        assert r["tool_calls"] == 1 and r["tool_usage"] == {tool: 1}
        assert r["last_successful_tool"] == tool and r["failed_tools"] == []
        assert r["completed_steps"] == [f"Ran {tool}: echo hi"]
        assert output in r["message"]

    return check


def _http_status(status: int | None, exit_code: int, retries: int = 0) -> Check:
    def check(r: dict[str, Any]) -> None:
        assert r["api_error_status"] == status
        assert r["exit_code"] == exit_code and r["signal"] is None
        assert r["cli_retries"] == retries
        assert r["completed"] is True

    return check


def _gemini_429(r: dict[str, Any]) -> None:
    # 429 mod 256: gemini's own exit code, not a signal; its retries are told on stderr only
    # (the router call's 5 attempts and the main call's 10, 13 "Retrying" lines in all).
    _http_status(None, 173, retries=13)(r)
    assert r["failure"]["reason"] == "backend hint: rate_limit"


def _stopped_mid_tool(exit_code: int, tool: str) -> Check:
    """SIGTERM in the middle of a shell tool, no result line: a failure, never a success."""

    def check(r: dict[str, Any]) -> None:
        assert r["exit_code"] == exit_code and r["completed"] is False
        assert r["tool_usage"] == {tool: 1}
        assert r["session_id"]

    return check


def _gemini_sigterm(r: dict[str, Any]) -> None:
    # gemini (relaunch off) exits 0 on SIGTERM, without its result line.
    _stopped_mid_tool(0, "run_shell_command")(r)
    assert r["status"] == 1 and r["error"] == "incomplete"
    assert r["unfinished_steps"] == [
        "Ran run_shell_command: python3 -c 'import time; time.sleep(600)'"
    ]


def _opencode_sigterm(r: dict[str, Any]) -> None:
    assert r["signal"] == "SIGTERM" and r["status"] == 143 and r["completed"] is False
    assert r["message"].startswith("opencode was killed by signal SIGTERM")


def _qwen_retrying(r: dict[str, Any]) -> None:
    # Stopped by the recorder's own timeout (exit 124) while qwen waited to retry a 429.
    assert r["cli_retries"] == 2 and r["cli_retry_delay_s"] == 120.0
    assert r["completed"] is False


#: recording -> (category, or None for a success; extra checks)
EXPECTED: dict[str, tuple[str | None, Check]] = {
    "claude_text": (None, _text),
    "claude_text_partial": (None, _text),
    "claude_bash_allowed": (None, _bash_allowed),
    "claude_bash_denied": (None, _denied),
    "claude_write": (None, _claude_write),
    "claude_429": ("rate_limit", _claude_429),
    "claude_401": ("auth", _claude_401),
    "claude_500": ("agent_error", _claude_500),
    "claude_429once": (None, _recovered),
    "claude_bash_sleep_sigterm_early": ("agent_error", _sigterm),
    "codex_text": (None, _text),
    "codex_text_unknown_model": (None, _unknown_model),
    "codex_shell": (None, _codex_shell),
    "codex_shell_fail": (None, _codex_shell_fail),
    "codex_write_workspace": (None, _codex_write),
    "codex_429": ("rate_limit", _codex_retried(5, 429)),
    "codex_401": ("auth", _codex_retried(5, 401)),
    "codex_500": ("agent_error", _codex_retried(5, None)),
    "codex_429once": (None, _recovered),
    "codex_stream_error": ("network", _stream_error),
    "gemini_text": (None, _text),
    "gemini_resume": (None, _text),
    "gemini_tool": (None, _shell_tool("run_shell_command", "Output: hi")),
    "gemini_401": ("auth", _http_status(401, 145)),
    "gemini_429": ("rate_limit", _gemini_429),
    "gemini_429capped": ("rate_limit", _http_status(None, 173)),
    "gemini_sigterm": ("partial", _gemini_sigterm),
    "opencode_text": (None, _text),
    "opencode_resume": (None, _text),
    "opencode_tool": (None, _shell_tool("bash", '["hi\\n"]')),
    "opencode_401": ("auth", _http_status(401, 1)),
    "opencode_429": ("rate_limit", _http_status(429, 1)),
    "opencode_sigterm": ("agent_error", _opencode_sigterm),
    "qwen_text": (None, _text),
    "qwen_resume": (None, _text),
    "qwen_tool": (None, _shell_tool("run_shell_command", "Output: hi")),
    "qwen_401": ("auth", _http_status(401, 1)),
    "qwen_429capped": ("rate_limit", _http_status(429, 1)),
    "qwen_429retrying": ("rate_limit", _qwen_retrying),
    "qwen_sigterm": ("agent_error", _stopped_mid_tool(130, "run_shell_command")),
}


def test_every_recording_has_an_expectation() -> None:
    recorded = {p.stem for p in RECORDINGS.glob("*.jsonl")}
    assert recorded == set(EXPECTED)
    for name in recorded:
        assert (RECORDINGS / f"{name}.rc").exists() and (RECORDINGS / f"{name}.stderr").exists()


def replay_steps(name: str, jsonl: Path | None = None) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = [{"recording": str(jsonl or RECORDINGS / f"{name}.jsonl")}]
    stderr = (RECORDINGS / f"{name}.stderr").read_text()
    if stderr:
        steps.append({"stderr": stderr.removesuffix("\n")})
    rc = int((RECORDINGS / f"{name}.rc").read_text().strip())
    # A negative code: the CLI was killed by that signal (the fake kills itself the same way).
    steps.append({"kill_self": signal.Signals(-rc).name} if rc < 0 else {"exit": rc})
    return steps


def replay(
    name: str, tmp_path: Path, portal: BlockingPortal, jsonl: Path | None = None, **kwargs: Any
) -> dict[str, Any]:
    fake = FakeCLI(tmp_path, name.split("_")[0])
    fake.script(replay_steps(name, jsonl))
    agent = fake.agent(**kwargs)
    return dict(portal.call(agent.run, "replay the recording"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recording(name: str, tmp_path: Path, portal: BlockingPortal) -> None:
    category, check = EXPECTED[name]
    response = replay(name, tmp_path, portal)
    assert response["message"].strip(), "a response message is never empty"
    if category is None:
        assert response["status"] == 0, response["message"]
        assert response["is_error"] is False
        assert response["failure"] is None
        assert response["error_context"] is None
        assert response["failure_report"] is None
    else:
        assert response["status"] != 0
        failure = response["failure"]
        assert failure["category"] == category, failure["reason"]
        assert set(failure) == FAILURE_KEYS
        assert failure["message"] == response["message"][:2000]
        assert failure["session_id"] == response["session_id"] is not None
        assert failure["exit_code"] == response["exit_code"]
        context = response["error_context"]
        assert set(context) >= CONTEXT_KEYS
        assert context["error_type"] == category
        assert context["failed_node"] == f"{name.split('_')[0]}-agent"
        assert context["can_retry"] is failure["suggested_retry"]
        parsed = parse_failure_report(response["failure_report"]).to_dict()
        assert parsed == {**failure, "stderr_tail": ""}
        assert f"<failure_category>{category}</failure_category>" in response["failure_report"]
    check(response)


def _moved(name: str, tmp_path: Path, drop_result: bool = False) -> tuple[Path, Path]:
    """A copy of a recording whose recorded working directory is ``tmp/work``."""
    work = tmp_path / "work"
    work.mkdir()
    recorded_cwd = f"/srv/acceptance/.tmp/wd_{name}"
    lines = (RECORDINGS / f"{name}.jsonl").read_text().splitlines()
    if drop_result:
        lines = [
            ln for ln in lines if json.loads(ln).get("type") not in ("result", "turn.completed")
        ]
    moved = tmp_path / f"{name}.jsonl"
    moved.write_text("\n".join(lines).replace(recorded_cwd, str(work)) + "\n")
    return work, moved


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "step"),
    [
        ("claude_write", "Wrote fake_written.txt"),
        ("codex_write_workspace", "Created fake_written.txt"),
    ],
)
def test_files_modified_are_relative_to_the_runs_cwd(
    name: str, step: str, tmp_path: Path, portal: BlockingPortal
) -> None:
    work, moved = _moved(name, tmp_path)
    response = replay(name, tmp_path, portal, jsonl=moved, cwd=work)
    assert response["status"] == 0
    assert response["files_modified"] == ["fake_written.txt"]
    assert response["completed_steps"] == [step]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["claude_write", "codex_write_workspace"])
def test_a_run_killed_after_writing_reports_partial_progress(
    name: str, tmp_path: Path, portal: BlockingPortal
) -> None:
    """The write recordings without their terminal event, stopped by SIGTERM (exit 143)."""
    work, moved = _moved(name, tmp_path, drop_result=True)
    fake = FakeCLI(tmp_path, name.split("_")[0])
    fake.script([{"recording": str(moved)}, {"exit": 143}])
    response = portal.call(fake.agent(cwd=work).run, "write a file")
    failure = response["failure"]
    assert failure["category"] == "partial"
    assert failure["reason"] == (
        "exited with code 143 before its result, as a CLI stopped by SIGTERM does, "
        "after changing 1 file(s)"
    )
    assert failure["files_modified"] == ["fake_written.txt"]
    assert len(failure["completed_steps"]) == 1
    assert failure["suggested_retry"] is True
    assert failure["suggested_actions"][0] == (
        "Complete remaining work: continue from the completed steps"
    )
    assert response["error_context"]["degraded_results"] is True
    assert "files_modified" in response["error_context"]["available_data"]
    report = response["failure_report"]
    assert "Files modified: fake_written.txt\n" in report
    assert f"  ✓ {failure['completed_steps'][0]}\n" in report
