"""The tolerant JSON-lines parser: the same objects and counts however the
stream is cut into chunks, through either entry point."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from coding_genesis._util.parser import (
    HEAD_BYTES,
    TAIL_BYTES,
    JsonLinesParser,
    edge_fields,
    head_fields,
    parse_lines,
    tail_fields,
)

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


@pytest.mark.slow
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


# -- what is read of a line that cannot be parsed ----------------------------------------


@pytest.mark.parametrize("limit", [10**9, 320, 40])
def test_each_skipped_line_is_handed_on_with_its_head_and_tail(limit: int) -> None:
    rng = random.Random(limit + 1)
    for _ in range(300):
        data, picked = _stream(rng)
        chunks = _cut(data, rng)
        skipped = [
            line for line, kind in picked if kind == "bad" or (kind == "obj" and len(line) > limit)
        ]
        handed: list[tuple[bytes, bytes]] = []

        def hand(
            head: bytes, tail: bytes, whole: bool, into: list[tuple[bytes, bytes]] = handed
        ) -> None:
            into.append((head, tail))

        parser = JsonLinesParser(limit, on_unparsed=hand)
        for chunk in chunks:
            parser.feed_each(chunk, lambda obj: None)
        parser.close()
        assert len(handed) == parser.skipped == len(skipped), chunks
        for line, (head, tail) in zip(skipped, handed, strict=True):
            assert head and line.startswith(head), (line, head)
            assert line.endswith(tail), (line, tail)
            if len(line) <= limit:  # read whole: both ends handed on
                assert (head, tail) == (line[:HEAD_BYTES], line[-TAIL_BYTES:])


def test_good_lines_cost_no_call() -> None:
    handed: list[bytes] = []
    parser = JsonLinesParser(on_unparsed=lambda head, tail, whole: handed.append(head))
    assert parser.feed(b'{"a":1}\n\n{"b":2}\n') == [{"a": 1}, {"b": 2}]
    assert handed == []


def deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.slow
def test_a_line_too_deep_to_parse_is_read_from_both_ends() -> None:
    line = (
        b'{"type":"control_request","request_id":"r-1","request":{"subtype":"can_use_tool",'
        b'"tool_name":"Workflow","input":{"args":' + deep(6000) + b'},"tool_use_id":"t"},'
        b'"after":"x \\" } ] { [","n":-1.5e3,"ok":true,"none":null}'
    )
    handed: list[tuple[bytes, bytes, bool]] = []
    parser = JsonLinesParser(
        on_unparsed=lambda head, tail, whole: handed.append((head, tail, whole))
    )
    assert parser.feed(line + b"\n") == []
    ((head, tail, whole),) = handed
    assert whole  # JSON too deep, not garbled
    assert len(head) == HEAD_BYTES and tail == line  # (shorter than TAIL_BYTES)
    fields = edge_fields(head, tail)
    assert fields == {
        ("type",): "control_request",
        ("request_id",): "r-1",
        ("request", "subtype"): "can_use_tool",
        ("request", "tool_name"): "Workflow",
        ("after",): 'x " } ] { [',
        ("n",): -1500.0,
        ("ok",): True,
        ("none",): None,
    }


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        (b'{"a":1,"b":{"c":"d","e":[{"f":1}],"g":2}', {("a",): 1, ("b", "c"): "d", ("b", "g"): 2}),
        (b'{"id":1234', {}),  # a number cut off by the head's end is not read
        (b'{"id":12,"s":"cut', {("id",): 12}),
        (b'{"a":{"b":{"c":{"d":{"e":1},"x":2}}}}', {("a", "b", "c", "x"): 2}),  # four deep at most
        (b"[1,2]", {}),
        (b'{"a" 1}', {}),
        (b"", {}),
    ],
)
def test_head_fields(text: bytes, fields: dict[tuple[str, ...], Any]) -> None:
    assert head_fields(text) == fields


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        (
            b'{"a":1,"b":{"c":"}"},"d":"\\\\","e":[1,"]"],"f":false}',
            {("a",): 1, ("d",): "\\", ("f",): False},
        ),
        (b'ut"},"x":1}', {("x",): 1}),  # the start cut off: what comes after it
        (b']]]]]]],"type":"result","n":3 }\n', {("type",): "result", ("n",): 3}),
        (b'12,"x":1}', {("x",): 1}),  # a number that may be cut off is not read
        (b'{"a":1', {}),  # no closing brace: not the end of an object
        (b'{"a":1]', {}),
        (b"", {}),
    ],
)
def test_tail_fields(text: bytes, fields: dict[tuple[str, ...], Any]) -> None:
    assert tail_fields(text) == fields


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_reading_the_ends_of_any_bytes_never_raises(data: bytes) -> None:
    assert isinstance(edge_fields(data, data), dict)


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=12,
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(), _VALUES, max_size=6))
def test_what_is_read_is_what_the_object_holds(obj: dict[str, Any]) -> None:
    import orjson

    text = orjson.dumps(obj)
    for path, value in head_fields(text).items():
        held: Any = obj
        for key in path:
            held = held[key]
        assert held == value, (path, held, value)
    for (key,), value in tail_fields(text).items():
        assert obj[key] == value
    # A whole object's scalar members are all read, from either end.
    top = {(k,): v for k, v in obj.items() if not isinstance(v, dict | list)}
    assert {k: v for k, v in head_fields(text).items() if len(k) == 1} == top
    assert tail_fields(text) == top


def test_a_garbled_or_cut_line_is_handed_on_as_not_whole() -> None:
    """A line that is no JSON (garbled, or cut short when the CLI died) is still read
    from its edges (a request it holds is refused), but marked: nothing else it seems to
    say is taken from it (a cut ``result`` is never an answer)."""
    handed: list[bool] = []
    parser = JsonLinesParser(on_unparsed=lambda head, tail, whole: handed.append(whole))
    parser.feed(b'{"type":"result","subtype":"success","result":"{\\"status\\": \\"par\n')
    parser.feed(b'{"type":"result","subtype":"success","result":"half')
    parser.close()
    assert handed == [False, False]
