"""The caller's functions (``tools=``) for a CLI that takes tools only over MCP
(an ACP agent): the session serves them on a Unix socket of its own, and the
agent launches our small stdio MCP server (:mod:`coding_genesis._live.mcpstdio`),
which lists them and bridges each call back here.

The socket is the session's alone: a fresh 0700 directory in our private
runtime directory, the socket itself 0600, removed when the session closes;
a host killed before it could close leaves both behind, so each bridge's
start first sweeps the directories whose owner (named in their file ``o``,
``<pid>-<start time, ms>``) is dead (:func:`sweep`);
on Linux each connection's peer (``SO_PEERCRED``) must be ours and one of the
session's processes (a descendant of its CLI, or carrying its marker), so
another program of the same user cannot call the caller's functions.  One
request a connection, one JSON line each way:

* ``{"op": "list"}`` → ``{"tools": [{"name", "description", "inputSchema", "timeout"}]}``
* ``{"op": "call", "name": ..., "arguments": {...}}`` → ``{"text": ..., "is_error": ...}``

A call runs as on claude and codex (:class:`~coding_genesis._live.hosttools.HostCalls`):
bounded by its tool's timeout, an error told to the model as an error result,
cancelled when its turn ends; the agent reports the call in its own stream
(an ACP ``tool_call``), which records, meters and traces it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import secrets
import shutil
import socket
import struct
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import orjson
from anyio.streams.buffered import BufferedByteReceiveStream

from coding_genesis._supervision import owners
from coding_genesis._util.files import NotARegularFile, open_own_dir, own_runtime_dir, read_regular
from coding_genesis.control import McpServer, ToolCall
from coding_genesis.tools import HostTool, ToolResult

__all__ = ["MCP_MISSING", "McpBridge", "mcp_missing", "sweep"]

log = logging.getLogger("coding_genesis._live.mcpbridge")

#: The runtime directory's stem (``<tmp>/coding-genesis-mcp-<uid>...``).
_STEM = "coding-genesis-mcp"
#: The stem of the server's name as the agent shows it; each session's server
#: is ``genesis-<12 random hex>`` (:func:`server_name`).
SERVER_STEM = "genesis"


def server_name() -> str:
    """A fresh, unguessable name for one session's server.  The codec allows a
    permission request titled for a tool of *this* name without the approver:
    a server of the repository's or the user's, which cannot know the name,
    can never be taken for ours (a plain ``genesis`` would be).  A hyphen, not
    an underscore: gemini splits ``mcp_<server>_<tool>`` at the first ``_``;
    short: gemini's function names stop at 63 characters (``mcp_`` + this +
    ``_`` + the tool), opencode keeps ``[A-Za-z0-9_-]``."""
    return f"{SERVER_STEM}-{secrets.token_hex(6)}"


#: A session directory's prefix, its socket's name and its owner's file.
_PREFIX, _SOCKET, _OWNER = "s-", "s", "o"
#: Seconds a connection may take to say what it wants.
_ASK_WITHIN = 10.0
#: Why a session cannot serve tools over MCP without the ``mcp`` package.
MCP_MISSING = "tools= on an ACP agent needs the mcp package (pip install 'coding-genesis[mcp]')"

#: Runs one call; None: its turn ended first.
RunCall = Callable[[ToolCall], Awaitable[ToolResult | None]]


def mcp_missing() -> bool:
    """The ``mcp`` package our stdio server needs is not installed."""
    return importlib.util.find_spec("mcp") is None


def peer_pid(sock: socket.socket) -> tuple[int, int] | None:
    """(pid, uid) of the process at the other end of a Unix socket (None: the
    platform does not say)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, 12))
    return pid, uid


