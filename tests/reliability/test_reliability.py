"""Reliability (issue 3, item 8): a soak of hundreds of runs cycling every
failure mode, and 50 concurrent agents in one event loop.  Afterwards: every
agent READY, zero zombies, zero processes left from any run, open file
descriptors and threads back to their starting count.  The figures are printed
at the end of the pytest run and written to ``reliability-figures.json`` in
the pytest base temp directory.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from coding_genesis import AgentState
from tests.reliability import figures
from tests.reliability.modes import MODES, Soak, ok_claude
from tests.support import marked_processes, zombie_children

pytestmark = pytest.mark.anyio

#: Workers running modes side by side during the soak, and runs each makes.
WORKERS = 8
RUNS_PER_WORKER = 25
CONCURRENT_AGENTS = 50


def _trio_idle_workers() -> int:
    """trio keeps idle worker threads (it runs ``Popen`` in one) for 10 s: the
    event loop's cache, not ours; they are counted apart."""
    return sum(1 for t in threading.enumerate() if t.name.startswith("Trio thread "))


def _resources() -> tuple[int, int]:
    """Open fds, and OS threads other than trio's idle worker cache."""
    me = psutil.Process()
    return me.num_fds(), me.num_threads() - _trio_idle_workers()


async def _settled(baseline: tuple[int, int], within: float = 3.0) -> tuple[int, int]:
    """fd and thread deltas, given a bounded moment to settle (a child watcher
    thread finishing its last ``waitpid``)."""
    deadline = anyio.current_time() + within
    while True:
        fds, threads = _resources()
        deltas = fds - baseline[0], threads - baseline[1]
        if deltas == (0, 0) or anyio.current_time() >= deadline:
            return deltas
        await anyio.sleep(0.05)


async def _measure(
    name: str,
    backend: str,
    soak: Soak,
    body: Callable[[], Awaitable[int]],
    tmp_path_factory: pytest.TempPathFactory,
    record_property: Callable[[str, Any], None],
) -> None:
    await ok_claude(soak)  # warm up what is created once (child watcher, ...)
    baseline = _resources()
    threads_before = threading.active_count()
    cached_before = _trio_idle_workers()
    started = time.monotonic()
    runs = await body()
    seconds = round(time.monotonic() - started, 1)
    leaked = [f"{p.pid} {p.name()}" for p in marked_processes()]
    zombies = [p.pid for p in zombie_children()]
    fd_delta, thread_delta = await _settled(baseline)
    not_ready = [a.name for a in soak.agents if a.state is not AgentState.READY]
    figure = {
        "test": f"{name}[{backend}]",
        "runs": runs,
        "modes": dict(soak.counts),
        "agents": len(soak.agents),
        "leaked_processes": len(leaked),
        "zombies": len(zombies),
        "fd_delta": fd_delta,
        "thread_delta": thread_delta,
        "python_thread_delta": threading.active_count() - threads_before,
        "trio_idle_worker_delta": _trio_idle_workers() - cached_before,
        "not_ready": len(not_ready),
        "seconds": seconds,
    }
    figure["json"] = str(figures.add(figure, tmp_path_factory.getbasetemp()))
    record_property("reliability", figure)
    assert not leaked, f"processes left by the runs: {leaked}"
    assert not zombies, f"zombies: {zombies}"
    assert not not_ready, f"agents not READY: {not_ready}"
    assert (fd_delta, thread_delta) == (0, 0), figure


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_soak_every_failure_mode(
    anyio_backend: str,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    record_property: Callable[[str, Any], None],
) -> None:
    soak = Soak(tmp_path)

    async def body() -> int:
        async def worker(offset: int) -> None:
            for i in range(RUNS_PER_WORKER):
                mode = MODES[(offset * 3 + i) % len(MODES)]
                await mode(soak)
                soak.counts[mode.__name__] += 1

        async with anyio.create_task_group() as tg:
            for w in range(WORKERS):
                tg.start_soon(worker, w)
        return soak.counts.total()

    await _measure("soak", anyio_backend, soak, body, tmp_path_factory, record_property)
    assert set(soak.counts) == {m.__name__ for m in MODES}


@pytest.mark.timeout(120)
async def test_fifty_concurrent_agents_in_one_loop(
    anyio_backend: str,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    record_property: Callable[[str, Any], None],
) -> None:
    soak = Soak(tmp_path)

    async def body() -> int:
        async def one(i: int) -> None:
            mode = MODES[i % len(MODES)]
            await mode(soak)
            soak.counts[mode.__name__] += 1

        async with anyio.create_task_group() as tg:
            for i in range(CONCURRENT_AGENTS):
                tg.start_soon(one, i)
        return soak.counts.total()

    await _measure("concurrent", anyio_backend, soak, body, tmp_path_factory, record_property)
    assert soak.counts.total() == CONCURRENT_AGENTS
    assert len(soak.agents) >= CONCURRENT_AGENTS + 1
