"""Opening a live CLI: a :class:`~coding_genesis._pipeline.live.LiveLink`
for a session's life (:func:`open_link`), or for one turn of a ``run()``
with an approver or host tools (:func:`one_turn`), started from a validated request
(:func:`session_start`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from coding_genesis._pipeline.attempt import AttemptContext, AttemptOutcome, Refusal
from coding_genesis._pipeline.hooking import hook_wait
from coding_genesis._pipeline.live import LiveLink
from coding_genesis._pipeline.overlay import overlays
from coding_genesis._pipeline.request import Request
from coding_genesis._pipeline.tally import RunTally
from coding_genesis._supervision.stop import StopHandle
from coding_genesis._supervision.values import ProcessOutcome
from coding_genesis.approval import Approver
from coding_genesis.backend import Backend
from coding_genesis.config import AgentConfig
from coding_genesis.control import ControlProtocol, SessionStart
from coding_genesis.status import ErrorCode, Status

__all__ = ["one_turn", "open_link", "session_start"]


@asynccontextmanager
async def open_link(
    config: AgentConfig,
    backend: Backend,
    protocol: ControlProtocol,
    start: SessionStart,
    *,
    marker: str,
    timeout: float,
    approver: Approver | None,
    approval_timeout: float,
    stop: StopHandle,
    context: AttemptContext | None = None,
    request: Request | None = None,
) -> AsyncIterator[LiveLink]:
    """A live process for the body: started (its opening handshake done, or
    its failure kept in ``broken``/``exit``), closed and reaped at the end,
    whatever ends the body.  ``request``: the hooks and their timeout."""
    link = LiveLink(
        config,
        backend,
        protocol,
        start,
        marker=marker,
        approver=approver,
        approval_timeout=approval_timeout,
        stop=stop,
        context=context,
        hooks=request.hooks if request is not None else None,
        hook_timeout=request.hook_timeout if request is not None else 30.0,
    )
    async with overlays(), anyio.create_task_group() as tg:
        await link.open(tg, timeout)
        try:
            yield link
        finally:
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(2 * config.grace + link.supervisor.kill_wait + 5):
                    await link.close()
                tg.cancel_scope.cancel()


def session_start(request: Request, *, approvals: bool) -> SessionStart:
    """What a live CLI is started with, from a validated request (its hooks included)."""
    attempt = request.attempt
    return SessionStart(
        cwd=attempt.cwd,
        model=attempt.model,
        resume=attempt.resume_session,
        permissions=attempt.permissions,
        approvals=approvals,
        max_turns=attempt.max_turns,
        cli_max_retries=attempt.cli_max_retries,
        options=attempt.options,
        extra_args=attempt.extra_args,
        hooks=frozenset(request.hooks),
        hook_wait=hook_wait(request),
        output_schema=attempt.output_schema,
        tools=request.tools,
        setting_sources=attempt.setting_sources,
    )


async def one_turn(
    config: AgentConfig,
    backend: Backend,
    request: Request,
    context: AttemptContext,
    run_id: str,
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
    async with open_link(
        config,
        backend,
        protocol,
        session_start(request, approvals=request.approver is not None),
        marker=run_id,
        timeout=request.timeout,
        approver=request.approver,
        approval_timeout=request.approval_timeout,
        stop=context.stop if context.stop is not None else StopHandle(),
        context=context,
        request=request,
    ) as link:
        return await link.turn(request, context, run_id=run_id)
