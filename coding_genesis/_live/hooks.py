"""Hooks in a live session: which a backend can run, and the hook calls of a
turn still running (how long its CLI should wait for them: ``Request.hook_wait``).

Running the hooks of one hook point is :func:`coding_genesis.hooks.run_hooks`;
the session's link (``link.py``) fills in the input, answers the CLI through
its protocol and keeps the records on the turn.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import anyio

from coding_genesis.control import HookCall, PermissionAsk
from coding_genesis.hooks import Hook, HookEvent, HookResult

__all__ = ["Running", "longest", "then_ask"]


def longest(hooks: Mapping[HookEvent, tuple[Hook, ...]], timeout: float) -> float:
    """What the hooks of one hook point may take at most."""
    return max((len(h) for h in hooks.values()), default=0) * timeout + 1.0


def then_ask(call: HookCall, result: HookResult) -> PermissionAsk | None:
    """The approver's question after the hooks of ``call`` (None: no
    question, or the hooks blocked), with the input they changed."""
    ask = call.ask
    if ask is None or result.block:
        return None
    if result.input is not None:
        ask = dataclasses.replace(ask, request=dataclasses.replace(ask.request, input=result.input))
    return ask


class Running:
    """The hook calls of one turn still running (a turn's result waits for
    them: an observed hook of codex runs while codex goes on)."""

    __slots__ = ("_idle", "count")

    def __init__(self) -> None:
        self.count = 0
        self._idle: anyio.Event | None = None

    def add(self) -> None:
        self.count += 1

    def done(self) -> None:
        self.count -= 1
        if self.count <= 0 and self._idle is not None:
            self._idle.set()

    async def wait(self, timeout: float) -> None:
        """Until none runs, or ``timeout`` seconds."""
        if self.count <= 0:
            return
        self._idle = anyio.Event()
        with anyio.move_on_after(timeout):
            await self._idle.wait()
