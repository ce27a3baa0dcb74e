"""What a live link writes on its CLI's stdin: each control message a line,
in order, written at once while nothing waits before it (an answer is not
held up by a trip through the event loop), else queued for the writer task.

Unbounded: a line queued is an answer to a line the CLI wrote (or a prompt,
an interrupt), so the queue grows only as the CLI's own output does; a bound
dropped answers in a burst of questions, and the CLI waited for them until
the turn's wall limit."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable

import anyio
import orjson

from coding_genesis._supervision.live import LiveStdin, LiveStdinClosed
from coding_genesis.control import Outgoing

__all__ = ["Outbox"]

log = logging.getLogger("coding_genesis._live.link")

#: What a line that cannot go to the CLI's stdin raises (it is dropped, logged).
_UNSENT = (anyio.ClosedResourceError, anyio.BrokenResourceError, LiveStdinClosed)


class Outbox:
    """The lines for ``stdin`` (``name``: the CLI's, for the log)."""

    __slots__ = ("_emptied", "_lines", "_name", "_queue", "_queued", "_sealed", "_stdin")

    def __init__(self, stdin: LiveStdin, name: str) -> None:
        self._stdin = stdin
        self._name = name
        self._queue, self._lines = anyio.create_memory_object_stream[bytes](
            max_buffer_size=math.inf
        )
        #: Lines handed to the writer and not yet written; sealed: no more lines.
        self._queued, self._sealed = 0, False
        #: Set while the writer has taken every queued line (or the CLI is
        #: gone): what closing waits on, an event rather than a poll.
        self._emptied = anyio.Event()
        self._emptied.set()

    def send(self, objects: Iterable[Outgoing], on_stdin: Callable[[bytes], object] | None) -> None:
        """Write ``objects``, one line each, in order (``on_stdin`` hears each line)."""
        for obj in objects:
            data = orjson.dumps(obj) + b"\n"
            if on_stdin is not None:
                on_stdin(data)
            try:
                if not self._queued and not self._sealed:
                    data = data[self._stdin.write_nowait(data) :]
                if data:
                    self._queue.send_nowait(data)
                    self._queued += 1
                    if self._emptied.is_set():
                        self._emptied = anyio.Event()
            except _UNSENT:
                log.warning("%s: stdin closed; a control message was dropped", self._name)

    async def writer(self) -> None:
        """The task that writes what was queued, until sealed and written (or stdin closed)."""
        try:
            async for data in self._lines:
                if not self._lines.statistics().current_buffer_used:
                    self._emptied.set()  # the last one queued: taken
                try:
                    await self._stdin.write(data)
                except LiveStdinClosed:
                    return
                finally:
                    self._queued -= 1
        finally:
            self._lines.close()
            self._emptied.set()

    def seal(self) -> None:
        """Nothing more goes to the CLI's stdin (what is queued still does)."""
        self._sealed = True
        self._queue.close()

    def gone(self) -> None:
        """The CLI is gone: nothing more goes, and nobody waits for what was queued."""
        self._emptied.set()
        self.seal()

    def unused(self) -> None:
        """The CLI was never started (no writer runs): closed at once."""
        self.gone()
        self._lines.close()

    async def emptied(self) -> None:
        """Until the writer has taken every line queued (or the CLI is gone)."""
        await self._emptied.wait()
