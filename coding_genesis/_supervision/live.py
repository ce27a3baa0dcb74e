"""What a live process needs from the supervisor: its stdin held open across
turns (its clocks, which run only while a turn does, are
:class:`~coding_genesis._supervision.watchdog.TurnClocks`).

A live session keeps one CLI running for several turns and speaks to it in
JSON lines on stdin.  It runs :func:`~coding_genesis._supervision.process.run_process`
as a background task for its whole life, with ``stdin=LiveStdin()`` and
``clocks=TurnClocks()``: the supervisor opens the pipe and binds it to the
:class:`LiveStdin` once the CLI is spawned, closes it when the run ends
(always), and times out only while a turn has armed the ``TurnClocks``.
Everything else (the tree stopped on timeout or cancellation, reaping, the
stop handle) is the one-shot supervision, unchanged.

Both (the stdin and the clocks) belong to the event loop that runs the
process: call them from its tasks, not from other threads.
"""

from __future__ import annotations

import contextlib
import errno
import os

import anyio

__all__ = ["LiveStdin", "LiveStdinClosed"]


class LiveStdinClosed(BrokenPipeError):
    """The CLI can no longer read what we write: it exited or closed its
    stdin (``EPIPE``), we closed our end, or the run ended (or never spawned).

    A :class:`BrokenPipeError` (so an ``OSError``, ``errno`` ``EPIPE``): what
    a write to a pipe nobody reads raises, whichever way the reader went.
    """

    def __init__(self, why: str) -> None:
        super().__init__(errno.EPIPE, f"the CLI's stdin is closed: {why}")


class LiveStdin:
    """The stdin of a live CLI, held open across turns.

    Hand one to ``run_process(stdin=...)``; it serves that one run.  Writes
    made before the CLI is spawned wait for it; writes are serialized, so the
    lines of concurrent writers never interleave.
    """

    __slots__ = ("_ended", "_fd", "_lock", "_ready", "_used", "_why")

    def __init__(self) -> None:
        self._fd: int | None = None
        #: Set once the pipe is bound or will never be: a waiting write goes on.
        self._ready = anyio.Event()
        self._lock = anyio.Lock()
        self._used = False
        self._ended = False
        self._why = ""

    @property
    def closed(self) -> bool:
        """True once nothing written can reach the CLI any more."""
        return self._ended

    async def write(self, data: bytes) -> None:
        """Write all of ``data`` (waiting while the pipe is full).

        Raises :class:`LiveStdinClosed` when the CLI can no longer read it:
        then none or only part of ``data`` was delivered.  Never hangs past
        the end of the run: the supervisor closes our end when it ends.
        """
        if not self._ready.is_set():
            await self._ready.wait()
        async with self._lock:
            view = memoryview(data)
            while True:
                fd = self._fd
                if fd is None:
                    raise LiveStdinClosed(self._why)
                if not view:
                    return
                try:
                    view = view[os.write(fd, view) :]
                except BlockingIOError:
                    with contextlib.suppress(anyio.ClosedResourceError):  # closed: the loop raises
                        await anyio.wait_writable(fd)
                except OSError as exc:
                    self._end(
                        "the CLI no longer reads it" if exc.errno == errno.EPIPE else str(exc)
                    )

    def write_nowait(self, data: bytes) -> int:
        """Write what the pipe takes of ``data`` now, without waiting: the
        number of bytes written, 0 while a :meth:`write` is under way, before
        the CLI is spawned or when the pipe is full (then :meth:`write` the
        rest).  A message goes out without a trip through the event loop.

        Raises :class:`LiveStdinClosed` as :meth:`write` does.
        """
        if self._lock.locked() or not self._ready.is_set():
            return 0
        fd = self._fd
        if fd is None:
            raise LiveStdinClosed(self._why)
        try:
            return os.write(fd, data)
        except BlockingIOError:
            return 0
        except OSError as exc:
            self._end("the CLI no longer reads it" if exc.errno == errno.EPIPE else str(exc))
            raise LiveStdinClosed(self._why) from None

    def close(self) -> None:
        """Close our end: the CLI reads EOF once it has read what was written.
        Idempotent; before the CLI is spawned, it gets an empty stdin."""
        self._end("closed by us")

    def _end(self, why: str) -> None:
        if self._ended:
            return
        self._ended, self._why = True, why
        fd, self._fd = self._fd, None
        if fd is not None:
            anyio.notify_closing(fd)  # a write waiting for room wakes up
            os.close(fd)
        self._ready.set()

    # -- the supervisor's side -----------------------------------------------

    def claim(self) -> None:
        """Called by ``run_process`` before it opens the pipe: one run only."""
        if self._used:
            raise RuntimeError("a LiveStdin serves one run only")
        self._used = True

    def bind(self, fd: int) -> None:
        """Take our (non-blocking) write end of the CLI's stdin pipe, once the
        CLI runs.  Closed at once if :meth:`close` came first."""
        if self._ended:
            os.close(fd)
            return
        self._fd = fd
        self._ready.set()

    def release(self, why: str) -> None:
        """The run ended, or the CLI exited (or never started): nothing
        written can reach it any more."""
        self._end(why)

    def __repr__(self) -> str:
        state = "closed" if self._ended else "open" if self._fd is not None else "unbound"
        return f"LiveStdin({state})"
