"""Opening a live CLI: a :class:`~coding_genesis._live.link.LiveLink`
for a session's life (:func:`open_link`), or for one turn of a ``run()``
with an approver, hooks or host tools (:func:`one_turn`), started from the
validated request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from coding_genesis._live.link import LiveLink
from coding_genesis._pipeline.attempt import AttemptContext, AttemptOutcome, Refusal
from coding_genesis._pipeline.overlay import overlays
from coding_genesis._pipeline.tally import RunTally
from coding_genesis._supervision.stop import StopHandle
from coding_genesis._supervision.values import ProcessOutcome
from coding_genesis.backend import Backend
from coding_genesis.control import ControlProtocol
from coding_genesis.request import Request
from coding_genesis.status import ErrorCode, Status

__all__ = ["one_turn", "open_link"]


@asynccontextmanager
async def open_link(
    backend: Backend,
    protocol: ControlProtocol,
    request: Request,
    *,
    marker: str,
    stop: StopHandle,
    context: AttemptContext | None = None,
) -> AsyncIterator[LiveLink]:
    """A live process for the body: started (its opening handshake done within
    the request's timeout, or its failure kept in ``broken``/``exit``), closed
    and reaped at the end, whatever ends the body."""
    link = LiveLink(backend, protocol, request, marker=marker, stop=stop, context=context)
    async with overlays(), anyio.create_task_group() as tg:
        await link.open(tg, request.timeout)
        try:
            yield link
        finally:
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(2 * request.grace + link.process.supervisor.kill_wait + 5):
                    await link.close()
                tg.cancel_scope.cancel()


async def one_turn(
    backend: Backend, request: Request, context: AttemptContext, run_id: str
) -> AttemptOutcome:
    """A one-shot run with an approver, hooks or host tools: a live process for one turn."""
    protocol = backend.control()
    if protocol is None:  # checked before: a backend without one never gets here
        return AttemptOutcome(
            request,
            request.timeout,
            RunTally(request.cwd),
            ProcessOutcome(),
            refusal=Refusal(
                Status.USAGE,
                ErrorCode.INVALID_REQUEST,
                f"backend {backend.name!r} has no two-way protocol: "
                "approver=, hooks= and tools= cannot be used",
            ),
        )
    stop = context.stop if context.stop is not None else StopHandle()
    async with open_link(
        backend, protocol, request, marker=run_id, stop=stop, context=context
    ) as link:
        outcome = await link.turn(request, context, run_id=run_id)
        ended = await link.end_hooks()  # the run's one turn was its session
        if ended:
            outcome.hooks = (*outcome.hooks, *ended)
        return outcome
