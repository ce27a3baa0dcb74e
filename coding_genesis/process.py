"""Supervised subprocess: spawn, stream stdout, drain stderr, watch the clocks,
stop the whole process tree, always reap.

Only this module touches processes.  Guarantees and limits:

* The CLI starts in its own session (``start_new_session``), stdin is a pipe
  that is written and closed, or /dev/null; never an open pipe.
* Every process a run starts carries ``GENESIS_RUN_ID=<run id>`` in its
  environment, so descendants that escaped with ``setsid`` or a double fork
  can still be recognised.
* On Linux the runner makes itself a child subreaper
  (``prctl(PR_SET_CHILD_SUBREAPER)``): orphans of a run are reparented to us,
  found by that marker, stopped and reaped.  Where that is unavailable the
  stop path scans every process of our user for the marker instead.
* Stopping sends each signal of the stop sequence (SIGTERM by default) to the
  CLI's process group, to every process group and process found in a fresh
  snapshot of the tree, waits up to the grace period, and ends with SIGKILL.
  Every wait is bounded; cleanup runs shielded from cancellation.
* Limits: a process that drops the marker from its environment *and* escapes
  to another parent before we snapshot it (only possible without the
  subreaper), or one running as another user, cannot be found.
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import psutil

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

from .parser import DEFAULT_MAX_LINE_BYTES, JsonLinesParser

__all__ = [
    "RUN_MARKER_ENV",
    "ProcessOutcome",
    "StopReason",
    "SupervisorConfig",
    "build_env",
    "run_process",
    "subreaper_enabled",
]

log = logging.getLogger("coding_genesis.process")

#: Environment variable that marks every process of a run.
RUN_MARKER_ENV = "GENESIS_RUN_ID"

_PR_SET_CHILD_SUBREAPER = 36
_subreaper: bool | None = None
#: Main pids of runs in flight: never reaped by our orphan sweep.
_active_mains: set[int] = set()


class StopReason(enum.StrEnum):
    """Why the runner stopped the process tree."""

    TIMEOUT = "timeout"
    IDLE = "idle"
    LINGER = "linger"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class SupervisorConfig:
    """Clocks and limits for one supervised process."""

    timeout: float = 300.0
    #: Seconds between each stop signal and the next (then SIGKILL).
    grace: float = 5.0
    #: Stop when stdout is silent this long (None: never).
    idle_timeout: float | None = None
    #: Stop a CLI still running this long after its terminal event (None: never).
    linger: float | None = 2.0
    #: After the CLI exits, how long its pipes may stay open (a grandchild holding them).
    eof_grace: float = 0.5
    #: Signals sent in turn before SIGKILL.
    stop_signals: tuple[int, ...] = (signal.SIGTERM,)
    #: Bound on waiting for SIGKILLed processes to disappear.
    kill_wait: float = 2.0
    #: Stop processes of the run still alive after the CLI exited by itself.
    kill_leftovers: bool = True
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    stderr_tail_bytes: int = 64 * 1024
    read_size: int = 1024 * 1024


@dataclass(slots=True)
class ProcessOutcome:
    """What happened to the process; the agent turns it into a response."""

    pid: int | None = None
    returncode: int | None = None
    stop_reason: StopReason | None = None
    spawn_error: OSError | None = None
    signals_sent: list[str] = field(default_factory=list)
    stderr_tail: str = ""
    stderr_bytes: int = 0
    stdout_bytes: int = 0
    lines: int = 0
    skipped_lines: int = 0
    #: Processes of the run other than the CLI that we had to stop.
    leftovers_stopped: int = 0
    #: Whether stdout reached EOF (False: a grandchild held it open).
    stdout_eof: bool = False
    duration_s: float = 0.0


def subreaper_enabled() -> bool:
    """Make this process a child subreaper once (Linux); report whether it is."""
    global _subreaper
    if _subreaper is None:
        _subreaper = False
        if sys.platform.startswith("linux") and os.environ.get("GENESIS_SUBREAPER", "1") != "0":
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                _subreaper = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
            except (OSError, AttributeError):  # pragma: no cover - exotic libc
                _subreaper = False
    return _subreaper


def build_env(
    base: Mapping[str, str],
    *,
    unset: Sequence[str] = (),
    add: Mapping[str, str] | None = None,
    marker: str | None = None,
) -> dict[str, str]:
    """The child's environment: ``base`` minus ``unset``, plus ``add``.

    In ``unset`` a trailing ``*`` matches a prefix, and an entry starting with
    ``!`` keeps what it matches (e.g. ``CLAUDE_CODE_*`` but ``!CLAUDE_CODE_OAUTH_TOKEN``).
    """
    env = dict(base)
    if unset:
        drop = [u for u in unset if not u.startswith("!")]
        keep = [u[1:] for u in unset if u.startswith("!")]
        for key in list(env):
            if _env_match(key, drop) and not _env_match(key, keep):
                del env[key]
    if add:
        env.update(add)
    if marker is not None:
        env[RUN_MARKER_ENV] = marker
    return env


def _env_match(key: str, patterns: Sequence[str]) -> bool:
    for pattern in patterns:
        if pattern.endswith("*"):
            if key.startswith(pattern[:-1]):
                return True
        elif key == pattern:
            return True
    return False


class _Tail:
    """The last N bytes of a stream, amortised O(1) per chunk."""

    __slots__ = ("_buf", "limit", "total")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._buf = bytearray()

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self._buf += chunk
        if len(self._buf) > 2 * self.limit:
            del self._buf[: -self.limit]

    def text(self) -> str:
        data = bytes(self._buf[-self.limit :]) if self.limit else b""
        return data.decode("utf-8", "replace")


def _has_marker(proc: psutil.Process, marker: str) -> bool:
    try:
        return proc.environ().get(RUN_MARKER_ENV) == marker
    except (psutil.Error, OSError):
        return False


class _Tree:
    """The processes of one run: snapshots, signals, bounded waits, reaping."""

    def __init__(self, pid: int, marker: str, started_at: float) -> None:
        self.pid = pid
        self.marker = marker
        self.started_at = started_at
        self.seen: set[int] = set()
        self._own_pgrp = os.getpgrp()

    def snapshot(self) -> dict[int, psutil.Process]:
        procs: dict[int, psutil.Process] = {}
        try:
            root = psutil.Process(self.pid)
            if root.status() != psutil.STATUS_ZOMBIE:
                procs[root.pid] = root
            for child in root.children(recursive=True):
                procs[child.pid] = child
        except psutil.Error:
            pass
        for orphan in self._marked_orphans():
            procs[orphan.pid] = orphan
            try:
                for child in orphan.children(recursive=True):
                    procs[child.pid] = child
            except psutil.Error:
                pass
        self.seen.update(p for p in procs if p != self.pid)
        return procs

    def _marked_orphans(self) -> list[psutil.Process]:
        if subreaper_enabled():
            try:
                candidates = psutil.Process().children()
            except psutil.Error:
                return []
        else:
            uid = os.getuid()
            candidates = []
            for proc in psutil.process_iter():
                try:
                    if proc.uids().real == uid and proc.pid != os.getpid():
                        candidates.append(proc)
                except psutil.Error:
                    continue
        return [
            p
            for p in candidates
            if p.pid != self.pid and p.pid not in _active_mains and _has_marker(p, self.marker)
        ]

    def signal(self, procs: Mapping[int, psutil.Process], signum: int) -> None:
        # Each process's group too: it reaches members born after the snapshot.
        groups: set[int] = set()
        for pid in procs:
            with contextlib.suppress(OSError):
                groups.add(os.getpgid(pid))
        groups.discard(self._own_pgrp)
        for pgid in groups:
            with contextlib.suppress(OSError):
                os.killpg(pgid, signum)
        for proc in procs.values():
            with contextlib.suppress(psutil.Error, OSError):
                proc.send_signal(signum)

    async def wait_gone(
        self, procs: Mapping[int, psutil.Process], timeout: float
    ) -> dict[int, psutil.Process]:
        deadline = anyio.current_time() + max(timeout, 0.0)
        delay = 0.005
        while True:
            alive = {pid: p for pid, p in procs.items() if _alive(p)}
            self.reap()
            if not alive or anyio.current_time() >= deadline:
                return alive
            await anyio.sleep(min(delay, max(deadline - anyio.current_time(), 0.0)))
            delay = min(delay * 2, 0.05)

    async def stop(self, signals: Sequence[int], grace: float, kill_wait: float) -> list[str]:
        sent: list[str] = []
        procs = self.snapshot()
        for signum in (*signals, signal.SIGKILL):
            if not procs:
                break
            self.signal(procs, signum)
            sent.append(signal.Signals(signum).name)
            wait = kill_wait if signum == signal.SIGKILL else grace
            alive = await self.wait_gone(procs, wait)
            # Children born during the wait (or reparented to us) join the next round.
            procs = {**alive, **{pid: p for pid, p in self.snapshot().items() if _alive(p)}}
        if procs:
            # Still there after SIGKILL: one more round for late forks, then give up loudly.
            self.signal(procs, signal.SIGKILL)
            alive = await self.wait_gone(procs, kill_wait)
            if alive:
                log.warning("processes survived SIGKILL: %s", sorted(alive))
        self.reap()
        return sent

    def reap(self) -> None:
        """Collect zombies of this run that were reparented to us."""
        for pid in list(self.seen):
            if pid in _active_mains:
                continue
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue  # not our child (or already reaped)
            except OSError:
                continue
            if done:
                self.seen.discard(pid)
        if subreaper_enabled():
            _reap_orphan_zombies(self.started_at)


def _stdout_pipe(size: int) -> tuple[int, int]:
    """The CLI's stdout pipe: our (non-blocking) read end and its write end.

    Widened to ``size`` where Linux allows (``F_SETPIPE_SZ``; up to
    ``/proc/sys/fs/pipe-max-size``, 1 MiB by default): a fast CLI then wakes
    us once per MiB instead of once per 64 KiB.
    """
    r, w = os.pipe()
    os.set_blocking(r, False)
    setpipe = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if setpipe is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(w, setpipe, size)
    return r, w


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _reap_orphan_zombies(since: float) -> None:
    """Reap zombies reparented to us (subreaper) that appeared during a run.

    They have no readable environment any more, so they are recognised by
    being our children, born after the run started and not a run's main
    process (those belong to the event loop's child watcher).
    """
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return
    for child in children:
        if child.pid in _active_mains:
            continue
        try:
            if child.status() != psutil.STATUS_ZOMBIE or child.create_time() < since - 1.0:
                continue
            os.waitpid(child.pid, os.WNOHANG)
        except (psutil.Error, ChildProcessError, OSError):
            continue


#: Receives each parsed stdout object as soon as its line is parsed; returns
#: True for the CLI's terminal event.  One call per object, no list per chunk:
#: that keeps the hot path within reach of a bare ``orjson.loads`` loop.
ObjectSink = Callable[[dict[str, Any]], bool]


async def run_process(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    stdin: bytes | None,
    config: SupervisorConfig,
    sink: ObjectSink,
    marker: str,
    stdout_tap: Callable[[bytes], object] | None = None,
    on_spawn: Callable[[int], object] | None = None,
    on_chunk: Callable[[], object] | None = None,
) -> ProcessOutcome:
    """Run one CLI to completion under supervision.

    ``sink`` receives each parsed stdout object and returns True for the
    CLI's terminal event (which starts the linger clock); ``on_chunk`` is
    called once the objects of a stdout chunk have all been through it.
    Never raises for process failures: they are in the outcome.  Re-raises
    cancellation after the tree is stopped and reaped.
    """
    outcome = ProcessOutcome()
    parser = JsonLinesParser(config.max_line_bytes)
    tail = _Tail(config.stderr_tail_bytes)
    subreaper_enabled()
    wall_started = time.time()
    started = anyio.current_time()
    stdout_fd, stdout_w = _stdout_pipe(config.read_size)
    try:
        proc = await anyio.open_process(
            list(argv),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=stdout_w,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
        )
    except OSError as exc:
        os.close(stdout_fd)
        outcome.spawn_error = exc
        outcome.duration_s = anyio.current_time() - started
        return outcome
    except BaseException:
        os.close(stdout_fd)
        raise
    finally:
        os.close(stdout_w)

    outcome.pid = proc.pid
    _active_mains.add(proc.pid)
    if on_spawn is not None:
        try:
            on_spawn(proc.pid)
        except Exception:
            log.exception("on_spawn callback failed")
    tree = _Tree(proc.pid, marker, wall_started)
    last_output = started
    terminal_at: float | None = None
    wake = anyio.Event()
    readers_left = 2
    readers_done = anyio.Event()

    def reader_finished() -> None:
        nonlocal readers_left
        readers_left -= 1
        if readers_left == 0:
            readers_done.set()

    sink_errors = 0

    def feed(obj: dict[str, Any]) -> None:
        nonlocal terminal_at, sink_errors
        try:
            terminal = sink(obj)
        except Exception:
            if not sink_errors:
                log.exception("event sink failed on an object; skipped (logged once per run)")
            sink_errors += 1
            parser.skipped += 1
            return
        if terminal and terminal_at is None:
            terminal_at = anyio.current_time()
            wake.set()

    def chunk_done() -> None:
        try:
            if on_chunk is not None:
                on_chunk()
        except Exception:
            log.exception("on_chunk callback failed")

    async def read_stdout() -> None:
        # Straight from our end of the pipe: one read() per pipe-full (1 MiB),
        # no stream buffer copying in between.
        nonlocal last_output
        size = config.read_size
        feed_each = parser.feed_each
        read = os.read
        while True:
            try:
                chunk = read(stdout_fd, size)
            except BlockingIOError:
                await anyio.wait_readable(stdout_fd)
                continue
            except OSError:
                break
            if not chunk:
                outcome.stdout_eof = True
                break
            last_output = anyio.current_time()
            outcome.stdout_bytes += len(chunk)
            if stdout_tap is not None:
                stdout_tap(chunk)
            feed_each(chunk, feed)
            if on_chunk is not None:
                chunk_done()
            await anyio.lowlevel.checkpoint()  # a CLI that never pauses must not starve the loop
        for obj in parser.close():
            feed(obj)
        if on_chunk is not None:
            chunk_done()
        reader_finished()

    async def drain_stderr() -> None:
        assert proc.stderr is not None
        try:
            while True:
                tail.add(await proc.stderr.receive(65536))
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        reader_finished()

    async def write_stdin(data: bytes) -> None:
        assert proc.stdin is not None
        try:
            await proc.stdin.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the CLI exited or closed stdin without reading it all
        finally:
            with contextlib.suppress(Exception):
                await proc.stdin.aclose()

    async def stop(reason: StopReason) -> None:
        if outcome.stop_reason is None:
            outcome.stop_reason = reason
        with anyio.CancelScope(shield=True):
            sent = await tree.stop(config.stop_signals, config.grace, config.kill_wait)
            outcome.signals_sent.extend(sent)

    async def watchdog() -> None:
        nonlocal wake
        while True:
            now = anyio.current_time()
            reason, deadline = StopReason.TIMEOUT, started + config.timeout
            if config.idle_timeout is not None and last_output + config.idle_timeout < deadline:
                reason, deadline = StopReason.IDLE, last_output + config.idle_timeout
            if (
                terminal_at is not None
                and config.linger is not None
                and terminal_at + config.linger < deadline
            ):
                reason, deadline = StopReason.LINGER, terminal_at + config.linger
            if now >= deadline:
                break
            with anyio.move_on_after(deadline - now):
                await wake.wait()
            if wake.is_set():
                wake = anyio.Event()
        await stop(reason)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_stdout)
            tg.start_soon(drain_stderr)
            if stdin is not None:
                tg.start_soon(write_stdin, stdin)
            tg.start_soon(watchdog)
            await proc.wait()
            # The CLI has ended: its pipes get a short grace, then whatever of
            # the run is left is stopped and the readers are let go.
            with anyio.move_on_after(config.eof_grace):
                await readers_done.wait()
            if config.kill_leftovers or not readers_done.is_set():
                await _sweep_leftovers(tree, config, outcome)
            with anyio.move_on_after(config.eof_grace):
                await readers_done.wait()
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if proc.returncode is None:
                await stop(StopReason.CANCELLED)
            with anyio.move_on_after(config.kill_wait):
                await proc.wait()
            with anyio.move_on_after(config.kill_wait):
                await proc.aclose()
            tree.reap()
        _active_mains.discard(proc.pid)
        os.close(stdout_fd)
        outcome.returncode = proc.returncode
        outcome.stderr_tail = tail.text()
        outcome.stderr_bytes = tail.total
        outcome.lines = parser.lines
        outcome.skipped_lines = parser.skipped
        outcome.duration_s = anyio.current_time() - started
    return outcome


async def _sweep_leftovers(tree: _Tree, config: SupervisorConfig, outcome: ProcessOutcome) -> None:
    """After the CLI exited: stop what the run left behind."""
    leftovers = {pid: p for pid, p in tree.snapshot().items() if pid != tree.pid and _alive(p)}
    if not leftovers:
        tree.reap()
        return
    outcome.leftovers_stopped += len(leftovers)
    with anyio.CancelScope(shield=True):
        await tree.stop(config.stop_signals, config.grace, config.kill_wait)
