"""A turn interrupted in its middle, as the session tests do it on every CLI:
the turn sent in the background, a wait until it is where the test wants it
(a tool running, a question asked), the interrupt (which must be taken), and
the turn's answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from coding_genesis.result import RunResult

__all__ = ["interrupted_turn", "polled"]


async def interrupted_turn(
    session: Any, prompt: str, ready: Callable[[], Awaitable[object]]
) -> RunResult:
    """Send ``prompt``, wait for ``ready``, interrupt: the turn's result."""
    results: list[RunResult] = []
    async with anyio.create_task_group() as tg:

        async def turn() -> None:
            results.append(await session.send_result(prompt))

        tg.start_soon(turn)
        await ready()
        assert await session.interrupt() is True
    return results[0]


def polled(
    check: Callable[[], object], what: str, *, tries: int, every: float
) -> Callable[[], Awaitable[None]]:
    """A wait until ``check()`` is true (at most ``tries`` looks, ``every``
    seconds apart), failing with ``what`` when it never is."""

    async def wait() -> None:
        for _ in range(tries):
            await anyio.sleep(every)
            if check():
                break
        assert check(), what

    return wait
