"""A long live session's memory stays bounded: it keeps its last results, not every one.

Found by an audit: a session kept every turn's whole result (`session.results`), +104 kB per
turn of 100 KiB answers, without bound.  Now it keeps the last `keep_results` (100 by
default; "all" is the opt-in to the whole history).  Measured in this process (the session's
link, decoder and protocol live here; the CLI is a fast fake two-way CLI) with psutil, after a
garbage collection, the median of several readings."""

from __future__ import annotations

import gc
import statistics
from pathlib import Path
from typing import Any

import psutil
import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis.errors import AgentUsageError
from tests.session.twoway import TwoWayBackend

pytestmark = [pytest.mark.timeout(180), pytest.mark.anyio]

ANSWER = 100 * 1024
#: The most a turn may add from turn 100 to turn 400 (measured on main: ~107 kB).
PER_TURN = 16 * 1024


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def agent(tmp_path: Path) -> CodingGenesisAgent:
    return CodingGenesisAgent(
        TwoWayBackend(), cwd=str(tmp_path), timeout=20, grace=1.0, ledger=str(tmp_path / "ledger")
    )


def rss() -> int:
    """This process's resident memory, the median of a few readings after a collection."""
    readings = []
    for _ in range(5):
        gc.collect()
        readings.append(psutil.Process().memory_info().rss)
    return int(statistics.median(readings))


@pytest.mark.slow
async def test_400_turns_of_100_kib_answers_keep_memory_bounded(tmp_path: Path) -> None:
    marks: dict[int, int] = {}
    async with agent(tmp_path).session() as session:
        for turn in range(1, 401):
            result = await session.send_result(f"BIG {ANSWER}")
            assert result.status == 0 and len(result.message) == ANSWER, result.message[:200]
            if turn in (100, 400):
                marks[turn] = rss()
        growth = (marks[400] - marks[100]) / 300
        assert growth <= PER_TURN, f"{growth / 1024:.1f} kB per turn from turn 100 to 400"
        # The last 100 (options.KEEP_RESULTS) are kept; the sums count every turn.
        assert [r.turn for r in session.results] == list(range(301, 401))
        assert session.usage["input_tokens"] == 12 * 400


@pytest.mark.slow
async def test_keep_results_keeps_the_last_n_or_all(tmp_path: Path) -> None:
    async with agent(tmp_path).session(keep_results=3) as session:
        for n in range(5):
            await session.send_result(f"TEXT answer {n}")
        assert [r.message for r in session.results] == ["answer 2", "answer 3", "answer 4"]
    async with agent(tmp_path).session(keep_results="all") as session:
        for n in range(5):
            await session.send_result(f"TEXT answer {n}")
        assert len(session.results) == 5


@pytest.mark.parametrize("bad", [-1, 1.5, "some", True, None])
def test_a_bad_keep_results_is_refused(tmp_path: Path, bad: Any) -> None:
    with pytest.raises(AgentUsageError, match="keep_results"):
        agent(tmp_path).session(keep_results=bad)
