"""``genesis mcp``: the MCP server on stdin and stdout, over parts of its own.

It holds runs, sessions and an approval inbox as ``genesis serve`` does (the
same parts, built by :func:`coding_genesis._serve.parts.build`, with journals
in its state directory), without HTTP: a client reaches them through the
tools alone (``list_approvals`` and ``answer_approval`` answer the inbox).
When stdin closes or a stop signal comes, every run and session is cancelled
and its process tree stopped before it exits.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any, cast

import anyio
from mcp.server.stdio import stdio_server

from coding_genesis._mcp.server import build_server
from coding_genesis._serve.parts import Settings, build
from coding_genesis._serve.service import Service
from coding_genesis._util.display import printable

__all__ = ["serve"]


#: The longest message read from stdin (bytes): a longer line is cut there.
MAX_LINE = 64 * 1024 * 1024


class _Lines:
    """stdin's lines, read on the event loop (no worker thread): a stop
    signal ends the wait for the next one even while the client keeps stdin
    open (a thread blocked in ``readline`` would hold the server until it
    closed)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        while b"\n" not in self._buffer and len(self._buffer) < MAX_LINE:
            await anyio.wait_readable(self._fd)
            chunk = os.read(self._fd, 1 << 16)
            if not chunk:
                if not self._buffer:
                    raise StopAsyncIteration
                break
            self._buffer += chunk
        line, newline, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", "replace") + newline.decode()


def _say(text: str) -> None:
    print(printable(f"genesis mcp: {text}"), file=sys.stderr, flush=True)


async def _stop(service: Service, why: str) -> None:
    """Every run and session ended, their trees stopped (shielded: it runs
    while the server is being cancelled)."""
    with anyio.CancelScope(shield=True):
        service.sessions.close_all(why)
        await service.runs.drain(0, cancel=True)
        service.hub.close()
        with anyio.move_on_after(60):
            await service.runs.idle()
            await service.sessions.idle()


async def serve(settings: Settings, token: str) -> int:
    """Serve MCP on stdio until stdin closes or a stop signal; 0."""
    built = await build(settings, token)
    service = built.service
    server = build_server(service)
    if settings.trusted:
        _say(
            "WARNING: --trusted-input: a tool call may set cli_path, env, extra_args, verify...: "
            "whoever speaks to this server runs any program as you"
        )

    async def signals(scope: anyio.CancelScope, task_status: Any) -> None:
        # Held open until it exits: a client that follows its SIGINT with a
        # SIGTERM (claude, 100 ms later) must not kill it mid-stop.
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as got:
            task_status.started()
            async for signum in got:
                if not scope.cancel_called:
                    _say(f"{signal.Signals(signum).name}: cancelling every run and session")
                    scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(service.runs.work)
        await tg.start(service.sessions.work)
        serving = anyio.CancelScope()
        await tg.start(signals, serving)
        try:
            with serving:
                async with stdio_server(stdin=cast(Any, _Lines(sys.stdin.fileno()))) as (
                    read,
                    write,
                ):
                    await server.run(read, write, server.create_initialization_options())
        finally:
            await _stop(service, "the MCP server stopped")
            tg.cancel_scope.cancel()
    return 0
