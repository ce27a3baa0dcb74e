"""The MCP servers of an ACP session, beside :mod:`.acp`: the caller's
(``mcp_servers=``) as an agent takes them in ``session/new`` (a stdio server's
``env`` as ``[{name, value}]``, over stdin, never argv; an HTTP server only
where the agent's ``initialize`` offers ``mcpCapabilities.http``), the one the
session serves for the caller's functions, and how an agent names a call of
one of those functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from coding_genesis.request import Request

if TYPE_CHECKING:
    from coding_genesis.control import McpServer
    from coding_genesis.tools import HostTool

__all__ = ["MCP_CALL_NAMES", "MCP_META_NAME", "callers_servers", "named_tool", "session_server"]

#: How agents name a call of a tool of an MCP server, in its title or its
#: ``_meta`` tool name (measured): gemini ``add (<server> MCP Server)``,
#: opencode ``<server>_add``, qwen ``_meta.toolName`` ``mcp__<server>__add`` (as
#: claude names MCP tools; its permission request is titled with the arguments).
MCP_META_NAME = "mcp__{server}__{tool}"
MCP_CALL_NAMES = ("{tool} ({server} MCP Server)", "{server}_{tool}", MCP_META_NAME)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def callers_servers(
    start: Request | None, capabilities: Mapping[str, Any]
) -> list[dict[str, Any]] | str:
    """``mcp_servers=`` as ``session/new``'s entries (a stdio server's ``env``
    as ``[{name, value}]``, over stdin), or why the agent cannot take them (an
    HTTP server needs its ``mcpCapabilities.http``)."""
    if start is None or not start.mcp_servers:
        return []
    http = _mapping(capabilities.get("mcpCapabilities")).get("http") is True
    entries: list[dict[str, Any]] = []
    for name, spec in start.mcp_servers.items():
        if spec.url is not None:
            if not http:
                return f"the agent takes no HTTP MCP server (mcp_servers[{name!r}] is one)"
            entries.append({"type": "http", "name": name, "url": spec.url, "headers": []})
        else:
            env = [{"name": key, "value": value} for key, value in spec.env.items()]
            entries.append(
                {"name": name, "command": spec.command, "args": list(spec.args), "env": env}
            )
    return entries


def session_server(server: McpServer) -> dict[str, Any]:
    """One of ``session/new``'s ``mcpServers`` for the server the session
    serves (a stdio server: no environment of its own, so nothing secret is
    written to the agent)."""
    return {"name": server.name, "command": server.command, "args": list(server.args), "env": []}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def named_tool(
    call: Mapping[str, Any],
    forms: Sequence[str],
    server: str,
    tools: Sequence[HostTool],
    *,
    by_id: bool,
) -> str | None:
    """The caller's function ``call`` names in one of ``forms`` (``{tool}``,
    ``{server}``) on ``server``, the session's own.  That server's name is
    the session's own and unguessable, so no server of the repository's or
    the user's matches it."""
    meta = _mapping(call.get("_meta"))
    said = {
        _text(call.get("title")),
        _text(meta.get("toolName")),
        _text(_mapping(meta.get("claudeCode")).get("toolName")),
    }
    for tool in tools:
        if said & {form.format(tool=tool.name, server=server) for form in forms}:
            return tool.name
    call_id = _text(call.get("toolCallId")) or ""
    for tool in tools if by_id else ():
        if call_id.startswith(f"mcp_{server}_{tool.name}__"):  # gemini's call ids
            return tool.name
    return None
