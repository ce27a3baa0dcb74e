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

# The text above is the guarantee, pinned verbatim (tests/supervision/test_guarantee_text.py).
# Since it was written the pieces moved: stdin held open is `live.py`, the clocks armed per
# turn are `watchdog.py` (`TurnClocks`), the readers `readers.py`.

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

import anyio
import psutil

from coding_genesis._supervision.live import LiveStdin
from coding_genesis._supervision.readers import Readers, Tail
from coding_genesis._supervision.shield import shielded
from coding_genesis._supervision.spawn import (
    Child,
    setpriv_exec_error,
    setpriv_used,
    spawn,
    stdout_pipe,
)
from coding_genesis._supervision.table import count_main, count_spawning, hold_subreaper
from coding_genesis._supervision.tree import Tree
from coding_genesis._supervision.values import (
    ProcessOutcome,
    StdoutSink,
    StopReason,
    SupervisorConfig,
)
from coding_genesis._supervision.watchdog import RunClocks, TurnClocks, Watchdog, stop_tree

if TYPE_CHECKING:
    from coding_genesis._supervision.stop import StopHandle


__all__ = [
    "ProcessOutcome",
    "StdoutSink",
    "StopReason",
    "SupervisorConfig",
    "run_process",
]

log = logging.getLogger("coding_genesis._supervision.process")


def _start(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    config: SupervisorConfig,
    stdin: bytes | LiveStdin | None,
    live: LiveStdin | None,
) -> tuple[Child, int, int, int | None] | OSError:
    """Spawn the CLI on three pipes: the child, our ends of its stdout and
    stderr, and of its stdin (None: no stdin), or why it could not be spawned
    (every pipe closed).  Synchronous: no await between the fork and the
    registration of the main pid, so a cancellation cannot lose the process."""
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
        return exc if isinstance(exc, OSError) else OSError(str(exc))
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
    return proc, stdout_fd, stderr_fd, stdin_fd


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
        tail = Tail(config.stderr_tail_bytes)
        tail.listener = on_stderr
        wall_started = time.time()
        started = anyio.current_time()
        spawned = _start(argv, cwd=cwd, env=env, config=config, stdin=stdin, live=live)
        if isinstance(spawned, OSError):
            outcome.spawn_error = spawned
            outcome.duration_s = anyio.current_time() - started
            return outcome
        proc, stdout_fd, stderr_fd, stdin_fd = spawned
        outcome.pid = proc.pid
        if live is not None and stdin_fd is not None:
            live.bind(stdin_fd)
        try:
            root: psutil.Process | None = psutil.Process(proc.pid)
        except psutil.Error:
            root = None  # cannot happen before we reap it; kept for safety
        tree = Tree(root, proc.pid, marker, wall_started)
        try:
            readers = Readers(
                stdout_fd,
                stderr_fd,
                on_stdout,
                tail,
                outcome,
                started=started,
                read_size=config.read_size,
            )
            if clocks is not None:
                clocks.bind_tree(tree, config)
            run_clocks = clocks if clocks is not None else RunClocks(config, started)
            watchdog = Watchdog(run_clocks, readers, tree, config, outcome, stop_handle)
            if on_spawn is not None:
                _tell_spawned(on_spawn, proc.pid)
            done = await _supervise(proc, tree, config, outcome, readers, watchdog, stdin, started)
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


def _tell_spawned(on_spawn: Callable[[int], object], pid: int) -> None:
    try:
        on_spawn(pid)
    except Exception:
        log.exception("on_spawn callback failed")


async def _supervise(
    proc: Child,
    tree: Tree,
    config: SupervisorConfig,
    outcome: ProcessOutcome,
    readers: Readers,
    watchdog: Watchdog,
    stdin: bytes | LiveStdin | None,
    started: float,
) -> ProcessOutcome:
    """The CLI read, written to and watched until it exits; then its pipes'
    grace, what it left stopped, and (always) the shielded cleanup."""
    live = stdin if isinstance(stdin, LiveStdin) else None
    watchdog.bind()
    finished = False
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(readers.stdout)
            tg.start_soon(readers.stderr)
            if isinstance(stdin, bytes):
                tg.start_soon(_write_stdin, proc, stdin)
            tg.start_soon(watchdog.watch)
            await proc.wait()
            await _wind_down(tree, config, outcome, readers, watchdog, live)
            tg.cancel_scope.cancel()
        finished = True
    finally:
        watchdog.unbind()
        try:
            await shielded(partial(_cleanup, proc, tree, config, outcome, live, finished=finished))
        finally:
            outcome.returncode = proc.returncode
            outcome.stderr_tail = readers.tail.text()
            outcome.stderr_bytes = readers.tail.total
            outcome.duration_s = anyio.current_time() - started
    return outcome


async def _write_stdin(proc: Child, data: bytes) -> None:
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


async def _wind_down(
    tree: Tree,
    config: SupervisorConfig,
    outcome: ProcessOutcome,
    readers: Readers,
    watchdog: Watchdog,
    live: LiveStdin | None,
) -> None:
    """The CLI has ended: no clock applies any more (a stop under way
    completes), its pipes get a short grace, then whatever of the run is left
    is stopped and the readers are let go (by the caller)."""
    exited_at = time.monotonic()
    if live is not None:
        live.release("the CLI exited")
    watchdog.stand_down()
    with anyio.move_on_after(config.eof_grace):
        await readers.done.wait()
    if config.kill_leftovers:
        await _sweep_leftovers(tree, config, outcome, exited_at)
        with anyio.move_on_after(config.eof_grace):
            await readers.done.wait()


async def _cleanup(
    proc: Child,
    tree: Tree,
    config: SupervisorConfig,
    outcome: ProcessOutcome,
    live: LiveStdin | None,
    *,
    finished: bool,
) -> None:
    """Stop what is left (unless the CLI exited by itself), reap the CLI and
    every zombie of the run."""
    if not finished or proc.returncode is None:
        await stop_tree(tree, config, outcome, StopReason.CANCELLED)
    with anyio.move_on_after(config.kill_wait):
        await proc.wait()
    waited = time.monotonic()  # what the CLI left is our child by now
    proc.close_stdin()
    if live is not None:
        live.release("the run ended")
    await tree.reap_all(config.kill_wait, not_before=waited)


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
