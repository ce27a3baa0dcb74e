"""The tolerant JSON-lines parser: the same objects and counts however the
stream is cut into chunks, through either entry point."""

from __future__ import annotations

import random
from typing import Any

import pytest

from coding_genesis._util.parser import JsonLinesParser, parse_lines

#: Lines the parser must tell apart: objects (kept), blanks (ignored, not
#: counted), and bad lines (counted in ``lines`` and ``skipped``).
PIECES: list[tuple[bytes, str]] = [
    (b'{"a":1}', "obj"),
    (b'{"b":"caf\xc3\xa9 \\n \\"q\\""}', "obj"),
    (b'  {"c":[1,2,{"d":null}]}  ', "obj"),
    (b'{"e":1}\r', "obj"),
    (b"", "blank"),
    (b"\r", "blank"),
    (b" \t ", "blank"),
    (b"[1,2]", "bad"),
    (b"null", "bad"),
    (b'{"broken":', "bad"),
    (b'{"utf8":"\xff\xfe"}', "bad"),
    (b"not json at all", "bad"),
    (b'{"long":"' + b"x" * 300 + b'"}', "obj"),
]


def _stream(rng: random.Random) -> tuple[bytes, list[tuple[bytes, str]]]:
    picked = [rng.choice(PIECES) for _ in range(rng.randint(0, 40))]
    data = b"\n".join(line for line, _ in picked)
    if picked and rng.random() < 0.7:
        data += b"\n"
    return data, picked


def _cut(data: bytes, rng: random.Random) -> list[bytes]:
    cuts = sorted(rng.sample(range(len(data) + 1), min(len(data) + 1, rng.randint(0, 12))))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def _expected(picked: list[tuple[bytes, str]], limit: int) -> tuple[list[Any], int, int]:
    import orjson

    objs, lines, skipped = [], 0, 0
    for line, kind in picked:
        if kind == "blank":
            continue
        lines += 1
        if kind == "bad" or len(line) > limit:
            skipped += 1
        else:
            objs.append(orjson.loads(line))
    return objs, lines, skipped


@pytest.mark.parametrize("limit", [10**9, 320, 40])
def test_any_chunking_gives_the_same_objects_and_counts(limit: int) -> None:
    rng = random.Random(limit)
    for _ in range(400):
        data, picked = _stream(rng)
        want, lines, skipped = _expected(picked, limit)
        chunks = _cut(data, rng)

        listed = JsonLinesParser(limit)
        got = [obj for chunk in chunks for obj in listed.feed(chunk)] + listed.close()
        assert got == want, chunks
        assert (listed.lines, listed.skipped) == (lines, skipped), chunks

        each = JsonLinesParser(limit)
        emitted: list[Any] = []
        for chunk in chunks:
            each.feed_each(chunk, emitted.append)
        emitted += each.close()
        assert emitted == want, chunks
        assert (each.lines, each.skipped) == (lines, skipped), chunks

        assert list(parse_lines(chunks, limit)) == want


def test_a_line_over_the_limit_is_dropped_as_it_arrives() -> None:
    parser = JsonLinesParser(max_line_bytes=1000)
    huge = b'{"x":"' + b"y" * 5000 + b'"}\n{"after":1}\n'
    got = [obj for i in range(0, len(huge), 100) for obj in parser.feed(huge[i : i + 100])]
    assert got == [{"after": 1}]
    assert (parser.lines, parser.skipped) == (2, 1)
    assert not parser._pending  # nothing of the long line is held


def test_each_object_is_handed_on_before_the_next_line_is_parsed() -> None:
    order: list[str] = []
    parser = JsonLinesParser()

    def emit(obj: dict[str, Any]) -> None:
        order.append(f"emit {obj['n']}")

    parser.feed_each(b'{"n":1}\n{"n":2}\n{"n"', emit)
    order.append("chunk done")
    parser.feed_each(b":3}\n", emit)
    assert order == ["emit 1", "emit 2", "chunk done", "emit 3"]


def test_bad_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="max_line_bytes"):
        JsonLinesParser(0)
