"""A batch's usage-limit gate: once a run hits the account's usage limit, the
batch pauses until it resets, within its own deadline, instead of starting
every queued request into the same error.

:func:`~coding_genesis.batch.run_many` asks :meth:`LimitGate.admit` before it
starts each request and tells :meth:`LimitGate.note` every result.  A result
whose failure carries a reset time (``failure.retry_at``, see
coding_genesis._failures.usagelimits) closes the gate until then.  A request admitted
while the gate is closed waits for the reset if the batch's deadline allows;
otherwise it is answered at once, not started, with the usage-limit failure
and when to retry.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

from coding_genesis._util.clock import Clock

__all__ = ["LimitGate"]


class LimitGate:
    """Shared by the tasks of one batch (one event loop: no lock needed)."""

    def __init__(self, clock: Clock, deadline: float | None) -> None:
        self._clock = clock
        self._deadline = clock.monotonic() + deadline if deadline is not None else None
        #: Wall-clock time the limit resets at, and the failure that said so.
        self._until: float | None = None
        self._failure: Mapping[str, Any] | None = None
        self._backend = ""
        #: Seconds the batch paused, in total (for the caller's curiosity).
        self.paused_s = 0.0

    def note(self, result: Mapping[str, Any]) -> None:
        """Read one finished result: a usage limit closes the gate until its reset."""
        failure = result.get("failure")
        if not isinstance(failure, Mapping):
            return
        retry_at = failure.get("retry_at")
        if failure.get("category") != "rate_limit" or not isinstance(retry_at, str):
            return
        try:
            until = _dt.datetime.fromisoformat(retry_at.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return
        if self._until is None or until > self._until:
            self._until = until
            self._failure = failure
            self._backend = str(result.get("backend") or "")

    async def admit(self) -> dict[str, Any] | None:
        """None: start the request (after waiting for a reset, if one is due
        and the deadline allows); else what to answer instead: the request is
        not started."""
        while self._until is not None:
            wait = self._until - self._clock.time()
            if wait <= 0:
                self._until = None
                self._failure = None
                return None
            if self._deadline is not None and self._clock.monotonic() + wait > self._deadline:
                return self._refusal(wait)
            self.paused_s += wait
            until = self._until
            await self._clock.sleep(wait)
            if self._until == until and self._clock.time() >= until:
                self._until = None
                self._failure = None
        return None

    def _refusal(self, wait: float) -> dict[str, Any]:
        failure = dict(self._failure or {})
        retry_at = failure.get("retry_at")
        return {
            "message": (
                f"not started: the batch hit a usage limit that resets at {retry_at} "
                f"(in {wait:.0f}s), past the batch's deadline; retry at {retry_at}"
            ),
            "failure": failure,
            "retry_after_s": round(wait, 3),
            "backend": self._backend,
        }
