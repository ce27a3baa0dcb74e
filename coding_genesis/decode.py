"""The one decoding pipeline: stdout bytes → JSON lines parser → the backend's
translator → typed events → the run's tally.

Live runs feed it the supervisor's chunks, ``replay`` feeds it a recorded
stdout, and the benchmarks time it; all three get the same events and the same
tally from the same bytes, whatever the chunking.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .backend import Translator
from .events import Event, ResultEvent, ToolCallEvent, UsageEvent
from .parser import DEFAULT_MAX_LINE_BYTES, JsonLinesParser, bound_depth, has_nested
from .result import RunTally

#: The fields through which a CLI's containers reach an event, per event type:
#: each is bounded to :data:`~coding_genesis.parser.MAX_DEPTH` on the way in.
_CONTAINER_FIELDS: dict[type[Event], tuple[str, ...]] = {
    ToolCallEvent: ("input",),
    UsageEvent: ("usage",),
    ResultEvent: ("permission_denials", "errors"),
}


def _bound(event: Event, fields: tuple[str, ...]) -> None:
    """Replace containers nested too deep in ``event``'s CLI fields by a
    marker (the check is one pass over a flat container: almost all are)."""
    for name in fields:
        value = getattr(event, name, None)
        if has_nested(value):
            setattr(event, name, bound_depth(value))


__all__ = ["Decoder"]

log = logging.getLogger("coding_genesis.decode")


class Decoder:
    """Decodes one attempt's stdout.  ``feed`` is the supervisor's stdout sink:
    it takes each chunk as read and ``b""`` at EOF, and says whether the CLI's
    terminal event has been seen."""

    __slots__ = ("_emit", "_on_event", "_translate", "errors", "parser", "tally", "terminal")

    def __init__(
        self,
        translator: Translator,
        tally: RunTally,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        on_event: Callable[[Event], object] | None = None,
    ) -> None:
        self.parser = JsonLinesParser(max_line_bytes)
        self.tally = tally
        self.terminal = False
        #: Lines the translator or a subscriber failed on (counted as skipped).
        self.errors = 0
        self._translate = translator.translate
        self._on_event = on_event
        self._emit = self._object

    @property
    def lines(self) -> int:
        return self.parser.lines

    @property
    def skipped(self) -> int:
        return self.parser.skipped

    def feed(self, chunk: bytes) -> bool:
        if chunk:
            self.parser.feed_each(chunk, self._emit)
        else:
            for obj in self.parser.close():
                self._object(obj)
        return self.terminal

    def feed_all(self, data: bytes) -> Decoder:
        """Decode a whole recorded stdout (then EOF)."""
        self.feed(data)
        self.feed(b"")
        return self

    def _object(self, obj: dict[str, Any]) -> None:
        try:
            try:
                events = self._translate(obj)
            except RecursionError:
                # A translator that walked a hostile nesting: once more, bounded.
                events = self._translate(bound_depth(obj))
            if not events:
                return
            add = self.tally.add
            on_event = self._on_event
            fields_of = _CONTAINER_FIELDS.get
            for event in events:
                fields = fields_of(type(event))
                if fields is not None:
                    _bound(event, fields)
                if add(event):
                    self.terminal = True
                if on_event is not None:
                    on_event(event)
        except Exception:
            if not self.errors:
                log.exception("decoding a stdout line failed; skipped (logged once per run)")
            self.errors += 1
            self.parser.skipped += 1
