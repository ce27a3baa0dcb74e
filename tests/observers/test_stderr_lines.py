"""``on_stderr=``: the CLI's stderr lines reach the callable as they are written
(the failer's ``/stderr 3``: three lines 200 ms apart, each saying when it was
written), one-shot and in a live session's turn; redacted, bounded, and a
callable that raises is logged once."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import anyio
import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis._observers.stderr_lines import MAX_LINE, _Lines
from coding_genesis._util.redact import Redactor

pytestmark = pytest.mark.timeout(60)


def _heard_live(heard: list[tuple[float, str]]) -> None:
    """Each line was heard before the next was written (its own stamp says when)."""
    lines = [(t, line) for t, line in heard if line.startswith("stderr line")]
    assert len(lines) == 3, heard
    written = [float(line.rsplit(" ", 1)[1]) for _, line in lines]
    for i in range(2):
        assert lines[i][0] < written[i + 1], (lines, written)
    assert [line.split(" written")[0] for _, line in lines] == [
        "stderr line 1",
        "stderr line 2",
        "stderr line 3",
    ]


def _agent(tmp_path: Path, heard: list[tuple[float, str]]) -> CodingGenesisAgent:
    return CodingGenesisAgent(
        "failer",
        cwd=str(tmp_path),
        on_stderr=lambda line: heard.append((time.time(), line)),
        timeout=30,
    )


def test_a_one_shot_runs_stderr_lines_arrive_as_written(tmp_path: Path) -> None:
    heard: list[tuple[float, str]] = []
    response = _agent(tmp_path, heard).run_sync("/stderr 3")
    assert response["status"] == 0, response
    _heard_live(heard)


def test_a_sessions_stderr_lines_arrive_as_written(tmp_path: Path) -> None:
    heard: list[tuple[float, str]] = []

    async def main() -> None:
        async with _agent(tmp_path, heard).session() as session:
            result = await session.send_result("/stderr 3")
            assert result.status == 0, result

    anyio.run(main)
    _heard_live(heard)


def test_one_calls_own_on_stderr_is_used(tmp_path: Path) -> None:
    heard: list[str] = []
    agent = CodingGenesisAgent("failer", cwd=str(tmp_path), timeout=30)
    response = agent.run_sync("/stderr 2", on_stderr=heard.append)
    assert response["status"] == 0, response
    assert [line.split(" written")[0] for line in heard] == ["stderr line 1", "stderr line 2"]


def test_lines_are_split_redacted_and_bounded() -> None:
    heard: list[str] = []
    lines = _Lines(heard.append, Redactor({"MY_API_KEY": "supersecretvalue123"}))
    lines.stderr(b"first supersecret")
    lines.stderr(b"value123 line\r\nsecond\n" + b"x" * (MAX_LINE + 10))
    assert heard == ["first [REDACTED] line", "second", "x" * MAX_LINE]
    lines.finish({})
    assert heard[-1] == "x" * 10


def test_a_callable_that_raises_is_logged_once_and_still_called(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[str] = []

    def broken(line: str) -> None:
        calls.append(line)
        raise RuntimeError("boom")

    lines = _Lines(broken, Redactor({}))
    with caplog.at_level(logging.ERROR):
        lines.stderr(b"a\nb\nc\n")
    assert calls == ["a", "b", "c"]
    assert sum("on_stderr" in r.getMessage() for r in caplog.records) == 1