class McpBridge:
    """One session's socket for its MCP server (see the module's docstring).

    ``allowed(pid)`` says whether a connecting process is the session's;
    ``run`` runs a call (the session's host calls, cancelled with its turn)."""

    def __init__(
        self,
        tools: Mapping[str, HostTool],
        run: RunCall,
        allowed: Callable[[int], bool],
        *,
        max_bytes: int,
    ) -> None:
        self.tools = tools
        self._run = run
        self._allowed = allowed
        self._max_bytes = max_bytes
        runtime = own_runtime_dir(tempfile.gettempdir(), _STEM)
        sweep(runtime)
        self.directory = Path(tempfile.mkdtemp(prefix=_PREFIX, dir=runtime))
        # the owner's name in a file, not in the directory's: macOS allows a
        # socket path of 104 bytes
        owner = os.open(self.directory / _OWNER, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(owner, owners.own_prefix().encode())
        finally:
            os.close(owner)
        self.path = str(self.directory / _SOCKET)
        #: What the protocol declares to the CLI: our stdio server on this socket,
        #: run isolated (-I: the working directory, which the repository owns,
        #: is not on its import path; no PYTHON* variables).
        self.server = McpServer(
            server_name(),
            sys.executable,
            ("-I", "-m", "coding_genesis._live.mcpstdio", self.path),
        )
        self._listener: anyio.abc.SocketListener | None = None

    def launched(self, argv: list[str]) -> bool:
        """Whether ``argv`` is our MCP server for this session (an agent may
        launch it during a turn: it is no stray of that turn's tools).  Its
        arguments exactly, not a mention of the socket: a tool cannot dodge
        the sweep by naming it (the session's close stops everything anyway)."""
        return argv[1:] == list(self.server.args)

    async def serve(self, tg: anyio.abc.TaskGroup) -> None:
        """Listen (0600) and answer each connection in ``tg`` until cancelled."""
        self._listener = listener = await anyio.create_unix_listener(self.path, mode=0o600)
        tg.start_soon(self._accept, listener, tg)

    async def _accept(self, listener: anyio.abc.SocketListener, tg: anyio.abc.TaskGroup) -> None:
        with contextlib.suppress(anyio.ClosedResourceError):  # closed with the session
            await listener.serve(self._answer, tg)

    async def _answer(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)
            peer = peer_pid(sock)
            if peer is not None and (peer[1] != os.getuid() or not self._allowed(peer[0])):
                log.warning("refused a connection to the tools' socket from pid %s", peer[0])
                return
            try:
                with anyio.fail_after(_ASK_WITHIN):
                    line = await BufferedByteReceiveStream(stream).receive_until(
                        b"\n", self._max_bytes
                    )
                ask = orjson.loads(line)
            except (
                TimeoutError,
                anyio.EndOfStream,
                anyio.DelimiterNotFound,
                orjson.JSONDecodeError,
            ):
                return
            except (anyio.BrokenResourceError, anyio.IncompleteRead, OSError):
                return
            answer = await self._reply(ask)
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await stream.send(orjson.dumps(answer) + b"\n")

    async def _reply(self, ask: Any) -> dict[str, Any]:
        op = ask.get("op") if isinstance(ask, dict) else None
        if op == "list":
            return {"tools": [_listed(tool) for tool in self.tools.values()]}
        if op != "call":
            return {"text": f"coding-genesis: no such request {op!r}", "is_error": True}
        name, arguments = ask.get("name"), ask.get("arguments") or {}
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return {
                "text": "coding-genesis: a call needs a name and an object of arguments",
                "is_error": True,
            }
        result = await self._run(ToolCall(("mcp", name), name, arguments))
        if result is None:
            return {"text": f"the turn ended before {name} finished", "is_error": True}
        return {"text": result.text, "is_error": result.is_error}

    async def close(self) -> None:
        """Stop listening and remove the socket and its directory."""
        if self._listener is not None:
            with contextlib.suppress(OSError, anyio.ClosedResourceError):
                await self._listener.aclose()
        shutil.rmtree(self.directory, ignore_errors=True)


def sweep(runtime: Path) -> list[str]:
    """Remove the session directories in our private ``runtime`` directory
    whose owner is dead (a host killed mid-session: its socket and directory
    stayed); the names removed.  Only directories of ours, private, found
    and removed through descriptors, never through a link, nothing outside
    ``runtime``; one without an owner's file (being made, or of an older
    version) or whose socket still answers (a live owner in another pid
    namespace sharing the directory) is left alone."""
    removed: list[str] = []
    try:
        fd = open_own_dir(runtime)
    except OSError:
        return removed
    try:
        for name in os.listdir(fd):
            if name.startswith(_PREFIX) and _stale(fd, name, runtime):
                try:
                    shutil.rmtree(name, dir_fd=fd)
                except OSError as exc:
                    log.debug("could not remove the stale %s: %s", name, exc)
                else:
                    removed.append(name)
    finally:
        os.close(fd)
    if removed:
        log.info("removed %d tools' socket directories of dead hosts", len(removed))
    return removed


def _stale(runtime_fd: int, name: str, runtime: Path) -> bool:
    """Whether ``name`` is a session directory of ours whose owner is dead."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=runtime_fd)
    except OSError:  # gone, a link, or no directory
        return False
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            return False
        key = owners.owner_of(read_regular(_OWNER, 64, dir_fd=fd, private=True).decode())
    except (OSError, NotARegularFile, UnicodeDecodeError):
        return False
    finally:
        os.close(fd)
    if key is None or owners.alive(key):
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(runtime / name / _SOCKET))
    except OSError:
        return True  # nobody listens: the owner is gone
    finally:
        probe.close()
    return False


def _listed(tool: HostTool) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "inputSchema": dict(tool.parameters),
        "timeout": tool.timeout,
    }
