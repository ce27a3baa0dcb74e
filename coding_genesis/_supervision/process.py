"""Supervised subprocess: spawn, stream stdout, drain stderr, watch the clocks,
stop the whole process tree, always reap.

Only this module touches processes.

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
  escaped with ``setsid`` or a double fork are recognised by it.
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
  time) and checked before each signal; a group is signalled only while one of
  its members is known alive.  The CLI itself is reaped only through its
  ``Popen`` once its pidfd turns readable (polled where there are no pidfds):
  the main pids of runs in flight are excluded from every other ``waitpid``.
* The CLI is forked by one long-lived spawner thread with a parent-death
  signal armed (Linux; see :func:`_pdeath_preexec`): it dies with this
  process even when nothing here gets to run.

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

import asyncio
import contextlib
import ctypes
import enum
import errno
import functools
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import psutil

from coding_genesis._supervision import procscan

if TYPE_CHECKING:
    from coding_genesis._supervision.stop import StopHandle

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]


__all__ = [
    "RUN_MARKER_ENV",
    "TABLE",
    "ProcessOutcome",
    "ProcessTable",
    "StdoutSink",
    "StopReason",
    "SupervisorConfig",
    "build_env",
    "run_process",
    "set_subreaper",
    "spawn",
    "stop_marked",
    "subreaper_enabled",
]

log = logging.getLogger("coding_genesis._supervision.process")

#: Environment variable that marks every process of a run.
RUN_MARKER_ENV = "GENESIS_RUN_ID"

_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_PR_SET_PDEATHSIG = 1
#: Seconds a zombie of unknown origin must stay unreaped before we take it.
_ORPHAN_SETTLE = 0.1


class ProcessTable:
    """This process's supervision state, in one object: the subreaper hold,
    the main pids of runs in flight and the zombies of unknown origin.

    Runs may go on in several threads at once (``run_sync`` from a thread
    pool), so every change happens under one lock.
    """

    def __init__(self) -> None:
        #: Whether runs may use the subreaper (the ``genesis`` CLI turns it off for
        #: ``GENESIS_SUBREAPER=0``; :func:`set_subreaper` does it in code).
        self.subreaper_allowed = True
        #: Whether runs use the subreaper (None: not checked yet).
        self.subreaper: bool | None = None
        #: Runs in flight holding the subreaper on; the host's own setting is kept.
        self.holders = 0
        self.was_on = False
        #: Main pids of runs in flight: reaped through their ``Popen`` only,
        #: never by the tree's ``waitpid``.  Counted: with pid reuse a new run may get a pid
        #: whose old run is still cleaning up.
        self.active_mains: Counter[int] = Counter()
        #: Runs inside ``open_process``: a main pid not yet in ``active_mains`` may exist.
        self.spawning = 0
        self.lock = threading.Lock()
        #: When each unknown zombie was first seen (pid, start time) -> monotonic time.
        self.unknown_zombies: dict[tuple[int, float], float] = {}
        #: The one thread that forks every CLI (see :func:`spawn`), started lazily.
        self.spawner: ThreadPoolExecutor | None = None


#: The one table of this process.
TABLE = ProcessTable()


def set_subreaper(enabled: bool) -> None:
    """Allow (default) or forbid runs to make this process a child subreaper."""
    with TABLE.lock:
        TABLE.subreaper_allowed = bool(enabled)
        TABLE.subreaper = None


class StopReason(enum.StrEnum):
    """Why the runner stopped the process tree."""

    TIMEOUT = "timeout"
    IDLE = "idle"
    LINGER = "linger"
    CANCELLED = "cancelled"
    #: The whole tree was silent and (nearly) idle for ``stall_timeout``.
    STALLED = "stalled"
    #: Asked for through the run's stop handle (a budget, say: see coding_genesis._supervision.stop).
    REQUESTED = "requested"


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
    stderr_tail_bytes: int = 64 * 1024
    read_size: int = 1024 * 1024
    #: Stop a tree silent on stdout and stderr *and* under ``stall_cpu`` of one core
    #: (averaged) for this long (None: never).
    stall_timeout: float | None = None
    #: CPU share of one core under which a silent tree counts as stalled.
    stall_cpu: float = 0.01
    #: Signal the CLI gets when this process dies (Linux ``PR_SET_PDEATHSIG``; None: none).
    pdeath_signal: int | None = signal.SIGTERM


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
    #: Processes of the run other than the CLI that we had to stop.
    leftovers_stopped: int = 0
    #: Whether stdout reached EOF (False: a grandchild held it open).
    stdout_eof: bool = False
    #: Evidence of a stall: seconds without output, CPU seconds of the tree in the window.
    stall_silent_s: float | None = None
    stall_cpu_s: float | None = None
    duration_s: float = 0.0


def subreaper_enabled() -> bool:
    """Whether runs make this process a child subreaper (Linux, unless
    :func:`set_subreaper` forbade it).  It is one only while a run is in flight,
    so orphans of the host's other children go to init the rest of the time."""
    if TABLE.subreaper is None:
        TABLE.subreaper = (
            sys.platform.startswith("linux")
            and TABLE.subreaper_allowed
            and _prctl(_PR_GET_CHILD_SUBREAPER) is not None
        )
    return TABLE.subreaper


