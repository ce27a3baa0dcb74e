"""What existed when a live turn began, read in a few microseconds.

An interrupted turn's tools are stopped and the CLI is spared: a process of
the run's tree is the turn's if it was not there when the turn's clocks were
armed.  Taking a snapshot of the tree there means reading every process's
``/proc/PID/stat`` (1.5-9 ms, more on a busy machine), on the turn's path,
before its prompt is written.  An :class:`Epoch` instead reads the clock the
kernel stamps process start times with (clock ticks since boot) and the last
pid the kernel handed out (``/proc/loadavg``, this pid namespace's); the tree
is resolved only when strays are looked for.  A process that started in an
earlier tick predates the epoch, one that started in a later tick does not;
one that started in the epoch's own tick (10 ms) does if its pid was handed
out no later than that last pid, in the kernel's cyclic order (pids wrap at
``pid_max``, 32768 on many machines).

Where ``/proc/loadavg`` is not the kernel's (a container's FUSE view of it)
the epoch lists the pids that exist instead (``os.listdir("/proc")``, 0.05-0.3
ms); outside Linux it uses psutil's pids and start times.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil

__all__ = ["Epoch"]

_PROC = "/proc"
#: Clock ticks per second of ``/proc/PID/stat``'s start time.
_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: Linux: start times are clock ticks of CLOCK_BOOTTIME, readable without psutil.
_TICKS = hasattr(time, "CLOCK_BOOTTIME") and os.path.isdir(_PROC)


def _start_ticks(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (None: gone)."""
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as f:
            stat = f.read()
        # Field 22; the command (field 2) may hold spaces and parentheses.
        return int(stat[stat.rindex(b")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _pid_max() -> int | None:
    """The kernel's ``pid_max``, if ``/proc/loadavg`` is the kernel's own (not a
    file mounted over it, as LXCFS does in containers); else None."""
    try:
        with open(f"{_PROC}/sys/kernel/pid_max", "rb") as f:
            pid_max = int(f.read())
        with open(f"{_PROC}/self/mountinfo", "rb") as f:
            if any(line.split()[4] == b"/proc/loadavg" for line in f if line.strip()):
                return None
        return pid_max if pid_max > 0 else None
    except (OSError, ValueError, IndexError):
        return None


_PID_MAX = _pid_max() if _TICKS else None


def _last_pid() -> int | None:
    """The last pid handed out in this pid namespace."""
    try:
        with open(f"{_PROC}/loadavg", "rb") as f:
            return int(f.read().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def handed_out_by(pid: int, last: int, pid_max: int) -> bool:
    """Whether ``pid`` was handed out no later than ``last``: at most half the
    pid space behind it in the kernel's cyclic order (more than that many forks
    within one clock tick cannot happen)."""
    return (last - pid) % pid_max < pid_max // 2


@dataclass(frozen=True, slots=True)
class Epoch:
    """A moment on the clock processes' start times are read on (clock ticks
    since boot on Linux, ``time.time()`` elsewhere), with what tells the
    processes started within its own tick: the last pid handed out, or the
    pids that existed."""

    pids: frozenset[int]
    at: float
    last_pid: int | None = None

    @classmethod
    def now(cls) -> Epoch:
        """The epoch of now: the pids first, so a process missing from them (or
        handed out after the last pid) surely started later."""
        if _TICKS:
            last = _last_pid() if _PID_MAX is not None else None
            pids: frozenset[int] = frozenset()
            if last is None:
                pids = frozenset(int(name) for name in os.listdir(_PROC) if name.isdigit())
            # Floored like the kernel's stamps: a start in the same tick is not "later".
            return cls(pids, float(int(time.clock_gettime(time.CLOCK_BOOTTIME) * _HZ)), last)
        return cls(frozenset(psutil.pids()), time.time())

    @classmethod
    def empty(cls) -> Epoch:
        """An epoch nothing predates."""
        return cls(frozenset(), float("-inf"))

    def predates(self, proc: psutil.Process) -> bool:
        """Whether ``proc`` existed at this epoch (False if it is gone)."""
        if _TICKS:
            start = _start_ticks(proc.pid)
            if start is None:
                return False
            if start != self.at:
                return start < self.at
            if self.last_pid is not None and _PID_MAX is not None:
                return handed_out_by(proc.pid, self.last_pid, _PID_MAX)
            return proc.pid in self.pids
        if proc.pid not in self.pids:
            return False
        try:
            return proc.create_time() <= self.at
        except psutil.Error:
            return False
