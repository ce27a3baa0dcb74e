"""A turn codex begins by itself between ours (its thread compaction, a thread
goal, a background terminal) is the session's turn of the CLI's (``trigger="cli"``):
it ends at codex's ``turn/completed``, takes an interrupt and a steer, and a
caller's ``send()`` waits for it.  Played by the fake ``codex app-server``
(``OWNTURN <s>``: after the answer, a turn of its own of ``s`` seconds).  Before
the fix the turn's end was dropped: the turn ran until its wall clock stopped
the session."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis.result import RunResult
from tests.support import FAKE_BIN

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

T = TypeVar("T")

#: Far above what each test takes (about a second), far below the turn's clock.
BOUND = 8


def codex(tmp_path: Path) -> CodingGenesisAgent:
    return CodingGenesisAgent(
        "codex",
        cli_path=str(FAKE_BIN / "codex"),
        cwd=str(tmp_path),
        ledger=False,
        timeout=30,
        grace=1.0,
        env={"FAKE_CLI_RECORD": str(tmp_path / "record.jsonl")},
    )


def recorded(tmp_path: Path, key: str) -> list[Any]:
    lines = (tmp_path / "record.jsonl").read_text().splitlines()
    return [entry[key] for entry in map(json.loads, lines) if key in entry]


async def test_codexs_own_turn_ends_with_its_turn_completed(tmp_path: Path) -> None:
    async with codex(tmp_path).session() as s:
        first = await s.send_result("OWNTURN 0.3")
        assert first.status == 0 and first.message == "fake codex got: OWNTURN 0.3"
        with anyio.fail_after(BOUND):
            own = await s.cli_turn()
        assert own.trigger == "cli" and own.turn == 2
        assert own.status == 0, own.message
        assert own.message == "codex's own turn"
        after = await s.send_result("hello")
        assert after.status == 0 and after.message == "fake codex got: hello"
        assert [(r.trigger, r.turn) for r in s.results] == [("user", 1), ("cli", 2), ("user", 3)]


async def during_own_turn(s: Any, act: Callable[[], Awaitable[T]]) -> tuple[RunResult, T]:
    """``act`` once codex's own turn runs (bounded): that turn's result and ``act``'s."""
    results: list[RunResult] = []
    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as tg:

            async def own() -> None:
                results.append(await s.cli_turn())

            tg.start_soon(own)
            await s.wait_for_turn()
            done = await act()
    return results[0], done


async def test_a_send_during_codexs_own_turn_waits_for_it(tmp_path: Path) -> None:
    async with codex(tmp_path).session() as s:
        await s.send_result("OWNTURN 0.5")
        mine, after = await during_own_turn(s, lambda: s.send_result("hello"))
        assert mine.status == 0 and mine.trigger == "cli", mine.message
        assert after.status == 0 and after.message == "fake codex got: hello", after.message
        assert [r.trigger for r in s.results] == ["user", "cli", "user"]
    # the second turn/start reached codex once its own turn was over, and was taken
    assert recorded(tmp_path, "received").count("turn/start") == 2


async def test_codexs_own_turn_takes_an_interrupt_and_a_steer(tmp_path: Path) -> None:
    async with codex(tmp_path).session() as s:
        await s.send_result("OWNTURN 5")

        async def steer_then_interrupt() -> bool:
            await s.steer("look again")
            return bool(await s.interrupt())

        mine, interrupted = await during_own_turn(s, steer_then_interrupt)
        assert interrupted
        assert mine.trigger == "cli" and mine.status == 130, mine.message
        assert recorded(tmp_path, "steer") == ["look again"]
        assert recorded(tmp_path, "interrupted") == [True]
        after = await s.send_result("hello")  # the session lives on
        assert after.status == 0 and after.message == "fake codex got: hello", after.message
