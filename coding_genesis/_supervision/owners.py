"""Who wrote a file or a directory, told by its name: ``<pid>-<start time,
ms>-...``.  A pid alone can be reused; with its process's start time it names
one process, so a sweep can tell a dead writer's leftovers from a live one's
without reading them (the run ledger's records, the MCP bridge's socket
directories)."""

from __future__ import annotations

import functools
import os

import psutil

__all__ = ["alive", "own_prefix", "own_start_time", "owner_of", "start_time"]


def start_time(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch; None: no such process)."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


@functools.cache
def own_start_time(pid: int) -> float | None:
    """This process's :func:`start_time`, cached per pid (a forked child looks again)."""
    return start_time(pid)


def own_prefix() -> str:
    """``<pid>-<start time, ms>-`` of this process (its start time cached)."""
    pid = os.getpid()
    return f"{pid}-{round((own_start_time(pid) or 0.0) * 1000)}-"


def owner_of(name: str) -> tuple[int, int] | None:
    """(pid, start time in ms) from a name that starts with them, if it does."""
    pid, _, rest = name.partition("-")
    born, _, _ = rest.partition("-")
    if pid.isdigit() and born.isdigit():
        return int(pid), int(born)
    return None


def alive(key: tuple[int, int]) -> bool:
    """Whether the process named (pid, start time in ms) is alive."""
    born = start_time(key[0])
    return born is not None and abs(born * 1000 - key[1]) <= 10
