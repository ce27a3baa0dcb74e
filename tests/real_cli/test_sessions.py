"""Live sessions and approvals with the REAL claude and codex against the fake model server.

Each test holds one session with the installed CLI (claude's stream-json control protocol,
codex's app-server), as a user would: approvals of a write (allowed, refused, changed), an
approver that never answers or raises, the path approver and a symlink, three turns with
their usage, an interrupt in the middle of a long command, steer (codex), resume, a budget
crossed mid-turn, and a runner SIGKILLed with a session open.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from coding_genesis import Budget, CodingGenesisAgent, Decision, writes_under
from coding_genesis.approval import ApprovalRequest
from tests.fakes.model_server import FakeModelServer, sleep_command
from tests.real_cli.test_claude_codex import Rig, codex_rig, hermetic_env, rig
from tests.session.interrupting import interrupted_turn, polled

__all__ = ["codex_rig", "hermetic_env", "rig"]  # the real-CLI fixtures, active here too

pytestmark = [pytest.mark.timeout(120), pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the protocol is the subject here; both loops run tests/session


def session_agent(rig: Rig, **settings: Any) -> CodingGenesisAgent:
    settings.setdefault("timeout", 60.0)
    settings.setdefault("grace", 2.0)
    return CodingGenesisAgent(
        rig.backend, cli_path=rig.cli, cwd=rig.work, env=rig.env(), **settings
    )


def marked(key: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("GENESIS_RUN_ID") == key and proc.status() != "zombie":
                found.append(proc)
        except psutil.Error:
            continue
    return found


def sleepers(key: str) -> list[psutil.Process]:
    """The fake model's long ``python3 -c 'import time; time.sleep(...)'`` tools, of the
    session ``key`` (its processes carry the marker; other tests' sleepers do not count)."""
    found = []
    for proc in marked(key):
        try:
            cmdline = " ".join(proc.cmdline())
        except psutil.Error:
            continue
        if "time.sleep(600)" in cmdline and "python" in cmdline and proc.pid != os.getpid():
            found.append(proc)
    return found


async def test_approve_refuse_and_change_a_write(rig: Rig) -> None:
    def approver(request: ApprovalRequest) -> Decision:
        assert request.kind == "write" and request.paths, request
        name = Path(request.paths[0]).name
        if name == "refused.txt":
            return Decision.deny("not this file")
        if name == "changed.txt" and rig.backend == "claude":
            return Decision.allow({**request.input, "content": "changed by the approver\n"})
        return Decision.allow()

    agent = session_agent(rig, approver=approver)
    async with agent.session() as session:
        allowed = await session.send_result("SCENARIO:write allowed.txt hello")
        assert allowed.status == 0, allowed.message
        assert (rig.work / "allowed.txt").read_text() == "hello\n"
        assert allowed.approvals[0]["allowed"] is True
        refused = await session.send_result("SCENARIO:write refused.txt nope")
        assert refused.status == 0, refused.message  # the turn goes on; the model is told
        assert not (rig.work / "refused.txt").exists()
        assert refused.approvals[0]["allowed"] is False
        if rig.backend == "claude":
            changed = await session.send_result("SCENARIO:write changed.txt original")
            assert changed.status == 0, changed.message
            assert (rig.work / "changed.txt").read_text() == "changed by the approver\n"
        ended = await session.send_result("SCENARIO:write ended.txt x")
        assert ended.status == 0
    agent2 = session_agent(rig, approver=lambda r: Decision.deny("stop", end_turn=True))
    async with agent2.session() as session:
        stopped = await session.send_result("SCENARIO:write stopped.txt x")
        assert stopped.status == 1 and stopped.error == "permission_denied", stopped.message
        assert not (rig.work / "stopped.txt").exists()
        again = await session.send_result("SCENARIO:text still here")
        assert again.status == 0 and again.message == "still here"


async def test_unanswered_and_raising_approvers_deny(rig: Rig) -> None:
    async def never(request: ApprovalRequest) -> bool:
        await anyio.sleep(600)
        return True

    agent = session_agent(rig, approver=never, approval_timeout=1.0)
    async with agent.session() as session:
        started = time.monotonic()
        r = await session.send_result("SCENARIO:write late.txt x")
        assert time.monotonic() - started < 30
        assert r.approvals[0]["source"] == "timeout", r.approvals
        assert not (rig.work / "late.txt").exists()

    def boom(request: ApprovalRequest) -> bool:
        raise ValueError("approver bug")

    agent = session_agent(rig, approver=boom)
    async with agent.session() as session:
        r = await session.send_result("SCENARIO:write boom.txt x")
        assert r.approvals[0]["source"] == "error" and "approver bug" in r.approvals[0]["error"]
        assert not (rig.work / "boom.txt").exists()


async def test_the_path_approver_refuses_a_write_through_a_symlink(rig: Rig) -> None:
    outside = rig.tmp / "outside"
    outside.mkdir()
    (rig.work / "link").symlink_to(outside)
    agent = session_agent(rig, approver=writes_under(rig.work))
    async with agent.session() as session:
        escaped = await session.send_result("SCENARIO:write link/escape.txt x")
        assert escaped.approvals[0]["allowed"] is False, escaped.approvals
        assert not (outside / "escape.txt").exists()
        inside = await session.send_result("SCENARIO:write inside.txt y")
        assert inside.approvals[0]["allowed"] is True
        assert (rig.work / "inside.txt").exists()


async def test_three_turns_with_usage_per_turn(rig: Rig) -> None:
    agent = session_agent(rig)
    async with agent.session() as session:
        results = [await session.send_result(f"SCENARIO:text answer {n}") for n in range(3)]
        pids = {r.pid for r in results}
    assert [r.message for r in results] == ["answer 0", "answer 1", "answer 2"]
    assert [r.turn for r in results] == [1, 2, 3]
    assert len(pids) == 1
    for r in results:
        assert (r.usage or {}).get("input_tokens") == 12, r.usage
        assert (r.usage or {}).get("output_tokens") == 7, r.usage
    assert session.usage["input_tokens"] == 36
    assert marked(session.key) == []


async def test_interrupt_mid_command_leaves_no_process_and_the_next_turn_works(
    rig: Rig,
) -> None:
    agent = session_agent(rig, approver=lambda r: True)
    async with agent.session() as session:
        started = polled(
            lambda: sleepers(session.key), "the long command never started", tries=300, every=0.1
        )
        interrupted = await interrupted_turn(session, "SCENARIO:sleep 600", started)
        assert interrupted.status == 130 and interrupted.error == "interrupted"
        for _ in range(50):
            if not sleepers(session.key):
                break
            await anyio.sleep(0.1)
        assert sleepers(session.key) == []
        after = await session.send_result("SCENARIO:text after the interrupt")
        assert after.status == 0 and after.message == "after the interrupt"
    assert marked(session.key) == []
    assert sleep_command(600) in str(interrupted.model_dump()) or interrupted.tool_calls >= 1


async def test_steer_adds_input_to_the_running_turn(codex_rig: Rig) -> None:
    agent = session_agent(codex_rig, approver=lambda r: True)
    async with agent.session() as session:
        results: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def turn() -> None:
                results.append(await session.send_result("SCENARIO:sleep 2"))

            tg.start_soon(turn)
            with anyio.fail_after(30):
                await session.wait_for_turn()
            await anyio.sleep(0.5)
            await session.steer("SCENARIO:text steered answer")
        assert results[0].status == 0, results[0].message
        assert results[0].message == "steered answer"


async def test_resume_a_closed_session(rig: Rig) -> None:
    agent = session_agent(rig)
    async with agent.session() as first:
        await first.send("SCENARIO:text remember the word tangerine")
        session_id = first.session_id
    assert session_id
    rig.server.clear()
    async with agent.session(resume=session_id) as second:
        r = await second.send_result("SCENARIO:text and now?")
        assert r.status == 0 and r.message == "and now?"
        assert second.session_id == session_id
    bodies = str([req.body for req in rig.server.model_requests()])
    assert "tangerine" in bodies  # the history went with the resumed session


async def test_a_budget_crossed_mid_turn_stops_the_session(rig: Rig) -> None:
    # per_run: the session is the run a limit is set for (its turns share the account)
    agent = session_agent(rig, budget=Budget(max_tool_calls=1, per_run=True))
    async with agent.session() as session:
        first = await session.send_result("SCENARIO:bash echo zero")
        assert first.status == 0, first.message
        spent = await session.send_result("SCENARIO:bash echo one")
        assert spent.status == 1 and spent.error == "budget_exceeded", spent.message
        assert session.closed
    assert marked(session.key) == []


def test_the_runner_sigkilled_with_a_session_open_leaves_nothing(
    rig: Rig, model_server: FakeModelServer
) -> None:
    ledger = rig.tmp / "ledger"
    script = f"""
import anyio, sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from coding_genesis import CodingGenesisAgent
async def main():
    a = CodingGenesisAgent({rig.backend!r}, cli_path={rig.cli!r}, cwd={str(rig.work)!r},
        env={rig.env()!r}, ledger={str(ledger)!r}, approver=lambda r: True, timeout=120)
    async with a.session() as s:
        print(s.key, flush=True)
        await s.send("SCENARIO:sleep 600")
anyio.run(main)
"""
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE) as runner:
        assert runner.stdout is not None
        key = runner.stdout.readline().decode().strip()
        deadline = time.monotonic() + 60
        while not sleepers(key) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sleepers(key), "the long command never started"
        runner.kill()
        runner.wait()
    later = CodingGenesisAgent("failer", cwd=str(rig.work), ledger=str(ledger))
    later.run_sync("hello")  # its first run sweeps the ledger
    deadline = time.monotonic() + 20
    while (marked(key) or sleepers(key)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marked(key) == [] and sleepers(key) == []
