"""The one decoding pipeline: stdout bytes → JSON lines parser → the backend's
translator → typed events → the run's tally, then whoever hears it.

Live runs feed it the supervisor's chunks, ``replay`` feeds it a recorded
stdout, and the benchmarks time it; all three get the same events and the same
tally from the same bytes, whatever the chunking.

Each event goes down a *route* made for its type the first time the type is
seen: bound its CLI containers, fold it into the tally, then the handlers
that want that type (the bus's publisher, observers' handlers).  A run sees a
handful of types and a hundred thousand events, so the per-event work is a
dict lookup and the handlers themselves: no type tests, no "does anyone want
this" questions on every event.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from coding_genesis._pipeline.tally import RunTally, by_type
from coding_genesis._util.numbers import clamp_fields
from coding_genesis._util.parser import DEFAULT_MAX_LINE_BYTES, JsonLinesParser, bound_depth
from coding_genesis.events import (
    CliRetryEvent,
    Event,
    ResultEvent,
    ToolCallEvent,
    Translator,
    UsageEvent,
)

__all__ = ["Decoder", "Handler", "Router", "Routes", "Watch", "skip_failed_line"]

log = logging.getLogger("coding_genesis._pipeline.decode")

#: One handler of a route: called with each event of the route's type.
Handler = Callable[[Any], object]


class Watch(Protocol):
    """Handlers for a few event types, settled at the end of the chunk in which
    one of them found something (``pending``): the fail-fast watch
    (``coding_genesis._pipeline.evidence``)."""

    @property
    def handlers(self) -> Mapping[type[Event], Handler]: ...

    @property
    def pending(self) -> object: ...

    def settle(self, terminal: bool) -> None:
        """The chunk is decoded; ``terminal``: the CLI's terminal event was seen."""
        ...


class Routes(Protocol):
    """The handlers of a run's decoded events, per event type (the agent's bus
    and the run's observers: see ``coding_genesis._pipeline.routes``)."""

    #: Changes whenever who hears changes (a subscriber comes or goes, an
    #: observer is dropped): the decoder then builds its routes again.
    @property
    def version(self) -> int: ...

    def handlers(self, event_type: type[Event]) -> Sequence[Handler]:
        """The handlers for events of ``event_type``, in order (may be empty)."""
        ...

    def failed(self, handler: Handler) -> None:
        """``handler`` raised: log it and stop calling it (the event and the
        line it came from are not at fault; the run goes on)."""
        ...


def _bounder(*names: str) -> Handler:
    """A handler that replaces the containers nested too deep in these fields
    of an event (a CLI's JSON reaches events through them) by a marker."""

    if len(names) == 1:
        (name,) = names

        def bound_one(event: Any) -> None:
            value = getattr(event, name)
            # Inline ``has_nested``: almost every container is flat (hot path).
            if type(value) is dict:
                items: Any = value.values()
            elif type(value) is list:
                items = value
            else:
                return
            for item in items:
                if type(item) is dict or type(item) is list:
                    setattr(event, name, bound_depth(value))
                    return

        return bound_one

    bounders = tuple(_bounder(name) for name in names)

    def bound_all(event: Any) -> None:
        for bound in bounders:
            bound(event)

    return bound_all


#: The fields through which a CLI's containers reach an event, per event type:
#: each is bounded to :data:`~coding_genesis._util.parser.MAX_DEPTH` on the way in.
_BOUNDERS: dict[type[Event], Handler] = {
    ToolCallEvent: _bounder("input"),
    UsageEvent: _bounder("usage"),
    ResultEvent: _bounder("permission_denials", "errors"),
}


#: The fields whose numbers the tally, metering and budgets read, per event
#: type: a number out of range in them (or inside them) becomes None at the
#: door, and the run's warnings name the field (``_util/numbers.py``).
_COUNTED: dict[type[Event], tuple[str, ...]] = {
    UsageEvent: ("usage", "cost_usd", "by_model", "messages"),
    ResultEvent: ("num_turns", "duration_ms", "api_error_status"),
    CliRetryEvent: ("attempt", "max_retries", "error_status", "retry_delay_ms"),
}


