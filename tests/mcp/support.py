"""MCP clients of the ``mcp`` package for the tests: one over a real ``genesis
mcp`` process on stdio, one over streamable HTTP to a real ``genesis serve``
(its ``/mcp``)."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.serve.support import ROOT, Served, server_env

#: The tools every server lists.
TOOLS = [
    "run",
    "get_run",
    "list_runs",
    "cancel_run",
    "open_session",
    "send_turn",
    "close_session",
    "list_approvals",
    "answer_approval",
]


def mcp_argv(root: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "coding_genesis._cli.main", "mcp", "--root", str(root), *args]


@contextlib.asynccontextmanager
async def over_stdio(
    tmp: Path, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """A client session with a real ``genesis mcp`` (its own environment, under ``tmp``)."""
    root = tmp / "root"
    root.mkdir(parents=True, exist_ok=True)
    params = StdioServerParameters(
        command=sys.executable,
        args=mcp_argv(root, *args)[1:],
        env=server_env(tmp, env),
        cwd=str(ROOT),
    )
    errlog = (tmp / f"mcp-{time.monotonic_ns()}.err").open("w")
    try:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
    finally:
        errlog.close()


@contextlib.asynccontextmanager
async def over_http(served: Served, token: str | None = None) -> AsyncIterator[ClientSession]:
    """A client session with ``served``'s ``/mcp``, with its token (or ``token``)."""
    headers = {"Authorization": f"Bearer {token if token is not None else served.token}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(f"{served.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


class Progress:
    """A progress callback that keeps what it is told."""

    def __init__(self) -> None:
        self.reports: list[tuple[float, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.reports.append((progress, message))

    @property
    def messages(self) -> list[str]:
        return [m or "" for _, m in self.reports]


def text(result: Any) -> str:
    """A tool result's text."""
    return "".join(getattr(block, "text", "") for block in result.content)


def structured(result: Any) -> dict[str, Any]:
    """A successful tool result's structured content (its text says the same)."""
    assert not result.is_error, text(result)
    data: dict[str, Any] = result.structured_content
    assert json.loads(text(result)) == data
    return data
