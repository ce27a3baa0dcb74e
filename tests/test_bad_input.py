"""Bad input, one table (issue 3, item 7): each case gets a clear error at
construction or a structured failure response, within its time bound (the
pytest-timeout mark), and leaves no process behind.  The docs' "Bad input"
lists the same rows with their answers.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis.errors import (
    ConfigError,
    InvalidCwdError,
    InvalidTimeoutError,
    UnknownBackendError,
)
from tests.support import FakeCLI
from tests.tree_support import RssPeak, assert_tree_gone, describe

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

Check = Callable[[FakeCLI, Path], Awaitable[None]]


@dataclass(frozen=True)
class Case:
    id: str
    answer: str
    check: Check


def _agent_with_timeout(value: object) -> Callable[[FakeCLI, Path], Any]:
    """Builds an agent with a bad ``timeout`` (of any type: that is the point)."""
    return lambda fake, tmp: CodingGenesisAgent("claude", timeout=value)  # type: ignore[arg-type]


def raises(exc: type[Exception], match: str, make: Callable[[FakeCLI, Path], Any]) -> Check:
    """The case must raise ``exc`` (a ConfigError, so also a ValueError) at construction."""

    async def check(fake: FakeCLI, tmp: Path) -> None:
        assert issubclass(exc, ConfigError) and issubclass(exc, ValueError)
        with pytest.raises(exc, match=match):
            make(fake, tmp)

    return check


def answers(
    prompt: str,
    *,
    status: int,
    error: str | None,
    contains: str = "",
    started: bool = True,
    agent: Callable[[FakeCLI, Path], CodingGenesisAgent] | None = None,
    script: list[dict[str, Any]] | None = None,
    more: Callable[[Mapping[str, Any], FakeCLI], None] | None = None,
    run_kwargs: dict[str, Any] | None = None,
) -> Check:
    """The case must come back as a response with this status and error code."""

    async def check(fake: FakeCLI, tmp: Path) -> None:
        if script is not None:
            fake.script(script)
        runner = agent(fake, tmp) if agent else fake.agent(timeout=10.0)
        result = await runner.run(prompt, **(run_kwargs or {}))
        assert result["status"] == status, describe(result)
        assert result["error"] == error, describe(result)
        assert contains in result["message"], describe(result)
        assert bool(fake.records()) is started, f"CLI started: {not started}, expected {started}"
        if more is not None:
            more(result, fake)
        assert_tree_gone(fake)

    return check


def _not_executable(fake: FakeCLI, tmp: Path) -> CodingGenesisAgent:
    path = tmp / "claude"
    path.write_text("#!/bin/sh\necho hi\n")
    path.chmod(0o644)
    return CodingGenesisAgent("claude", cli_path=str(path), timeout=5.0)


def _stdin_intact(prompt: str) -> Callable[[Mapping[str, Any], FakeCLI], None]:
    def more(result: Mapping[str, Any], fake: FakeCLI) -> None:
        data = prompt.encode()
        got = next(r for r in fake.records() if "stdin_sha256" in r)
        assert got["stdin_bytes"] == len(data)
        assert got["stdin_sha256"] == hashlib.sha256(data).hexdigest()
        argv = next(r["argv"] for r in fake.records() if "argv" in r)
        assert not any(prompt[:50] in arg for arg in argv), argv

    return more


def _skipped_one(result: Mapping[str, Any], fake: FakeCLI) -> None:
    assert result["skipped_lines"] == 1
    assert result["session_id"] is not None  # the line before the bad one
    assert result["message"] == "the answer"  # the lines after it


async def _huge_line(fake: FakeCLI, tmp: Path) -> None:
    """A 100 MiB line between good ones: skipped and counted, memory bounded
    (the parser holds at most max_line_bytes, 64 MiB by default, then drops)."""
    fake.script([{"init": True}, {"long_line": 100 * 2**20}, {"answer": "the answer"}])
    async with RssPeak().sampling() as rss:
        result = await fake.agent(timeout=25.0).run("go")
    assert result["status"] == 0, describe(result)
    _skipped_one(result, fake)
    assert rss.growth_mib < 100, f"memory grew by {rss.growth_mib:.0f} MiB"
    assert_tree_gone(fake)


MIB_PROMPT = ("Ünïcode ✓ line\n" * (2**20 // 18 + 1))[: 2**20]
INVALID_UTF8 = "ff fe 7b 22 74 79 70 65 22 3a 22 61 c3 28 22 7d 0a".replace(" ", "")

CASES = [
    Case(
        "unknown backend",
        "UnknownBackendError (a ConfigError/ValueError) at construction, listing the backends",
        raises(
            UnknownBackendError, "unknown backend 'gpt-9'", lambda f, t: CodingGenesisAgent("gpt-9")
        ),
    ),
    Case(
        "missing binary",
        "status 127, error `not_found`; nothing started",
        answers(
            "go",
            status=127,
            error="not_found",
            contains="not found",
            started=False,
            agent=lambda f, t: CodingGenesisAgent("claude", cli_path=str(t / "no-such-cli")),
        ),
    ),
    Case(
        "binary not executable",
        "status 126, error `not_executable` (chmod +x it)",
        answers(
            "go",
            status=126,
            error="not_executable",
            contains="not executable",
            started=False,
            agent=_not_executable,
        ),
    ),
    Case(
        "a directory as binary",
        "status 126, error `not_executable` (is a directory)",
        answers(
            "go",
            status=126,
            error="not_executable",
            contains="is a directory",
            started=False,
            agent=lambda f, t: CodingGenesisAgent("claude", cli_path=str(t)),
        ),
    ),
    Case(
        "bad cwd (missing)",
        "InvalidCwdError at construction",
        raises(
            InvalidCwdError,
            "does not exist",
            lambda f, t: CodingGenesisAgent("claude", cwd=t / "missing"),
        ),
    ),
    Case(
        "bad cwd (a file)",
        "InvalidCwdError at construction",
        raises(
            InvalidCwdError,
            "not a directory",
            lambda f, t: CodingGenesisAgent("claude", cwd=f.script_file),
        ),
    ),
    Case(
        "bad cwd (per run)",
        "status 64, error `invalid_request`; nothing started",
        answers(
            "go",
            status=64,
            error="invalid_request",
            contains="does not exist",
            started=False,
            run_kwargs={"cwd": "/nonexistent/coding-genesis"},
        ),
    ),
    *[
        Case(
            f"timeout {value!r}",
            "InvalidTimeoutError (a ConfigError/ValueError) at construction",
            raises(
                InvalidTimeoutError,
                "timeout must be a",
                _agent_with_timeout(value),
            ),
        )
        for value in (0, -1.0, math.nan, math.inf, "10")
    ],
    Case(
        "empty prompt",
        "status 64, error `invalid_request`; nothing started",
        answers("", status=64, error="invalid_request", contains="empty", started=False),
    ),
    Case(
        "blank prompt",
        "status 64, error `invalid_request`; nothing started",
        answers(" \n\t ", status=64, error="invalid_request", contains="empty", started=False),
    ),
    Case(
        "1 MiB prompt",
        "runs; the prompt reaches the CLI intact through stdin (never argv)",
        answers(
            MIB_PROMPT,
            status=0,
            error=None,
            script=[{"answer": "read it all"}],
            more=_stdin_intact(MIB_PROMPT),
        ),
    ),
    Case(
        "prompt starting with --",
        "runs; the prompt goes to stdin, never becomes a flag",
        answers(
            "--dangerously-skip-permissions --help",
            status=0,
            error=None,
            contains="fake claude got: --dangerously-skip-permissions --help",
            more=_stdin_intact("--dangerously-skip-permissions --help"),
        ),
    ),
    Case(
        "NUL byte in prompt",
        "status 64, error `invalid_request`; nothing started",
        answers("fix\0this", status=64, error="invalid_request", contains="NUL", started=False),
    ),
    Case(
        "invalid UTF-8 on stdout",
        "the bad line is skipped and counted (`skipped_lines`); the lines around it are kept",
        answers(
            "go",
            status=0,
            error=None,
            script=[{"init": True}, {"raw_hex": INVALID_UTF8}, {"answer": "the answer"}],
            more=_skipped_one,
        ),
    ),
    Case(
        "100 MiB line on stdout",
        "skipped and counted; memory bounded by `max_line_bytes` (64 MiB); lines around kept",
        _huge_line,
    ),
    Case(
        "CLI closes stdout, keeps running",
        "status 124 `timeout` at the wall clock: the run does not wait for a process forever",
        answers(
            "go",
            status=124,
            error="timeout",
            contains="timed out after 1s",
            script=[{"init": True}, {"close_stdout": True}, {"hang": True}],
            agent=lambda f, t: f.agent(timeout=1.0, grace=0.3),
        ),
    ),
    Case(
        "CLI closes stdout, keeps running (idle timeout)",
        "status 124 `idle_timeout` when an idle timeout is set",
        answers(
            "go",
            status=124,
            error="idle_timeout",
            contains="idle for 0.5s",
            script=[{"init": True}, {"close_stdout": True}, {"hang": True}],
            agent=lambda f, t: f.agent(timeout=10.0, idle_timeout=0.5, grace=0.3),
        ),
    ),
    Case(
        "unknown backend option",
        "ConfigError at construction, naming the valid options",
        raises(
            ConfigError,
            r"unknown option\(s\) 'max_turnz' for backend 'claude'; valid options: .*max_turns",
            lambda f, t: CodingGenesisAgent("claude", options={"max_turnz": 3}),
        ),
    ),
    Case(
        "unknown backend option (per run)",
        "status 64, error `invalid_request`; nothing started",
        answers(
            "go",
            status=64,
            error="invalid_request",
            contains="unknown option(s) 'max_turnz'",
            started=False,
            run_kwargs={"options": {"max_turnz": 3}},
        ),
    ),
    Case(
        "CLI exits 127 by itself",
        "status 1, error `cli_error`, its code in `exit_code` (never one of our statuses)",
        answers(
            "go",
            status=1,
            error="cli_error",
            contains="exited with code 127",
            script=[{"init": True}, {"exit": 127}],
            more=lambda r, f: _assert(r["exit_code"] == 127 and r["signal"] is None, r),
        ),
    ),
    Case(
        "CLI exits 0 with no output",
        "status 0, error `empty_output`, warning `no_output`",
        answers(
            "go",
            status=0,
            error="empty_output",
            contains="without producing any events",
            script=[{"exit": 0}],
            more=lambda r, f: _assert(r["warnings"] == ["no_output"], r),
        ),
    ),
]


def _assert(ok: bool, result: Mapping[str, Any]) -> None:
    assert ok, describe(result)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_bad_input(case: Case, fake_claude: FakeCLI, tmp_path: Path) -> None:
    await case.check(fake_claude, tmp_path)


def test_table_matches_the_docs() -> None:
    """Every row of the table is in the "Bad input" section of docs/failures.md, with its answer."""
    page = (Path(__file__).parent.parent / "docs" / "failures.md").read_text()
    section = page.split("## Bad input", 1)[1].split("\n## ", 1)[0]
    for case in CASES:
        assert f"| {case.id} | {case.answer} |" in section, case.id
