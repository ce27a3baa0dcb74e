"""Helpers for the supervision tests: the processes a fake started, checks that
they are all gone (now, not eventually), and a peak-memory sampler."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import psutil

from tests.support import FakeCLI, marked_processes, zombie_children

__all__ = ["RssPeak", "assert_tree_gone", "kill_and_reap", "run_pids", "wait_for_record"]

#: Record keys that name a process the fake started.
_PID_KEYS = ("child", "grandchild", "intermediate", "bomb")


def run_pids(fake: FakeCLI) -> dict[str, list[int]]:
    """Every pid the fake recorded, by role (``main`` is the CLI itself)."""
    out: dict[str, list[int]] = {"main": []}
    for rec in fake.records():
        if "argv" in rec:
            out["main"].append(rec["pid"])
        for key in _PID_KEYS:
            if key in rec:
                out.setdefault(key, []).append(int(rec[key]))
    return out


def _still_ours(pid: int, mark: str) -> bool:
    """True if ``pid`` is a live process of this fake (a reused pid is not)."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return True
        return proc.environ().get("FAKE_CLI_MARK") == mark
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return False


def assert_tree_gone(fake: FakeCLI) -> None:
    """Right now: no process of the fake's runs alive, none a zombie, nothing to reap."""
    left = [p.pid for p in marked_processes([fake.mark], env_names=("FAKE_CLI_MARK",))]
    assert not left, f"processes of the run still alive: {left}"
    zombies = [p.pid for p in zombie_children()]
    assert not zombies, f"unreaped zombie children: {zombies}"
    pids = run_pids(fake)
    for role, group in pids.items():
        for pid in group:
            assert not _still_ours(pid, fake.mark), f"{role} {pid} still exists"


def kill_and_reap(pids: list[int]) -> None:
    """Test cleanup for processes a test left on purpose."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).wait(5)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


async def wait_for_record(fake: FakeCLI, key: str, count: int = 1, within: float = 10.0) -> None:
    """Wait (bounded) until the fake has recorded ``count`` entries with ``key``."""
    with anyio.fail_after(within):
        while True:
            if sum(1 for r in fake.records() if key in r) >= count:
                return
            await anyio.sleep(0.02)


class RssPeak:
    """Samples this process's resident memory while a block runs."""

    def __init__(self, interval: float = 0.01) -> None:
        self.interval = interval
        self.baseline = 0
        self.peak = 0
        self._proc = psutil.Process()

    @property
    def growth_mib(self) -> float:
        return (self.peak - self.baseline) / 2**20

    def _sample(self) -> None:
        self.peak = max(self.peak, self._proc.memory_info().rss)

    @contextlib.asynccontextmanager
    async def sampling(self) -> AsyncIterator[RssPeak]:
        self.baseline = self.peak = self._proc.memory_info().rss

        async def sampler() -> None:
            while True:
                self._sample()
                await anyio.sleep(self.interval)

        async with anyio.create_task_group() as tg:
            tg.start_soon(sampler)
            try:
                yield self
            finally:
                self._sample()
                tg.cancel_scope.cancel()


def describe(result: Mapping[str, Any]) -> str:
    """A short view of a response for assertion messages."""
    keys = ("status", "error", "message", "stop_reason", "signals_sent", "exit_code", "warnings")
    return repr({k: result.get(k) for k in keys})
