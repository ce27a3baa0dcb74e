"""``on_stderr=`` with the REAL codex (its app-server logs on stderr under
``RUST_LOG=info``): the lines reach the callable while the session runs, each
before the turn that caused it ended, redacted."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.real_cli.test_claude_codex import Rig, codex_rig, hermetic_env

__all__ = ["codex_rig", "hermetic_env"]

pytestmark = [pytest.mark.timeout(120), pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_codexs_stderr_lines_arrive_during_the_turn(codex_rig: Rig) -> None:
    heard: list[tuple[float, str]] = []
    env = codex_rig.env(RUST_LOG="info")
    agent = codex_rig.agent_with(env=env, on_stderr=lambda line: heard.append((time.time(), line)))
    async with agent.session() as session:
        before = len(heard)
        result: Any = await session.send_result("SCENARIO:text hello")
        ended = time.time()
        assert result.status == 0, result
        during = [(t, line) for t, line in heard[before:] if t <= ended]
    assert during, heard[-5:]
    assert all("\n" not in line for _, line in heard)
    assert any("INFO" in line for _, line in during), during[:5]
