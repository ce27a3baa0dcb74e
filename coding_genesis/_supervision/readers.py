"""The run's readers: stdout straight to the sink, stderr into a tail, and
what the watchdog reads from them (when output was last seen, when the
terminal event was).

Apart from the loop (:mod:`coding_genesis._supervision.process`) so that the
hot path, one ``os.read`` per pipe-full of stdout, reads on its own.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

import anyio
import anyio.lowlevel

from coding_genesis._supervision.values import ProcessOutcome, StdoutSink

__all__ = ["Readers", "Tail"]

log = logging.getLogger(__name__)


class Tail:
    """The last N bytes of a stream, amortised O(1) per chunk."""

    __slots__ = ("_buf", "limit", "listener", "total")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._buf = bytearray()
        #: Also hears each chunk (a live session's turn keeps its own tail).
        self.listener: Callable[[bytes], object] | None = None

    def add(self, chunk: bytes) -> None:
        if self.listener is not None:
            self.listener(chunk)
        self.total += len(chunk)
        self._buf += chunk
        if len(self._buf) > 2 * self.limit:
            del self._buf[: -self.limit]

    def text(self) -> str:
        data = bytes(self._buf[-self.limit :]) if self.limit else b""
        return data.decode("utf-8", "replace")


class Readers:
    """The CLI's stdout and stderr, read until EOF (or until let go).

    ``last_output`` and ``last_stderr`` are when each stream last gave bytes
    (``anyio.current_time()``, the run's start until then); ``terminal_at``
    when the sink first answered True, which calls ``on_terminal`` (the
    watchdog's wake: the linger clock starts).  ``done`` is set once both
    streams reached EOF.
    """

    __slots__ = (
        "_left",
        "_outcome",
        "_sink",
        "_sink_errors",
        "_stderr_fd",
        "_stdout_fd",
        "done",
        "last_output",
        "last_stderr",
        "on_terminal",
        "read_size",
        "tail",
        "terminal_at",
    )

    def __init__(
        self,
        stdout_fd: int,
        stderr_fd: int,
        sink: StdoutSink,
        tail: Tail,
        outcome: ProcessOutcome,
        *,
        started: float,
        read_size: int,
    ) -> None:
        self._stdout_fd, self._stderr_fd = stdout_fd, stderr_fd
        self._sink, self.tail, self._outcome = sink, tail, outcome
        self.read_size = read_size
        self.last_output = self.last_stderr = started
        self.terminal_at: float | None = None
        self.on_terminal: Callable[[], object] | None = None
        self.done = anyio.Event()
        self._left = 2
        self._sink_errors = 0

    def _feed(self, chunk: bytes) -> None:
        try:
            terminal = self._sink(chunk)
        except Exception:
            if not self._sink_errors:
                log.exception("stdout sink failed on a chunk; skipped (logged once per run)")
            self._sink_errors += 1
            return
        if terminal and self.terminal_at is None:
            self.terminal_at = anyio.current_time()
            if self.on_terminal is not None:
                self.on_terminal()

    def _finished(self) -> None:
        self._left -= 1
        if self._left == 0:
            self.done.set()

    async def stdout(self) -> None:
        # Straight from our end of the pipe: one read() per pipe-full (1 MiB),
        # no stream buffer copying in between.  The hot path: what the loop
        # uses is bound to locals first.
        fd, size, read, feed = self._stdout_fd, self.read_size, os.read, self._feed
        outcome, now, checkpoint = self._outcome, anyio.current_time, anyio.lowlevel.checkpoint
        while True:
            try:
                chunk = read(fd, size)
            except BlockingIOError:
                await anyio.wait_readable(fd)
                continue
            except OSError:
                break
            if not chunk:
                outcome.stdout_eof = True
                break
            self.last_output = now()
            outcome.stdout_bytes += len(chunk)
            feed(chunk)
            await checkpoint()  # a CLI that never pauses must not starve the loop
        feed(b"")
        self._finished()

    async def stderr(self) -> None:
        fd, read, tail = self._stderr_fd, os.read, self.tail
        while True:
            try:
                chunk = read(fd, 65536)
            except BlockingIOError:
                await anyio.wait_readable(fd)
                continue
            except OSError:
                break
            if not chunk:
                break
            self.last_stderr = anyio.current_time()
            tail.add(chunk)
            await anyio.lowlevel.checkpoint()
        self._finished()
