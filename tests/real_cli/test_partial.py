"""Text as it is written (``partial=True``) with the REAL claude and codex against the
fake model server, which streams the answer in pieces with gaps (``SCENARIO:chunks``,
``SCENARIO:think``) and stamps when it sent each: the deltas come in order, before the
server sent the last piece, joined equal to the whole message that follows; the run's
answer is the whole message; the transcript keeps the CLI's own lines and no delta record."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from coding_genesis import CodingGenesisAgent, Event
from coding_genesis.events import TextDeltaEvent, TextEvent, ThoughtDeltaEvent
from tests.fakes.model_server import RecordedRequest
from tests.real_cli.test_acp import acp_agent
from tests.real_cli.test_claude_codex import Rig, claude_rig, codex_rig, hermetic_env, rig
from tests.real_cli.test_gemini_opencode_qwen import MoreRig, more_rig

__all__ = ["claude_rig", "codex_rig", "hermetic_env", "rig"]

pytestmark = [pytest.mark.timeout(120), pytest.mark.anyio]

WORDS = "alpha beta gamma delta epsilon zeta eta theta"
PIECES = 4
TEE = Path(__file__).resolve().parents[1] / "fakes" / "tee_cli.py"
CHUNKS = f"SCENARIO:chunks {PIECES} 400 {WORDS}"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _answered(rig: Rig) -> RecordedRequest:
    chunked = [r for r in rig.server.model_requests() if r.chunks_sent]
    assert chunked, [r.scenario for r in rig.server.model_requests()]
    return chunked[-1]


def _check_deltas(events: list[tuple[float, Event]], text: str, sent: list[float]) -> None:
    """At least PIECES deltas, joined equal to the whole text event that follows them;
    the first received before the server sent its last piece."""
    deltas = [(t, e) for t, e in events if isinstance(e, TextDeltaEvent)]
    assert len(deltas) >= PIECES, [e.kind for _, e in events]
    last = max(i for i, (_, e) in enumerate(events) if isinstance(e, TextDeltaEvent))
    whole = [e for _, e in events[last:] if isinstance(e, TextEvent)]
    assert whole and whole[0].text == text
    assert "".join(e.text for _, e in deltas) == text
    assert deltas[0][0] < sent[-1], (deltas[0][0], sent)


async def test_a_sessions_deltas_come_live_in_order_and_join_to_the_message(rig: Rig) -> None:
    agent = rig.agent_with(partial=True, transcripts=str(rig.tmp / "t"))
    events: list[tuple[float, Event]] = []
    async with agent.session(partial=True) as session:
        async with session.stream(CHUNKS) as turn:
            async for event in turn:
                events.append((time.time(), event))
        result = turn.result
    assert result is not None and result.status == 0, result
    assert result.message == WORDS
    _check_deltas(events, WORDS, _answered(rig).chunks_sent)
    _check_transcript(Path(result.transcript or ""), rig.backend, WORDS)


def _check_transcript(where: Path, backend: str, text: str) -> None:
    """stdout.jsonl holds the CLI's own delta lines (its bytes, not our events);
    events.jsonl holds no delta."""
    said = (where / "stdout.jsonl").read_text()
    pieces = []
    for line in said.splitlines():
        obj = json.loads(line)
        if backend == "claude" and obj.get("type") == "stream_event":
            delta = obj["event"].get("delta") or {}
            if delta.get("type") == "text_delta":
                pieces.append(delta["text"])
        elif backend == "codex" and obj.get("method") == "item/agentMessage/delta":
            pieces.append(obj["params"]["delta"])
    assert "".join(pieces) == text, said[:2000]
    records = (where / "events.jsonl").read_text()
    assert '"text_delta"' not in records


async def test_a_run_streams_deltas(rig: Rig) -> None:
    """claude one-shot (``-p --include-partial-messages``); codex exec has no pieces,
    so the run is one turn of its app-server.  The CLI's stdout, copied on its way
    (``tests/fakes/tee_cli.py``), is the transcript's ``stdout.jsonl`` byte for byte."""
    copy = rig.tmp / "cli-stdout"
    agent = CodingGenesisAgent(
        rig.backend,
        cli_path=(sys.executable, str(TEE), str(copy), rig.cli),
        cwd=rig.work,
        env=rig.env(),
        timeout=60.0,
        grace=2.0,
        partial=True,
        transcripts=str(rig.tmp / "t"),
    )
    events: list[tuple[float, Event]] = []
    agent.subscribe(lambda event: events.append((time.time(), event)))
    response: Any = await agent.run(CHUNKS)
    assert response["status"] == 0, response
    assert response["message"] == WORDS
    _check_deltas(events, WORDS, _answered(rig).chunks_sent)
    _check_transcript(Path(response["transcript"]), rig.backend, WORDS)


async def test_thinking_streams_as_thought_deltas_apart(rig: Rig) -> None:
    agent = rig.agent_with(partial=True)
    prompt = f"SCENARIO:think 3 100 weighing it up | {WORDS}"
    async with agent.session(partial=True) as session, session.stream(prompt) as turn:
        events = [event async for event in turn]
    assert turn.result is not None and turn.result.status == 0, turn.result
    thoughts = [e.text for e in events if isinstance(e, ThoughtDeltaEvent)]
    texts = [e.text for e in events if isinstance(e, TextDeltaEvent)]
    assert "".join(thoughts) == "weighing it up" and len(thoughts) >= 3
    assert "".join(texts) == WORDS
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDeltaEvent))
    assert all(not isinstance(e, ThoughtDeltaEvent) for e in events[first_text:])


@pytest.fixture(params=["qwen", "gemini"])
def acp_rig(request: pytest.FixtureRequest, model_server: Any, tmp_path: Path) -> MoreRig:
    return more_rig(request.param, request, model_server, tmp_path)  # skips when not installed


async def test_an_acp_agents_chunks_are_deltas_and_one_text_event(acp_rig: MoreRig) -> None:
    """ACP's ``agent_message_chunk``s: a delta each with ``partial``, and one text
    event per message (the chunks joined), whatever ``partial`` says."""
    agent = acp_agent(acp_rig, partial=True)
    events: list[tuple[float, Event]] = []
    async with agent.session(partial=True) as session, session.stream(CHUNKS) as turn:
        async for event in turn:
            events.append((time.time(), event))
    result = turn.result
    assert result is not None and result.status == 0, result
    assert result.message == WORDS
    chunked = [r for r in acp_rig.server.model_requests() if r.chunks_sent]
    assert chunked
    _check_deltas(events, WORDS, chunked[-1].chunks_sent)
    assert [e.text for _, e in events if isinstance(e, TextEvent)] == [WORDS]


async def test_an_acp_agents_run_streams_deltas(acp_rig: MoreRig) -> None:
    """A run: qwen one-shot (``--include-partial-messages``, claude's lines); gemini's
    one-shot stream has no deltas, so the run is one live turn over ACP."""
    agent = acp_agent(acp_rig, partial=True)
    events: list[tuple[float, Event]] = []
    agent.subscribe(lambda event: events.append((time.time(), event)))
    response: Any = await agent.run(CHUNKS)
    assert response["status"] == 0, response
    assert response["message"] == WORDS
    chunked = [r for r in acp_rig.server.model_requests() if r.chunks_sent]
    _check_deltas(events, WORDS, chunked[-1].chunks_sent)
