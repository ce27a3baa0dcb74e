"""The run's publish/subscribe bus: the agent stamps each event (its name,
the run id, a sequence number, a time) and fans it out to subscribers
(callbacks, optionally per kind) and bounded async streams.  A failing
subscriber is logged and never breaks a run."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from types import TracebackType

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from coding_genesis._util.homes import public
from coding_genesis.events import Event, EventKind

__all__ = ["Callback", "EventBus", "EventStream", "Subscription"]

log = logging.getLogger("coding_genesis._pipeline.bus")

Callback = Callable[[Event], object]


class Subscription:
    """Handle returned by :meth:`EventBus.subscribe`; call it (or use it as a
    context manager) to unsubscribe."""

    __slots__ = ("_bus", "_callback")

    def __init__(self, bus: EventBus, callback: Callback) -> None:
        self._bus = bus
        self._callback = callback

    def __call__(self) -> None:
        self._bus._remove_callback(self._callback)

    unsubscribe = __call__

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self()


class EventStream:
    """An async iterator over published events (bounded; drops when full).

    ``async with agent.events() as stream: async for event in stream: ...``
    """

    def __init__(self, bus: EventBus, max_buffer: int) -> None:
        self._bus = bus
        send, receive = anyio.create_memory_object_stream[Event](max_buffer)
        self._send: MemoryObjectSendStream[Event] = send
        self._receive: MemoryObjectReceiveStream[Event] = receive
        #: Events dropped because the consumer did not keep up.
        self.dropped = 0

    def _offer(self, event: Event) -> None:
        try:
            self._send.send_nowait(event)
        except anyio.WouldBlock:
            self.dropped += 1
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._bus._remove_stream(self)

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> Event:
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError) as exc:
            raise StopAsyncIteration from exc

    def close(self) -> None:
        """Stop receiving; iteration ends once the buffer is drained."""
        self._bus._remove_stream(self)
        self._send.close()

    async def aclose(self) -> None:
        self.close()
        self._receive.close()

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class EventBus:
    """Stamps and fans out events.  A failing subscriber is logged and never
    breaks a run."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._callbacks: list[Callback] = []
        self._streams: list[EventStream] = []
        #: Subscribers that hear only some kinds (``subscribe(..., kinds=...)``).
        self._some: list[tuple[Callback, frozenset[EventKind]]] = []
        self._some_kinds: frozenset[EventKind] = frozenset()
        self._seq = 0
        #: Bumped whenever who subscribes changes (producers cache ``wants``).
        self.version = 0

    @property
    def has_subscribers(self) -> bool:
        return bool(self._callbacks or self._streams or self._some)

    def wants(self, kind: EventKind) -> bool:
        """Whether a subscriber would hear an event of this kind (a producer
        skips building and redacting the events nobody hears)."""
        return bool(self._callbacks or self._streams) or kind in self._some_kinds

    def subscribe(
        self, callback: Callback, *, kinds: Iterable[EventKind] | None = None
    ) -> Subscription:
        """``callback`` hears every published event, or only those of ``kinds``."""
        self.version += 1
        if kinds is None:
            self._callbacks.append(callback)
        else:
            self._some.append((callback, frozenset(kinds)))
            self._some_kinds = self._some_kinds.union(kinds)
        return Subscription(self, callback)

    def stream(self, max_buffer: int = 10_000) -> EventStream:
        stream = EventStream(self, max_buffer)
        self._streams.append(stream)
        self.version += 1
        return stream

    def close_streams(self) -> None:
        for stream in list(self._streams):
            stream.close()

    def publish(self, event: Event, run_id: str | None) -> Event:
        self._seq += 1
        event.agent = self.name
        event.run_id = run_id
        event.seq = self._seq
        event.ts = time.time()
        for callback in tuple(self._callbacks):
            try:
                callback(event)
            except Exception:
                log.exception(
                    "event subscriber %r failed; event %s dropped for it", callback, event.kind
                )
        for stream in tuple(self._streams):
            stream._offer(event)
        if self._some:
            kind = event.kind
            for callback, kinds in tuple(self._some):
                if kind in kinds:
                    try:
                        callback(event)
                    except Exception:
                        log.exception(
                            "event subscriber %r failed; event %s dropped for it", callback, kind
                        )
        return event

    def _remove_callback(self, callback: Callback) -> None:
        self.version += 1
        with contextlib.suppress(ValueError):
            self._callbacks.remove(callback)
        self._some = [(c, k) for c, k in self._some if c != callback]
        self._some_kinds = frozenset().union(*(k for _, k in self._some))

    def _remove_stream(self, stream: EventStream) -> None:
        self.version += 1
        with contextlib.suppress(ValueError):
            self._streams.remove(stream)


# Public names: ``from coding_genesis import ...`` (see coding_genesis._util.homes).
public(Subscription)
public(EventStream)