def _prctl(option: int, value: int | None = None) -> int | None:
    """``prctl`` for the subreaper options: the flag read (or 0 when set), None on error."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if value is not None:
            return 0 if libc.prctl(option, value, 0, 0, 0) == 0 else None
        flag = ctypes.c_int(0)
        if libc.prctl(option, ctypes.byref(flag), 0, 0, 0) != 0:
            return None
        return flag.value
    except (OSError, AttributeError):  # pragma: no cover - exotic libc
        return None


def _hold_subreaper(delta: int) -> None:
    """Turn the subreaper on for the first run in flight, off after the last
    (unless the host had turned it on itself)."""
    if not subreaper_enabled():
        return
    table = TABLE
    with table.lock:
        table.holders += delta
        if delta > 0 and table.holders == 1:
            table.was_on = bool(_prctl(_PR_GET_CHILD_SUBREAPER))
            if not table.was_on and _prctl(_PR_SET_CHILD_SUBREAPER, 1) is None:
                table.subreaper = False  # pragma: no cover - refused by the kernel
        elif delta < 0 and table.holders == 0 and not table.was_on:
            _prctl(_PR_SET_CHILD_SUBREAPER, 0)


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


def _alive(proc: psutil.Process) -> bool:
    """Still the same process (pid + start time) and not a zombie."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class _PidFds:
    """pidfds of processes waited for (readable once the process has exited)."""

    __slots__ = ("_fds",)

    def __init__(self) -> None:
        self._fds: dict[int, int | None] = {}

    def of(self, proc: psutil.Process) -> int | None:
        pid = proc.pid
        if pid in self._fds:
            return self._fds[pid]
        fd: int | None = None
        with contextlib.suppress(AttributeError, OSError):
            fd = os.pidfd_open(pid)
        if fd is not None and not _same_process_alive(proc):
            os.close(fd)  # gone, or the pid was reused before we opened it
            fd = None
        self._fds[pid] = fd
        return fd

    def close(self) -> None:
        for fd in self._fds.values():
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._fds.clear()


def _same_process_alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running()
    except psutil.Error:
        return False


def _myself() -> psutil.Process:
    """This process (psutil's handle, made once per process)."""
    me = _MYSELF.get(os.getpid())
    if me is None:
        _MYSELF.clear()
        me = _MYSELF[os.getpid()] = psutil.Process()
    return me


_MYSELF: dict[int, psutil.Process] = {}


def _same_process(proc: psutil.Process, born: float) -> bool:
    try:
        return abs(proc.create_time() - born) < 0.01
    except psutil.Error:
        return False


def _session_and_group(pid: int) -> tuple[int, int] | None:
    try:
        return os.getsid(pid), os.getpgid(pid)
    except OSError:
        return None


