"""Fail fast on evidence: a CLI's own retry or error event that proves a
failure no retry can fix stops the run at once.

A CLI retries a failed API call by itself (claude up to ten times over minutes,
codex five): against a bad key every one of those retries fails the same way,
and the run would wait for its timeout to be called a timeout.  The backend
says what an event proves (:meth:`~coding_genesis.backend.Backend.fatal_evidence`);
this watch asks the run's stop handle (the capability budgets use) to stop the
tree with that category and the CLI's words, which the failure analysis then
names (``RunResult.stopped_on``).  What a retry can fix (a rate limit, a
network blip) is left to the CLI's retries and their cap (``cli_max_retries``).

The decoder calls the watch only for the two event types it reads, and
settles it at the end of a chunk only when it holds a verdict: no per-event
work on the hot path.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from coding_genesis._failures.usagelimits import reset_at
from coding_genesis._supervision.stop import StopHandle
from coding_genesis.backend import Backend
from coding_genesis.events import CliRetryEvent, ErrorEvent, Event
from coding_genesis.status import ErrorCode, FailureCategory

__all__ = ["MAX_WORDS", "EvidenceWatch"]

log = logging.getLogger("coding_genesis._pipeline.evidence")

#: The CLI's words quoted in the answer, at most (characters).
MAX_WORDS = 500


class EvidenceWatch:
    """The decoder's watch over one attempt: each retry or error event is shown
    to ``backend.fatal_evidence``; a verdict stops the run through ``stop``
    once the chunk it came in is decoded, unless the CLI's own terminal event
    came in the same chunk (a CLI that is ending by itself is left to end: its
    own answer says more than our stop).  ``deadline``: the Unix time the
    attempt's timeout ends (a usage limit stops the run only when it resets
    after it)."""

    __slots__ = ("_backend", "_clock", "_deadline", "_stop", "handlers", "pending")

    def __init__(
        self,
        backend: Backend,
        stop: StopHandle,
        deadline: float,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._backend = backend
        self._stop = stop
        self._deadline = deadline
        self._clock = clock
        #: The stop to ask for at the end of the chunk: (message, category).
        self.pending: tuple[str, FailureCategory] | None = None
        #: The decoder's handlers, per event type.
        self.handlers: Mapping[type[Event], Callable[[Event], object]] = {
            CliRetryEvent: self._saw,
            ErrorEvent: self._saw,
        }

    def settle(self, terminal: bool) -> None:
        """The chunk is decoded: stop the run on the pending verdict, unless the
        CLI's terminal event came (``terminal``)."""
        pending, self.pending = self.pending, None
        if pending is not None and not terminal:
            self._stop.stop(ErrorCode.CLI_ERROR, pending[0], pending[1])

    def _saw(self, event: Event) -> None:
        if self.pending is not None or self._stop.requested:
            return
        if not isinstance(event, CliRetryEvent | ErrorEvent):
            return
        backend = self._backend
        try:
            category = backend.fatal_evidence(event)
        except Exception:  # a plug-in's hook must not cost the run
            log.exception("fatal_evidence of backend %s failed", backend.name)
            return
        if category is None:
            return
        words = _words(event)
        if category is FailureCategory.RATE_LIMIT:
            resets = reset_at(words, now=self._clock())
            if resets is None or resets <= self._deadline:
                return  # a limit that may lift in time: the CLI's retries stay
        status = (
            f" (HTTP {event.error_status})"
            if isinstance(event, CliRetryEvent) and event.error_status is not None
            else ""
        )
        self.pending = (
            f"{backend.name} reported {words!r}{status}: {category}, which no retry can fix",
            category,
        )


def _words(event: CliRetryEvent | ErrorEvent) -> str:
    text = (event.error or "") if isinstance(event, CliRetryEvent) else event.message
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_WORDS else text[:MAX_WORDS] + "…"
