"""Where an attempt goes besides a fresh CLI: a live session's link, or one
turn of a live CLI for a two-way ``run()``.

The live transport lives above the pipeline (``coding_genesis._live``); the
pipeline knows it only through these types, and the agent hands the one-turn
transport down (``RunWiring(one_turn=)``), as it hands down the wrappers and the
sweep."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from coding_genesis._pipeline.attempt import AttemptContext, AttemptOutcome
    from coding_genesis._supervision.stop import StopHandle
    from coding_genesis.backend import Backend
    from coding_genesis.options import Trigger
    from coding_genesis.request import Request

__all__ = ["OneTurn", "Transport"]


class Transport(Protocol):
    """A live session's link, as a run sees it: its request (a turn is it with
    the turn's prompt and timeout), its stop handle (a budget stops the
    session's process), its key (the session's id in a run's info), the turns
    it has taken, and one attempt as a turn."""

    @property
    def request(self) -> Request: ...

    @property
    def stop(self) -> StopHandle: ...

    @property
    def key(self) -> str: ...

    @property
    def turns(self) -> int: ...

    async def turn(
        self,
        request: Request,
        context: AttemptContext,
        *,
        run_id: str,
        trigger: Trigger = "user",
    ) -> AttemptOutcome: ...


#: One turn of a live CLI opened for one attempt (a ``run()`` with an approver,
#: hooks or host tools): (backend, the attempt's request, its context, run id).
OneTurn = Callable[["Backend", "Request", "AttemptContext", str], Awaitable["AttemptOutcome"]]