def _clamper(event_type: type[Event], names: tuple[str, ...], tally: RunTally) -> Handler:
    warn = tally.bad_number
    if issubclass(event_type, UsageEvent):

        def clamp_usage(event: Any) -> None:
            # A message's own usage (claude: one per assistant message, on the
            # hot path) is only summed, by ``normalize_usage``, which takes a
            # number out of range as 0; the run's totals are clamped here.
            if event.message_id is None:
                clamp_fields(event, names, warn)

        return clamp_usage

    def clamp(event: Any) -> None:
        clamp_fields(event, names, warn)

    return clamp


class _Nobody:
    """No handlers."""

    version = 0

    def handlers(self, event_type: type[Event]) -> Sequence[Handler]:
        return ()

    def failed(self, handler: Handler) -> None:  # pragma: no cover - has no handlers
        pass


class Router:
    """The routes of one attempt's events (a live session's turn, or a session
    between turns): each event down the route of its type, made the first time
    the type is seen, into :attr:`tally`.

    ``on_event`` hears every event (a replay, a conformance check); ``watch``
    adds a handler for the event types it names, after the tally's, and is
    settled at the end of a chunk in which it found something (see
    :class:`Watch`); ``routes`` give the handlers of the types they ask for: a
    failure in one is theirs (see :class:`Routes`).  A failure of any other
    handler propagates out of :meth:`deliver` (its line is skipped)."""

    __slots__ = (
        "_adders",
        "_extra",
        "_given",
        "_routes",
        "_version",
        "_watch",
        "tally",
        "terminal",
    )

    def __init__(
        self,
        tally: RunTally,
        *,
        routes: Routes | None = None,
        watch: Watch | None = None,
        on_event: Handler | None = None,
    ) -> None:
        self.tally = tally
        #: The CLI's terminal event has been seen.
        self.terminal = False
        self._adders = tally.adders()
        self._extra: tuple[Handler, ...] = (on_event,) if on_event is not None else ()
        self._watch = watch
        self._given: Routes = routes if routes is not None else _Nobody()
        self._version = self._given.version
        #: event type -> (its core handlers, the handlers ``routes`` give).
        self._routes: dict[type, tuple[tuple[Handler, ...], tuple[Handler, ...]]] = {}

    def decode(
        self,
        parser: JsonLinesParser,
        chunk: bytes,
        each: Callable[[dict[str, Any]], object],
        clock: Callable[[], float],
    ) -> None:
        """One chunk of stdout (``b""``: its end) through ``parser``, each
        object to ``each`` (which delivers its events here): the tally's
        ``now`` read once for the chunk, the watch settled after it."""
        version = self._given.version
        if version != self._version:  # who hears changed: routes anew
            self._version = version
            self._routes.clear()
        if chunk:
            self.tally.now = clock()
            parser.feed_each(chunk, each)
            watch = self._watch
            if watch is not None and watch.pending is not None:
                watch.settle(self.terminal)
        else:
            for obj in parser.close():
                each(obj)

    def deliver(self, events: Sequence[Event]) -> None:
        """Take ``events`` down their routes, in order."""
        routes = self._routes
        for event in events:
            route = routes.get(type(event))
            if route is None:
                route = self._route(type(event))
            core, heard = route
            for handler in core:
                handler(event)
            for handler in heard:
                try:
                    handler(event)
                except Exception:  # noqa: BLE001  (a failing handler is dropped, the run goes on)
                    self._handler_failed(handler)

    def _route(self, event_type: type) -> tuple[tuple[Handler, ...], tuple[Handler, ...]]:
        """The route of a type, made at its first event (so also: when it came)."""
        self.tally.first_seen.setdefault(event_type, self.tally.now)
        core: list[Handler] = []
        bound = by_type(_BOUNDERS, event_type)
        if bound is not None:
            core.append(bound)
        counted = by_type(_COUNTED, event_type)
        if counted is not None:
            core.append(_clamper(event_type, counted, self.tally))
        adder = by_type(self._adders, event_type)
        if adder is not None:
            core.append(adder)
        if issubclass(event_type, ResultEvent):
            core.append(self._saw_terminal)
        watched = by_type(self._watch.handlers, event_type) if self._watch is not None else None
        if watched is not None:
            core.append(watched)
        core.extend(self._extra)
        route = (tuple(core), tuple(self._given.handlers(event_type)))
        self._routes[event_type] = route
        return route

    def _saw_terminal(self, event: Event) -> None:
        self.terminal = True

    def _handler_failed(self, handler: Handler) -> None:
        self._given.failed(handler)
        self._version = self._given.version
        self._routes.clear()  # at once: the rest of this chunk must not call it


