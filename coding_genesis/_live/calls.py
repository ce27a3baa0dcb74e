"""The calls a live session made to its CLI that wait for an answer
(:meth:`~coding_genesis.control.ControlProtocol.call`: switch the model, the
context's use now, compact...): one table of pending calls, each with its
deadline.  The link registers a call before writing it, the dispatch hands
each :class:`~coding_genesis.control.Answered` here, and the caller gets the
answer, or an error answer when the deadline passes or the CLI ends first;
never a hang.  An answer that comes after its caller stopped waiting is let go
(counted)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import anyio

from coding_genesis.control import Answered

__all__ = ["PendingCalls"]


@dataclasses.dataclass(slots=True)
class _Call:
    """One pending call: its time allowed, its deadline (``time.monotonic()``)
    and its answer."""

    timeout: float
    deadline: float
    done: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    answer: Answered | None = None


class PendingCalls:
    """The calls awaiting their answer, by key."""

    __slots__ = ("_pending", "late")

    def __init__(self) -> None:
        self._pending: dict[Any, _Call] = {}
        #: Answers that came for no pending call (late, or never asked).
        self.late = 0

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, key: Any, timeout: float) -> None:
        """A call about to be written, answered within ``timeout`` seconds."""
        if key in self._pending:
            raise ValueError(f"a call with key {key!r} is already pending")
        self._pending[key] = _Call(timeout, time.monotonic() + timeout)

    def answered(self, item: Answered) -> bool:
        """The CLI's answer: to its caller (False: nobody waits for it)."""
        call = self._pending.get(_hashable(item.key))
        if call is None or call.answer is not None:
            self.late += 1
            return False
        call.answer = item
        call.done.set()
        return True

    async def wait(self, key: Any, ended: anyio.Event) -> Answered:
        """The answer to the call ``key``: the CLI's, or an error answer once
        its deadline passes or ``ended`` is set (the CLI is gone).  The call
        leaves the table either way."""
        call = self._pending[key]
        try:
            with anyio.move_on_after(max(call.deadline - time.monotonic(), 0.0)):
                async with anyio.create_task_group() as race:

                    async def gone() -> None:
                        await ended.wait()
                        race.cancel_scope.cancel()

                    race.start_soon(gone)
                    await call.done.wait()
                    race.cancel_scope.cancel()
        finally:
            del self._pending[key]
        if call.answer is not None:
            return call.answer
        if ended.is_set():
            return Answered(key, error="the CLI ended before it answered")
        return Answered(key, error=f"the CLI did not answer within {call.timeout:g}s")


def _hashable(key: Any) -> Any:
    """A key from the CLI as a table key (an unhashable one matches nothing)."""
    try:
        hash(key)
    except TypeError:
        return object()
    return key
