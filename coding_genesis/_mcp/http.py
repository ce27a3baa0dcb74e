"""``/mcp`` on ``genesis serve``: the MCP tools over streamable HTTP, acting on
the server's own parts (its runs, sessions and approval inbox), behind its
door (:class:`~coding_genesis._serve.security.Guard`: the token, the Host and
Origin checks, the body's bound), which sits in front of every route."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from coding_genesis._mcp.server import build_server
from coding_genesis._serve.service import Mount, Service

__all__ = ["PATH", "mount"]

#: Where the MCP endpoint is served.
PATH = "/mcp"


def _make(service: Service) -> tuple[Any, Callable[[], AbstractAsyncContextManager[Any]]]:
    manager = StreamableHTTPSessionManager(
        app=build_server(service),
        # The guard in front checks Host and Origin (and the token) for every route.
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    @asynccontextmanager
    async def running() -> AsyncIterator[None]:
        async with manager.run():
            yield

    return StreamableHTTPASGIApp(manager), running


def mount() -> Mount:
    """``/mcp``, for the server's settings (``Settings.mounts``)."""
    return Mount(PATH, _make)
