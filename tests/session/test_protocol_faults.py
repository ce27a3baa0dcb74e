"""The failure modes of claude's and codex's two-way protocols, through a whole session:
the fake ``claude`` (stream-json control) and the fake ``codex app-server`` play garbage,
an answer for an id never used, death mid-turn, silence, a hung question and an interrupt;
each ends its turn with a clear answer, never a hang or a traceback, and nothing of the
session outlives it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis.errors import AgentUsageError
from tests.session.interrupting import interrupted_turn

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

FAKES = Path(__file__).resolve().parents[1] / "fakes" / "bin"


@pytest.fixture(params=["claude", "codex"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def agent(backend: str, tmp_path: Path, **settings: Any) -> CodingGenesisAgent:
    settings.setdefault("timeout", 20)
    settings.setdefault("grace", 1.0)
    return CodingGenesisAgent(
        backend, cli_path=str(FAKES / backend), cwd=str(tmp_path), ledger=False, **settings
    )


def left(key: str) -> list[int]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("GENESIS_RUN_ID") == key and proc.status() != "zombie":
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


async def test_garbage_and_unknown_ids_end_the_turn_and_the_session_goes_on(
    backend: str, tmp_path: Path
) -> None:
    a = agent(backend, tmp_path)
    async with a.session() as s:
        first = await s.send_result("hello")
        assert first.status == 0, first.message
        garbage = await s.send_result("GARBAGE")
        assert garbage.status in (0, 1), garbage.message  # skipped lines, or a fault
        assert garbage.skipped_lines >= 1 or "protocol" in garbage.message
        unknown = await s.send_result("UNKNOWN_ID")
        assert unknown.status == 1 and "protocol" in unknown.message, unknown.message
        after = await s.send_result("hello again")
        assert after.status == 0, after.message
        assert "hello again" in after.message
    assert left(s.key) == []


async def test_death_mid_turn_is_incomplete_and_closes_the_session(
    backend: str, tmp_path: Path
) -> None:
    a = agent(backend, tmp_path)
    async with a.session() as s:
        r = await s.send_result("DIE")
        assert r.status == 1 and r.error == "incomplete", r.message
        assert s.closed
        with pytest.raises(AgentUsageError):
            await s.send("hello")
    assert left(s.key) == []


async def test_silence_is_stopped_by_the_turns_idle_limit(backend: str, tmp_path: Path) -> None:
    a = agent(backend, tmp_path, idle_timeout=1.0)
    async with a.session() as s:
        started = time.monotonic()
        r = await s.send_result("SILENCE")
        assert time.monotonic() - started < 15
        assert r.status == 124 and r.error == "idle_timeout", r.message
    assert left(s.key) == []


async def test_a_hung_question_is_denied_at_its_deadline_and_interrupt_works(
    backend: str, tmp_path: Path
) -> None:
    async def never(request: Any) -> bool:
        await anyio.sleep(600)
        return True

    a = agent(backend, tmp_path, approver=never, approval_timeout=0.5)
    async with a.session() as s:
        results: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def turn() -> None:
                results.append(await s.send_result("HANG_ASK"))

            tg.start_soon(turn)
            with anyio.fail_after(10):
                await s.wait_for_turn()
            await anyio.sleep(1.0)  # past the approval deadline: denied, the CLI hangs on
            assert await s.interrupt() is True
        r = results[0]
        assert r.status == 130 and r.error == "interrupted", r.message
        assert r.approvals and r.approvals[0]["source"] == "timeout"
        assert (await s.send_result("hello")).status == 0
    assert left(s.key) == []


async def test_interrupt_a_sleeping_tool(backend: str, tmp_path: Path) -> None:
    a = agent(backend, tmp_path, approver=lambda r: True)
    async with a.session() as s:
        r = await interrupted_turn(s, "SLEEP 600", lambda: anyio.sleep(1.0))
        assert r.status == 130, r.message
        assert len(left(s.key)) >= 1  # the CLI lives on
        assert (await s.send_result("hello")).status == 0
    assert left(s.key) == []
