"""Starting and stopping ``genesis serve``: the state directory, the token,
what an earlier start left (:func:`~coding_genesis._serve.history.recover`),
uvicorn, and the signals.

SIGTERM (or SIGINT, SIGHUP) drains: no new run is taken (503), the queued and
running ones finish within the drain timeout (the rest are then cancelled,
their trees stopped), the event streams say ``closing`` and end, and the
server exits 0 with no process of any run left.  ``--on-term cancel``
cancels at once; a second signal does too.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import ipaddress
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import uvicorn

from coding_genesis._observers.transcript import safe_dumps
from coding_genesis._serve.app import build_app
from coding_genesis._serve.hub import Hub
from coding_genesis._serve.parts import Settings, build, locked
from coding_genesis._serve.security import Guard, allowed_hosts, write_token
from coding_genesis._util.display import printable
from coding_genesis._util.files import FILE_FLAGS

__all__ = ["Settings", "main"]  # Settings: its home is parts.py

#: Headers and the request line: h11's buffer of an incomplete request, bytes.
MAX_HEAD = 16 * 1024
#: What uvicorn waits for open connections once the streams have ended.
GRACE = 3.0


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: ours drain the runs first."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _with_mounts(app: Any, mounts: Mapping[str, Any]) -> Any:
    """``app`` with each mounted application at its path (``/mcp``, and what
    lies under it), behind the same guard."""

    async def dispatch(scope: Any, receive: Any, send: Any) -> None:
        path = str(scope.get("path") or "")
        for prefix, mounted in mounts.items():
            if path == prefix or path.startswith(prefix + "/"):
                await mounted(scope, receive, send)
                return
        await app(scope, receive, send)

    return dispatch


def _say(text: str) -> None:
    print(printable(f"genesis serve: {text}"), file=sys.stderr, flush=True)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(2048)
    sock.set_inheritable(False)
    return sock


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    fd = os.open(tmp, FILE_FLAGS | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def main(settings: Settings) -> int:
    """Serve until a stop signal; 0 after a clean stop, 2 when it cannot start."""
    try:
        with locked(settings.state_dir):
            return anyio.run(_serve, settings, backend="asyncio")
    except (RuntimeError, OSError) as exc:
        _say(f"error: {exc}")
        return 2


def _give_back_memory() -> None:
    """Collect garbage, then ask the C allocator to return free memory to the
    system (glibc's ``malloc_trim``; elsewhere nothing more): after a burst of
    clients leaves, the server's memory comes back down."""
    gc.collect()
    libc = ctypes.util.find_library("c")
    if libc is None:
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(libc).malloc_trim(0)


async def _housekeeping(hub: Hub, heartbeat: float) -> None:
    """Every second: memory given back after a burst of clients; every
    ``heartbeat`` seconds, a keep-alive on the idle streams."""
    last = time.monotonic()
    while True:
        await anyio.sleep(1.0)
        if hub.burst_over():
            _give_back_memory()
        if time.monotonic() - last >= heartbeat:
            last = time.monotonic()
            hub.beat()


async def _serve(settings: Settings) -> int:
    if settings.token is not None:
        token, where = settings.token, "as given"
    else:
        token, path = write_token(settings.state_dir)
        where = f"in {path} (0600)"
    sock = _bind(settings.host, settings.port)
    port = sock.getsockname()[1]
    url_host = f"[{settings.host}]" if ":" in settings.host else settings.host
    url = f"http://{url_host}:{port}"
    built = await build(settings, token)
    service, lost, lost_sessions, expired = (
        built.service,
        built.lost_runs,
        built.lost_sessions,
        built.expired,
    )
    hub, runs, sessions = service.hub, service.runs, service.sessions
    mounted = [(mount.path, mount.make(service)) for mount in settings.mounts]
    app = build_app(service)
    if mounted:
        app = _with_mounts(app, {path: made[0] for path, made in mounted})
    hosts = allowed_hosts(settings.host, port, settings.allow_hosts)
    guard = Guard(app, token=token, hosts=hosts, max_body=settings.max_body)
    config = uvicorn.Config(
        guard,
        lifespan="off",
        log_level="warning",
        access_log=False,
        h11_max_incomplete_event_size=MAX_HEAD,
        timeout_graceful_shutdown=int(GRACE),
        server_header=False,
    )
    server = _Server(config)
    if not is_loopback(settings.host):
        _say(
            f"WARNING: listening on {settings.host}, beyond this machine's loopback: anyone "
            "who can reach it and holds the token runs programs as you, over plain HTTP "
            "(no TLS); prefer 127.0.0.1 behind an SSH tunnel or a TLS proxy"
        )
    if settings.trusted:
        _say(
            "WARNING: --trusted-input: a request may set cli_path, env, extra_args, verify...: "
            "whoever holds the token runs any program as you"
        )
    if lost:
        _say(f"{lost} run(s) in flight or queued when it last stopped are listed lost")
    if lost_sessions:
        _say(f"{lost_sessions} session(s) open when it last stopped are listed lost")
    if expired:
        _say(f"{expired} approval(s) pending when it last stopped are listed expired")
    _write_private(
        settings.state_dir / "server.json",
        safe_dumps({"url": url, "pid": os.getpid(), "boot": hub.boot}) + b"\n",
    )
    _say(f"listening on {url} (root {settings.root}); the token is {where}")
    print(url, flush=True)

    stopping: list[int] = []

    async def stop(signum: int) -> None:
        mode = "cancel" if settings.on_term == "cancel" else "drain"
        _say(
            f"{signal.Signals(signum).name}: {'cancelling' if mode == 'cancel' else 'draining'}"
            " the runs"
        )
        sessions.close_all("the server was stopped")
        await runs.drain(settings.drain_timeout, cancel=mode == "cancel")
        await sessions.idle()

    async def signals(task_status: Any) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as got:
            task_status.started()
            async with anyio.create_task_group() as tg:
                async for signum in got:
                    if not stopping:
                        stopping.append(signum)
                        runs.stop_accepting()

                        async def first(number: int = signum) -> None:
                            await stop(number)
                            hub.close()  # the streams say so and end: no connection waits
                            await anyio.sleep(0.2)
                            server.should_exit = True

                        tg.start_soon(first)
                    else:
                        _say(f"{signal.Signals(signum).name} again: cancelling every run")
                        runs.cancel_all("the server was stopped")

    async with anyio.create_task_group() as tg:
        await tg.start(signals)
        tg.start_soon(runs.work)
        await tg.start(sessions.work)
        tg.start_soon(_housekeeping, hub, settings.heartbeat)
        try:
            async with contextlib.AsyncExitStack() as stack:
                for _path, (_app, running) in mounted:
                    await stack.enter_async_context(running())
                await server.serve(sockets=[sock])
        finally:
            with anyio.CancelScope(shield=True):
                sessions.close_all("the server was stopped")
                await runs.drain(0, cancel=True)
                hub.close()
                await runs.idle()
                with anyio.move_on_after(30):
                    await sessions.idle()
                tg.cancel_scope.cancel()
    _say(f"stopped; {runs.answered} run(s) answered")
    return 0
