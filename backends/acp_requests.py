"""The caller's MCP servers (``mcp_servers=``) as an ACP agent takes them in
``session/new``, beside :mod:`.acp`: a stdio server's ``env`` as ``[{name,
value}]`` (over stdin, never argv), an HTTP server only where the agent's
``initialize`` offers ``mcpCapabilities.http``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coding_genesis.request import Request

__all__ = ["callers_servers"]


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
