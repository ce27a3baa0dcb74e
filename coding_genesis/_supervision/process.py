"""Supervised subprocess: spawn, stream stdout, drain stderr, watch the clocks,
stop the whole process tree, always reap.

Only this subpackage touches processes.  This module is the supervision
loop; the CLI is started by :mod:`coding_genesis._supervision.spawn`, its
tree found and stopped by :mod:`coding_genesis._supervision.tree` (state
shared by runs in :mod:`coding_genesis._supervision.table`), and the cleanup
is shielded by :mod:`coding_genesis._supervision.shield`.

Guarantee.  When :func:`run_process` returns or raises, every process of the
run that it could find has been stopped and every zombie of the run that is
our child has been reaped, within a bounded time.  This holds whatever ended
the run: the CLI exiting by itself, the wall-clock, idle or linger timeout,
cancellation from the caller (an anyio cancel scope, ``Task.cancel()``, even
repeated), or an internal error.  How processes are found:

* The CLI starts in its own session (``start_new_session``), so nothing of a
  run is ever in our session or process group; we never signal either.
* Every process of a run carries ``GENESIS_RUN_ID=<run id>`` in its
  environment, inherited through forks and execs, so descendants that
  escaped with ``setsid`` or a double fork are recognized by it.
* On Linux the host process is a child subreaper
  (``prctl(PR_SET_CHILD_SUBREAPER)``) while runs are in flight (not in
  between, unless it made itself one): orphans of a run are reparented to us
  instead of init, where a scan of our children finds them (by the marker)
  and ``waitpid`` reaps them once dead.  Where that is unavailable (or
  ``GENESIS_SUBREAPER=0``), the stop path scans every process of our user for
  the marker instead, and init reaps the orphans.
* Stopping takes a fresh snapshot of the tree (the CLI's descendants plus the
  marked orphans), sends each signal of the stop sequence (SIGTERM by
  default, followed by SIGCONT so a stopped process sees it) to every process
  group and every process found, waits up to the grace period, snapshots again
  (children born meanwhile join), and ends with SIGKILL rounds until nothing
  is left or ``kill_wait`` runs out.
* After the CLI exits by itself, its pipes get ``eof_grace``; then the
  processes it left behind are stopped the same way, and the readers are
  released even if something still holds stdout: the run ends when the CLI
  ends.
* Cleanup cannot be interrupted: on trio and for anyio cancel scopes it is
  shielded; on asyncio it runs as its own task that native ``Task.cancel()``
  cannot reach, and the cancellation is re-raised once it is done.
* pid reuse: processes are held as ``psutil.Process`` objects (pid plus start
  time) and checked before each signal; a group is signaled only while one of
  its members is known alive.  The CLI itself is reaped only through its
  ``Popen`` once its pidfd turns readable (polled where there are no pidfds):
  the main pids of runs in flight are excluded from every other ``waitpid``.
* The CLI is forked by one long-lived spawner thread with a parent-death
  signal armed (Linux; see :func:`_pdeath_preexec`): it dies with this
  process even when nothing here gets to run.

A live process (one CLI kept across turns) is the same run with its stdin
held open and clocks that run only while a turn is armed
(:mod:`coding_genesis._supervision.live`): the guarantee is unchanged.

Zombie children that are not a run's main process are reaped when they are
known to belong to a run (seen alive, or in a session or group of the run).
A zombie of unknown origin (a run process that escaped and died before any
snapshot saw it) is reaped when it is not in our session, was born during
the run, and stays a zombie for ``_ORPHAN_SETTLE`` seconds, which an owner
waiting on it (an asyncio or trio child watcher) never lets happen.

Limits: a process that removes the marker from its environment (``env -i``)
*and* is no longer a descendant of the CLI when we look; a process running as
another user, or one that escaped into another PID namespace; a process in
uninterruptible sleep that survives SIGKILL beyond ``kill_wait`` (logged).
While a run is in flight the host process also inherits orphans of its
*other* children; their zombies are reaped by the rule above.  A host program
that spawns children in new sessions and leaves their zombies unreaped for a
while during a run can lose their exit status to us; set
``GENESIS_SUBREAPER=0`` for such programs.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import psutil

from coding_genesis._supervision.live import LiveStdin
from coding_genesis._supervision.shield import shielded
from coding_genesis._supervision.spawn import (
    Child,
    setpriv_exec_error,
    setpriv_used,
    spawn,
    stdout_pipe,
)
from coding_genesis._supervision.stall import StallWatch
from coding_genesis._supervision.table import count_main, count_spawning, hold_subreaper
from coding_genesis._supervision.tree import Tree
from coding_genesis._supervision.values import (
    ProcessOutcome,
    StdoutSink,
    StopReason,
    SupervisorConfig,
)

if TYPE_CHECKING:
    from coding_genesis._supervision.live import TurnClocks
    from coding_genesis._supervision.stop import StopHandle


__all__ = [
    "ProcessOutcome",
    "StdoutSink",
    "StopReason",
    "SupervisorConfig",
    "run_process",
]

log = logging.getLogger("coding_genesis._supervision.process")


class _Tail:
    """The last N bytes of a stream, amortised O(1) per chunk."""

    __slots__ = ("_buf", "limit", "listener", "total")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._buf = bytearray()
        #: Also hears each chunk (a live session's turn keeps its own tail).
        self.listener: Callable[[bytes], object] | None = None

    def add(self, chunk: bytes) -> None:
        if self.listener is not None:
            self.listener(chunk)
        self.total += len(chunk)
        self._buf += chunk
        if len(self._buf) > 2 * self.limit:
            del self._buf[: -self.limit]

    def text(self) -> str:
        data = bytes(self._buf[-self.limit :]) if self.limit else b""
        return data.decode("utf-8", "replace")


async def run_process(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    stdin: bytes | LiveStdin | None,
    config: SupervisorConfig,
    on_stdout: StdoutSink,
    marker: str,
    on_spawn: Callable[[int], object] | None = None,
    stop_handle: StopHandle | None = None,
    clocks: TurnClocks | None = None,
    on_stderr: Callable[[bytes], object] | None = None,
) -> ProcessOutcome:
    """Run one CLI to completion under supervision.

    The supervisor speaks bytes: ``on_stdout`` receives each stdout chunk as
    read (up to ``config.read_size``), then ``b""`` once at EOF, and returns
    True once the CLI's terminal event has been seen (which starts the linger
    clock).  Never raises for process failures: they are in the outcome.
    Re-raises cancellation after the tree is stopped and reaped.
    ``stop_handle``: a stop asked for through it stops the tree like a timeout
    (stop reason ``requested``).

    A live process (:mod:`coding_genesis._supervision.live`): ``stdin`` a
    :class:`LiveStdin`, bound to the pipe once the CLI runs and released when
    it exits or the run ends (always); ``clocks`` a ``TurnClocks``, whose
    armed turn sets the wall, idle and stall limits instead of ``config``
    (no linger), nothing timing out while it is disarmed.
    """
    live = stdin if isinstance(stdin, LiveStdin) else None
    if live is not None:
        live.claim()
    hold_subreaper(+1)
    try:
        outcome = ProcessOutcome()
        tail = _Tail(config.stderr_tail_bytes)
        tail.listener = on_stderr
        wall_started = time.time()
        started = anyio.current_time()
        stdout_fd, stdout_w = stdout_pipe(config.read_size)
        stderr_fd, stderr_w = os.pipe()
        os.set_blocking(stderr_fd, False)
        stdin_fd: int | None = None
        stdin_r: int = subprocess.DEVNULL
        if stdin is not None:
            stdin_r, stdin_fd = os.pipe()
            os.set_blocking(stdin_fd, False)
        count_spawning(+1)
        try:
            # No await between the fork and the registration of the main pid:
            # a cancellation cannot lose the process.
            proc = Child(
                spawn(
                    list(argv),
                    cwd=cwd,
                    env=dict(env),
                    stdin=stdin_r,
                    stdout=stdout_w,
                    stderr=stderr_w,
                    pdeath_signal=config.pdeath_signal,
                ),
                stdin_fd if live is None else None,
            )
            count_main(proc.pid, +1)
        except (OSError, subprocess.SubprocessError) as exc:
            for fd in (stdout_fd, stderr_fd, stdin_fd):
                if fd is not None:
                    os.close(fd)
            outcome.spawn_error = exc if isinstance(exc, OSError) else OSError(str(exc))
            outcome.duration_s = anyio.current_time() - started
            return outcome
        except BaseException:
            for fd in (stdout_fd, stderr_fd, stdin_fd):
                if fd is not None:
                    os.close(fd)
            raise
        finally:
            os.close(stdout_w)
            os.close(stderr_w)
            if stdin is not None:
                os.close(stdin_r)
            count_spawning(-1)

        outcome.pid = proc.pid
        if live is not None and stdin_fd is not None:
            live.bind(stdin_fd)
        try:
            root: psutil.Process | None = psutil.Process(proc.pid)
        except psutil.Error:
            root = None  # cannot happen before we reap it; kept for safety
        tree = Tree(root, proc.pid, marker, wall_started)
        try:
            done = await _supervise(
                proc,
                tree,
                config,
                outcome,
                tail,
                started,
                stdin,
                on_stdout,
                on_spawn,
                stdout_fd,
                stderr_fd,
                stop_handle,
                clocks,
            )
            if (
                done.returncode == 127
                and not done.stdout_bytes
                and setpriv_used(config.pdeath_signal)
            ):
                failed = setpriv_exec_error(done.stderr_tail)
                if failed is not None:  # the CLI never ran: as if execve had failed here
                    done.spawn_error, done.returncode = failed, None
            return done
        finally:
            os.close(stdout_fd)
            os.close(stderr_fd)
            proc.close()
            if proc.returncode is not None:
                count_main(proc.pid, -1)
    finally:
        hold_subreaper(-1)
        if live is not None:
            live.release("the run ended")


async def _supervise(
    proc: Child,
    tree: Tree,
    config: SupervisorConfig,
    outcome: ProcessOutcome,
    tail: _Tail,
    started: float,
    stdin: bytes | LiveStdin | None,
    on_stdout: StdoutSink,
    on_spawn: Callable[[int], object] | None,
    stdout_fd: int,
    stderr_fd: int,
    stop_handle: StopHandle | None = None,
    clocks: TurnClocks | None = None,
) -> ProcessOutcome:
    if on_spawn is not None:
        try:
            on_spawn(proc.pid)
        except Exception:
            log.exception("on_spawn callback failed")
    last_output = started
    last_stderr = started
    terminal_at: float | None = None
    wake = anyio.Event()
    readers_left = 2
    readers_done = anyio.Event()
    watching = anyio.CancelScope()

    def reader_finished() -> None:
        nonlocal readers_left
        readers_left -= 1
        if readers_left == 0:
            readers_done.set()

    sink_errors = 0

    def feed(chunk: bytes) -> None:
        nonlocal terminal_at, sink_errors
        try:
            terminal = on_stdout(chunk)
        except Exception:
            if not sink_errors:
                log.exception("stdout sink failed on a chunk; skipped (logged once per run)")
            sink_errors += 1
            return
        if terminal and terminal_at is None:
            terminal_at = anyio.current_time()
            wake.set()

    async def read_stdout() -> None:
        # Straight from our end of the pipe: one read() per pipe-full (1 MiB),
        # no stream buffer copying in between.
        nonlocal last_output
        size = config.read_size
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
            feed(chunk)
            await anyio.lowlevel.checkpoint()  # a CLI that never pauses must not starve the loop
        feed(b"")
        reader_finished()

    async def drain_stderr() -> None:
        nonlocal last_stderr
        read = os.read
        while True:
            try:
                chunk = read(stderr_fd, 65536)
            except BlockingIOError:
                await anyio.wait_readable(stderr_fd)
                continue
            except OSError:
                break
            if not chunk:
                break
            last_stderr = anyio.current_time()
            tail.add(chunk)
            await anyio.lowlevel.checkpoint()
        reader_finished()

    async def write_stdin(data: bytes) -> None:
        fd = proc.stdin_fd
        assert fd is not None
        view = memoryview(data)
        try:
            while view:
                try:
                    view = view[os.write(fd, view) :]
                except BlockingIOError:
                    await anyio.wait_writable(fd)
        except OSError:
            pass  # the CLI exited or closed stdin without reading it all
        finally:
            proc.close_stdin()

    async def stop(reason: StopReason) -> None:
        if outcome.stop_reason is None:
            outcome.stop_reason = reason
        with anyio.CancelScope(shield=True):
            sent = await tree.stop(config.stop_signals, config.grace, config.kill_wait)
            outcome.signals_sent.extend(s for s in sent if s not in outcome.signals_sent)

    # The clocks' origin and limits: the run's (from ``config``), or with
    # ``clocks`` those of the armed turn (re-read at each wake).
    origin = started
    timeout: float | None = config.timeout
    idle, linger = config.idle_timeout, config.linger
    stall = config.stall_timeout
    watch = StallWatch(tree, stall, config.stall_cpu, started) if stall is not None else None
    turn = 0

    def new_turn(now: float) -> None:
        """The armed turn's limits (none while disarmed); a new turn's stall window."""
        nonlocal origin, timeout, idle, linger, watch, turn
        assert clocks is not None
        timeout, idle, linger = clocks.timeout, clocks.idle_timeout, None
        if turn != clocks.generation:
            turn, origin, watch = clocks.generation, clocks.armed_at, None
            limit = clocks.stall_timeout
            if limit is not None:
                watch = StallWatch(tree, limit, config.stall_cpu, now, cpu=None)

    async def watchdog() -> None:
        nonlocal wake
        reason: StopReason | None = None
        with watching:
            while True:
                if stop_handle is not None and stop_handle.requested:
                    reason = StopReason.REQUESTED
                    break
                now = anyio.current_time()
                if clocks is not None:
                    new_turn(now)
                if timeout is None:  # between turns: only a stop or an arming wakes us
                    await wake.wait()
                    wake = anyio.Event()
                    continue
                if watch is not None and now >= watch.next_sample:
                    evidence = watch.sample(now, max(last_output, last_stderr, origin))
                    if evidence is not None:
                        outcome.stall_silent_s, outcome.stall_cpu_s = evidence
                        reason = StopReason.STALLED
                        break
                reason, deadline = StopReason.TIMEOUT, origin + timeout
                if idle is not None and max(last_output, origin) + idle < deadline:
                    reason, deadline = StopReason.IDLE, max(last_output, origin) + idle
                if (
                    terminal_at is not None
                    and linger is not None
                    and terminal_at + linger < deadline
                ):
                    reason, deadline = StopReason.LINGER, terminal_at + linger
                if now >= deadline:
                    break
                wait_until = min(deadline, watch.next_sample) if watch is not None else deadline
                with anyio.move_on_after(wait_until - now):
                    await wake.wait()
                if wake.is_set():
                    wake = anyio.Event()
        if not watching.cancel_called and reason is not None:
            await stop(reason)

    if stop_handle is not None:
        stop_handle.bind(lambda: wake.set())
    if clocks is not None:
        clocks.bind(lambda: wake.set())
        clocks.bind_tree(tree, config)
    live = stdin if isinstance(stdin, LiveStdin) else None
    finished = False
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_stdout)
            tg.start_soon(drain_stderr)
            if isinstance(stdin, bytes):
                tg.start_soon(write_stdin, stdin)
            tg.start_soon(watchdog)
            await proc.wait()
            exited_at = time.monotonic()
            if live is not None:
                live.release("the CLI exited")
            # The CLI has ended: no clock applies any more (a stop under way
            # completes), its pipes get a short grace, then whatever of the
            # run is left is stopped and the readers are let go.
            watching.cancel()
            with anyio.move_on_after(config.eof_grace):
                await readers_done.wait()
            if config.kill_leftovers:
                await _sweep_leftovers(tree, config, outcome, exited_at)
                with anyio.move_on_after(config.eof_grace):
                    await readers_done.wait()
            tg.cancel_scope.cancel()
        finished = True
    finally:

        async def cleanup() -> None:
            if not finished or proc.returncode is None:
                await stop(StopReason.CANCELLED)
            with anyio.move_on_after(config.kill_wait):
                await proc.wait()
            proc.close_stdin()
            if live is not None:
                live.release("the run ended")
            await tree.reap_all()

        if stop_handle is not None:
            stop_handle.unbind()
        if clocks is not None:
            clocks.unbind()
        try:
            await shielded(cleanup)
        finally:
            outcome.returncode = proc.returncode
            outcome.stderr_tail = tail.text()
            outcome.stderr_bytes = tail.total
            outcome.duration_s = anyio.current_time() - started
    return outcome


async def _sweep_leftovers(
    tree: Tree, config: SupervisorConfig, outcome: ProcessOutcome, exited_at: float
) -> None:
    """After the CLI exited: stop what the run left behind.  What it left was
    reparented to us before its exit could be seen: a scan started since then
    (another run's, maybe) finds it."""
    leftovers = {pid: p for pid, p in tree.snapshot(exited_at).items() if pid != tree.pid}
    if not leftovers:
        return
    outcome.leftovers_stopped += len(leftovers)
    with anyio.CancelScope(shield=True):
        await tree.stop(config.stop_signals, config.grace, config.kill_wait)
