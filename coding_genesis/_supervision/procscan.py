"""One scan of the process table, shared by every run of this process.

Finding a process's children means reading the parent of every process on
the machine (``/proc/*/stat`` on Linux): 1.5-8 ms with 100-300 processes,
and it blocks the event loop.  A run needs such a scan when it stops its tree,
when its CLI has exited (what did it leave behind?) and when it reaps the
zombies the subreaper inherited; 200 concurrent runs made 600 of them.

Each caller says how fresh the scan must be: ``not_before``, a
``time.monotonic()`` reading, typically the moment it learnt what it looks
for (the CLI's exit was seen, a signal was sent).  The newest scan that
*started* at or after that moment is as good as a new one for that caller (a
process it looks for existed, with its parent, when that scan read the
table), so runs finishing together share one scan instead of each making
its own.  Anything that happens after a scan started is found by the
caller's next look, as before (every stop repeats its snapshot after each
wait).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Container

import psutil

__all__ = ["children", "exiting", "has_zombie_child", "parents", "scan_count"]


class _Scan:
    __slots__ = ("at", "by_parent", "count", "lock")

    def __init__(self) -> None:
        #: ``time.monotonic()`` when the newest scan started (-inf: none yet).
        self.at = float("-inf")
        self.by_parent: dict[int, list[int]] = {}
        #: Scans made so far (the benchmarks and tests read it).
        self.count = 0
        self.lock = threading.Lock()


_SCAN = _Scan()


def _forget() -> None:  # pragma: no cover - runs in a forked child
    global _SCAN
    _SCAN = _Scan()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)


def scan_count() -> int:
    """How many scans this process has made."""
    return _SCAN.count


def _read_parents() -> dict[int, int]:
    ppid_map = getattr(psutil, "_ppid_map", None)
    if ppid_map is not None:
        with contextlib.suppress(Exception):
            return dict(ppid_map())
    out: dict[int, int] = {}
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            out[proc.pid] = proc.ppid()
    return out


def parents(not_before: float | None = None) -> dict[int, list[int]]:
    """Children pids by parent pid, from a scan that started at or after
    ``not_before`` (None: now)."""
    scan = _SCAN
    if not_before is not None and scan.at >= not_before:
        return scan.by_parent
    started = time.monotonic()
    by_parent: dict[int, list[int]] = {}
    for pid, ppid in _read_parents().items():
        by_parent.setdefault(ppid, []).append(pid)
    with scan.lock:
        scan.count += 1
        if started >= scan.at:
            scan.at = started
            scan.by_parent = by_parent
    return by_parent


def children(
    proc: psutil.Process,
    *,
    recursive: bool = False,
    not_before: float | None = None,
    skip: Container[int] = (),
) -> list[psutil.Process]:
    """``proc.children(recursive)`` from a shared scan (see the module doc):
    raises ``psutil.NoSuchProcess`` if ``proc`` is gone (or its pid reused);
    a child born before ``proc`` is not its child (pid reuse); pids in
    ``skip`` are left out (and not descended into)."""
    if not proc.is_running():
        raise psutil.NoSuchProcess(proc.pid)
    by_parent = parents(not_before)
    born = proc.create_time()
    found: list[psutil.Process] = []
    seen = {proc.pid}
    stack = [proc.pid]
    while stack:
        for pid in by_parent.get(stack.pop(), ()):
            if pid in seen or pid in skip:
                continue
            seen.add(pid)
            try:
                child = psutil.Process(pid)
                if child.create_time() < born:
                    continue
            except psutil.Error:
                continue
            found.append(child)
            if recursive:
                stack.append(pid)
    return found


def has_zombie_child() -> bool | None:
    """Whether a child of ours has exited and is not reaped yet, asked of the
    kernel without reaping it (``waitid(WNOWAIT)``): False means no scan can
    find a zombie to reap.  None where that cannot be asked."""
    waitid = getattr(os, "waitid", None)
    if waitid is None:
        return None
    try:
        return waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return False  # no children at all
    except OSError:
        return None


#: ``PF_EXITING`` in ``/proc/<pid>/stat``'s flags: the task is in ``do_exit``.
_PF_EXITING = 0x4


def exiting(pid: int) -> bool:
    """Whether ``pid`` is exiting but not a zombie yet: its memory (so its
    environment) may already be gone, and ``waitid`` sees no exit until it
    turns zombie a moment later.  False where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[0] not in (b"Z", b"X") and bool(int(fields[6]) & _PF_EXITING)
    except (OSError, IndexError, ValueError):
        return False
