"""``/mcp`` on ``genesis serve``: the MCP tools over streamable HTTP, acting on
the server's own parts (its runs, sessions and approval inbox), behind its
door (:class:`~coding_genesis._serve.security.Guard`: the token, the Host and
Origin checks, the body's bound), which sits in front of every route.

The ``mcp`` package takes seconds to import: it is imported in a worker
thread once the server listens, so a server starts as fast as without it; a
request to ``/mcp`` meanwhile waits for it (``503`` if it cannot load).
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import orjson

from coding_genesis._serve.service import Mount, Service

__all__ = ["PATH", "mount"]

#: Where the MCP endpoint is served.
PATH = "/mcp"
#: Seconds a request to ``/mcp`` waits for the mcp package to load.
LOAD_WITHIN = 120.0


def _load() -> tuple[Any, Any, Any]:
    """The modules ``/mcp`` needs (in a worker thread: imports only)."""
    server = importlib.import_module("coding_genesis._mcp.server")
    manager = importlib.import_module("mcp.server.streamable_http_manager")
    security = importlib.import_module("mcp.server.transport_security")
    return server, manager, security


async def _unavailable(send: Any, why: str) -> None:
    body = orjson.dumps({"error": "unavailable", "message": why})
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _make(service: Service) -> tuple[Any, Callable[[], AbstractAsyncContextManager[Any]]]:
    loaded = anyio.Event()
    held: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        with anyio.move_on_after(LOAD_WITHIN):
            await loaded.wait()
        asgi = held.get("app")
        if asgi is None:
            await _unavailable(send, held.get("why") or "the MCP endpoint is still loading")
            return
        await asgi(scope, receive, send)

    async def serve_mcp() -> None:
        try:
            server, manager_module, security = await anyio.to_thread.run_sync(_load)
        except ImportError as exc:
            held["why"] = f"the MCP endpoint needs the mcp extra ({exc.name or exc})"
            loaded.set()
            return
        manager = manager_module.StreamableHTTPSessionManager(
            app=server.build_server(service),
            # The guard in front checks Host and Origin (and the token) for every route.
            security_settings=security.TransportSecuritySettings(
                enable_dns_rebinding_protection=False
            ),
        )
        async with manager.run():
            held["app"] = manager_module.StreamableHTTPASGIApp(manager)
            loaded.set()
            await anyio.sleep_forever()

    @asynccontextmanager
    async def running() -> AsyncIterator[None]:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve_mcp)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()

    return app, running


def mount() -> Mount:
    """``/mcp``, for the server's settings (``Settings.mounts``)."""
    return Mount(PATH, _make)
