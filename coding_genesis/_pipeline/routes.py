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
from coding_genesis._util.redact import Redactor
from coding_genesis.events import Event

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

    __slots__ = ("_bus", "_observers", "_redactor", "_run_id", "_warned")

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

    @property
    def version(self) -> int:
        observers = self._observers
        return self._bus.version + (observers.version if observers is not None else 0)

    def handlers(self, event_type: type[Event]) -> Sequence[Handler]:
        handlers: list[Handler] = []
        if self._bus.wants(event_type.kind):
            handlers.append(self._publish_redacted if self._redactor.active else self._publish)
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
