"""What existed when a live turn began, read in a tenth of a millisecond.

An interrupted turn's tools are stopped and the CLI is spared: a process of
the run's tree is the turn's if it was not there when the turn's clocks were
armed.  Taking a snapshot of the tree there means reading every process's
``/proc/PID/stat`` (1.5-9 ms, more on a busy machine), on the turn's path,
before its prompt is written.  An :class:`Epoch` instead lists the pids that
exist and reads the clock the kernel stamps process start times with; the tree
is resolved only when strays are looked for.  A process predates the epoch if
its pid was listed and it started no later than the epoch: a pid listed but
reused by a process started since is newer (pids wrap at ``pid_max``, 32768
on many machines).
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


@dataclass(frozen=True, slots=True)
class Epoch:
    """The pids that existed at a moment, and that moment on the clock
    processes' start times are read on (clock ticks since boot on Linux,
    ``time.time()`` elsewhere)."""

    pids: frozenset[int]
    at: float

    @classmethod
    def now(cls) -> Epoch:
        """The epoch of now: pids listed first, so a process missing from the
        list surely started later."""
        if _TICKS:
            pids = frozenset(int(name) for name in os.listdir(_PROC) if name.isdigit())
            # Floored like the kernel's stamps: a start in the same tick is not "later".
            return cls(pids, float(int(time.clock_gettime(time.CLOCK_BOOTTIME) * _HZ)))
        return cls(frozenset(psutil.pids()), time.time())

    @classmethod
    def empty(cls) -> Epoch:
        """An epoch nothing predates."""
        return cls(frozenset(), float("-inf"))

    def predates(self, proc: psutil.Process) -> bool:
        """Whether ``proc`` existed at this epoch (False if it is gone)."""
        if proc.pid not in self.pids:
            return False
        if _TICKS:
            start = _start_ticks(proc.pid)
            return start is not None and start <= self.at
        try:
            return proc.create_time() <= self.at
        except psutil.Error:
            return False