class _Tree:
    """The processes of one run: snapshots, signals, bounded waits, reaping."""

    def __init__(
        self,
        root: psutil.Process | None,
        pid: int,
        marker: str,
        since: float,
        *,
        scan_all: bool = False,
    ) -> None:
        #: Find marked processes among every process of our user, not only our children.
        self.scan_all = scan_all
        #: The CLI, identified while it was our unreaped child (no pid reuse possible then).
        self.root = root
        self.pid = pid
        self.marker = marker
        #: Wall-clock start of the run (psutil start times are wall-clock).
        self.since = since
        #: Every process of the run ever found, by pid (each holds its start time).
        self.members: dict[int, psutil.Process] = {}
        #: Sessions and process groups that processes of the run were found in.
        self.sessions: set[int] = {pid}
        self.groups: set[int] = {pid}
        #: Highest CPU seconds seen per process (pid, start time): a process that
        #: exits keeps its share, so the tree's total never goes down.
        self.cpu_seen: dict[tuple[int, float], float] = {}
        self._me = os.getpid()
        self._own_sid = os.getsid(0)
        self._own_pgrp = os.getpgrp()
        self._lock = anyio.Lock()

    def snapshot(self, not_before: float | None = None) -> dict[int, psutil.Process]:
        """The run's live processes: the CLI's descendants and the marked
        orphans, from a scan of the process table that started at or after
        ``not_before`` (``time.monotonic()``; None: a new scan; see
        :mod:`coding_genesis._supervision.procscan`)."""
        if not_before is None:
            not_before = time.monotonic()
        found: dict[int, psutil.Process] = {}
        root = self.root
        if root is not None:
            try:
                if _alive(root):
                    found[root.pid] = root
                # checks root's identity
                for child in procscan.children(root, recursive=True, not_before=not_before):
                    found[child.pid] = child
            except psutil.Error:
                pass
        for orphan in self._marked_orphans(not_before):
            found[orphan.pid] = orphan
            try:
                for child in procscan.children(orphan, recursive=True, not_before=not_before):
                    found[child.pid] = child
            except psutil.Error:
                pass
        procs: dict[int, psutil.Process] = {}
        for pid, proc in found.items():
            ids = _session_and_group(pid)
            if ids is None or ids[0] == self._own_sid or pid == self._me:
                continue  # gone, or ours: nothing of a run lives in our session
            self.sessions.add(ids[0])
            self.groups.add(ids[1])
            if pid != self.pid:
                self.members.setdefault(pid, proc)
            if _alive(proc):
                procs[pid] = proc
        return procs

    def cpu_seconds(self) -> float:
        """CPU seconds used so far by the run's processes: the CLI, its
        descendants (their reaped children included) and, with the subreaper,
        its marked orphans.  Cheap: no scan of the whole process table."""
        procs: list[psutil.Process] = []
        root = self.root
        # A sample, not a stop: a scan another run made in the last 50 ms will do.
        recent = time.monotonic() - 0.05
        if root is not None:
            procs.append(root)
            with contextlib.suppress(psutil.Error):
                procs.extend(procscan.children(root, recursive=True, not_before=recent))
        if subreaper_enabled() and not self.scan_all:
            for orphan in self._marked_orphans(recent):
                procs.append(orphan)
                with contextlib.suppress(psutil.Error):
                    procs.extend(procscan.children(orphan, recursive=True, not_before=recent))
        seen = self.cpu_seen
        for proc in procs:
            try:
                t = proc.cpu_times()
                key = (proc.pid, proc.create_time())
            except psutil.Error:
                continue
            used = t.user + t.system + t.children_user + t.children_system
            if used > seen.get(key, 0.0):
                seen[key] = used
        return sum(seen.values())

    def _marked_orphans(self, not_before: float | None = None) -> list[psutil.Process]:
        if subreaper_enabled() and not self.scan_all:
            try:
                candidates = procscan.children(
                    _myself(), not_before=not_before, skip=TABLE.active_mains
                )
            except psutil.Error:
                return []
        else:
            uid = os.getuid()
            candidates = []
            for proc in psutil.process_iter():
                try:
                    if proc.uids().real == uid and proc.pid != self._me:
                        candidates.append(proc)
                except psutil.Error:
                    continue
        return [
            p
            for p in candidates
            if p.pid != self.pid and p.pid not in TABLE.active_mains and _has_marker(p, self.marker)
        ]

    def signal(self, procs: Mapping[int, psutil.Process], signum: int) -> None:
        """Signal every process group of the live members (each member itself
        where its group cannot be signalled)."""
        # Once each: a second SIGINT means "abort now" to many CLIs.
        by_group: dict[int, list[psutil.Process]] = {}
        for pid, proc in procs.items():
            ids = _session_and_group(pid) if _alive(proc) else None
            if ids is not None and ids[0] != self._own_sid:
                by_group.setdefault(ids[1], []).append(proc)
        for pgid, members in by_group.items():
            if pgid > 1 and pgid != self._own_pgrp:
                try:
                    # A group also reaches members born after the snapshot.
                    os.killpg(pgid, signum)
                    continue
                except OSError:
                    pass
            for proc in members:
                with contextlib.suppress(psutil.Error, OSError):
                    proc.send_signal(signum)  # psutil re-checks the start time first

    async def wait_gone(
        self, procs: Mapping[int, psutil.Process], timeout: float
    ) -> dict[int, psutil.Process]:
        deadline = anyio.current_time() + max(timeout, 0.0)
        delay = 0.005
        pidfds = _PidFds()
        readable: set[int] = set()
        try:
            while True:
                alive = {pid: p for pid, p in procs.items() if _alive(p)}
                self.reap()
                if not alive or anyio.current_time() >= deadline:
                    return alive
                remaining = max(deadline - anyio.current_time(), 0.0)
                # Woken by the exit itself where the kernel has pidfds; else polled.
                fd = pidfds.of(next(iter(alive.values())))
                if fd is not None and fd not in readable:
                    with anyio.move_on_after(remaining):
                        await anyio.wait_readable(fd)
                        readable.add(fd)  # exited: the next look finds it gone
                    continue
                await anyio.sleep(min(delay, remaining))
                delay = min(delay * 2, 0.05)
        finally:
            pidfds.close()

    async def stop(self, signals: Sequence[int], grace: float, kill_wait: float) -> list[str]:
        """Stop everything of the run; bounded by ``len(signals) * grace + 2 * kill_wait``."""
        async with self._lock:
            return await self._stop(signals, grace, kill_wait)

    async def _stop(self, signals: Sequence[int], grace: float, kill_wait: float) -> list[str]:
        sent: list[str] = []
        procs = self.snapshot()
        for signum in signals:
            if not procs:
                break
            self.signal(procs, signum)
            self.signal(procs, signal.SIGCONT)  # a stopped process cannot act on it otherwise
            sent.append(signal.Signals(signum).name)
            alive = await self.wait_gone(procs, grace)
            # Children born during the wait (or reparented to us) join the next round.
            procs = {**alive, **self.snapshot()}
        # SIGKILL rounds until nothing new turns up (late forks), within kill_wait.
        deadline = anyio.current_time() + kill_wait
        while procs:
            self.signal(procs, signal.SIGKILL)
            if not sent or sent[-1] != "SIGKILL":
                sent.append("SIGKILL")
            alive = await self.wait_gone(procs, deadline - anyio.current_time())
            procs = {**alive, **self.snapshot()}
            if anyio.current_time() >= deadline:
                if procs:
                    log.warning("processes survived SIGKILL: %s", sorted(procs))
                break
        self.reap()
        return sent

    def reap(self) -> list[int]:
        """Reap zombies of the run that are our children; return unknown zombies left."""
        for pid, proc in list(self.members.items()):
            if pid in TABLE.active_mains:
                continue
            try:
                if not proc.is_running():
                    del self.members[pid]  # gone, reaped elsewhere (or the pid was reused)
                    continue
                if proc.ppid() != self._me or proc.status() != psutil.STATUS_ZOMBIE:
                    continue
            except psutil.Error:
                del self.members[pid]
                continue
            if _waitpid(pid):
                del self.members[pid]
        if subreaper_enabled():
            return self._reap_orphan_zombies()
        return []

    def _reap_orphan_zombies(self) -> list[int]:
        """Reap zombies reparented to us (subreaper) that died unseen.

        They have no readable environment any more: recognised by their
        session or group (one of the run's), else by the settle rule.
        """
        pending: list[int] = []
        checked = time.monotonic()
        if procscan.has_zombie_child() is False:
            return pending  # the kernel says: no child of ours has exited unreaped
        try:
            children = procscan.children(_myself(), not_before=checked, skip=TABLE.active_mains)
        except psutil.Error:
            return pending
        now = time.monotonic()
        for child in children:
            pid = child.pid
            if pid in TABLE.active_mains:
                continue
            try:
                if child.status() != psutil.STATUS_ZOMBIE:
                    continue
                born = child.create_time()
            except psutil.Error:
                continue
            ids = _session_and_group(pid)
            if ids is None or ids[0] == self._own_sid:
                continue  # a child of the host program, not of a run
            sid, pgid = ids
            member = self.members.get(pid)
            known = member is not None and _same_process(member, born)
            if known or sid in self.sessions or pgid in self.groups:
                _waitpid(pid)
                continue
            if born < self.since - 1.0:
                continue
            if TABLE.spawning:
                pending.append(pid)  # it could be a run's main not yet registered
                continue
            key = (pid, born)
            first = TABLE.unknown_zombies.setdefault(key, now)
            if now - first >= _ORPHAN_SETTLE:
                _waitpid(pid)
                TABLE.unknown_zombies.pop(key, None)
            else:
                pending.append(pid)
        if len(TABLE.unknown_zombies) > 1024:  # forget entries whose zombie went away
            TABLE.unknown_zombies.clear()
        return pending

    async def reap_all(self) -> None:
        """Reap the run's zombies, waiting out the settle time of unknown ones (bounded)."""
        deadline = anyio.current_time() + 5 * _ORPHAN_SETTLE
        while True:
            if not self.reap() or anyio.current_time() >= deadline:
                return
            await anyio.sleep(_ORPHAN_SETTLE / 4)


