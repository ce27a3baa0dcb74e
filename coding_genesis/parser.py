"""A tolerant JSON-lines parser for CLI stdout.

A bad line (not JSON, not an object, truncated, invalid UTF-8, too long) is
skipped and counted; it never stops the stream or loses the lines around it.
Chunks are split by searching for ``b"\\n"`` from where the last search ended,
so a long line costs one pass, and a line beyond ``max_line_bytes`` is dropped
as it arrives instead of being held whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson

__all__ = ["DEFAULT_MAX_LINE_BYTES", "JsonLinesParser", "parse_lines"]

#: Tool results can be tens of MiB; anything longer than this is skipped.
DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024

_loads = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError


class JsonLinesParser:
    """Feed it byte chunks, get back the JSON objects of the complete lines.

    ``skipped`` counts malformed or oversized lines; blank lines are ignored
    and not counted.  Call :meth:`close` at EOF to parse a last line that had
    no newline.
    """

    __slots__ = ("_discarding", "_pending", "_pending_len", "lines", "max_line_bytes", "skipped")

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be at least 1")
        self.max_line_bytes = max_line_bytes
        self.skipped = 0
        self.lines = 0
        self._pending: list[bytes] = []
        self._pending_len = 0
        self._discarding = False

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        find = chunk.find
        start = 0
        if self._pending or self._discarding:
            idx = find(b"\n")
            if idx < 0:
                self._hold(chunk)
                return out
            if self._discarding:
                self._discarding = False
            else:
                self._pending.append(chunk[:idx])
                line = b"".join(self._pending)
                self._pending.clear()
                self._pending_len = 0
                if len(line) > self.max_line_bytes:
                    self.lines += 1
                    self.skipped += 1
                else:
                    self._parse(line, out)
            start = idx + 1
        limit = self.max_line_bytes
        parse = self._parse
        while True:
            idx = find(b"\n", start)
            if idx < 0:
                break
            if idx - start > limit:
                self.lines += 1
                self.skipped += 1
            else:
                parse(chunk[start:idx], out)
            start = idx + 1
        if start < len(chunk):
            self._hold(chunk[start:] if start else chunk)
        return out

    def close(self) -> list[dict[str, Any]]:
        """Flush the last line if the stream did not end with a newline."""
        out: list[dict[str, Any]] = []
        if self._discarding:
            self._discarding = False
        elif self._pending:
            line = b"".join(self._pending)
            self._pending.clear()
            self._pending_len = 0
            self._parse(line, out)
        return out

    def _hold(self, piece: bytes) -> None:
        if self._discarding:
            return
        self._pending_len += len(piece)
        if self._pending_len > self.max_line_bytes:
            # Too long: count it once now and drop bytes until the next newline.
            self._pending.clear()
            self._pending_len = 0
            self._discarding = True
            self.lines += 1
            self.skipped += 1
        else:
            self._pending.append(piece)

    def _parse(self, line: bytes, out: list[dict[str, Any]]) -> None:
        if line[-1:] == b"\r":
            line = line[:-1]
        if not line or line.isspace():
            return
        self.lines += 1
        try:
            obj = _loads(line)
        except _JSONDecodeError:
            self.skipped += 1
            return
        if type(obj) is dict:
            out.append(obj)
        else:
            self.skipped += 1


def parse_lines(
    chunks: Iterable[bytes], max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> Iterator[dict[str, Any]]:
    """Parse a whole byte stream offline (replay, tests)."""
    parser = JsonLinesParser(max_line_bytes)
    for chunk in chunks:
        yield from parser.feed(chunk)
    yield from parser.close()
