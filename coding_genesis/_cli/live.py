"""Running one request from the command line: live progress, event streaming,
and a clean stop on Ctrl-C / SIGTERM / SIGHUP.

A stop signal cancels the run; the core's cancellation path stops and reaps
the whole process tree (shielded, bounded by the grace period), then we print
what the run did so far and exit 128 + the signal (130 for Ctrl-C).  Further
signals while the tree is being stopped only say so: the stop is bounded, and
leaving the tree behind is what this exists to prevent.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import IO, TYPE_CHECKING, Any

import anyio

from coding_genesis._cli.common import stop_signal_name, watch_stop_signals
from coding_genesis._observers.progress import ProgressView, RunTracker
from coding_genesis._observers.transcript import safe_dumps
from coding_genesis._util.display import json_for_terminal
from coding_genesis.events import Event
from coding_genesis.result import RunResponse
from coding_genesis.status import Status

if TYPE_CHECKING:
    from coding_genesis._cli.asking import TerminalAsker, TerminalLines
    from coding_genesis.agent import CodingGenesisAgent

__all__ = ["LiveOutcome", "execute"]

_TICK = 0.125


class LiveOutcome:
    """The response dict (None when a signal stopped the run) and the tracker."""

    def __init__(self, result: RunResponse | None, signum: int | None, tracker: RunTracker):
        self.result = result
        self.signum = signum
        self.tracker = tracker

    @property
    def stopped(self) -> bool:
        return self.result is None


class EventWriter:
    """Writes each event as one JSON line as it happens; stops quietly if the
    reader goes away (``genesis run --events | head``)."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self.broken = False
        try:  # asked once: on a terminal, C1 and bidi controls are escaped
            self._tty = out.isatty()
        except (ValueError, OSError):
            self._tty = False

    def __call__(self, event: Event) -> None:
        self.line(event.to_dict())

    def line(self, obj: dict[str, Any]) -> None:
        if self.broken:
            return
        try:
            data = safe_dumps(obj) + b"\n"
            self._out.write(json_for_terminal(data) if self._tty else data)
            self._out.flush()
        except (BrokenPipeError, ValueError, OSError):
            self.broken = True
            _silence_stdout()


def _silence_stdout() -> None:
    """After EPIPE: point fd 1 at /dev/null so the interpreter's exit flush is quiet."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def execute(
    agent: CodingGenesisAgent,
    start: Callable[[], Awaitable[RunResponse]],
    *,
    progress: bool,
    events: EventWriter | None,
    asker: TerminalAsker | None = None,
) -> LiveOutcome:
    """Run ``start()`` (the agent's run) with the tracker, the progress panel
    and the event writer attached, stopping cleanly on a signal; ``asker``
    (``--ask``) takes the panel off the screen while it asks."""
    tracker = RunTracker(agent.backend_name, agent.timeout)
    subscriptions = [agent.subscribe(tracker.on_event)]
    if events is not None:
        subscriptions.append(agent.subscribe(events))
    view = ProgressView(tracker) if progress else None
    if asker is not None:
        asker.view = view
    stop: list[int] = []

    async def main() -> RunResponse | None:
        result: RunResponse | None = None
        run_scope = anyio.CancelScope()

        def first(signum: int) -> None:
            tracker.stopping(
                f"{stop_signal_name(signum)}: stopping the process tree "
                f"(SIGTERM, then SIGKILL after {agent.config.grace:g}s)…"
            )
            run_scope.cancel()

        def again(_: int) -> None:
            tracker.stop_note = "still stopping the process tree (bounded); please wait"

        async def tick() -> None:
            assert view is not None
            while True:
                view.refresh()
                await anyio.sleep(_TICK)

        async with anyio.create_task_group() as tg:
            await tg.start(functools.partial(watch_stop_signals, stop, first, again))
            if view is not None:
                tg.start_soon(tick)
            with run_scope:
                result = await start()
            tg.cancel_scope.cancel()
        return result

    result: RunResponse | None = None
    # Keys typed during the run would be drawn into the panel: not echoed;
    # they stay typed for the shell.
    keys = _keyboard(asker) if view is not None else None
    try:
        with (
            keys.hidden(keep=False) if keys is not None else contextlib.nullcontext(),
            view if view is not None else contextlib.nullcontext(),
        ):
            result = anyio.run(main)
    except KeyboardInterrupt:
        # Ctrl-C before the signal watcher was up or after it was gone: the
        # run itself was not in flight, so there is no tree to stop.
        if not stop:
            stop.append(signal.SIGINT)
        result = None
    finally:
        for unsubscribe in subscriptions:
            unsubscribe()
    if result is not None:
        stop.clear()
    return LiveOutcome(result, stop[0] if stop else None, tracker)


def _keyboard(asker: TerminalAsker | None) -> TerminalLines | None:
    """The terminal keys are typed on (the asker's), if stdin is one."""
    from coding_genesis._cli.asking import TerminalLines  # lazy: only a terminal needs it

    if asker is not None:
        return asker.lines
    try:
        return TerminalLines(sys.stdin.fileno()) if sys.stdin.isatty() else None
    except (OSError, ValueError):  # stdin closed or replaced
        return None


def stopped_response(outcome: LiveOutcome, agent: CodingGenesisAgent) -> dict[str, Any]:
    """The dict printed for ``--json`` / ``--events`` when a signal stopped the run."""
    t = outcome.tracker
    signum = outcome.signum or signal.SIGINT
    status = int(Status.CANCELLED) if signum == signal.SIGINT else 128 + signum
    transcript = None
    if t.run_id and agent.transcript_dir:
        transcript = os.path.join(agent.transcript_dir, t.run_id)
    return {
        "status": status,
        "message": f"stopped by {stop_signal_name(signum)} after {t.elapsed:.1f}s; process tree stopped",
        "is_error": True,
        "error": "cancelled",
        "backend": agent.backend_name,
        "agent": agent.name,
        "run_id": t.run_id or "",
        "session_id": t.session_id,
        "tool_calls": t.tool_calls,
        "tool_usage": dict(t.tool_usage),
        "files_modified": list(t.files),
        "duration_s": round(t.elapsed, 6),
        "stop_reason": "cancelled",
        "transcript": transcript,
    }