async def stop_marked(marker: str, *, grace: float = 1.0, dry_run: bool = False) -> list[int]:
    """Stop every process of our user carrying ``marker`` (a run whose runner
    died): the usual tree stop, pid-reuse safe.  Returns the pids found (in a
    dry run, those that would be stopped)."""
    tree = _Tree(None, -1, marker, time.time(), scan_all=True)
    found = sorted(tree.snapshot())
    if found and not dry_run:
        await tree.stop((signal.SIGTERM,), grace, 2.0)
    return found


def _spawn_count(delta: int) -> None:
    with TABLE.lock:
        TABLE.spawning += delta


def _main_count(pid: int, delta: int) -> None:
    mains = TABLE.active_mains
    with TABLE.lock:
        mains[pid] += delta
        if mains[pid] <= 0:
            del mains[pid]


def _waitpid(pid: int) -> bool:
    """Reap ``pid`` if it is a zombie child of ours; True if it was reaped."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except OSError:
        return False  # not our child, or already reaped
    return done != 0


def _asyncio_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no asyncio loop running here (trio)
        return None


async def _uninterruptible(cleanup: Callable[[], Awaitable[None]]) -> None:
    """Run ``cleanup`` to its end even if the caller is cancelled meanwhile.

    anyio's shielded scope protects against anyio cancel scopes (and is
    complete on trio), but not against a native ``Task.cancel()`` on asyncio:
    there the cleanup runs as its own task, and a cancellation that arrives
    while we wait for it is held and re-raised once it is done.
    """
    if _asyncio_task() is None:
        with anyio.CancelScope(shield=True):
            await cleanup()
        return

    async def shielded() -> None:
        with anyio.CancelScope(shield=True):
            await cleanup()

    task = asyncio.ensure_future(shielded())
    held: BaseException | None = None
    with anyio.CancelScope(shield=True):
        while not task.done():
            try:
                await asyncio.wait((task,))
            except asyncio.CancelledError as exc:
                held = held or exc
    if held is not None:
        if not task.cancelled() and task.exception() is not None:
            log.error("cleanup failed during cancellation", exc_info=task.exception())
        raise held
    task.result()


#: Receives each parsed stdout object as soon as its line is parsed; returns
#: True for the CLI's terminal event.  One call per object, no list per chunk:
#: that keeps the hot path within reach of a bare ``orjson.loads`` loop.
#: Receives each stdout chunk (then ``b""`` at EOF); True once the terminal event was seen.
StdoutSink = Callable[[bytes], bool]


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


# -- spawning: the parent-death signal and the spawner thread ---------------


def pdeathsig_supported() -> bool:
    """Whether the CLI can get a parent-death signal here (Linux only)."""
    return sys.platform.startswith("linux") and _libc_prctl() is not None


@functools.cache
def _libc_prctl() -> Any:
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - exotic libc
        return None
    prctl.restype = ctypes.c_int
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return prctl


def _pdeath_preexec(signum: int) -> Callable[[], None]:
    """The ``preexec_fn`` that arms the parent-death signal, between fork and
    exec: the fallback where ``setpriv --pdeathsig`` is not installed (see
    :func:`_setpriv`).

    It closes the race the prefix leaves open: if this process died between
    the fork and the ``prctl``, the signal was never armed, so the child checks
    that its parent is still the process that forked it and otherwise acts as
    if the signal had come.  The function only calls ``prctl`` (resolved
    before the fork), ``getppid`` and, in that race, ``kill``/``_exit``:
    nothing that takes a lock another thread could hold at fork time.  Its
    cost: CPython forks instead of using ``vfork`` when a ``preexec_fn`` is
    given, about 4 ms of this process's CPU per run, and the spawns queue
    behind each other (``python -m benchmarks``, concurrency figure).

    Linux delivers the signal when the *thread* that forked exits, not the
    process: every CLI is therefore forked by one dedicated spawner thread
    (:func:`spawn`) that lives as long as the process.
    """
    prctl = _libc_prctl()
    parent = os.getpid()
    getppid, kill, exit_, me = os.getppid, os.kill, os._exit, os.getpid

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if getppid() != parent:  # the runner died before the signal was armed
            kill(me(), signum)
            exit_(128 + signum)

    return arm


def _spawner() -> ThreadPoolExecutor:
    """The process's spawner thread: one worker that never exits while the
    process lives (a ``ThreadPoolExecutor`` worker does not time out), so the
    parent-death signal of a CLI fires with the process, never because some
    short-lived thread (a ``to_thread`` worker, trio's thread cache, a thread
    that called ``run_sync``) ended."""
    with TABLE.lock:
        if TABLE.spawner is None:
            TABLE.spawner = ThreadPoolExecutor(1, thread_name_prefix="genesis-spawner")
        return TABLE.spawner


def _forget_spawner() -> None:  # pragma: no cover - runs in a forked child
    TABLE.spawner = None
    TABLE.lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_spawner)


#: Where util-linux's ``setpriv`` may be (a fixed list: the library reads no
#: environment, and a ``setpriv`` found on a user's PATH could be anything).
_SETPRIV_PATHS = ("/usr/bin/setpriv", "/bin/setpriv", "/usr/sbin/setpriv", "/sbin/setpriv")
#: What ``setpriv`` writes when it cannot execute the CLI (then exits 127).
_SETPRIV_FAILED = "setpriv: failed to execute "


@functools.cache
def _setpriv() -> str | None:
    """``setpriv`` if it is installed and arms a parent-death signal
    (util-linux >= 2.33), checked once per process.

    As an exec prefix it arms the signal in the CLI's own process (``setpriv
    --pdeathsig SIG -- CLI ...`` execs the CLI in place: same pid, parent and
    session), so the CLI can be started by ``vfork`` without a ``preexec_fn``.
    What it cannot do is the preexec's parent check: if this process dies in
    the millisecond between the spawn and setpriv's ``prctl``, the CLI gets no
    signal; the run ledger's sweep is there for what the signal cannot reach.
    """
    if not pdeathsig_supported():
        return None
    for path in _SETPRIV_PATHS:
        if os.access(path, os.X_OK):
            try:
                done = subprocess.run(  # noqa: S603 - a fixed path, fixed arguments
                    [path, "--pdeathsig", "SIGTERM", "--", path, "--version"],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    timeout=10,
                    check=False,
                )
            except (OSError, subprocess.SubprocessError):
                return None
            return path if done.returncode == 0 else None
    return None


def _setpriv_used(config: SupervisorConfig) -> bool:
    return config.pdeath_signal is not None and pdeathsig_supported() and _setpriv() is not None


def setpriv_exec_error(stderr_tail: str) -> OSError | None:
    """The exec failure ``setpriv`` reported for the CLI, as the ``OSError``
    a direct ``execve`` would have raised (None if it reported none)."""
    for line in stderr_tail.splitlines():
        if line.startswith(_SETPRIV_FAILED):
            what, _, reason = line[len(_SETPRIV_FAILED) :].rpartition(": ")
            code = _ERRNO_OF.get(reason.strip())
            if code is None:
                return OSError(f"cannot execute {what}: {reason}")
            return OSError(code, os.strerror(code), what)
    return None


_ERRNO_OF = {os.strerror(code): code for code in sorted(errno.errorcode, reverse=True)}


def spawn(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    stdin: int,
    stdout: int,
    stderr: int,
    pdeath_signal: int | None,
) -> subprocess.Popen[bytes]:
    """Start the CLI in a new session, forked by the spawner thread, with the
    parent-death signal armed where supported: by ``setpriv`` as an exec
    prefix where it is installed (the CLI is then vforked), else by a
    ``preexec_fn`` (forked).  Blocks for the fork and exec (as asyncio's own
    subprocess start does); raises ``OSError`` when the program cannot be
    started (through ``setpriv``, an exec failure shows as exit status 127:
    see :func:`setpriv_exec_error`)."""
    preexec = None
    command = list(argv)
    if pdeath_signal is not None and pdeathsig_supported():
        setpriv = _setpriv()
        if setpriv is not None:
            name = signal.Signals(pdeath_signal).name
            command = [setpriv, "--pdeathsig", name, "--", *command]
        else:
            preexec = _pdeath_preexec(pdeath_signal)

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(  # noqa: S603 - argv is the backend's command
            command,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
            close_fds=True,
            preexec_fn=preexec,
        )

    return _spawner().submit(start).result()


class _Child:
    """The CLI process: its exit awaited without blocking (a pidfd where the
    kernel has them, else polling), reaped by us through ``Popen``."""

    def __init__(self, popen: subprocess.Popen[bytes], stdin_fd: int | None) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.stdin_fd = stdin_fd
        self._pidfd: int | None = None
        with contextlib.suppress(AttributeError, OSError):
            self._pidfd = os.pidfd_open(popen.pid)

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    async def wait(self) -> int:
        delay = 0.002
        while True:
            code = self.popen.poll()
            if code is not None:
                return code
            if self._pidfd is not None:
                await anyio.wait_readable(self._pidfd)
                if self.popen.poll() is None:
                    await anyio.sleep(0.001)  # readable but not reapable yet: brief
            else:
                await anyio.sleep(delay)
                delay = min(delay * 2, 0.05)

    def close_stdin(self) -> None:
        fd, self.stdin_fd = self.stdin_fd, None
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        self.close_stdin()
        fd, self._pidfd = self._pidfd, None
        if fd is not None:
            os.close(fd)


async def run_process(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    stdin: bytes | None,
    config: SupervisorConfig,
    on_stdout: StdoutSink,
    marker: str,
    on_spawn: Callable[[int], object] | None = None,
    stop_handle: StopHandle | None = None,
) -> ProcessOutcome:
    """Run one CLI to completion under supervision.

    The supervisor speaks bytes: ``on_stdout`` receives each stdout chunk as
    read (up to ``config.read_size``), then ``b""`` once at EOF, and returns
    True once the CLI's terminal event has been seen (which starts the linger
    clock).  Never raises for process failures: they are in the outcome.
    Re-raises cancellation after the tree is stopped and reaped.
    ``stop_handle``: a stop asked for through it stops the tree like a timeout
    (stop reason ``requested``).
    """
    _hold_subreaper(+1)
    try:
        outcome = ProcessOutcome()
        tail = _Tail(config.stderr_tail_bytes)
        wall_started = time.time()
        started = anyio.current_time()
        stdout_fd, stdout_w = _stdout_pipe(config.read_size)
        stderr_fd, stderr_w = os.pipe()
        os.set_blocking(stderr_fd, False)
        stdin_fd: int | None = None
        stdin_r: int = subprocess.DEVNULL
        if stdin is not None:
            stdin_r, stdin_fd = os.pipe()
            os.set_blocking(stdin_fd, False)
        _spawn_count(+1)
        try:
            # No await between the fork and the registration of the main pid:
            # a cancellation cannot lose the process.
            proc = _Child(
                spawn(
                    list(argv),
                    cwd=cwd,
                    env=dict(env),
                    stdin=stdin_r,
                    stdout=stdout_w,
                    stderr=stderr_w,
                    pdeath_signal=config.pdeath_signal,
                ),
                stdin_fd,
            )
            _main_count(proc.pid, +1)
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
            _spawn_count(-1)

        outcome.pid = proc.pid
        try:
            root: psutil.Process | None = psutil.Process(proc.pid)
        except psutil.Error:
            root = None  # cannot happen before we reap it; kept for safety
        tree = _Tree(root, proc.pid, marker, wall_started)
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
            )
            if done.returncode == 127 and not done.stdout_bytes and _setpriv_used(config):
                failed = setpriv_exec_error(done.stderr_tail)
                if failed is not None:  # the CLI never ran: as if execve had failed here
                    done.spawn_error, done.returncode = failed, None
            return done
        finally:
            os.close(stdout_fd)
            os.close(stderr_fd)
            proc.close()
            if proc.returncode is not None:
                _main_count(proc.pid, -1)
    finally:
        _hold_subreaper(-1)


async def _supervise(
    proc: _Child,
    tree: _Tree,
    config: SupervisorConfig,
    outcome: ProcessOutcome,
    tail: _Tail,
    started: float,
    stdin: bytes | None,
    on_stdout: StdoutSink,
    on_spawn: Callable[[int], object] | None,
    stdout_fd: int,
    stderr_fd: int,
    stop_handle: StopHandle | None = None,
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
    clocks = anyio.CancelScope()

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

    stall = config.stall_timeout
    #: (time, tree CPU seconds) samples covering the last stall window.
    #: The CLI had used no CPU when it started: the first sample is free.
    samples: deque[tuple[float, float]] = deque([(started, 0.0)])
    sample_every = min(max(stall / 10, 0.05), 5.0) if stall is not None else 0.0
    next_sample = started + sample_every

    def stalled(now: float) -> bool:
        """Sample the tree's CPU; True when silent and idle for ``stall`` seconds."""
        assert stall is not None
        cpu = tree.cpu_seconds()
        samples.append((now, cpu))
        while len(samples) > 1 and samples[1][0] <= now - stall:
            samples.popleft()
        silent_since = max(last_output, last_stderr)
        if now - silent_since < stall:
            return False
        base_t, base_cpu = samples[0]
        window = now - base_t
        used = cpu - base_cpu
        if window < stall or used >= config.stall_cpu * window:
            return False
        outcome.stall_silent_s = round(now - silent_since, 3)
        outcome.stall_cpu_s = round(used, 3)
        return True

    async def watchdog() -> None:
        nonlocal wake, next_sample
        reason: StopReason | None = None
        with clocks:
            while True:
                if stop_handle is not None and stop_handle.requested:
                    reason = StopReason.REQUESTED
                    break
                now = anyio.current_time()
                if stall is not None and now >= next_sample:
                    if stalled(now):
                        reason = StopReason.STALLED
                        break
                    next_sample = now + sample_every
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
                wait_until = min(deadline, next_sample) if stall is not None else deadline
                with anyio.move_on_after(wait_until - now):
                    await wake.wait()
                if wake.is_set():
                    wake = anyio.Event()
        if not clocks.cancel_called and reason is not None:
            await stop(reason)

    if stop_handle is not None:
        stop_handle.bind(lambda: wake.set())
    finished = False
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_stdout)
            tg.start_soon(drain_stderr)
            if stdin is not None:
                tg.start_soon(write_stdin, stdin)
            tg.start_soon(watchdog)
            await proc.wait()
            exited_at = time.monotonic()
            # The CLI has ended: no clock applies any more (a stop under way
            # completes), its pipes get a short grace, then whatever of the
            # run is left is stopped and the readers are let go.
            clocks.cancel()
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
            await tree.reap_all()

        if stop_handle is not None:
            stop_handle.unbind()
        try:
            await _uninterruptible(cleanup)
        finally:
            outcome.returncode = proc.returncode
            outcome.stderr_tail = tail.text()
            outcome.stderr_bytes = tail.total
            outcome.duration_s = anyio.current_time() - started
    return outcome


async def _sweep_leftovers(
    tree: _Tree, config: SupervisorConfig, outcome: ProcessOutcome, exited_at: float
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
