"""The watchdog: the clocks of a run, and the stop of its tree when one runs
out (or a stop is asked for).

The clocks are an object (:class:`Clocks`) that answers the window they
measure now: a one-shot run's is fixed from its start (:class:`RunClocks`);
a live process's is the armed turn's, none between turns
(:class:`TurnClocks`).  The watchdog itself does not know which it holds.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from coding_genesis._supervision.epoch import Epoch
from coding_genesis._supervision.stall import StallWatch
from coding_genesis._supervision.values import ProcessOutcome, StopReason, SupervisorConfig
from coding_genesis.errors import InvalidTimeoutError

if TYPE_CHECKING:
    from coding_genesis._supervision.readers import Readers
    from coding_genesis._supervision.stop import StopHandle
    from coding_genesis._supervision.tree import Tree

__all__ = ["Clocks", "RunClocks", "TurnClocks", "Watchdog", "Window", "stop_tree"]


@dataclass(slots=True)
class Window:
    """What the clocks measure now: from ``origin``, ``timeout`` of wall time,
    ``idle`` without stdout, ``linger`` after the terminal event (None: no
    such limit), and the stall window (None: none)."""

    origin: float
    timeout: float
    idle: float | None
    linger: float | None
    stall: StallWatch | None

    def deadline(self, last_output: float, terminal_at: float | None) -> tuple[StopReason, float]:
        """The first limit to run out, and when."""
        origin = self.origin
        reason, deadline = StopReason.TIMEOUT, origin + self.timeout
        idle, linger = self.idle, self.linger
        if idle is not None and max(last_output, origin) + idle < deadline:
            reason, deadline = StopReason.IDLE, max(last_output, origin) + idle
        if terminal_at is not None and linger is not None and terminal_at + linger < deadline:
            reason, deadline = StopReason.LINGER, terminal_at + linger
        return reason, deadline


class Clocks(ABC):
    """The limits a watchdog enforces, as a window that may change over a run."""

    __slots__ = ()

    @abstractmethod
    def window(self, now: float, tree: Tree) -> Window | None:
        """The window in force now (None: nothing times out until a wake)."""

    @abstractmethod
    def bind(self, wake: Callable[[], object]) -> None:
        """Called by the supervisor: ``wake`` is called when the window changes."""

    @abstractmethod
    def unbind(self) -> None:
        """Called by the supervisor when the run ends."""


class RunClocks(Clocks):
    """A one-shot run's clocks: one window from the run's start, with the
    config's limits (linger included); the stall window's base is the start."""

    __slots__ = ("_config", "_started", "_window")

    def __init__(self, config: SupervisorConfig, started: float) -> None:
        self._config, self._started = config, started
        self._window: Window | None = None

    def window(self, now: float, tree: Tree) -> Window | None:
        window = self._window
        if window is None:
            config, started = self._config, self._started
            timeout: float | None = config.timeout
            if timeout is None:  # only a stop wakes the watchdog
                return None
            stall = config.stall_timeout
            watch = (
                StallWatch(tree, stall, config.stall_cpu, started) if stall is not None else None
            )
            window = self._window = Window(
                started, timeout, config.idle_timeout, config.linger, watch
            )
        return window

    def bind(self, wake: Callable[[], object]) -> None:
        """Nothing to tell: the window never changes."""

    def unbind(self) -> None:
        """Nothing to let go."""


class TurnClocks(Clocks):
    """A live process's clocks, running only during a turn.

    :meth:`arm` starts a turn's wall clock, idle clock and stall window now;
    :meth:`disarm` ends them.  While disarmed nothing times out, however long
    the pause between turns.  With clocks, ``run_process`` ignores its
    config's ``timeout``, ``idle_timeout``, ``stall_timeout`` and ``linger``.
    """

    __slots__ = (
        "_config",
        "_tree",
        "_turn",
        "_wake",
        "_window",
        "armed_at",
        "before",
        "generation",
        "idle_timeout",
        "stall_timeout",
        "timeout",
    )

    def __init__(self) -> None:
        self.timeout: float | None = None
        self.idle_timeout: float | None = None
        self.stall_timeout: float | None = None
        #: When the running turn was armed (``anyio.current_time()``).
        self.armed_at = 0.0
        #: What existed when the turn was armed: its strays are what came after.
        self.before = Epoch.empty()
        #: Counts the armings, so the supervisor sees a new turn's clocks.
        self.generation = 0
        self._wake: Callable[[], object] | None = None
        self._tree: Tree | None = None
        self._config: SupervisorConfig | None = None
        #: The window of arming ``_turn`` (made at the first look after it).
        self._turn = 0
        self._window: Window | None = None

    @property
    def armed(self) -> bool:
        return self.timeout is not None

    def arm(
        self,
        *,
        timeout: float,
        idle_timeout: float | None = None,
        stall_timeout: float | None = None,
    ) -> None:
        """Start a turn's clocks now (again from zero if a turn was armed):
        ``timeout`` of wall time, stopped after ``idle_timeout`` seconds
        without stdout, or ``stall_timeout`` without output and CPU."""
        for name, value in (
            ("timeout", timeout),
            ("idle_timeout", idle_timeout),
            ("stall_timeout", stall_timeout),
        ):
            if value is not None and not (isinstance(value, int | float) and math.isfinite(value)):
                raise InvalidTimeoutError(f"{name} must be a finite number of seconds")
            if value is not None and value <= 0:
                raise InvalidTimeoutError(f"{name} must be greater than zero, got {value}")
        self.timeout, self.idle_timeout, self.stall_timeout = timeout, idle_timeout, stall_timeout
        self.armed_at = anyio.current_time()
        self.before = Epoch.now()
        self.generation += 1
        self._poke()

    def disarm(self) -> None:
        """End the turn's clocks: nothing times out until the next :meth:`arm`."""
        self.timeout = self.idle_timeout = self.stall_timeout = None
        self._poke()

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake()

    # -- the supervisor's side -----------------------------------------------

    def window(self, now: float, tree: Tree) -> Window | None:
        """The armed turn's window, none while disarmed; a new arming's stall
        window takes its first sample as its base (see
        :mod:`~coding_genesis._supervision.stall`), no linger."""
        if self._turn != self.generation:
            self._turn, self._window = self.generation, None
            limit, config = self.stall_timeout, self._config
            watch = None
            if limit is not None and config is not None:
                watch = StallWatch(tree, limit, config.stall_cpu, now, cpu=None)
            self._window = Window(self.armed_at, 0.0, None, None, watch)
        timeout = self.timeout
        window = self._window
        if timeout is None or window is None:
            return None
        window.timeout, window.idle = timeout, self.idle_timeout
        return window

    def bind(self, wake: Callable[[], object]) -> None:
        """Called by the supervisor at the start of its run: ``wake`` is called
        on each arm and disarm; the run's first look makes a new window."""
        self._wake = wake
        self._turn, self._window = 0, None

    def bind_tree(self, tree: Tree, config: SupervisorConfig) -> None:
        """Called by the supervisor: the process tree :meth:`stop_strays` stops in."""
        self._tree, self._config = tree, config

    async def stop_strays(self, keep: Callable[[list[str]], bool] | None = None) -> int:
        """Stop the processes of the tree that were not there at the last
        :meth:`arm`, the CLI itself spared, and those whose argv ``keep``
        accepts (what an interrupted turn's tools left running); how many
        there were.  The tree is resolved now: arming
        only lists pids (see :mod:`~coding_genesis._supervision.epoch`).
        Bounded like a stop of the whole tree."""
        tree, config = self._tree, self._config
        if tree is None or config is None:
            return 0
        return await tree.stop_strays(
            self.before, config.stop_signals, config.grace, config.kill_wait, keep
        )

    def unbind(self) -> None:
        self._wake = None

    def __repr__(self) -> str:
        if not self.armed:
            return "TurnClocks(disarmed)"
        return (
            f"TurnClocks(timeout={self.timeout}, idle_timeout={self.idle_timeout}, "
            f"stall_timeout={self.stall_timeout})"
        )


