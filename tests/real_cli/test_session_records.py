"""Sessions you can audit: every number and every decision of a live session recorded as
it happened, with the REAL claude and codex against the fake model server.

claude reports its *session's* running cost (``total_cost_usd``, ``modelUsage``) after
each turn, across ``--resume`` too; codex its thread's running usage (``codex exec
resume``).  Each turn and run carries its own share; a session's shares add up to the
CLI's own total.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_genesis import Budget, CodingGenesisAgent, Decision
from coding_genesis.approval import ApprovalRequest
from tests.real_cli.test_claude_codex import Rig, codex_rig, hermetic_env, rig
from tests.real_cli.test_structured_output import BAD, GOOD, Named

__all__ = ["codex_rig", "hermetic_env", "rig"]  # the real-CLI fixtures, active here too

pytestmark = [pytest.mark.timeout(120), pytest.mark.anyio]


GENESIS_RUN = (sys.executable, "-m", "coding_genesis._cli.main", "run", "--json", "-b", "claude")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def agent(rig: Rig, **settings: Any) -> CodingGenesisAgent:
    """The rig's agent, its transcripts kept (the records under audit)."""
    return rig.agent_with(transcripts=str(rig.tmp / "t"), **settings)


def claude_total(transcript: str | None) -> float:
    """claude's own running session cost, as its last result line says (the last
    attempt's: ``stdout-N.jsonl`` is attempt N's)."""
    assert transcript
    files = sorted(Path(transcript).glob("stdout*.jsonl"), key=lambda p: (len(p.name), p.name))
    lines = files[-1].read_text().splitlines()
    results = [json.loads(line) for line in lines if '"type":"result"' in line.replace(" ", "")]
    return float(results[-1]["total_cost_usd"])


@pytest.mark.parametrize("rig", ["claude"], indirect=True)
async def test_a_claude_sessions_turns_add_up_to_claudes_own_total(rig: Rig) -> None:
    async with agent(rig).session() as session:
        results = [await session.send_result("SCENARIO:text same") for _ in range(3)]
        total = claude_total(results[-1].transcript)
    costs = [r.cost_usd for r in results]
    assert all(c is not None and c > 0 for c in costs), costs
    assert costs[0] == pytest.approx(costs[1]) == pytest.approx(costs[2])  # one turn's share each
    assert sum(c or 0 for c in costs) == pytest.approx(total)
    assert session.cost_usd == pytest.approx(total)
    for r in results:
        assert r.cost_source == "reported"
        assert (r.metering or {})["tokens"]["total"] == 19, r.metering  # 12 in + 7 out, this turn's


@pytest.mark.parametrize("rig", ["claude"], indirect=True)
async def test_a_budget_between_two_and_three_turns_stops_at_the_third(rig: Rig) -> None:
    async with agent(rig).session() as probe:
        one = (await probe.send_result("SCENARIO:text same")).cost_usd
    assert one
    budget = Budget(max_cost_usd=2.5 * one, per_run=True)
    async with agent(rig, budget=budget).session() as session:
        first = await session.send_result("SCENARIO:text same")
        second = await session.send_result("SCENARIO:text same")
        assert (first.status, second.status) == (0, 0), second.message
        third = await session.send_result("SCENARIO:text same")
    assert third.error == "budget_exceeded", third.message


@pytest.mark.parametrize("rig", ["claude", "codex"], indirect=True)
async def test_a_resumed_one_shot_run_is_priced_once(rig: Rig) -> None:
    a = agent(rig)
    first = await a.run_result("SCENARIO:text one")
    again = await a.run_result("SCENARIO:text two", resume=first.session_id)
    assert again.status == 0, again.message
    assert again.usage and again.usage["input_tokens"] == 12, again.usage  # not 24
    assert (again.metering or {})["tokens"]["total"] == 19
    if rig.backend == "claude":
        assert again.cost_usd == pytest.approx(first.cost_usd)
        assert claude_total(again.transcript) == pytest.approx(2 * (first.cost_usd or 0))


@pytest.mark.parametrize("rig", ["claude"], indirect=True)
async def test_a_structured_output_retry_is_priced_once(rig: Rig) -> None:
    fixed = await agent(rig).run_result(f"SCENARIO:jsonfix {BAD} {GOOD}", output_schema=Named)
    assert fixed.status == 0 and fixed.attempts == 2, fixed.message
    # the retry resumed the session: claude's last total counts both attempts, once each
    assert fixed.cost_usd == pytest.approx(claude_total(fixed.transcript))


