"""Nothing between turns goes unrecorded (issue "approvals that hold"), with the REAL
claude against the fake model server.

The finding: claude 2.1.330 runs subagents in the background and re-invokes itself when
they finish, after the turn's result; such a Write reached the approver and happened,
and was in no result, event or transcript.  Measured: with
``CLAUDE_CODE_DISABLE_BACKGROUND_TASKS`` (which we now set) claude drops
``run_in_background`` and the subagent runs inside the turn; with it turned off again
(``env=``), what claude does between turns is a turn of its own (``trigger="cli"``).

The subagent's prompt is ``SCENARIO:later 3 write ...``: the fake model answers its
first request 3 s late, so its Write comes after the main turn's result.
"""

from __future__ import annotations

import json

import anyio
import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis.approval import ApprovalRequest, Decision
from coding_genesis.run_events import ApprovalEvent
from tests.real_cli.test_claude_codex import Rig, hermetic_env, rig

__all__ = ["hermetic_env", "rig"]  # the real-CLI fixtures, active here too

pytestmark = [pytest.mark.timeout(120), pytest.mark.anyio, pytest.mark.slow]

BACKGROUND = {
    "description": "writes later",
    "prompt": "SCENARIO:later 3 write late.txt from the background",
    "subagent_type": "general-purpose",
    "run_in_background": True,
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _agent(rig: Rig, asked: list[ApprovalRequest], **env: str) -> CodingGenesisAgent:
    def approver(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return Decision.allow()

    return CodingGenesisAgent(
        rig.backend,
        cli_path=rig.cli,
        cwd=rig.work,
        env=rig.env(**env),
        timeout=60.0,
        grace=2.0,
        approver=approver,
        transcripts=str(rig.tmp / "t"),
    )


@pytest.mark.parametrize("rig", ["claude"], indirect=True)
async def test_a_background_subagent_write_is_a_turn_of_its_own(rig: Rig) -> None:
    asked: list[ApprovalRequest] = []
    agent = _agent(rig, asked, CLAUDE_CODE_DISABLE_BACKGROUND_TASKS="0")
    events: list[ApprovalEvent] = []
    agent.subscribe(lambda e: events.append(e) if isinstance(e, ApprovalEvent) else None)
    async with agent.session() as session:
        first = await session.send_result("SCENARIO:tool Agent " + json.dumps(BACKGROUND))
        assert first.status == 0, first.message
        assert [a["tool"] for a in first.approvals] == ["Agent"]  # the write is not yet asked
        with anyio.fail_after(60):
            later = await session.cli_turn()
        assert later.trigger == "cli", later
        writes = [a for a in later.approvals if a["tool"] == "Write"]
        assert writes and writes[0]["allowed"] is True, later.approvals
        assert (rig.work / "late.txt").read_text() == "from the background\n"
        assert later.transcript
        said = (anyio.Path(later.transcript) / "stdout.jsonl").read_text(encoding="utf-8")
        assert "late.txt" in await said
    write_asks = [r for r in asked if r.tool == "Write"]
    assert write_asks and write_asks[0].run_id == later.run_id
    assert any(e.tool == "Write" and e.run_id == later.run_id for e in events)


@pytest.mark.parametrize("rig", ["claude"], indirect=True)
async def test_by_default_the_subagent_runs_inside_the_turn(rig: Rig) -> None:
    asked: list[ApprovalRequest] = []
    agent = _agent(rig, asked)
    async with agent.session() as session:
        first = await session.send_result("SCENARIO:tool Agent " + json.dumps(BACKGROUND))
        assert first.status == 0, first.message
        assert "Write" in [a["tool"] for a in first.approvals], first.approvals
        assert (rig.work / "late.txt").exists()
        agent_input = next(r.input for r in asked if r.tool == "Agent")
        assert "run_in_background" not in agent_input  # claude dropped it
        assert [r.trigger for r in session.results] == ["user"]
