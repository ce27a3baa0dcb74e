"""A live session's context with the REAL claude and codex against the fake model
server: ``session.context_usage()`` after a turn (claude: the ``get_context_usage``
control call; codex: its last ``thread/tokenUsage/updated``) and
``session.compact()`` (claude: a ``/compact`` turn; codex: ``thread/compact/start``,
whose work is a turn codex begins by itself): the result carries a
``CompactionEvent`` and the next model request is shorter than the one before."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from tests.real_cli.test_claude_codex import Recorder, Rig, hermetic_env, rig
from tests.real_cli.test_sessions import session_agent

__all__ = ["hermetic_env", "rig"]

pytestmark = [pytest.mark.timeout(150), pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _size(body: dict[str, Any] | None) -> int:
    """What a model request carries of the conversation (claude's ``messages``,
    codex's ``input``), in bytes of JSON."""
    body = body or {}
    return len(json.dumps(body.get("messages") or body.get("input") or []))


async def test_context_usage_after_a_turn(rig: Rig) -> None:
    agent = session_agent(rig)
    async with agent.session() as session:
        turn = await session.send_result("SCENARIO:text alpha")
        assert turn.status == 0, turn.message
        with anyio.fail_after(30):
            usage = await session.context_usage()
    assert usage.used > 0, usage
    if rig.backend == "codex":
        # The fake answers 12 input and 7 output tokens a request.
        assert usage.used == 19 and usage.source == "codex thread/tokenUsage/updated", usage
    else:
        # claude's "summary" estimates the whole context (its system prompt and tools
        # too: 14185 of 1000000 measured against the fake), not the fake's 12 + 7.
        assert usage.source == "claude get_context_usage" and usage.size, usage
        assert 19 < usage.used < usage.size, usage


async def test_compact_shortens_the_next_request(rig: Rig) -> None:
    agent = session_agent(rig)
    events = Recorder(agent)
    async with agent.session() as session:
        for word in ("alpha", "beta", "gamma"):
            turn = await session.send_result(f"SCENARIO:text {word} " + "padding " * 200)
            assert turn.status == 0, turn.message
        before = _size(rig.server.model_requests()[-1].body)
        with anyio.fail_after(90):
            compacted = await session.compact()
        assert compacted.status == 0, compacted.message
        after_turn = await session.send_result("SCENARIO:text delta")
        assert after_turn.status == 0 and after_turn.message == "delta", after_turn.message
    (compaction,) = [e for e in events.of("compaction") if e["run_id"] == compacted.run_id]
    assert compaction["trigger"] == "manual", compaction
    after = _size(rig.server.model_requests()[-1].body)
    assert after < before, (after, before)
    if rig.backend == "codex":
        assert compacted.trigger == "cli"
        assert [r.trigger for r in session.results] == ["user"] * 3 + ["cli", "user"]


def _history(body: dict[str, Any] | None) -> str:
    """The conversation a model request carries, as text."""
    return json.dumps((body or {}).get("messages") or (body or {}).get("input") or [])


async def test_a_fork_carries_the_history_and_the_original_goes_on_unchanged(rig: Rig) -> None:
    agent = session_agent(rig)
    async with agent.session() as session:
        alpha = await session.send_result("SCENARIO:text alpha-said")
        beta = await session.send_result("SCENARIO:text beta-said")
        assert alpha.status == 0 and beta.status == 0, (alpha.message, beta.message)
        assert alpha.turn_id and beta.turn_id and alpha.turn_id != beta.turn_id
        async with session.fork() as forked:
            on_fork = await forked.send_result("SCENARIO:text fork-said")
            assert on_fork.status == 0, on_fork.message
            fork_request = _history(rig.server.model_requests()[-1].body)
        assert "alpha-said" in fork_request and "beta-said" in fork_request, fork_request
        assert on_fork.session_id and on_fork.session_id != session.session_id
        again = await session.send_result("SCENARIO:text gamma-said")
        assert again.status == 0 and again.session_id == beta.session_id, again.message
        original = _history(rig.server.model_requests()[-1].body)
        assert "beta-said" in original and "fork-said" not in original, original
        async with session.fork(at=alpha.turn_id) as cut:
            at_alpha = await cut.send_result("SCENARIO:text cut-said")
            assert at_alpha.status == 0, at_alpha.message
            cut_request = _history(rig.server.model_requests()[-1].body)
        assert "alpha-said" in cut_request and "beta-said" not in cut_request, cut_request
