"""The observer base classes: the contract of whatever watches a run.

An :class:`Observer` plugs into every run of an agent
(``CodingGenesisAgent(observers=[...])``): it is told when a run starts and
returns a :class:`RunObserver` for it (or None: not interested), which then
hears the run.  Transcripts, the run log, metering and telemetry are observers;
a new capability plugs in the same way, without a branch in the agent.

Observers never break a run: an exception is logged once per observer and that
observer is dropped for the rest of the run.

Subclass these classes and override what you need; every member has a default
that does nothing (see :class:`RunObserver` for the optional methods).  An object that
does not subclass them but has the members of the same names (the protocol of
0.1.0) is still accepted: it is wrapped once, when its run starts, by the
run's fan-out (the part of the run pipeline that hands each event to every observer).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from coding_genesis._supervision.stop import StopHandle
from coding_genesis._util.redact import Redactor
from coding_genesis.events import Event, EventKind
from coding_genesis.options import Trigger

if TYPE_CHECKING:
    from coding_genesis.events import Translator
    from coding_genesis.request import Request
    from coding_genesis.usage import RunningTotals

__all__ = ["AttemptTally", "Observer", "RunInfo", "RunObserver"]


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What is known when a run starts."""

    run_id: str
    agent: str
    backend: str
    prompt: str
    cwd: str
    timeout: float
    model: str | None
    resume: str | None
    #: Wall-clock start (``time.time()``).
    started: float
    redactor: Redactor
    #: The run's stop handle: an observer that must end the run (a budget
    #: spent) asks for the stop here; the supervisor stops the tree like a
    #: timeout.
    stop: StopHandle | None = None
    #: Publishes an event of the run on the agent's bus (stamped with the run id).
    publish: Callable[[Event], object] | None = None
    #: A fresh translator of the run's backend, for an observer that decodes
    #: stdout itself (a transcript past its raw cap).
    translator: Callable[[], Translator] | None = None
    #: The live session this run is a turn of (its key; None: a one-shot run).
    session: str | None = None
    #: The turn's number in its session (0: a one-shot run).
    turn: int = 0
    #: Who started the run: the caller, or the CLI between a session's turns.
    trigger: Trigger = "user"
    #: The agent's memory of the running totals its CLI sessions reported
    #: (the run log seeds it with what a resumed session cost before).
    totals: RunningTotals | None = None
    #: The request the run answers (its options, as validated).
    request: Request | None = None

    @classmethod
    def from_request(
        cls,
        request: Request,
        *,
        run_id: str,
        agent: str,
        redactor: Redactor,
        prompt: str | None = None,
        stop: StopHandle | None = None,
        publish: Callable[[Event], object] | None = None,
        translator: Callable[[], Translator] | None = None,
        session: str | None = None,
        turn: int = 0,
        trigger: Trigger = "user",
        totals: RunningTotals | None = None,
    ) -> RunInfo:
        """What is known when ``request`` starts (``prompt``: a label instead of
        the request's own, for a replay or a session's own record)."""
        return cls(
            run_id=run_id,
            agent=agent,
            backend=request.backend,
            prompt=request.prompt if prompt is None else prompt,
            cwd=request.cwd,
            timeout=request.timeout,
            model=request.model,
            resume=request.resume,
            started=time.time(),
            redactor=redactor,
            stop=stop,
            publish=publish,
            translator=translator,
            session=session,
            turn=turn,
            trigger=trigger,
            totals=totals,
            request=request,
        )


class AttemptTally(Protocol):
    """What an attempt's decoder folded anyway, as :meth:`RunObserver.attempt_decoded`
    reads it (the run's tally, read-only)."""

    @property
    def now(self) -> float:
        """When the attempt's last stdout chunk was read (``time.monotonic()``)."""

    @property
    def first_seen(self) -> Mapping[type, float]:
        """Event type -> when the first event of that type was decoded."""

    @property
    def tool_calls(self) -> int:
        """Tool calls the CLI made."""

    @property
    def tool_timed(self) -> int:
        """Tool calls paired with their results."""

    @property
    def tool_time(self) -> float:
        """Their total time, in seconds."""

    @property
    def tool_timings(self) -> Sequence[tuple[str, str, float]]:
        """The first few as (call id, tool name, seconds)."""