async def test_a_codex_session_is_priced_by_the_threads_model(codex_rig: Rig) -> None:
    async with agent(codex_rig).session() as session:
        r = await session.send_result("SCENARIO:text priced")
    assert r.model, r
    assert r.cost_source == "computed" and r.cost_usd, (r.cost_usd, r.warnings)
    assert not any("no price" in w for w in r.warnings), r.warnings


async def test_codex_records_a_changed_input_as_not_applied(codex_rig: Rig) -> None:
    def approver(request: ApprovalRequest) -> Decision:
        return Decision.allow({**request.input, "command": "echo changed"})

    async with agent(codex_rig, approver=approver).session() as session:
        r = await session.send_result("SCENARIO:bash echo asked")
    (record,) = [a for a in r.approvals if a["kind"] == "command"]
    assert record["allowed"] is True
    assert "cannot change a call's input" in record["not_applied"], record


async def test_an_interrupt_withdraws_a_pending_question_on_record(rig: Rig) -> None:
    pondering = anyio.Event()

    async def ponder(request: ApprovalRequest) -> Decision:
        pondering.set()
        await anyio.sleep(600)
        return Decision.allow()

    async with agent(rig, approver=ponder, approval_timeout=600).session() as session:
        results: list[Any] = []
        assert not session.turn_running
        async with anyio.create_task_group() as tg:

            async def turn() -> None:
                results.append(await session.send_result("SCENARIO:write pending.txt x"))

            tg.start_soon(turn)
            with anyio.fail_after(60):
                await pondering.wait()
            assert session.turn_running
            assert await session.interrupt() is True
        assert not session.turn_running
    (withdrawn,) = [a for a in results[0].approvals if a.get("withdrawn")]
    assert (withdrawn["allowed"], withdrawn["source"]) == (False, "withdrawn")
    assert not (rig.work / "pending.txt").exists()


@pytest.mark.parametrize("rig", ["claude"], indirect=True)
async def test_claudes_session_id_is_known_at_open(rig: Rig) -> None:
    async with agent(rig).session() as session:
        opened = session.session_id
        assert opened
        r = await session.send_result("SCENARIO:text hi")
    assert r.session_id == opened == session.session_id


@pytest.mark.parametrize("rig", ["claude"], indirect=True)
def test_genesis_run_resume_in_a_new_process_is_priced_once(rig: Rig) -> None:
    """claude carries its running cost across ``--resume`` into a new process:
    `genesis run --resume` reads what the session cost from the run log first."""
    env = {
        **rig.env(),
        "PATH": os.environ.get("PATH", ""),
        "GENESIS_RUN_LOG": str(rig.tmp / "runs.jsonl"),
        "GENESIS_TRANSCRIPTS": str(rig.tmp / "t"),
        "GENESIS_LEDGER": str(rig.tmp / "ledger"),
    }

    def genesis(*argv: str) -> dict[str, Any]:
        done = subprocess.run(
            [*GENESIS_RUN, "--cli-path", rig.cli, "--cwd", str(rig.work), *argv],
            env=env,
            capture_output=True,
            timeout=90,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()
        return dict(json.loads(done.stdout))

    first = genesis("SCENARIO:text one")
    second = genesis("--resume", first["session_id"], "SCENARIO:text two")
    assert second["cost_usd"] == pytest.approx(first["cost_usd"])
    assert claude_total(second["transcript"]) == pytest.approx(2 * first["cost_usd"])


async def test_the_opening_exchange_is_in_the_sessions_own_transcript(rig: Rig) -> None:
    a = agent(rig)
    async with a.session() as session:
        r = await session.send_result("SCENARIO:text hi")
    own = rig.tmp / "t" / session.key
    sent = (own / "stdin.jsonl").read_text()
    said = (own / "stdout.jsonl").read_text()
    if rig.backend == "claude":
        assert '"subtype":"initialize"' in sent.replace(" ", ""), sent
        assert '"control_response"' in said.replace(" ", ""), said
    else:
        assert '"method":"initialize"' in sent.replace(" ", "") and "thread/start" in sent
        assert '"thread"' in said
    assert "SCENARIO:text hi" not in sent  # the turn's prompt is the turn's
    assert "SCENARIO:text hi" in (Path(r.transcript or "") / "stdin.jsonl").read_text()