def skip_failed_line(parser: JsonLinesParser, errors: int) -> int:
    """A line whose translation or routing failed: counted as skipped (the
    first failure of a stream logged with its traceback); the errors so far."""
    if not errors:
        log.exception("decoding a stdout line failed; skipped (logged once per run)")
    parser.skipped += 1
    return errors + 1


class Decoder:
    """Decodes one attempt's stdout.  ``feed`` is the supervisor's stdout sink:
    it takes each chunk as read and ``b""`` at EOF, and says whether the CLI's
    terminal event has been seen.

    The parser's objects are translated and their events taken down the
    routes of one :class:`Router` (``on_event``, ``watch`` and ``routes`` are
    its); a failure in the translator or in ``on_event`` counts the line as
    skipped.
    """

    __slots__ = (
        "_clock",
        "_deliver",
        "_flush",
        "_translate",
        "errors",
        "parser",
        "router",
        "tally",
    )

    def __init__(
        self,
        translator: Translator,
        tally: RunTally,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        on_event: Handler | None = None,
        routes: Routes | None = None,
        clock: Callable[[], float] = time.time,
        watch: Watch | None = None,
    ) -> None:
        self.parser = JsonLinesParser(max_line_bytes)
        self.tally = tally
        self.router = Router(tally, routes=routes, watch=watch, on_event=on_event)
        #: Lines the translator or an ``on_event`` failed on (counted as skipped).
        self.errors = 0
        self._translate = translator.translate
        self._deliver = self.router.deliver
        self._flush: Callable[[], Sequence[Event]] | None = translator.flush
        #: Read once per chunk: the time its events became known (the tally's ``now``).
        self._clock = clock

    @property
    def terminal(self) -> bool:
        return self.router.terminal

    @property
    def lines(self) -> int:
        return self.parser.lines

    @property
    def skipped(self) -> int:
        return self.parser.skipped

    def feed(self, chunk: bytes) -> bool:
        router = self.router
        router.decode(self.parser, chunk, self._object, self._clock)
        if not chunk and self._flush is not None:  # the end of the stream, whatever ended it
            flush, self._flush = self._flush, None
            # The held-back events take the lines' path (as one line).
            try:
                events = flush()
                if events:
                    self._deliver(events)
            except Exception:  # noqa: BLE001  (counted as a skipped line)
                self.errors = skip_failed_line(self.parser, self.errors)
        return router.terminal

    def feed_all(self, data: bytes) -> Decoder:
        """Decode a whole recorded stdout (then EOF)."""
        self.feed(data)
        self.feed(b"")
        return self

    def _object(self, obj: dict[str, Any]) -> None:
        """Translate one object and take its events down their routes; a
        failure skips that line, never the stream."""
        try:
            try:
                events = self._translate(obj)
            except RecursionError:
                # A translator that walked a hostile nesting: once more, bounded.
                events = self._translate(bound_depth(obj))
            if events:
                self._deliver(events)
        except Exception:  # noqa: BLE001  (counted as a skipped line)
            self.errors = skip_failed_line(self.parser, self.errors)
