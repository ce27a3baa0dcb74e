"""The stdio MCP server an ACP agent launches for a session with host tools:
``python -I -m coding_genesis._live.mcpstdio SOCKET``.  It lists the session's
tools and bridges each call to the session over its Unix socket
(:mod:`coding_genesis._live.mcpbridge`), which runs it.  It waits at most the
tool's timeout (and a margin) for the answer, so a session that is gone
never holds up the agent: the model is told instead.  Needs the ``mcp``
package (``pip install 'coding-genesis[mcp]'``)."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import orjson
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from coding_genesis._util.version import version

__all__ = ["main"]

#: Seconds past a tool's own timeout before the session is taken to be gone.
_MARGIN = 5.0
#: Seconds the session may take to list its tools.
_LIST_WITHIN = 30.0
#: The longest answer read from the session.
_MAX_ANSWER = 64 * 1024 * 1024


async def ask(path: str, message: dict[str, Any], within: float) -> dict[str, Any]:
    """One request to the session's socket and its answer."""
    with anyio.fail_after(within):
        async with await anyio.connect_unix(path) as stream:
            await stream.send(orjson.dumps(message) + b"\n")
            line = await BufferedByteReceiveStream(stream).receive_until(b"\n", _MAX_ANSWER)
    answer = orjson.loads(line)
    if not isinstance(answer, dict):
        raise ValueError("the session's answer is not an object")
    return answer


def _result(text: str, is_error: bool) -> types.CallToolResult:
    """The text as the model reads it.  A text that is JSON but no object (a
    tool that returns ``5``) also goes as ``structuredContent`` ``{"result":
    ...}``: gemini 0.61's MCP client parses a text block into
    ``structuredContent`` when there is none, then fails the call for not
    being an object."""
    structured: dict[str, Any] | None = None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        value = None
    else:
        if not isinstance(value, dict):
            structured = {"result": value}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=structured,
        is_error=is_error,
    )


async def serve(path: str) -> None:
    """Serve MCP on stdin/stdout for the session at ``path``."""
    listed = (await ask(path, {"op": "list"}, _LIST_WITHIN)).get("tools") or []
    tools = [
        types.Tool(
            name=str(entry["name"]),
            description=str(entry.get("description") or ""),
            input_schema=dict(entry.get("inputSchema") or {"type": "object"}),
        )
        for entry in listed
    ]
    timeouts = {str(entry["name"]): float(entry.get("timeout") or 30.0) for entry in listed}

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        name = params.name
        message = {"op": "call", "name": name, "arguments": dict(params.arguments or {})}
        try:
            answer = await ask(path, message, timeouts.get(name, 30.0) + _MARGIN)
        except TimeoutError:
            return _result(f"{name}: the session did not answer in time", True)
        except (OSError, ValueError, anyio.EndOfStream, anyio.DelimiterNotFound) as exc:
            return _result(f"{name}: the session could not be reached ({exc})", True)
        return _result(str(answer.get("text", "")), bool(answer.get("is_error")))

    server: Server[Any] = Server(
        "genesis",
        version=version(),
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m coding_genesis._live.mcpstdio SOCKET", file=sys.stderr)
        return 2
    try:
        anyio.run(serve, args[0])
    except (OSError, TimeoutError, ValueError) as exc:
        print(f"coding-genesis MCP server: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
