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

A line that is skipped may still be a message someone waits for (a control
request nested deeper than orjson's 1,024 levels): ``on_unparsed`` is handed
its head and its tail (at most :data:`HEAD_BYTES` and :data:`TAIL_BYTES`),
and :func:`edge_fields` reads the members written before and after the part
that could not be parsed.  Only skipped lines pay for it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson

from coding_genesis._util.homes import public

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "HEAD_BYTES",
    "HEAVY_FLOOR",
    "MAX_DEPTH",
    "TAIL_BYTES",
    "TOO_DEEP",
    "Emit",
    "JsonLinesParser",
    "Scalar",
    "Unparsed",
    "bound_depth",
    "edge_fields",
    "has_nested",
    "head_fields",
    "held_cost",
    "parse_lines",
    "tail_fields",
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
#: Receives the head and the tail of each line skipped as not JSON, not an
#: object, nested too deep or too costly to hold; of a line too long, its
#: head as soon as it is known to be (and no tail).  Same rule as :data:`Emit`.
Unparsed = Callable[[bytes, bytes, bool], object]

#: How much of a skipped line's head and tail ``on_unparsed`` gets: a
#: message's envelope is written before its payload (claude's type and
#: request id, codex's method and id) or after it (claude's ``result``: its
#: ``type``, ``subtype`` and answer come after its ``permission_denials``).
HEAD_BYTES = 8192
TAIL_BYTES = 65536

_loads = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError
_Bytes = bytes | bytearray | memoryview


class JsonLinesParser:
    """Feed it byte chunks, get back the JSON objects of the complete lines.

    ``lines`` counts non-blank lines, ``skipped`` the malformed or oversized
    ones among them; blank lines are ignored and not counted.  Call
    :meth:`close` at EOF to parse a last line that had no newline.
    """

    __slots__ = (
        "_discarding",
        "_heavy",
        "_pending",
        "lines",
        "max_line_bytes",
        "on_unparsed",
        "skipped",
    )

    def __init__(
        self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, on_unparsed: Unparsed | None = None
    ) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be at least 1")
        self.max_line_bytes = max_line_bytes
        #: Told the head of each skipped line (see the module's docstring).
        self.on_unparsed = on_unparsed
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
                    self._unparsed(pending, memoryview(chunk)[:idx])
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
                    self._unparsed(memoryview(chunk)[start:idx])
                    start = idx + 1
                    continue
                line = chunk[start:idx]
                start = idx + 1
                try:
                    obj = loads(line)
                except _JSONDecodeError as exc:
                    if line.isspace():
                        seen -= 1  # whitespace only (a lone "\r"): blank
                    else:
                        bad += 1
                        self._unparsed(line, whole=str(exc).startswith("depth limit"))
                    continue
                if type(obj) is dict:
                    emit(obj)
                else:
                    bad += 1
                    self._unparsed(line, whole=False)
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
            pending = self._pending
            self._pending = bytearray()
            self._discarding = True
            self.lines += 1
            self.skipped += 1
            self._unparsed(pending, memoryview(chunk)[start:], ended=False)
        else:
            self._pending += memoryview(chunk)[start:] if start else chunk

    def _unparsed(
        self, first: _Bytes, second: _Bytes = b"", *, ended: bool = True, whole: bool = True
    ) -> None:
        """Hand the head and the tail of a skipped line (``first`` then
        ``second``; ``ended``: its end is known; ``whole``: JSON too deep or
        too large to hold, not a garbled or cut one) to ``on_unparsed``."""
        if self.on_unparsed is None:
            return
        head = bytes(first[:HEAD_BYTES])
        if len(head) < HEAD_BYTES:
            head += bytes(second[: HEAD_BYTES - len(head)])
        tail = bytes(second[-TAIL_BYTES:]) if ended and len(second) else b""
        if ended and len(tail) < TAIL_BYTES and len(first):
            tail = bytes(first[-(TAIL_BYTES - len(tail)) :]) + tail
        self.on_unparsed(head, tail, whole)

    def _parse(self, line: bytes | bytearray, emit: Emit) -> None:
        if not line or line.isspace():
            return
        self.lines += 1
        if len(line) > self._heavy and held_cost(line) > self.max_line_bytes:
            self.skipped += 1  # would cost more than max_line_bytes to hold
            self._unparsed(line)
            return
        try:
            obj = _loads(line)
        except _JSONDecodeError as exc:
            self.skipped += 1
            # Too deep is JSON whole; anything else is not JSON (garbled, or cut
            # short by the CLI's death): its edges are read, not trusted.
            self._unparsed(line, whole=str(exc).startswith("depth limit"))
            return
        if type(obj) is dict:
            emit(obj)
        else:
            self.skipped += 1
            self._unparsed(line, whole=False)


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


#: A JSON value that is no container.
Scalar = str | int | float | bool | None

#: One token of JSON text (whitespace before it skipped): a string, a
#: punctuation mark, or a number or literal.
_TOKEN = re.compile(
    rb'\s*(?:("(?:[^"\\]|\\.)*")|([{}\[\]:,])|(-?[0-9][0-9.eE+-]*|true|false|null))', re.S
)
#: The deepest member :func:`head_fields` reads, and the most it reads.
_HEAD_DEPTH = 4
_HEAD_FIELDS = 64


def head_fields(head: bytes) -> dict[tuple[str, ...], Scalar]:
    """The members of a JSON object that ``head`` (the start of a line that
    could not be parsed) holds whole, each by its path of keys: the
    scalars of objects at most four deep, read up to the first thing that is
    not JSON or is cut off (``{"type": "control_request", "request_id": "r",
    "request": {"subtype": "can_use_tool", "input": [[[...`` gives ``type``,
    ``request_id`` and ``(request, subtype)``).  Arrays are gone through,
    their items not kept.  Cheap and bounded: only a head is read."""
    fields: dict[tuple[str, ...], Scalar] = {}
    #: Each open container: its path, and whether it is an object.
    stack: list[tuple[tuple[str, ...], bool]] = []
    key: str | None = None
    expect = "value"  # what comes next: "key", "colon", "value", "next"
    pos, end = 0, len(head)
    while len(fields) < _HEAD_FIELDS:
        match = _TOKEN.match(head, pos)
        if match is None:
            break
        pos = match.end()
        text, mark, scalar = match.groups()
        path, is_object = stack[-1] if stack else ((), False)
        if mark is not None:
            step = _mark_step(mark, expect, key, path, is_object, stack)
            if step is None:
                break
            expect, key = step
            continue
        if pos >= end and scalar is not None:
            break  # a number or literal cut off by the head's end
        try:
            value = _loads(text if text is not None else scalar)
        except _JSONDecodeError:
            break
        if expect == "key" and is_object and isinstance(value, str):
            key, expect = value, "colon"
        elif expect == "value" and stack:
            if is_object and key is not None and len(path) < _HEAD_DEPTH and "[]" not in path:
                fields[(*path, key)] = value
            expect = "next"
        else:
            break
    return fields


def _mark_step(
    mark: bytes,
    expect: str,
    key: str | None,
    path: tuple[str, ...],
    is_object: bool,
    stack: list[tuple[tuple[str, ...], bool]],
) -> tuple[str, str | None] | None:
    """One structural mark of :func:`head_fields` (``{ [ } ] : ,``): what
    comes next and the key kept (``stack`` opened or closed); None: stop
    there (not JSON, or the whole object was read)."""
    if mark in (b"{", b"["):
        if expect != "value":
            return None
        inner = (*path, key) if is_object and key is not None else path
        if mark == b"[":
            inner = (*inner, "[]")  # items are no members of the object
        stack.append((inner, mark == b"{"))
        return ("key" if mark == b"{" else "value"), None
    if mark in (b"}", b"]"):
        if not stack or stack[-1][1] != (mark == b"}"):
            return None
        stack.pop()
        return ("next", key) if stack else None  # empty: the whole object was read
    if mark == b":":
        return ("value", key) if expect == "colon" else None
    if expect != "next":  # ","
        return None
    return ("key" if is_object else "value"), key


#: The most tokens :func:`tail_fields` reads (each is a step of Python).
_TAIL_TOKENS = 8192
_SPACE = frozenset(b" \t\r\n")
_SCALAR_BYTES = frozenset(b"0123456789.eE+-truefalsn")


def tail_fields(tail: bytes) -> dict[tuple[str, ...], Scalar]:
    """The scalar members of the outermost JSON object that ``tail`` (the end
    of a line that could not be parsed) holds whole after its last member it
    cannot read, each by a path of one key; read backwards from its closing
    brace, nested values gone through (not kept), up to the first thing that
    is not JSON or is cut off.  Bounded: at most :data:`_TAIL_TOKENS` steps."""
    fields: dict[tuple[str, ...], Scalar] = {}
    pos = len(tail)
    value: Scalar | None = None
    has_value = False
    expect = "close"  # backwards: "close", "value", "colon", "key", "comma"
    for _ in range(_TAIL_TOKENS):
        while pos and tail[pos - 1] in _SPACE:
            pos -= 1
        if not pos:
            break
        byte = tail[pos - 1]
        if expect == "close":
            if byte != 0x7D:  # "}"
                break
            pos, expect = pos - 1, "value"
        elif expect == "value":
            read = _value_before(tail, pos, byte)
            if read is None:
                break
            pos, has_value, value = read
            expect = "colon"
        elif expect == "colon":
            if byte != 0x3A:  # ":"
                break
            pos, expect = pos - 1, "key"
        elif expect == "key":
            named = _key_before(tail, pos, byte)
            if named is None:
                break
            if has_value:
                fields.setdefault((named[1],), value)
            pos, expect = named[0], "comma"
        else:  # "comma": another member before, or the object's start
            if byte != 0x2C:  # ","
                break
            pos, expect = pos - 1, "value"
    return fields


def _value_before(tail: bytes, pos: int, byte: int) -> tuple[int, bool, Scalar | None] | None:
    """The member's value that ends at ``pos`` (its last byte ``byte``), read
    backwards: where it starts, whether it is a scalar kept (a nested object
    or array is gone through, not kept) and the scalar; None: not JSON, or
    maybe cut off at the tail's start."""
    if byte in (0x7D, 0x5D):  # a nested object or array: gone through
        start = _container_start(tail, pos)
        return None if start is None else (start, False, None)
    if byte == 0x22:  # '"'
        found = _string_start(tail, pos)
        if found is None:
            return None
        start = found
    else:
        start = pos
        while start and tail[start - 1] in _SCALAR_BYTES:
            start -= 1
        if start == pos or not start:
            return None  # nothing read, or maybe cut off at the tail's start
    try:
        value = _loads(tail[start:pos])
    except _JSONDecodeError:
        return None
    return start, True, value


def _key_before(tail: bytes, pos: int, byte: int) -> tuple[int, str] | None:
    """The member's key whose closing quote ends at ``pos``: where it starts
    and the key; None: not a JSON string."""
    start = _string_start(tail, pos) if byte == 0x22 else None
    if start is None:
        return None
    try:
        key = _loads(tail[start:pos])
    except _JSONDecodeError:
        return None
    return (start, key) if isinstance(key, str) else None


def _string_start(data: bytes, end: int) -> int | None:
    """Where the JSON string ending at ``end`` (its closing quote at
    ``end - 1``) starts: the quote before it that no backslash escapes."""
    at = end - 1
    while True:
        at = data.rfind(b'"', 0, at)
        if at < 0:
            return None
        slashes = 0
        while at - slashes > 0 and data[at - slashes - 1] == 0x5C:  # "\\"
            slashes += 1
        if slashes % 2 == 0:
            return at


def _container_start(data: bytes, end: int) -> int | None:
    """Where the object or array ending at ``end`` starts (strings in it
    skipped); None when it starts before ``data`` does."""
    depth, pos = 0, end
    while pos > 0:
        pos -= 1
        byte = data[pos]
        if byte == 0x22:  # '"'
            start = _string_start(data, pos + 1)
            if start is None:
                return None
            pos = start
        elif byte in (0x7D, 0x5D):  # "}", "]"
            depth += 1
        elif byte in (0x7B, 0x5B):  # "{", "["
            depth -= 1
            if depth == 0:
                return pos
    return None


def edge_fields(head: bytes, tail: bytes) -> dict[tuple[str, ...], Scalar]:
    """What :func:`head_fields` reads of ``head`` and :func:`tail_fields` of
    ``tail`` (the head's reading of a member first)."""
    return {**tail_fields(tail), **head_fields(head)} if tail else head_fields(head)


def parse_lines(
    chunks: Iterable[bytes], max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> Iterator[dict[str, Any]]:
    """Parse a whole byte stream offline (replay, tests)."""
    parser = JsonLinesParser(max_line_bytes)
    for chunk in chunks:
        yield from parser.feed(chunk)
    yield from parser.close()


# Public names: ``from coding_genesis import ...`` (see coding_genesis._util.homes).
public(JsonLinesParser)
