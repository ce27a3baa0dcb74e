"""The process table: this process's supervision state in one object, and the
child subreaper.

Everything the runs of this process share lives in :data:`TABLE`: whether the
subreaper may be used and who holds it, the main pids of runs in flight (which
only their own ``Popen`` may reap), the runs still spawning, the zombies of
unknown origin, the spawner thread, and the leftovers a run kept running
(``kill_leftovers=False``) that are our children: the keeper thread reaps
each when it exits, so a long-lived host never accumulates their zombies.  Runs may go on in several threads at
once (``run_sync`` from a thread pool), so every change happens under its lock.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import sys
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

__all__ = [
    "TABLE",
    "ProcessTable",
    "count_main",
    "count_spawning",
    "hold_subreaper",
    "keep",
    "set_subreaper",
    "subreaper_enabled",
]

_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37


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
        #: The one thread that forks every CLI (see
        #: :func:`coding_genesis._supervision.spawn.spawn`), started lazily.
        self.spawner: ThreadPoolExecutor | None = None
        #: Kept leftovers (children of ours a run left running), by pidfd: the
        #: keeper thread reaps each once its pidfd turns readable.
        self.kept: dict[int, int] = {}
        #: The keeper thread (None: not running) and the pipe that wakes it.
        self.keeper: threading.Thread | None = None
        self.wake: tuple[int, int] | None = None


#: The one table of this process.
TABLE = ProcessTable()


def _forget_kept() -> None:  # pragma: no cover - runs in a forked child
    """A forked child has no keeper thread, and its parent's children are not its own."""
    TABLE.kept = {}
    TABLE.keeper = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_kept)


def set_subreaper(enabled: bool) -> None:
    """Allow (default) or forbid runs to make this process a child subreaper."""
    with TABLE.lock:
        TABLE.subreaper_allowed = bool(enabled)
        TABLE.subreaper = None


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


def hold_subreaper(delta: int) -> None:
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


def count_spawning(delta: int) -> None:
    """One more (+1) or one fewer (-1) run between its fork and the
    registration of its main pid."""
    with TABLE.lock:
        TABLE.spawning += delta


def count_main(pid: int, delta: int) -> None:
    """Register (+1) or release (-1) the main pid of a run in flight."""
    mains = TABLE.active_mains
    with TABLE.lock:
        mains[pid] += delta
        if mains[pid] <= 0:
            del mains[pid]


def keep(pid: int, same: Callable[[], bool]) -> bool:
    """Reap ``pid``, a child of ours a run left running, once it exits (the
    keeper thread); ``same()`` says it is still that process (checked after
    its pidfd is opened, so the pidfd is its own).  False where there are no
    pidfds (Linux 5.3+): then it is reaped by a later run's reap, if any."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return False
    if not same():
        os.close(fd)
        return False
    table = TABLE
    with table.lock:
        if table.wake is None:
            table.wake = os.pipe()
            os.set_blocking(table.wake[1], False)
        table.kept[fd] = pid
        if table.keeper is None:
            table.keeper = threading.Thread(target=_keeper, name="genesis-keeper", daemon=True)
            table.keeper.start()
        with contextlib.suppress(OSError):
            os.write(table.wake[1], b"k")
    return True


def _keeper() -> None:
    """Wait for the kept leftovers' exits and reap exactly those processes
    (``waitid`` on each pidfd: never another pid); ends when none is left."""
    table = TABLE
    poller = select.poll()
    wake = table.wake
    assert wake is not None
    poller.register(wake[0], select.POLLIN)
    watched: set[int] = set()
    while True:
        with table.lock:
            if not table.kept:
                table.keeper = None
                return
            for fd in table.kept.keys() - watched:
                poller.register(fd, select.POLLIN)
                watched.add(fd)
        for fd, _ in poller.poll():
            if fd == wake[0]:
                with contextlib.suppress(OSError):
                    os.read(fd, 512)
                continue
            with contextlib.suppress(OSError):  # ECHILD: someone else reaped it
                os.waitid(os.P_PIDFD, fd, os.WEXITED | os.WNOHANG)
            poller.unregister(fd)
            watched.discard(fd)
            with table.lock:
                table.kept.pop(fd, None)
            os.close(fd)
