"""One call of the caller's function that a live CLI asked for (``tools=``):
the function found and run, bounded by its own timeout, off the decoder
(:meth:`HostTool.call <coding_genesis.tools.HostTool.call>` never raises);
and, for a protocol whose CLI does not report the call in its stream, the
events that record it like any tool call (tallies, metering, budgets,
telemetry's ``execute_tool`` span, transcripts)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from coding_genesis.control import ToolCall
from coding_genesis.events import Event, ToolCallEvent, ToolResultEvent
from coding_genesis.tools import HostTool, ToolResult

__all__ = ["call_host_tool"]

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
