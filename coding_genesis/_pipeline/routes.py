"""An attempt's routes: the handlers of its decoded events, per event type:
the agent's bus (for the kinds its subscribers want: redacted, stamped,
published) and the run's observers (their ``decoded`` handlers, unredacted).

The decoder asks once per event type and again only when :attr:`version`
changes, so a hundred thousand events cost no "does anyone want this?" each.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from coding_genesis._pipeline.bus import EventBus
from coding_genesis._pipeline.decode import Handler
from coding_genesis._util.redact import Pieces, Redactor
from coding_genesis.events import Event, EventKind, TextDeltaEvent, ThoughtDeltaEvent

__all__ = ["ObserverHandlers", "RunRoutes"]

log = logging.getLogger("coding_genesis._pipeline.routes")


class ObserverHandlers(Protocol):
    """The run's observers as the routes see them: their ``decoded`` handlers
    per event type (``coding_genesis._pipeline.fanout.RunObservers``, handed
    in by the agent)."""

    @property
    def version(self) -> int:
        """Changes when an observer is dropped (the routes must be made again)."""

    def route_handlers(self, event_type: type[Event]) -> Sequence[Handler]: ...

    def owns(self, handler: Handler) -> bool: ...

    def handler_failed(self, handler: Handler) -> None: ...


class RunRoutes:
    """The routes of one attempt (see :class:`coding_genesis._pipeline.decode.Routes`)."""

    __slots__ = ("_bus", "_observers", "_pieces", "_redactor", "_run_id", "_warned")

    def __init__(
        self,
        bus: EventBus,
        run_id: str,
        redactor: Redactor,
        observers: ObserverHandlers | None,
    ) -> None:
        self._bus = bus
        self._run_id = run_id
        self._redactor = redactor
        self._observers = observers
        self._warned = False
        #: The deltas' ends held back until no secret can span them.
        self._pieces = Pieces(redactor)

    @property
    def version(self) -> int:
        observers = self._observers
        return self._bus.version + (observers.version if observers is not None else 0)

    def handlers(self, event_type: type[Event]) -> Sequence[Handler]:
        handlers: list[Handler] = []
        redacting = self._redactor.active
        if event_type in _DELTAS:
            if self._bus.wants(event_type.kind):
                handlers.append(self._publish_piece if redacting else self._publish)
        elif redacting and any(self._bus.wants(kind) for kind in _DELTA_KINDS):
            # Whatever follows a message's pieces gives out what they held back first.
            handlers.append(self._release_pieces)
        if event_type not in _DELTAS and self._bus.wants(event_type.kind):
            handlers.append(self._publish_redacted if redacting else self._publish)
        if self._observers is not None:
            # After publishing: what an observer publishes follows the event.
            handlers.extend(self._observers.route_handlers(event_type))
        return handlers

    def failed(self, handler: Handler) -> None:
        if self._observers is not None and self._observers.owns(handler):
            self._observers.handler_failed(handler)
        elif not self._warned:  # publishing (redaction): the next event may be fine
            self._warned = True
            log.exception("publishing a decoded event failed (logged once per attempt)")

    def _publish(self, event: Event) -> None:
        self._bus.publish(event, self._run_id)

    def _publish_redacted(self, event: Event) -> None:
        self._bus.publish(event.redacted(self._redactor), self._run_id)

    def _publish_piece(self, event: Event) -> None:
        """A delta, redacted with the pieces before it (a secret split across
        two is masked too); what may begin a secret waits for the next."""
        assert isinstance(event, TextDeltaEvent | ThoughtDeltaEvent)
        text = self._pieces.piece((type(event), event.message_id), event.text)
        if text:
            self._bus.publish(type(event)(text, event.message_id), self._run_id)

    def _release_pieces(self, event: Event) -> None:
        if self._pieces:
            for (kind, message), text in self._pieces.release():
                self._bus.publish(kind(text, message), self._run_id)


#: The delta events, whose text is redacted across their pieces.
_DELTAS = frozenset({TextDeltaEvent, ThoughtDeltaEvent})
_DELTA_KINDS = (EventKind.TEXT_DELTA, EventKind.THOUGHT_DELTA)
