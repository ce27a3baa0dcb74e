"""Normalized run events and the publish/subscribe bus behind them.

Backends turn each CLI line into zero or more :class:`Event` objects; the agent
stamps them with its name, the run id, a sequence number and a time, and
publishes them together with its own state changes ("graph-node events").
Events stay light slotted objects on the hot path; ``to_dict`` builds the
plain dict only when someone asks.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import enum
import logging
import math
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["Event", "EventBus", "EventKind", "EventStream", "Subscription"]

log = logging.getLogger("coding_genesis.events")


class EventKind(enum.StrEnum):
    """What an event says.  Unknown CLI lines produce no event at all."""

    STATE = "state"  # agent state change (graph-node event)
    RUN_STARTED = "run_started"  # the subprocess was launched
    RUN_FINISHED = "run_finished"  # the final response is ready
    SESSION = "session"  # session / thread id is known
    TEXT = "text"  # assistant text
    TOOL_CALL = "tool_call"  # the CLI invoked a tool
    TOOL_RESULT = "tool_result"  # a tool finished
    USAGE = "usage"  # token usage / cost
    RESULT = "result"  # the CLI's terminal event
    ERROR = "error"  # an error line (often not fatal: the CLI retries)
    CLI_RETRY = "cli_retry"  # the CLI retries an API call by itself
    ATTEMPT = "attempt"  # coding-genesis starts another attempt (retry policy)


class Event:
    """One normalized event.  ``data`` holds the kind-specific fields."""

    __slots__ = ("agent", "data", "kind", "run_id", "seq", "ts")

    def __init__(self, kind: str, data: dict[str, Any] | None = None) -> None:
        self.kind = kind
        self.data: dict[str, Any] = data if data is not None else {}
        self.agent = ""
        self.run_id: str | None = None
        self.seq = 0
        self.ts = 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``type``, ``node``, ``run_id``, ``seq``, ``ts``,
        ``timestamp`` (ISO 8601, UTC) and the kind's own fields."""
        out: dict[str, Any] = {
            "type": str(self.kind),
            "node": self.agent,
            "run_id": self.run_id,
            "seq": self.seq,
            "ts": self.ts,
            "timestamp": _iso(self.ts),
        }
        out.update(self.data)
        return out

    def __repr__(self) -> str:
        return f"Event({self.kind!s}, run_id={self.run_id!r}, data={self.data!r})"


#: (whole second, its ISO text): events come many per second, and building a
#: datetime per event was most of ``to_dict``'s cost.
_iso_second: tuple[int, str] = (-1, "")


def _iso(ts: float) -> str:
    global _iso_second
    if not math.isfinite(ts) or ts <= 0:
        return ""
    second = int(ts)
    # Round to microseconds first, as datetime does, then truncate to milliseconds.
    micros = round((ts - second) * 1_000_000)
    if micros >= 1_000_000:
        second, micros = second + 1, micros - 1_000_000
    cached = _iso_second
    if cached[0] != second:
        text = _dt.datetime.fromtimestamp(second, _dt.UTC).isoformat(timespec="seconds")
        cached = _iso_second = (second, text[:-6])  # without "+00:00"
    return f"{cached[1]}.{micros // 1000:03d}+00:00"


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
        self._seq = 0

    @property
    def has_listeners(self) -> bool:
        return bool(self._callbacks or self._streams)

    def subscribe(self, callback: Callback) -> Subscription:
        self._callbacks.append(callback)
        return Subscription(self, callback)

    def stream(self, max_buffer: int = 10_000) -> EventStream:
        stream = EventStream(self, max_buffer)
        self._streams.append(stream)
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
        return event

    def _remove_callback(self, callback: Callback) -> None:
        with contextlib.suppress(ValueError):
            self._callbacks.remove(callback)

    def _remove_stream(self, stream: EventStream) -> None:
        with contextlib.suppress(ValueError):
            self._streams.remove(stream)
