"""Step definitions of text as it is written (tests/features/streaming.feature):
``partial=True`` on the embedded failer, which writes claude's ``stream_event``
pieces when told ``--include-partial-messages``.  Steps are synchronous: the
session's coroutines go through the anyio blocking portal fixture."""

from __future__ import annotations

import time
from typing import Any

from pytest_bdd import given, parsers, then, when

from coding_genesis import Event
from coding_genesis.errors import AgentUsageError
from coding_genesis.events import TextDeltaEvent, TextEvent
from tests.steps.session_steps import Live


class Streamed:
    """What one streamed turn or run delivered."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.result: Any = None
        self.refused: str | None = None
        #: (when heard, the line) of on_stderr.
        self.lines: list[tuple[float, str]] = []


def _streamed(live: Live) -> Streamed:
    found = getattr(live, "streamed", None)
    if found is None:
        found = Streamed()
        live.streamed = found  # type: ignore[attr-defined]
    return found


def _stream(live: Live, prompt: str, **options: Any) -> None:
    assert live.session is not None, "no session is open"
    seen = _streamed(live)
    session = live.session

    async def go() -> None:
        async with session.stream(prompt, **options) as turn:
            async for event in turn:
                seen.events.append(event)
        seen.result = turn.result

    try:
        live.portal.call(go)
    except AgentUsageError as exc:
        seen.refused = str(exc)


@given(parsers.parse('a two-way failer agent whose environment holds the secret "{secret}"'))
def failer_with_secret(live: Live, secret: str) -> None:
    live.settings["env"] = {"MY_SERVICE_API_KEY": secret}


@given("a two-way failer agent that hands its stderr lines to a callable")
def failer_with_on_stderr(live: Live) -> None:
    heard = _streamed(live).lines
    live.settings["on_stderr"] = lambda line: heard.append((time.time(), line))


@when("a session is opened with partial")
def open_partial(live: Live) -> None:
    live.open(partial=True)


@when(parsers.parse('the session streams "{prompt}"'))
def stream_turn(live: Live, prompt: str) -> None:
    _stream(live, prompt)


@when(parsers.parse('the session streams "{prompt}" with partial'))
def stream_partial(live: Live, prompt: str) -> None:
    _stream(live, prompt, partial=True)


@when(parsers.parse('a run asks "{prompt}" with partial'))
def run_partial(live: Live, prompt: str) -> None:
    seen = _streamed(live)
    agent = live.build()
    agent.subscribe(seen.events.append)
    seen.result = live.portal.call(lambda: agent.run(prompt, partial=True))


def _deltas_then_text(events: list[Event], n: int) -> None:
    deltas = [e for e in events if isinstance(e, TextDeltaEvent)]
    assert len(deltas) == n, [e.kind for e in events]
    last_delta = max(i for i, e in enumerate(events) if isinstance(e, TextDeltaEvent))
    texts = [e for e in events[last_delta:] if isinstance(e, TextEvent)]
    assert texts, "no text event followed the deltas"
    assert "".join(d.text for d in deltas) == texts[0].text
    seqs = [d.seq for d in deltas]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


@then(
    parsers.parse(
        "the streamed turn had {n:d} text deltas, in order, joined equal to the text that follows"
    )
)
def turn_deltas(live: Live, n: int) -> None:
    _deltas_then_text(_streamed(live).events, n)


@then(
    parsers.parse("the run had {n:d} text deltas, in order, joined equal to the text that follows")
)
def run_deltas(live: Live, n: int) -> None:
    seen = _streamed(live)
    assert seen.result["status"] == 0, seen.result
    _deltas_then_text(seen.events, n)


@then("the streamed turn answered with status 0, its answer the whole text")
def turn_answer(live: Live) -> None:
    seen = _streamed(live)
    assert seen.result is not None and seen.result.status == 0, seen.result
    texts = [e for e in seen.events if isinstance(e, TextEvent)]
    assert seen.result.message == texts[-1].text


@then(parsers.parse('it was refused with "{words}"'))
def refused(live: Live, words: str) -> None:
    seen = _streamed(live)
    assert seen.refused is not None and words in seen.refused, seen.refused


@then(parsers.parse('no text delta holds "{secret}", nor does their join'))
def no_secret(live: Live, secret: str) -> None:
    deltas = [e for e in _streamed(live).events if isinstance(e, TextDeltaEvent)]
    assert deltas
    assert all(secret not in d.text for d in deltas)
    joined = "".join(d.text for d in deltas)
    assert secret not in joined and "[REDACTED]" in joined


@then(parsers.parse("the callable heard {n:d} lines, each before the next was written"))
def heard_lines(live: Live, n: int) -> None:
    lines = [(t, x) for t, x in _streamed(live).lines if x.startswith("stderr line")]
    assert len(lines) == n, lines
    written = [float(x.rsplit(" ", 1)[1]) for _, x in lines]
    assert all(lines[i][0] < written[i + 1] for i in range(n - 1)), (lines, written)
