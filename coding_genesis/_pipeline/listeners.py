"""Who hears an attempt's decoded events, per event type: the agent's bus
(for the kinds its subscribers want: redacted, stamped, published) and the
run's observers (their ``decoded`` taps, unredacted).

The decoder asks once per event type and again only when :attr:`version`
changes, so a hundred thousand events cost no "does anyone want this?" each.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from coding_genesis._pipeline.bus import EventBus
from coding_genesis._pipeline.decode import Step
from coding_genesis._util.redact import Redactor
from coding_genesis.events import Event

__all__ = ["ObserverSteps", "RunListeners"]

log = logging.getLogger("coding_genesis._pipeline.listeners")


class ObserverSteps(Protocol):
    """The run's observers as the listeners see them: their ``decoded`` steps
    per event type (``coding_genesis._pipeline.fanout.RunObservers``, handed
    in by the agent)."""

    @property
    def version(self) -> int:
        """Changes when an observer is dropped (the routes must be made again)."""

    def decoded_steps(self, event_type: type[Event]) -> Sequence[Step]: ...

    def owns(self, step: Step) -> bool: ...

    def step_failed(self, step: Step) -> None: ...


class RunListeners:
    """The listeners of one attempt (see :class:`coding_genesis._pipeline.decode.Listeners`)."""

    __slots__ = ("_bus", "_observers", "_redactor", "_run_id", "_warned")

    def __init__(
        self,
        bus: EventBus,
        run_id: str,
        redactor: Redactor,
        observers: ObserverSteps | None,
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

    def steps(self, event_type: type[Event]) -> Sequence[Step]:
        steps: list[Step] = []
        if self._bus.wants(event_type.kind):
            steps.append(self._publish_redacted if self._redactor.active else self._publish)
        if self._observers is not None:
            # After publishing: what an observer publishes follows the event.
            steps.extend(self._observers.decoded_steps(event_type))
        return steps

    def failed(self, step: Step) -> None:
        if self._observers is not None and self._observers.owns(step):
            self._observers.step_failed(step)
        elif not self._warned:  # publishing (redaction): the next event may be fine
            self._warned = True
            log.exception("publishing a decoded event failed (logged once per attempt)")

    def _publish(self, event: Event) -> None:
        self._bus.publish(event, self._run_id)

    def _publish_redacted(self, event: Event) -> None:
        self._bus.publish(event.redacted(self._redactor), self._run_id)
