"""A tolerant JSON-lines parser for CLI stdout.

A bad line (not JSON, not an object, truncated, invalid UTF-8, too long) is
skipped and counted; it never stops the stream or loses the lines around it.
Chunks are split by searching for ``b"\\n"`` from where the last search ended,
so a long line costs one pass, and a line beyond ``max_line_bytes`` is dropped
as it arrives instead of being held whole.

A line's bytes are not what it costs to hold once parsed: ``[],`` is 3 bytes
but a 64-byte list.  A line long enough that its containers could cost more
than ``max_line_bytes`` (longer than :data:`HEAVY_FLOOR` and
``max_line_bytes // 128``) has its brackets counted first (two
``bytes.count`` passes, no allocation); if they would cost more than
``max_line_bytes`` (:func:`held_cost`), the line is skipped unparsed, counted
like an over-long line.  Shorter lines, all ordinary ones, skip the count.

On the hot path, :meth:`JsonLinesParser.feed_each` hands every object to a
callback as soon as its line is parsed, instead of building a list per chunk:
the consumer is done with one object before the next is decoded, so the
working set stays small and in cache (a list of the ~1,000 objects of a 1 MiB
chunk made the parser 1.5-1.8x slower than a bare ``orjson.loads`` loop; see
``benchmarks/``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "HEAVY_FLOOR",
    "MAX_DEPTH",
    "TOO_DEEP",
    "Emit",
    "JsonLinesParser",
    "bound_depth",
    "has_nested",
    "held_cost",
    "parse_lines",
]

#: Tool results can be tens of MiB; anything longer than this is skipped.
DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024

#: What one parsed container costs to hold, measured (CPython 3.11+, orjson):
#: a list 56 bytes + its slot in its parent; a dict with an entry ~190 bytes.
#: An estimate from above: a bracket inside a string is counted too.
LIST_COST = 64
DICT_COST = 192
#: Lines shorter than this are never counted: at ~96 bytes held per byte at
#: worst, such a line costs a few MiB at most, whatever ``max_line_bytes``.
HEAVY_FLOOR = 64 * 1024


def held_cost(line: bytes | bytearray, start: int = 0, end: int | None = None) -> int:
    """An upper estimate of what the containers of ``line[start:end]`` cost
    to hold once parsed (bytes)."""
    if end is None:
        end = len(line)
    return LIST_COST * line.count(b"[", start, end) + DICT_COST * line.count(b"{", start, end)


def _heavy_from(max_line_bytes: int) -> int:
    """The length above which a line's containers are counted: a line has at
    most one container per 2 bytes, so a shorter one cannot cost more than
    ``max_line_bytes`` (``DICT_COST / 2 < 128``).  Never above
    ``max_line_bytes``: the one comparison also catches over-long lines."""
    return min(max_line_bytes, max(HEAVY_FLOOR, max_line_bytes // 128))


#: Deepest nesting of containers kept from a CLI value.  A deeper container is
#: replaced by :data:`TOO_DEEP` (see :func:`bound_depth`, applied by
#: :class:`~coding_genesis._pipeline.decode.Decoder` to every container an event
#: carries), so every consumer (the transcript's JSON writer, which stops at
#: 254 levels, redaction, printing) gets a bounded value.
MAX_DEPTH = 64
#: What stands in for a container nested deeper than :data:`MAX_DEPTH`.
TOO_DEEP = f"[truncated: nested deeper than {MAX_DEPTH} levels]"

#: Receives each parsed object.  It should not raise: if it does, the
#: exception propagates and the rest of that chunk is lost.
Emit = Callable[[dict[str, Any]], object]

_loads = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError


class JsonLinesParser:
    """Feed it byte chunks, get back the JSON objects of the complete lines.

    ``lines`` counts non-blank lines, ``skipped`` the malformed or oversized
    ones among them; blank lines are ignored and not counted.  Call
    :meth:`close` at EOF to parse a last line that had no newline.
    """

    __slots__ = ("_discarding", "_heavy", "_pending", "lines", "max_line_bytes", "skipped")

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be at least 1")
        self.max_line_bytes = max_line_bytes
        self._heavy = _heavy_from(max_line_bytes)
        self.skipped = 0
        self.lines = 0
        #: The start of a line that has no newline yet (one buffer, so a
        #: 20 MiB line is held once, not as pieces plus their join).
        self._pending = bytearray()
        self._discarding = False

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """The objects of the lines this chunk completes."""
        out: list[dict[str, Any]] = []
        self.feed_each(chunk, out.append)
        return out

    def feed_each(self, chunk: bytes, emit: Emit) -> None:
        """Call ``emit(obj)`` for each object of the lines this chunk completes."""
        find = chunk.find
        start = 0
        if self._pending or self._discarding:
            idx = find(b"\n")
            if idx < 0:
                self._hold(chunk, 0)
                return
            start = idx + 1
            if self._discarding:
                self._discarding = False
            else:
                pending = self._pending
                self._pending = bytearray()
                if len(pending) + idx > self.max_line_bytes:
                    self.lines += 1
                    self.skipped += 1
                else:
                    pending += memoryview(chunk)[:idx]
                    self._parse(pending, emit)
        limit = self.max_line_bytes
        heavy = self._heavy
        loads = _loads
        seen = bad = 0
        try:
            while True:
                idx = find(b"\n", start)
                if idx < 0:
                    break
                if idx == start:
                    start += 1  # blank line
                    continue
                seen += 1
                if idx - start > heavy and (
                    idx - start > limit or held_cost(chunk, start, idx) > limit
                ):
                    bad += 1
                    start = idx + 1
                    continue
                line = chunk[start:idx]
                start = idx + 1
                try:
                    obj = loads(line)
                except _JSONDecodeError:
                    if line.isspace():
                        seen -= 1  # whitespace only (a lone "\r"): blank
                    else:
                        bad += 1
                    continue
                if type(obj) is dict:
                    emit(obj)
                else:
                    bad += 1
        finally:
            self.lines += seen
            self.skipped += bad
        if start < len(chunk):
            self._hold(chunk, start)

    def close(self) -> list[dict[str, Any]]:
        """Flush the last line if the stream did not end with a newline."""
        out: list[dict[str, Any]] = []
        if self._discarding:
            self._discarding = False
        elif self._pending:
            pending = self._pending
            self._pending = bytearray()
            self._parse(pending, out.append)
        return out

    def _hold(self, chunk: bytes, start: int) -> None:
        if self._discarding:
            return
        if len(self._pending) + len(chunk) - start > self.max_line_bytes:
            # Too long: count it once now and drop bytes until the next newline.
            self._pending = bytearray()
            self._discarding = True
            self.lines += 1
            self.skipped += 1
        else:
            self._pending += memoryview(chunk)[start:] if start else chunk

    def _parse(self, line: bytes | bytearray, emit: Emit) -> None:
        if not line or line.isspace():
            return
        self.lines += 1
        if len(line) > self._heavy and held_cost(line) > self.max_line_bytes:
            self.skipped += 1  # would cost more than max_line_bytes to hold
            return
        try:
            obj = _loads(line)
        except _JSONDecodeError:
            self.skipped += 1
            return
        if type(obj) is dict:
            emit(obj)
        else:
            self.skipped += 1


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests containers more than ``limit`` deep (iterative:
    no recursion whatever the depth)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        item, depth = pop()
        if depth > limit:
            return True
        children = item.values() if type(item) is dict else item
        for child in children:
            if type(child) is dict or type(child) is list:
                push((child, depth + 1))
    return False


def _cut(value: Any, depth: int) -> Any:
    if type(value) is dict:
        if depth > MAX_DEPTH:
            return TOO_DEEP
        return {k: _cut(v, depth + 1) for k, v in value.items()}
    if type(value) is list:
        if depth > MAX_DEPTH:
            return TOO_DEEP
        return [_cut(v, depth + 1) for v in value]
    return value


def has_nested(value: Any) -> bool:
    """Whether a container holds another container (cheap: one pass over its
    items, no allocation); a flat one needs no depth check at all."""
    if type(value) is dict:
        items: Any = value.values()
    elif type(value) is list:
        items = value
    else:
        return False
    for item in items:  # noqa: SIM110 - faster than any() over a generator (hot path)
        if type(item) is dict or type(item) is list:
            return True
    return False


def bound_depth(value: Any) -> Any:
    """``value`` itself when its containers nest at most :data:`MAX_DEPTH`
    deep; otherwise a copy whose deeper containers are :data:`TOO_DEEP`.
    Never recurses more than MAX_DEPTH levels (the check is iterative)."""
    if (type(value) is dict or type(value) is list) and _depth_exceeds(value, MAX_DEPTH):
        return _cut(value, 1)
    return value


def parse_lines(
    chunks: Iterable[bytes], max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> Iterator[dict[str, Any]]:
    """Parse a whole byte stream offline (replay, tests)."""
    parser = JsonLinesParser(max_line_bytes)
    for chunk in chunks:
        yield from parser.feed(chunk)
    yield from parser.close()