class RunObserver:
    """Watches one run: the plug-in contract.

    Every member has a default that does nothing; override what you need.
    What every run observer is told, in order:

    - :meth:`stdout`: every raw stdout chunk as read, before its events;
    - :meth:`event`: every event of the run, in order (stamped, redacted);
    - :meth:`flush`: the events of the last stdout chunk are all delivered;
    - :meth:`response_fields`: the fields it adds to the response;
    - :meth:`finish`: the final response.

    The optional methods (the run's fan-out looks once, when the run starts,
    at which of them a class overrides, so the hot path pays nothing for the
    ones it does not):

    1. :attr:`event_kinds`: the event kinds :meth:`event` hears (None: all);
       an observer that keeps the raw stdout needs no decoded events, and
       the hot path then builds none for it.
    2. :meth:`decoded`: every event of the run's attempts as the decoder makes
       it: unstamped, NOT redacted, before it is published (and whether or not
       anyone wants it published).  For observers that only count and time
       (metering): nothing they keep or emit may carry event text; the
       response they add to is redacted as a whole.
    3. :attr:`decoded_handlers`: instead of :meth:`decoded`, a dict (event type
       name -> callable) through which the decoder calls the observer only
       for the types it holds: the hot path's dispatch in one lookup.  The
       decoder reads it once per event type and attempt: a handler that must
       run only once checks for itself.
    4. :attr:`message_usage`: how an observer that hears usage events (with
       :meth:`decoded` or :attr:`decoded_handlers`) wants a CLI's per-message
       usage: ``live`` (the default) or ``folded`` (see
       :class:`coding_genesis.events.Translator`).
    5. :meth:`attempt_decoded`: an attempt's stdout is all decoded; read its
       tally (what the decoder folds anyway: tool calls paired with their
       durations, when each event type was first seen), at no cost per event.
    6. :meth:`attempt_env`: called just before each attempt spawns the CLI;
       the variables returned are added to the CLI's environment (telemetry
       gives ``TRACEPARENT`` this way).
    7. :attr:`Observer.replays` (on the observer, not the run observer).
    """

    __slots__ = ()

    #: The event kinds :meth:`event` hears; None: every kind.
    event_kinds: frozenset[EventKind] | None = None
    #: ``live`` or ``folded``: a CLI's per-message usage as this observer wants it.
    message_usage: str = "live"
    #: Event type name -> handler, called instead of :meth:`decoded`; None: unused.
    decoded_handlers: Mapping[str, Callable[[Event], object]] | None = None

    def event(self, event: Event) -> None:
        """Every event of the run (of :attr:`event_kinds`), in order (already redacted)."""

    def stdout(self, chunk: bytes) -> None:
        """Every raw stdout chunk as read, before its events."""

    def stdin(self, data: bytes) -> None:
        """Each line written on a live CLI's stdin (a session's turn, a run with
        an approver): our prompts and answers, unredacted."""

    def stderr(self, chunk: bytes) -> None:
        """Every raw stderr chunk as read (unredacted; a live CLI's, in a turn
        or between turns)."""

    def flush(self) -> None:
        """The events of the last stdout chunk have all been delivered: write
        out what was buffered (called once per chunk)."""

    def response_fields(self) -> Mapping[str, Any]:
        """Fields this observer adds to the response (e.g. ``transcript``;
        ``warnings`` are appended); called once, before :meth:`finish`."""
        return {}

    def finish(self, response: Mapping[str, Any]) -> None:
        """The final response (also for a cancelled run, status 130)."""

    def decoded(self, event: Event) -> None:
        """Every decoded event, unstamped and unredacted (method 2 above)."""

    def attempt_decoded(self, tally: AttemptTally) -> None:
        """An attempt's stdout is decoded: its tally, read-only (method 5 above)."""

    def attempt_env(self) -> Mapping[str, str]:
        """Variables for the next attempt's CLI environment (method 6 above)."""
        return {}


class Observer:
    """Plugs into every run of an agent: the plug-in contract.

    Override :meth:`start`; set :attr:`replays` if the observer writes nothing
    and should also watch replays (``agent.replay``, ``genesis replay``), so
    that a replay answers what the live run answered (metering does).
    """

    __slots__ = ()

    #: Watches replays too (it writes nothing, and says so).
    replays: bool = False

    def start(self, run: RunInfo) -> RunObserver | None:
        """A run starts: the run observer that watches it, or None (not interested)."""
        return None

    def session_started(self, session: str, info: RunInfo) -> RunObserver | None:
        """A live session opens (``info.run_id`` is its key): the observer of
        what its CLI says and is told *outside* its turns (the opening
        handshake, what comes between turns) — its ``stdout``, ``stdin`` and,
        when it closes, ``finish`` with the session's summary — or None."""
        return None

    def session_ended(self, session: str, summary: Mapping[str, Any]) -> None:
        """A live session closed (its turns were runs with ``RunInfo.session``
        == ``session``): ``summary`` holds its CLI session id, turns and usage."""
