"""A run's stop handle: the one narrow capability to stop a run from outside
the supervisor, given to observers when the run starts.

The agent makes one :class:`StopHandle` per run and hands it to the observers
(``RunInfo.stop``) and to each attempt.  An observer that decides the run must
end (a budget spent, say) calls :meth:`StopHandle.stop` with an error code and
a message; the supervisor then stops the process tree exactly as it does on a
timeout (same signals, grace, reaping), and the attempt's result carries that
error code and message.  A handle stopped before an attempt spawns its CLI
makes that attempt a refusal: nothing is started.

``stop`` is safe from any thread: several agents in one process (threads,
``run_sync``) may share what stops them.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass

from coding_genesis.status import ErrorCode, FailureCategory

__all__ = ["StopHandle", "StopRequest"]

log = logging.getLogger("coding_genesis._supervision.stop")


@dataclass(frozen=True, slots=True)
class StopRequest:
    """Why a run was asked to stop: our error code, a sentence and, when the
    stopper knows it, the failure category of this ending (the CLI's own
    events proved an auth failure, say): the failure analysis names it."""

    error: ErrorCode
    message: str
    category: FailureCategory | None = None


class StopHandle:
    """Asks the supervisor of one run to stop its process tree (first request wins)."""

    __slots__ = ("_lock", "_request", "_thread", "_wake", "_wake_soon")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._request: StopRequest | None = None
        self._wake: Callable[[], object] | None = None
        #: Schedules a callback on the bound event loop from another thread.
        self._wake_soon: Callable[[Callable[[], object]], object] | None = None
        self._thread: int | None = None

    @property
    def request(self) -> StopRequest | None:
        """The stop asked for, or None."""
        return self._request

    @property
    def requested(self) -> bool:
        return self._request is not None

    def stop(
        self,
        error: ErrorCode | str,
        message: str,
        category: FailureCategory | None = None,
    ) -> bool:
        """Ask for the run to stop with our error code ``error`` (an
        :class:`~coding_genesis.status.ErrorCode`; a ValueError otherwise),
        ``message`` and, if known, the failure ``category`` of this ending;
        True if this call was the first to ask."""
        code = ErrorCode(error)
        with self._lock:
            if self._request is not None:
                return False
            self._request = StopRequest(code, message, category)
            wake, wake_soon, thread = self._wake, self._wake_soon, self._thread
        if wake is None:
            return True
        if thread == threading.get_ident():
            wake()
        elif wake_soon is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed: the attempt is over
                wake_soon(wake)
        return True

    # -- the supervisor's side -------------------------------------------

    def bind(self, wake: Callable[[], object]) -> None:
        """Called by the supervisor of an attempt, in its event loop: ``wake``
        is called (in that loop) when a stop is asked for."""
        with self._lock:
            self._wake = wake
            self._thread = threading.get_ident()
            self._wake_soon = _threadsafe_scheduler()

    def unbind(self) -> None:
        with self._lock:
            self._wake = None
            self._wake_soon = None
            self._thread = None

    def __repr__(self) -> str:
        return f"StopHandle(request={self._request!r})"


def _threadsafe_scheduler() -> Callable[[Callable[[], object]], object] | None:
    """A function that runs a callback soon in the current event loop, callable
    from any thread."""
    import asyncio

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None:
        return loop.call_soon_threadsafe
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            token = trio.lowlevel.current_trio_token()
        except RuntimeError:
            return None
        run_sync_soon: Callable[[Callable[[], object]], object] = token.run_sync_soon
        return run_sync_soon
    return None
