"""The supervisor's values: what it is told (:class:`SupervisorConfig`), why it
stopped a tree (:class:`StopReason`) and what happened (:class:`ProcessOutcome`).

Apart from the loop (:mod:`coding_genesis._supervision.process`) so that what
the loop, its readers and its watchdog all read has a module below them.
"""

from __future__ import annotations

import enum
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from coding_genesis._util.homes import public

if TYPE_CHECKING:
    from coding_genesis.request import RequestSettings

__all__ = ["ProcessOutcome", "StdoutSink", "StopReason", "SupervisorConfig"]


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

    @classmethod
    def from_request(
        cls,
        settings: RequestSettings,
        *,
        pdeath_signal: int | None = signal.SIGTERM,
        timeout: float | None = None,
    ) -> SupervisorConfig:
        """The supervisor's settings for one attempt of a request (or under an
        agent's settings): its clocks and limits, the backend's ``pdeath_signal``."""
        return cls(
            pdeath_signal=pdeath_signal,
            timeout=settings.timeout if timeout is None else timeout,
            grace=settings.grace,
            idle_timeout=settings.idle_timeout,
            stall_timeout=settings.stall_timeout,
            linger=settings.linger,
            eof_grace=settings.eof_grace,
            stop_signals=settings.stop_signals,
            kill_leftovers=settings.kill_leftovers,
            stderr_tail_bytes=settings.stderr_tail_bytes,
        )


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


#: Receives each stdout chunk (then ``b""`` at EOF); True once the terminal event was seen.
StdoutSink = Callable[[bytes], bool]


# Public names: ``from coding_genesis import ...`` (see coding_genesis._util.homes).
public(StopReason)
public(SupervisorConfig)
