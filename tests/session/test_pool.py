"""Warm session pools through the machinery, against a real fake CLI
(``tests/fakes/twoway_cli.py``): warm sessions handed out once each, refills,
fresh sessions when none is warm, idle and dead sessions replaced, failed
openings, ``run_many(pool=...)``, the sync form, and nothing left once the
pool is closed."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from coding_genesis import (
    RunSpec,
    SessionPool,
    SyncSessionPool,
    run_many,
    run_many_sync,
)
from coding_genesis.errors import AgentUsageError, ConfigError
from tests.session.test_session import session_processes
from tests.session.twoway import TwoWayBackend, one_way_backend
from tests.support import Ended

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def pool(tmp_path: Path, ended: Ended | None = None, **options: Any) -> SessionPool:
    options.setdefault("size", 2)
    options.setdefault("max_idle", 60.0)
    options.setdefault("timeout", 20)
    options.setdefault("grace", 1.0)
    if ended is not None:
        options["observers"] = [ended]
    return SessionPool(TwoWayBackend(), cwd=str(tmp_path), **options)


def our_clis() -> list[psutil.Process]:
    """The fake CLIs this test process started (each carries its session key)."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if "GENESIS_RUN_ID" in proc.environ() and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


async def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait until ``check()`` holds (polled every 50 ms), failing after ``timeout`` seconds."""
    for _ in range(int(timeout / 0.05)):
        if check():
            return
        await anyio.sleep(0.05)
    raise AssertionError(f"not within {timeout}s: {check}")


def nothing_left(ended: Ended, opened: int) -> None:
    assert len(ended.keys) == opened, (ended.keys, opened)
    for key in ended.keys:
        assert session_processes(key) == [], key


@pytest.mark.slow
async def test_warm_sessions_serve_one_conversation_each(tmp_path: Path) -> None:
    ended = Ended()
    async with pool(tmp_path, ended) as p:
        assert await p.wait_warm(timeout=10)
        assert p.stats().warm == 2 and p.stats().served == 0
        keys, pids = [], []
        for n in range(5):
            async with p.session() as s:
                first = await s.send_result(f"TEXT first {n}")
                second = await s.send_result(f"TEXT second {n}")  # one conversation, many turns
                assert first.status == 0 and second.message == f"second {n}"
                assert first.pid == second.pid and s.turns == 2
                keys.append(s.key)
                pids.append(first.pid)
            assert s.closed  # released: closed, never handed to another caller
        assert len(set(keys)) == 5 and len(set(pids)) == 5
        await p.wait_warm(timeout=10)  # refilled in the background
        stats = p.stats()
        assert stats.served == 5 and stats.warm == 2 and stats.in_use == 0
        assert stats.fresh == 0 and stats.replaced == 0 and stats.failed == 0
        assert stats.opened == 7
    assert p.stats().warm == 0 and not p.serving
    nothing_left(ended, p.stats().opened)
    with pytest.raises(AgentUsageError, match="closed"):
        async with p.session():
            pass


@pytest.mark.slow
async def test_a_fresh_session_when_none_is_warm_and_waiting_is_bounded(tmp_path: Path) -> None:
    ended = Ended()
    async with pool(tmp_path, ended, size=1, wait=0) as p:
        assert await p.wait_warm(timeout=10)
        async with p.session() as warm, p.session() as fresh:
            assert warm.key != fresh.key
            assert (await fresh.send("TEXT fresh"))["status"] == 0
            stats = p.stats()
            assert stats.served == 2 and stats.fresh == 1 and stats.in_use == 2
    nothing_left(ended, p.stats().opened)

    # A refill under way is waited for (it is ready before a fresh start).
    async with pool(tmp_path, size=1, wait=10) as p:
        assert await p.wait_warm(timeout=10)
        async with p.session():
            pass
        assert p.stats().opening == 1
        async with p.session() as s:
            assert (await s.send("TEXT after the refill"))["status"] == 0
        assert p.stats().fresh == 0 and p.stats().served == 2


@pytest.mark.slow
async def test_idle_and_dead_warm_sessions_are_replaced(tmp_path: Path) -> None:
    ended = Ended()
    async with pool(tmp_path, ended, size=1, max_idle=0.5) as p:
        assert await p.wait_warm(timeout=10)
        await eventually(lambda: p.stats().expired >= 2 and len(ended.keys) >= 2)  # closed
        for key in ended.keys:
            assert session_processes(key) == []
    nothing_left(ended, p.stats().opened)

    ended = Ended()
    async with pool(tmp_path, ended, size=1) as p:
        assert await p.wait_warm(timeout=10)
        (cli,) = our_clis()
        os.kill(cli.pid, signal.SIGKILL)
        await eventually(lambda: p.stats().died >= 1 and p.stats().warm >= 1)
        async with p.session() as s:
            r = await s.send_result("TEXT alive")
            assert r.status == 0 and r.pid != cli.pid
        assert p.stats().replaced == 1
    nothing_left(ended, p.stats().opened)


async def test_a_cli_that_cannot_start_answers_without_a_hang(tmp_path: Path) -> None:
    async with pool(tmp_path, size=1, cli_path=str(tmp_path / "missing")) as p:
        started = time.monotonic()
        r = await p.run_result("TEXT hello")
        assert r.status == 127, r.message
        assert time.monotonic() - started < 5
        assert p.stats().failed >= 1 and p.stats().warm == 0


@pytest.mark.slow
async def test_closing_the_pool_closes_lent_sessions(tmp_path: Path) -> None:
    ended = Ended()
    p = pool(tmp_path, ended)
    async with p:
        await p.wait_warm(timeout=10)
        async with p.session() as s:
            await p.close()
            assert s.closed and not p.serving
            with pytest.raises(AgentUsageError, match="closed session"):
                await s.send("TEXT late")
    nothing_left(ended, p.stats().opened)
    assert our_clis() == []

    ended = Ended()
    p = pool(tmp_path, ended)

    async def failing_body() -> None:
        async with p:
            await p.wait_warm(timeout=10)
            raise ValueError("the caller's bug")

    with pytest.raises(ValueError, match="the caller's bug"):  # as it is, on both loops
        await failing_body()
    nothing_left(ended, p.stats().opened)
    assert our_clis() == []


@pytest.mark.slow
async def test_a_cancelled_lease_stops_its_tree_and_the_pool_refills(tmp_path: Path) -> None:
    ended = Ended()
    async with pool(tmp_path, ended, size=1) as p:
        assert await p.wait_warm(timeout=10)
        with anyio.move_on_after(0.5) as scope:
            async with p.session() as s:
                await s.send("SLEEP 30")  # a tool running when the caller gives up
        assert scope.cancelled_caught and s.closed
        assert session_processes(s.key) == []
        assert await p.wait_warm(timeout=10)
        assert (await p.run("TEXT next"))["status"] == 0
    nothing_left(ended, p.stats().opened)


@pytest.mark.slow
async def test_run_many_draws_from_the_pool(tmp_path: Path) -> None:
    ended = Ended()
    events: list[dict[str, Any]] = []
    async with pool(tmp_path, ended) as p:
        await p.wait_warm(timeout=10)
        requests: list[Any] = [
            RunSpec(prompt=f"TEXT answer {n}", backend="twoway", timeout=10) for n in range(6)
        ]
        requests += [
            {"prompt": "TEXT x", "backend": "claude"},
            {"prompt": "TEXT x", "backend": "twoway", "cwd": "/"},
            {"prompt": "TEXT x", "backend": "twoway", "cwd": str(tmp_path)},  # the pool's own
            {"prompt": "TEXT x", "backend": "twoway", "resume": "sess-9"},
            {"prompt": "TEXT x", "backend": "twoway", "pool": "another"},
        ]
        results = await run_many(requests, concurrency=3, pool=p, on_event=events.append)
        assert [r["index"] for r in results] == list(range(11))
        assert [r["message"] for r in results[:6]] == [f"answer {n}" for n in range(6)]
        assert len({r["pid"] for r in results[:6]}) == 6  # a session each
        assert "'claude' cannot" in results[6]["message"]
        assert "sets cwd otherwise" in results[7]["message"]
        assert results[8]["status"] == 0
        assert "resume" in results[9]["message"]
        assert "unknown field" in results[10]["message"]  # a batch line never names a pool
        assert {e["index"] for e in events if e["type"] == "text"} == {0, 1, 2, 3, 4, 5, 8}
        assert p.stats().served == 7
        with pytest.raises(ConfigError, match="pool="):
            await run_many(requests[:1], pool=p, executor="ray")
    nothing_left(ended, p.stats().opened)
    with pytest.raises(AgentUsageError, match="entered"):
        await run_many(requests[:1], pool=p)


@pytest.mark.slow
def test_the_sync_form(tmp_path: Path) -> None:
    ended = Ended()
    with SyncSessionPool(TwoWayBackend(), size=1, max_idle=60, cwd=str(tmp_path)) as p:
        assert p.wait_warm(timeout=10)
        with p.session() as s:
            assert s.send("TEXT one")["message"] == "one"
            assert s.send_result("TEXT two").turn == 2
        assert p.run("TEXT three")["message"] == "three"
        results = p.run_many([{"prompt": "TEXT four", "backend": "twoway"}])
        assert results[0]["message"] == "four"
        assert p.stats().served == 3
        with pytest.raises(AgentUsageError, match="own event loop"):
            run_many_sync([], pool=p.pool)
    with pytest.raises(AgentUsageError, match="inside"):
        p.run("TEXT late")
    nothing_left(ended, 0)
    assert our_clis() == []


def test_bad_settings_are_refused_at_once(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="size"):
        SessionPool(TwoWayBackend(), size=0, max_idle=1)
    with pytest.raises(ConfigError, match="max_idle"):
        SessionPool(TwoWayBackend(), size=1, max_idle=-1)
    with pytest.raises(AgentUsageError, match="two-way"):
        SessionPool(one_way_backend(), size=1, max_idle=1)
    with pytest.raises(AgentUsageError, match="isolation"):
        SessionPool(TwoWayBackend(), size=1, max_idle=1, isolation="worktree")
