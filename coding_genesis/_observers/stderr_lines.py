"""``on_stderr=``: the CLI's stderr, line by line, as it is written.

An observer like any other (it hears a run's and a session's raw stderr
chunks, :meth:`~coding_genesis.observer.RunObserver.stderr`), not a branch of
the pipeline: the chunks are split into lines, each redacted and cut at
:data:`MAX_LINE` characters, and handed to the caller's callable.  A callable
that raises is logged once and then called again with the next line (a
broken callback never stops the run, nor fills the log).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from coding_genesis._util.redact import Redactor
from coding_genesis.observer import Observer, RunInfo, RunObserver

__all__ = ["MAX_LINE", "StderrLines"]

log = logging.getLogger(__name__)

#: The longest line handed on, in bytes (a longer one is cut there, the rest
#: handed on as the next line): a CLI's stderr can be a megabyte without a newline.
MAX_LINE = 16 * 1024


class StderrLines(Observer):
    """Watches the runs and sessions whose request has ``on_stderr=`` (every
    agent holds one; a run without the option is not watched)."""

    def start(self, run: RunInfo) -> RunObserver | None:
        return _of(run)

    def session_started(self, session: str, info: RunInfo) -> RunObserver | None:
        return _of(info)


def _of(run: RunInfo) -> RunObserver | None:
    call = run.request.on_stderr if run.request is not None else None
    return _Lines(call, run.redactor) if call is not None else None


class _Lines(RunObserver):
    __slots__ = ("_call", "_held", "_raised", "_redactor")

    def __init__(self, call: Callable[[str], object], redactor: Redactor) -> None:
        self._call = call
        self._redactor = redactor
        #: The start of a line not ended yet.
        self._held = bytearray()
        self._raised = False

    def stderr(self, chunk: bytes) -> None:
        held = self._held
        held += chunk
        start = 0
        while True:
            end = held.find(b"\n", start)
            if end < 0 or end - start > MAX_LINE:
                break
            self._line(held[start:end])
            start = end + 1
        while len(held) - start > MAX_LINE:
            self._line(held[start : start + MAX_LINE])
            start += MAX_LINE
        del held[:start]

    def finish(self, response: Mapping[str, Any]) -> None:
        if self._held:
            self._line(self._held)
            self._held.clear()

    def _line(self, data: bytes | bytearray) -> None:
        text = self._redactor.text(bytes(data).decode("utf-8", "replace").removesuffix("\r"))
        try:
            self._call(text)
        except Exception:
            if not self._raised:
                self._raised = True
                log.exception("the on_stderr callable raised; later lines still reach it")
