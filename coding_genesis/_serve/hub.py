"""The event hub: every event the server streams, numbered once, kept in bounded rings.

One number per event (``<boot>-<seq>``, the SSE ``id``), one encoded frame per
event shared by every client, one ring for everything and one per topic (a
run, a live session, a session's turn, the approval inbox).  A client is a cursor over a
ring, never a queue: publishing appends and wakes, so a slow client can never
slow a run, and memory does not grow with the number of clients.  A client
whose cursor fell behind the ring's start is told what it missed (a
``missed`` event: how many, and from which id it goes on); with
``Last-Event-ID`` a client resumes after the last event it saw.
"""

from __future__ import annotations

import array
import bisect
import secrets
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio

from coding_genesis._observers.transcript import safe_dumps
from coding_genesis._util.redact import Redactor

__all__ = ["Hub"]

#: Evicted sequence numbers remembered per topic (to count what a client missed).
_EVICTED_KEPT = 100_000
#: At most this many frames (or bytes) go out in one write to a client.
_BATCH_FRAMES = 256
_BATCH_BYTES = 256 * 1024


@dataclass(slots=True)
class _Topic:
    seqs: list[int] = field(default_factory=list)
    frames: list[bytes] = field(default_factory=list)
    #: The sequence numbers evicted from the head (the newest ``_EVICTED_KEPT``).
    evicted: array.array[int] = field(default_factory=lambda: array.array("q"))
    #: Evicted before those: how many, and the newest of them.
    forgotten: int = 0
    forgotten_seq: int = 0
    ended: bool = False

    def missed_after(self, seq: int) -> int:
        """Events of this topic after ``seq`` that are no longer kept."""
        gone = len(self.evicted) - bisect.bisect_right(self.evicted, seq)
        return gone + (self.forgotten if seq < self.forgotten_seq else 0)


