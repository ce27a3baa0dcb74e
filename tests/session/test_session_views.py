"""What a live session looks like from outside: its spans, its redacted events, its
ledger record, its budget (against the fake two-way CLI)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coding_genesis import Budget
from coding_genesis.approval import ApprovalRequest
from coding_genesis.run_events import ApprovalEvent
from tests.otel_support import Spans, spans
from tests.session.twoway import agent

__all__ = ["spans"]

pytestmark = pytest.mark.anyio


async def test_a_session_span_with_a_child_span_per_turn_and_per_tool_call(
    tmp_path: Path, spans: Spans
) -> None:
    a = agent(tmp_path, approver=lambda r: True)
    async with a.session() as s:
        await s.send("TEXT one")
        await s.send('ASK Bash {"command": "echo"}')
    session = spans.one("session ")
    assert session.attributes is not None
    assert session.attributes["coding_genesis.turns"] == 2
    assert session.attributes["gen_ai.conversation.id"] == "sess-1"
    turns = [c for c in spans.children(session) if c.name.startswith("invoke_agent")]
    assert len(turns) == 2
    assert [t.attributes and t.attributes["coding_genesis.turn"] for t in turns] == [1, 2]
    tools = [s for s in spans.all() if s.name.startswith("execute_tool")]
    assert tools, [s.name for s in spans.all()]
    assert all(t.context.trace_id == session.context.trace_id for t in tools)


async def test_the_approver_gets_the_raw_input_events_get_it_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-live-abcdefghijklmnop1234"
    seen: list[ApprovalRequest] = []
    events: list[ApprovalEvent] = []

    def approver(request: ApprovalRequest) -> bool:
        seen.append(request)
        return True

    a = agent(
        tmp_path,
        approver=approver,
        env={"MY_API_KEY": secret},
        transcripts=str(tmp_path / "t"),
    )
    a.subscribe(lambda e: events.append(e) if isinstance(e, ApprovalEvent) else None)
    async with a.session() as s:
        r = await s.send_result(f'ASK Bash {{"command": "curl -H {secret}"}}')
    assert secret in str(seen[0].input["command"])
    assert events and secret not in str(events[0].to_dict())
    assert "[REDACTED]" in str(events[0].to_dict())
    transcript = Path(r.transcript or "")
    for name in os.listdir(transcript):
        assert secret not in (transcript / name).read_text(), name


async def test_an_open_session_is_in_the_ledger_until_it_closes(tmp_path: Path) -> None:
    a = agent(tmp_path)
    async with a.session() as s:
        await s.send("TEXT hello")
        assert any(s.key in name for name in os.listdir(tmp_path / "ledger"))
    assert not any(s.key in name for name in os.listdir(tmp_path / "ledger"))


@pytest.mark.slow
async def test_a_per_run_budget_counts_the_whole_session(tmp_path: Path) -> None:
    a = agent(tmp_path, budget=Budget(max_tokens=50, per_run=True))
    async with a.session() as s:
        first = await s.send_result("TEXT one")  # 19 tokens
        second = await s.send_result("TEXT two")  # 38
        third = await s.send_result("TEXT three")  # 57: over, mid-turn
    assert first.status == 0 and second.status == 0
    assert third.status == 1 and third.error == "budget_exceeded", third.message
    assert s.closed
    b = agent(tmp_path, budget=Budget(max_tokens=50, per_run=True))
    for _ in range(3):  # one-shot runs: each its own account
        assert (await b.run("TEXT x", approver=lambda r: True))["status"] == 0
