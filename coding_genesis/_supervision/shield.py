"""The shield: cleanup that a cancellation cannot cut short.

Stopping a process tree, reaping it and undoing what a run set up (a
worktree, a settings overlay) must finish even when the caller is cancelled
meanwhile, or processes and files of the run are left behind.  anyio's
shielded scope is enough on trio and against anyio cancel scopes, but not
against a native ``Task.cancel()`` on asyncio; :func:`shielded` covers both,
and re-raises the held cancellation once the cleanup is done.

A shield also keeps a hang alive, so whatever runs under it must be bounded
itself: the tree's stop has its grace and ``kill_wait``, the waits their
``move_on_after``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

__all__ = ["shielded"]

log = logging.getLogger("coding_genesis._supervision.shield")


def _asyncio_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no asyncio loop running here (trio)
        return None


async def shielded(cleanup: Callable[[], Awaitable[None]]) -> None:
    """Run ``cleanup`` to its end even if the caller is cancelled meanwhile.

    anyio's shielded scope protects against anyio cancel scopes (and is
    complete on trio), but not against a native ``Task.cancel()`` on asyncio:
    there the cleanup runs as its own task, and a cancellation that arrives
    while we wait for it is held and re-raised once it is done.
    """
    if _asyncio_task() is None:
        with anyio.CancelScope(shield=True):
            await cleanup()
        return

    async def guarded() -> None:
        with anyio.CancelScope(shield=True):
            await cleanup()

    task = asyncio.ensure_future(guarded())
    held: BaseException | None = None
    with anyio.CancelScope(shield=True):
        while not task.done():
            try:
                await asyncio.wait((task,))
            except asyncio.CancelledError as exc:
                held = held or exc
    if held is not None:
        if not task.cancelled() and task.exception() is not None:
            log.error("cleanup failed during cancellation", exc_info=task.exception())
        raise held
    task.result()
