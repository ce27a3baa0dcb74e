"""The calls of the caller's functions that a live CLI asks for (``tools=``):
each function found and run, bounded by its own timeout, off the decoder
(:meth:`HostTool.call <coding_genesis.tools.HostTool.call>` never raises);
for a protocol whose CLI does not report the call in its stream, the events
that record it like any tool call (tallies, metering, budgets, telemetry's
``execute_tool`` span, transcripts); and the calls still running when their
turn ends cancelled (the CLI gave up on them: an answer would be stale)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import anyio

from coding_genesis.control import ControlProtocol, ToolCall
from coding_genesis.events import Event, ToolCallEvent, ToolResultEvent
from coding_genesis.tools import HostTool, ToolResult

__all__ = ["HostCalls", "call_host_tool"]

log = logging.getLogger("coding_genesis._live.hosttools")

#: What a ToolResultEvent keeps of the text the model reads.
_PREVIEW = 2000


async def call_host_tool(
    tools: Mapping[str, HostTool],
    call: ToolCall,
    emit: Callable[[Sequence[Event]], object] | None,
) -> ToolResult:
    """Run ``call``; ``emit`` (None: the CLI reports the call itself) gets
    the call's event before and its result's after."""
    tool_id = call.call_id or str(call.key)
    if emit is not None:
        emit([ToolCallEvent(tool_id, call.name, dict(call.arguments))])
    host = tools.get(call.name)
    if host is None:
        known = ", ".join(sorted(tools)) or "none"
        result = ToolResult(f"no host tool named {call.name!r} (host tools: {known})", True)
    else:
        result = await host.call(call.arguments)
    if emit is not None:
        emit([ToolResultEvent(tool_id, call.name, result.is_error, result.text[:_PREVIEW])])
    return result


class HostCalls:
    """A session's host tools and their running calls: each answered through
    the protocol with ``send`` while the session is ``alive``."""

    def __init__(
        self,
        tools: Sequence[HostTool],
        protocol: ControlProtocol,
        send: Callable[..., None],
        alive: Callable[[], bool],
    ) -> None:
        self.tools = {tool.name: tool for tool in tools}
        self._protocol = protocol
        self._send = send
        self._alive = alive
        self._running: set[anyio.CancelScope] = set()

    async def run(
        self, call: ToolCall, emit: Callable[[Sequence[Event]], object] | None = None
    ) -> ToolResult | None:
        """Run ``call`` (None: :meth:`cancel` cut it short, its turn over)."""
        result: ToolResult | None = None
        with anyio.CancelScope() as scope:
            self._running.add(scope)
            try:
                result = await call_host_tool(self.tools, call, emit)
            finally:
                self._running.discard(scope)
        return result

    async def answer(
        self, call: ToolCall, emit: Callable[[Sequence[Event]], object] | None
    ) -> None:
        """Run ``call`` and write its answer (none when :meth:`cancel` cut it
        short, or when the protocol could not answer: that is logged)."""
        result = await self.run(call, emit)
        if result is None:
            return
        try:
            objects = self._protocol.answer_tool(call, result)
        except Exception:  # a plug-in's protocol must not break the session
            log.exception("%s could not answer host tool %s", self._protocol.name, call.name)
            return
        if objects and self._alive():
            self._send(*objects)

    def cancel(self) -> None:
        """Cancel the calls still running (their turn ended)."""
        for scope in self._running:
            scope.cancel()
