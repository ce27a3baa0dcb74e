"""The CLI of a live link: one process under :func:`run_process` in its live
mode (stdin held open; a turn's clocks armed only while the turn runs), and
what is known of it: its pid and argv, whether it is ready, alive, broken or
gone, and the supervisor's account once it is."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import anyio.abc

from coding_genesis._pipeline.attempt import AttemptContext, Refusal
from coding_genesis._supervision.live import LiveStdin
from coding_genesis._supervision.process import run_process
from coding_genesis._supervision.stop import StopHandle
from coding_genesis._supervision.values import ProcessOutcome, SupervisorConfig
from coding_genesis._supervision.watchdog import TurnClocks
from coding_genesis.backend import Backend
from coding_genesis.request import Request

__all__ = ["LiveProcess"]


class LiveProcess:
    """A live link's CLI (``marker``: the mark of its processes; ``context``:
    who hears the process itself, apart from any turn)."""

    def __init__(
        self,
        backend: Backend,
        request: Request,
        *,
        marker: str,
        stop: StopHandle,
        context: AttemptContext,
    ) -> None:
        self.marker = marker
        self.stop = stop
        self.context = context
        self.stdin = LiveStdin()
        self.clocks = TurnClocks()
        self.supervisor = SupervisorConfig.from_request(
            request, pdeath_signal=backend.pdeath_signal
        )
        self.pid: int | None = None
        self.argv: list[str] = []
        #: Set when the CLI could not be started (not found, not executable).
        self.refusal: Refusal | None = None
        #: The supervisor's outcome once the process is gone (None: alive).
        self.exit: ProcessOutcome | None = None
        #: Why the session cannot go on (a fatal protocol fault, a failed opening).
        self.broken: str | None = None
        #: What starting it warned about (the overlay's).
        self.warnings: tuple[str, ...] = ()
        #: Bytes of stdout so far.
        self.stdout_bytes = 0
        #: Set once the opening handshake is done (or can no longer be).
        self.ready = anyio.Event()
        #: Set once the process is gone.
        self.dead = anyio.Event()
        #: Set once it is no longer :attr:`alive` (gone or broken): what a
        #: pool keeping it warm waits on.
        self.ended = anyio.Event()
        #: The task group the process and the link's tasks run in.
        self.tg: anyio.abc.TaskGroup | None = None

    @property
    def alive(self) -> bool:
        return self.exit is None and self.broken is None and not self.dead.is_set()

    def break_off(self, why: str) -> None:
        """The session cannot go on (``why``), though the process may live on."""
        self.broken = why
        self.ended.set()

    def refused(self, refusal: Refusal) -> None:
        """It could not be started."""
        self.refusal = refusal
        self.break_off(refusal.message)
        self.dead.set()

    async def run(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: str,
        *,
        on_stdout: Callable[[bytes], bool],
        on_stderr: Callable[[bytes], None],
    ) -> None:
        """Run it to its end (the supervisor's outcome in :attr:`exit`)."""
        context = self.context

        def spawned(pid: int) -> None:
            self.pid = pid
            if context.on_spawn is not None:
                context.on_spawn(pid, argv)

        try:
            self.exit = await run_process(
                argv,
                cwd=cwd,
                env=env,
                stdin=self.stdin,
                config=self.supervisor,
                on_stdout=on_stdout,
                on_stderr=on_stderr,
                marker=self.marker,
                on_spawn=spawned,
                stop_handle=self.stop,
                clocks=self.clocks,
            )
        finally:
            self.dead.set()
            self.ended.set()
            self.ready.set()