async def stop_tree(
    tree: Tree, config: SupervisorConfig, outcome: ProcessOutcome, reason: StopReason
) -> None:
    """Stop the run's tree (shielded: a stop under way completes), the first
    reason given kept as the outcome's."""
    if outcome.stop_reason is None:
        outcome.stop_reason = reason
    with anyio.CancelScope(shield=True):
        sent = await tree.stop(config.stop_signals, config.grace, config.kill_wait)
        outcome.signals_sent.extend(s for s in sent if s not in outcome.signals_sent)


class Watchdog:
    """Watches a run's clocks, its stop handle and its output; stops the tree
    with the first reason found.  :meth:`stand_down` (the CLI exited) ends the
    watch; a stop under way completes."""

    __slots__ = ("_clocks", "_config", "_outcome", "_readers", "_scope", "_stop", "_tree", "_wake")

    def __init__(
        self,
        clocks: Clocks,
        readers: Readers,
        tree: Tree,
        config: SupervisorConfig,
        outcome: ProcessOutcome,
        stop_handle: StopHandle | None,
    ) -> None:
        self._clocks, self._readers, self._tree = clocks, readers, tree
        self._config, self._outcome, self._stop = config, outcome, stop_handle
        self._wake = anyio.Event()
        self._scope = anyio.CancelScope()

    def wake(self) -> None:
        """Look again now: the clocks, the stop handle or the output changed."""
        self._wake.set()

    def bind(self) -> None:
        """Be woken by the stop handle, the clocks and the terminal event."""
        self._readers.on_terminal = self.wake
        if self._stop is not None:
            self._stop.bind(self.wake)
        self._clocks.bind(self.wake)

    def unbind(self) -> None:
        if self._stop is not None:
            self._stop.unbind()
        self._clocks.unbind()

    def stand_down(self) -> None:
        """The CLI has ended: no clock applies any more."""
        self._scope.cancel()

    async def watch(self) -> None:
        reason: StopReason | None = None
        with self._scope:
            reason = await self._reason()
        if not self._scope.cancel_called and reason is not None:
            await stop_tree(self._tree, self._config, self._outcome, reason)

    async def _reason(self) -> StopReason:
        """Wait for the first reason to stop the tree."""
        clocks, readers, tree, handle = self._clocks, self._readers, self._tree, self._stop
        while True:
            if handle is not None and handle.requested:
                return StopReason.REQUESTED
            now = anyio.current_time()
            window = clocks.window(now, tree)
            if window is None:  # between turns: only a stop or an arming wakes us
                await self._wake.wait()
                self._wake = anyio.Event()
                continue
            watch = window.stall
            if watch is not None and now >= watch.next_sample:
                silent_since = max(readers.last_output, readers.last_stderr, window.origin)
                evidence = watch.sample(now, silent_since)
                if evidence is not None:
                    self._outcome.stall_silent_s, self._outcome.stall_cpu_s = evidence
                    return StopReason.STALLED
            reason, deadline = window.deadline(readers.last_output, readers.terminal_at)
            if now >= deadline:
                return reason
            wait_until = min(deadline, watch.next_sample) if watch is not None else deadline
            with anyio.move_on_after(wait_until - now):
                await self._wake.wait()
            if self._wake.is_set():
                self._wake = anyio.Event()