class Hub:
    """Numbers, encodes and keeps the server's events; streams them as SSE."""

    def __init__(
        self,
        redactor: Redactor,
        *,
        keep: int = 10_000,
        keep_per_topic: int = 2_000,
        ended_topics: int = 256,
    ) -> None:
        self.boot = secrets.token_hex(4)
        self._redactor = redactor
        self._seq = 0
        self._keep = keep
        self._ring: list[bytes | None] = [None] * keep
        self._keep_per_topic = keep_per_topic
        self._ended_topics = ended_topics
        self._topics: dict[str, _Topic] = {}
        self._ended: list[str] = []
        self._changed = anyio.Event()
        self.closed = False
        #: Streams open now, and the most open since memory was last given back.
        self.streams = 0
        self._peak = 0
        self._beats = 0

    # -- publishing -------------------------------------------------------------

    def event_id(self, seq: int) -> str:
        return f"{self.boot}-{seq}"

    def publish(
        self, topic: str | tuple[str, ...] | None, kind: str, payload: Mapping[str, Any]
    ) -> int:
        """Number, redact and encode one event; keep it in the rings (that of
        each topic named: a session's turn is in the session's stream too);
        wake the streams."""
        self._seq += 1
        seq = self._seq
        data = safe_dumps(self._redactor.deep(dict(payload)))
        frame = b"".join(
            (b"id: ", self.event_id(seq).encode(), b"\nevent: ", kind.encode(), b"\ndata: ")
        )
        frame += data + b"\n\n"
        self._ring[seq % self._keep] = frame
        for name in (topic,) if isinstance(topic, str) else topic or ():
            entry = self._topics.get(name)
            if entry is None:
                entry = self._topics[name] = _Topic()
            entry.seqs.append(seq)
            entry.frames.append(frame)
            if len(entry.seqs) > self._keep_per_topic + self._keep_per_topic // 4:
                self._evict(entry, len(entry.seqs) - self._keep_per_topic)
        self._wake()
        return seq

    def _evict(self, topic: _Topic, count: int) -> None:
        topic.evicted.extend(topic.seqs[:count])
        del topic.seqs[:count], topic.frames[:count]
        extra = len(topic.evicted) - _EVICTED_KEPT
        if extra > 0:
            topic.forgotten += extra
            topic.forgotten_seq = topic.evicted[extra - 1]
            del topic.evicted[:extra]

    def end(self, topic: str) -> None:
        """No more events for ``topic``: its streams end once they have sent all."""
        entry = self._topics.setdefault(topic, _Topic())
        if not entry.ended:
            entry.ended = True
            self._ended.append(topic)
            while len(self._ended) > self._ended_topics:
                self._topics.pop(self._ended.pop(0), None)
        self._wake()

    def has_topic(self, topic: str) -> bool:
        return topic in self._topics

    def open_topic(self, topic: str) -> None:
        """A topic that never ends (the approval inbox): its streams wait for
        its first event instead of ending at once."""
        self._topics.setdefault(topic, _Topic())

    def final_frame(self, view: Mapping[str, Any], kind: str = "run") -> bytes:
        """The stream of a run (or session) no longer held: its ``run`` (or
        ``session``) event, then the end."""
        payload = self._redactor.deep({"type": kind, **view})
        return b"retry: 2000\n\n" + self._frame(kind, payload, None)

    def close(self) -> None:
        """The server is going away: every stream says so and ends."""
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    # -- streaming --------------------------------------------------------------------

    def _resume_seq(self, last_event_id: str | None) -> int | None:
        """The sequence number a client saw last (None: none, or one of another boot)."""
        if not last_event_id:
            return None
        boot, _, number = last_event_id.strip().partition("-")
        if boot != self.boot or not number.isdigit():
            return None
        return min(int(number), self._seq)

    def _frame(self, kind: str, payload: Mapping[str, Any], seq: int | None) -> bytes:
        head = b"id: " + self.event_id(seq).encode() + b"\n" if seq is not None else b""
        return head + b"event: " + kind.encode() + b"\ndata: " + safe_dumps(payload) + b"\n\n"

    def _missed(self, count: int, after: int, resume: int | None = None) -> bytes:
        return self._frame(
            "missed",
            {
                "type": "missed",
                "missed": count,
                "after": self.event_id(after) if after else None,
                "next": self.event_id(resume) if resume is not None else None,
                "message": f"{count} event(s) were dropped before this client read them "
                "(it read too slowly, or came back too late); the run's transcript has "
                "them all (GET /runs/{id}/transcript)",
            },
            # The client has now heard of everything up to the gap's end.
            (resume - 1) if resume is not None and resume > 1 else None,
        )

    async def follow(
        self,
        topic: str | None,
        last_event_id: str | None,
        snapshot: Callable[[], tuple[str, Mapping[str, Any]]] | None = None,
    ) -> AsyncIterator[bytes]:
        """The SSE body of a stream: everything (``topic`` None, from now on) or
        one topic's events (from its first kept one); after ``Last-Event-ID``'s
        event when given.  Ends when the topic ends or the hub closes.

        ``snapshot`` (a topic's stream without ``Last-Event-ID``): the stream
        starts with that event (its kind and data: what is, now) and goes on
        with the topic's events from now on; its id resumes after it.

        One generator per stream, and what it sends read by plain calls: a
        publish wakes every stream, so each step of a wake-up is paid once per
        client (200 clients: 200 times per burst of events)."""
        self.streams += 1
        self._peak = max(self._peak, self.streams)
        try:
            yield b"retry: 2000\n\n"
            cursor, head = self._start(topic, last_event_id, snapshot)
            if head:
                yield head
            step: Callable[[int], tuple[bytes | None, int]] = (
                self._next_all if topic is None else partial(self._next_topic, topic)
            )
            while True:
                chunk, cursor = step(cursor)
                if chunk:
                    yield chunk
                    continue
                if chunk is None:  # the topic ended (or is gone): all was sent
                    return
                if self.closed:
                    yield self._closing()
                    return
                beats = self._beats
                await self._changed.wait()
                if self._beats != beats:
                    yield b": keep-alive\n\n"
        finally:
            self.streams -= 1

    def burst_over(self) -> bool:
        """Whether many streams closed since the last call said so: the memory
        their connections held may be given back to the system."""
        if self._peak - self.streams >= 32 and self.streams <= self._peak // 4:
            self._peak = self.streams
            return True
        return False

    def _start(
        self,
        topic: str | None,
        last_event_id: str | None,
        snapshot: Callable[[], tuple[str, Mapping[str, Any]]] | None,
    ) -> tuple[int, bytes]:
        """Where a stream starts (the sequence number it has seen), and what it
        says first (a ``missed`` event for another boot's id, the snapshot)."""
        seen = self._resume_seq(last_event_id)
        head = b""
        if last_event_id and seen is None:
            head = self._frame(
                "missed",
                {
                    "type": "missed",
                    "missed": None,
                    "after": last_event_id[:100],
                    "next": None,
                    "message": "that event id is not of this server's run (it restarted): "
                    "events before the restart are not kept; GET /runs has every run",
                },
                None,
            )
        if topic is None:
            return (self._seq if seen is None else seen), head
        if snapshot is not None and seen is None:
            # No await between reading what is and the cursor: nothing falls between.
            kind, data = snapshot()
            head += self._frame(kind, self._redactor.deep(dict(data)), self._seq or None)
            return self._seq, head
        return (0 if seen is None else seen), head

    def beat(self) -> None:
        """Every stream with nothing to send sends a keep-alive comment (the
        server calls this every ``heartbeat`` seconds: one timer for all streams,
        none per stream and wake-up)."""
        self._beats += 1
        self._wake()

    def _closing(self) -> bytes:
        return self._frame(
            "closing",
            {"type": "closing", "message": "the server is shutting down; reconnect later"},
            None,
        )

    def _next_all(self, cursor: int) -> tuple[bytes, int]:
        """What a stream of everything that saw ``cursor`` sends next (b"":
        nothing yet), and its new cursor."""
        oldest = max(1, self._seq - self._keep + 1)
        missed = b""
        if cursor + 1 < oldest:
            missed = self._missed(oldest - cursor - 1, cursor, oldest)
            cursor = oldest - 1
        if cursor < self._seq:
            last = min(self._seq, cursor + _BATCH_FRAMES)
            ring, keep = self._ring, self._keep
            chunk = b"".join([ring[s % keep] or b"" for s in range(cursor + 1, last + 1)])
            return missed + chunk, last
        return missed, cursor

    def _next_topic(self, name: str, cursor: int) -> tuple[bytes | None, int]:
        """What a stream of topic ``name`` that saw ``cursor`` sends next (b"":
        nothing yet; None: the topic ended, or is gone, and all was sent), and
        its new cursor."""
        topic = self._topics.get(name)
        if topic is None:  # evicted (long ended) or never had an event: nothing more
            return None, cursor
        missed = topic.missed_after(cursor)
        start = bisect.bisect_right(topic.seqs, cursor)
        head = b""
        if missed:
            resume = topic.seqs[start] if start < len(topic.seqs) else None
            head = self._missed(missed, cursor, resume)
            cursor = topic.evicted[-1] if topic.evicted else topic.forgotten_seq
        if start < len(topic.seqs):
            size = 0
            end = start
            while end < len(topic.seqs) and end - start < _BATCH_FRAMES and size < _BATCH_BYTES:
                size += len(topic.frames[end])
                end += 1
            return head + b"".join(topic.frames[start:end]), topic.seqs[end - 1]
        if head:
            return head, cursor
        return (None if topic.ended else b""), cursor
