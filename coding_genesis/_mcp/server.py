"""The MCP server of one set of the server's parts: the tools listed, each
call answered in MCP's structured content, or as a tool error in words.

A call's failure never reaches the client as a traceback: a
:class:`~coding_genesis._mcp.tools.ToolError` is its words, anything else
is a bug of ours, logged redacted, answered as an internal error.
"""

from __future__ import annotations

import contextlib
import logging
import traceback
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server

from coding_genesis._mcp.tools import TOOLS, ToolError, call
from coding_genesis._observers.transcript import safe_dumps
from coding_genesis._serve.service import Service

__all__ = ["build_server"]

log = logging.getLogger("coding_genesis._mcp.server")


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def build_server(service: Service) -> Server[Any]:
    """An MCP server whose tools act on ``service``."""
    listed = [
        types.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=tool.input_schema,
            output_schema=tool.output_schema,
        )
        for tool in TOOLS
    ]

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        async def progress(value: float, message: str) -> None:
            # the client went away: the call's own cancellation follows
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await ctx.session.report_progress(value, None, message)

        try:
            data = await call(service, params.name, params.arguments, progress)
        except ToolError as refused:
            return _error(service.redactor.text(str(refused)))
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # noqa: BLE001  (a bug of ours: logged, never a traceback to the client)
            trace = "".join(traceback.format_exception(exc))
            log.error("MCP tool %r raised: %s", params.name, service.redactor.text(trace))
            return _error("internal error in coding-genesis (see the server's log)")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=safe_dumps(data).decode())],
            structured_content=data,
        )

    return Server(
        "genesis",
        version=service.version,
        instructions="Runs coding-agent CLIs under supervision: run a prompt on a backend, "
        "hold a live session, answer the approvals of their tool calls.",
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )
