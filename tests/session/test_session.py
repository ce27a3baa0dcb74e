"""Live sessions through the machinery, driven against a real fake CLI
(``tests/fakes/twoway_cli.py``): states, turns, approvals, interrupt, the
protocol's failure modes, and that nothing of a session outlives it."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis.approval import ApprovalRequest, Decision
from coding_genesis.errors import AgentUsageError
from coding_genesis.events import ResultEvent, TextEvent
from coding_genesis.run_events import ApprovalEvent, StateEvent
from coding_genesis.status import AgentState
from tests.session.twoway import TwoWayBackend, agent, one_way_backend

pytestmark = pytest.mark.anyio


def session_processes(key: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if (
                proc.environ().get("GENESIS_RUN_ID") == key
                and proc.status() != psutil.STATUS_ZOMBIE
            ):
                found.append(proc)
        except psutil.Error:
            continue
    return found


@pytest.mark.slow
async def test_three_turns_in_one_process_with_usage_per_turn(tmp_path: Path) -> None:
    a = agent(tmp_path)
    states: list[str] = []
    a.subscribe(lambda e: states.append(e.state) if isinstance(e, StateEvent) else None)
    async with a.session() as s:
        pids = set()
        for n in range(3):
            r = await s.send(f"TEXT turn {n}")
            assert r["status"] == 0, r
            assert r["message"] == f"turn {n}"
            assert (r["usage"] or {})["input_tokens"] == 12
            pids.add(r["pid"])
            assert a.state is AgentState.READY
        assert len(pids) == 1  # one process for every turn
        assert s.turns == 3
        assert s.session_id == "sess-1"
        assert s.usage["input_tokens"] == 36
        key = s.key
        assert session_processes(key)
    assert s.closed
    assert session_processes(key) == []
    assert states.count("BUSY") == 3


@pytest.mark.slow
async def test_a_prompt_larger_than_the_pipe_goes_whole_and_in_order(tmp_path: Path) -> None:
    # Written at once as far as the pipe takes it, the rest by the writer; the
    # next line waits behind that rest.
    big = "y" * 3_000_000
    async with agent(tmp_path).session() as s:
        first = await s.send_result(f"TEXT {big}")
        second = await s.send_result("TEXT after")
    assert first.status == 0 and first.message == big, first.message[-200:]
    assert second.status == 0 and second.message == "after", second.message


@pytest.mark.slow
async def test_busy_during_a_turn_and_send_after_close_raises(tmp_path: Path) -> None:
    a = agent(tmp_path)
    async with a.session() as s:
        async with anyio.create_task_group() as tg:
            results: list[Any] = []

            async def slow() -> None:
                results.append(await s.send("SLEEP 1"))

            tg.start_soon(slow)
            await anyio.sleep(0.4)
            assert a.state is AgentState.BUSY
            second = await s.send("TEXT again")
            assert second["status"] == 75 and second["error"] == "busy"
            run = await a.run("TEXT one-shot")
            assert run["status"] == 75
        assert results[0]["status"] == 0
        second_session = a.session()  # only one open session at a time
        with pytest.raises(AgentUsageError, match="already has an open session"):
            await second_session.__aenter__()
    with pytest.raises(AgentUsageError, match="closed session"):
        await s.send("TEXT late")


async def test_approve_refuse_and_change_input(tmp_path: Path) -> None:
    seen: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Decision | bool:
        seen.append(request)
        command = request.input.get("command")
        if command == "rm -rf /":
            return Decision.deny("not that")
        if command == "change me":
            return Decision.allow({"command": "echo changed"})
        return True

    a = agent(tmp_path, approver=approver, transcripts=str(tmp_path / "t"))
    async with a.session() as s:
        ok = await s.send_result('ASK Bash {"command": "echo hi"}')
        assert ok.status == 0 and ok.message == 'allowed {"command": "echo hi"}'
        assert ok.approvals[0]["allowed"] is True and ok.approvals[0]["source"] == "approver"
        no = await s.send_result('ASK Bash {"command": "rm -rf /"}')
        assert no.status == 0 and no.message == "denied not that"
        changed = await s.send_result('ASK Bash {"command": "change me"}')
        assert changed.message == 'allowed {"command": "echo changed"}'
    assert [r.turn for r in seen] == [1, 2, 3]
    assert {r.kind for r in seen} == {"command"}
    assert seen[0].cwd == str(tmp_path) and seen[0].backend == "twoway"
    # The transcript holds both directions: our answers are in stdin.jsonl.
    sent = (Path(no.transcript or "") / "stdin.jsonl").read_text()
    assert '"allow":false' in sent and "not that" in sent
    events = (Path(no.transcript or "") / "events.jsonl").read_text()
    assert '"type":"approval"' in events


async def test_an_approval_settled_while_the_cli_streams_keeps_event_order(
    tmp_path: Path,
) -> None:
    """The approver decides (in its own task) while the CLI goes on writing
    lines: the approval's event comes between the lines decoded before the
    answer and those after it, in the turn's stream, and no line is lost or
    reordered around it."""
    ticked = anyio.Event()
    heard: list[Any] = []

    def hear(event: Any) -> None:
        heard.append(event)
        if isinstance(event, TextEvent) and event.text == "tick 2":
            ticked.set()

    async def approver(request: ApprovalRequest) -> bool:
        await ticked.wait()  # three lines decoded while the question is out
        return True

    a = agent(tmp_path, approver=approver, approval_timeout=20)
    a.subscribe(hear)
    async with a.session() as s:
        result = await s.send_result('ASK_STREAM Bash {"command": "echo"}')
    assert result.status == 0 and result.message == 'allowed {"command": "echo"}'
    assert [(r["tool"], r["allowed"]) for r in result.approvals] == [("Bash", True)]
    said = [
        e.text
        if isinstance(e, TextEvent)
        else "<approval>"
        if isinstance(e, ApprovalEvent)
        else "<end>"
        for e in heard
        if isinstance(e, TextEvent | ApprovalEvent | ResultEvent)
    ]
    decided = said.index("<approval>")
    ticks = [t for t in said if t.startswith("tick ")]
    assert ticks == [f"tick {i}" for i in range(len(ticks))]  # none lost, none moved
    assert said.count("<approval>") == 1 and decided > said.index("tick 2")
    assert said[-2:] == ['allowed {"command": "echo"}', "<end>"]
    assert said[:decided] == [f"tick {i}" for i in range(decided)]  # before it: lines only


async def test_a_refusal_that_ends_the_turn_is_permission_denied(tmp_path: Path) -> None:
    a = agent(tmp_path, approver=lambda r: Decision.deny("stop here", end_turn=True))
    async with a.session() as s:
        r = await s.send_result('ASK Write {"file_path": "x"}')
        assert r.status == 1 and r.error == "permission_denied", r.message
        assert "stop here" in r.message
        assert r.failure is not None
        after = await s.send("TEXT still here")
        assert after["status"] == 0


@pytest.mark.slow
async def test_unanswered_raising_and_async_approvers_deny(tmp_path: Path) -> None:
    async def slow(request: ApprovalRequest) -> bool:
        await anyio.sleep(30)
        return True

    def boom(request: ApprovalRequest) -> bool:
        raise RuntimeError("approver bug")

    a = agent(tmp_path, approver=slow, approval_timeout=0.3)
    async with a.session() as s:
        started = time.monotonic()
        r = await s.send_result('ASK Bash {"command": "echo"}')
        assert time.monotonic() - started < 10
        assert r.message.startswith("denied"), r.message
        assert r.approvals[0]["source"] == "timeout"
    b = agent(tmp_path, approver=boom)
    async with b.session() as s:
        r = await s.send_result('ASK Bash {"command": "echo"}')
        assert r.message.startswith("denied")
        assert r.approvals[0]["source"] == "error"
        assert "approver bug" in r.approvals[0]["error"]


async def test_without_an_approver_a_request_is_denied_with_a_reason(tmp_path: Path) -> None:
    a = agent(tmp_path)
    async with a.session() as s:
        r = await s.send_result('ASK Bash {"command": "echo"}')
        assert "permissions=" in r.message and "approver=" in r.message
        assert r.approvals[0]["source"] == "permissions"


@pytest.mark.slow
async def test_interrupt_ends_the_turn_kills_its_tool_and_the_session_lives_on(
    tmp_path: Path,
) -> None:
    a = agent(tmp_path)
    async with a.session() as s:
        async with anyio.create_task_group() as tg:
            results: list[Any] = []

            async def sleeper() -> None:
                results.append(await s.send_result("ORPHAN 600"))

            tg.start_soon(sleeper)
            for _ in range(100):
                await anyio.sleep(0.05)
                if len(session_processes(s.key)) > 1:
                    break
            assert await s.interrupt() is True
        r = results[0]
        assert r.status == 130 and r.error == "interrupted", r.message
        assert "session goes on" in r.message
        # the sleeper the CLI left behind was stopped; the CLI itself lives
        assert len(session_processes(s.key)) == 1
        assert (await s.send("TEXT next"))["status"] == 0
        assert await s.interrupt() is False  # nothing running


async def test_death_mid_turn_closes_the_session(tmp_path: Path) -> None:
    a = agent(tmp_path)
    async with a.session() as s:
        r = await s.send_result("DIE")
        assert r.status == 1 and r.error == "incomplete", r.message
        assert "exited with code 3" in r.message
        assert s.closed
        with pytest.raises(AgentUsageError):
            await s.send("TEXT")
    assert a.state is AgentState.READY


@pytest.mark.slow
async def test_garbage_unknown_ids_unknown_types_and_silence(tmp_path: Path) -> None:
    a = agent(tmp_path, idle_timeout=1.0)
    async with a.session() as s:
        garbage = await s.send_result("GARBAGE")
        assert garbage.status == 1 and "broke its control protocol" in garbage.message
        news = await s.send_result("NEWS")
        assert news.status == 0
        assert "1 message(s) of a type twoway does not know, ignored" in news.warnings
        unknown = await s.send_result("UNKNOWN_ID")
        assert unknown.status == 1 and "never used" in unknown.message
        started = time.monotonic()
        silent = await s.send_result("SILENCE")
        assert time.monotonic() - started < 15
        assert silent.status == 124 and silent.error == "idle_timeout", silent.message
        assert s.closed
        assert session_processes(s.key) == []


@pytest.mark.slow
async def test_a_cli_that_never_ends_a_broken_off_turn_closes_the_session(
    tmp_path: Path,
) -> None:
    a = agent(tmp_path, grace=0.5)
    async with a.session() as s:
        broken = await s.send_result("GARBAGE_STUCK")
        assert broken.status == 1 and "broke its control protocol" in broken.message
        after = await s.send_result("TEXT hello")
        assert after.status == 1 and "did not end a turn it broke off" in after.message
        assert s.closed
        assert session_processes(s.key) == []


@pytest.mark.slow
async def test_a_turn_timeout_stops_the_whole_tree(tmp_path: Path) -> None:
    a = agent(tmp_path)
    async with a.session() as s:
        r = await s.send_result("SLEEP 600", timeout=1.0)
        assert r.status == 124 and r.error == "timeout"
        assert s.closed
        assert session_processes(s.key) == []


@pytest.mark.slow
async def test_cancelling_a_turn_stops_the_tree(tmp_path: Path) -> None:
    a = agent(tmp_path)
    async with a.session() as s:
        with anyio.move_on_after(1.0):
            await s.send("SLEEP 600")
        key = s.key
    assert session_processes(key) == []
    assert a.state is AgentState.READY


async def test_resume_opens_the_cli_on_the_same_session(tmp_path: Path) -> None:
    a = agent(tmp_path)
    async with a.session(resume="sess-42") as s:
        assert (await s.send("TEXT hi"))["status"] == 0
        assert s.session_id == "sess-42"


async def test_steer_on_a_backend_that_cannot_names_those_that_can(tmp_path: Path) -> None:
    a = agent(tmp_path)
    async with a.session() as s:
        with pytest.raises(AgentUsageError, match="cannot steer"):
            await s.steer("more")


async def test_a_backend_without_two_way_answers_64_and_raises(tmp_path: Path) -> None:
    a = CodingGenesisAgent(one_way_backend(), cwd=str(tmp_path), ledger=False)
    with pytest.raises(AgentUsageError, match="two-way"):
        a.session()
    r = await a.run("hello", approver=lambda req: True)
    assert r["status"] == 64 and "two-way" in r["message"]


async def test_run_with_an_approver_is_one_turn_of_a_live_process(tmp_path: Path) -> None:
    a = agent(tmp_path)
    r = await a.run_result('ASK Bash {"command": "echo"}', approver=lambda req: True)
    assert r.status == 0 and r.message.startswith("allowed")
    assert r.approvals and r.approvals[0]["allowed"]


def test_the_sync_form(tmp_path: Path) -> None:
    a = agent(tmp_path)
    with a.session_sync() as s:
        assert s.send("TEXT one")["message"] == "one"
        assert s.send("TEXT two")["message"] == "two"
        key = s.session.key
    assert s.closed
    assert session_processes(key) == []


async def test_stream_yields_the_turns_events(tmp_path: Path) -> None:
    a = agent(tmp_path)
    async with a.session() as s:
        async with s.stream("TEXT streamed") as turn:
            kinds = [event.kind async for event in turn]
        assert "text" in kinds and "result" in kinds and "run_finished" in kinds
        assert turn.result is not None and turn.result.message == "streamed"


@pytest.mark.slow
def test_the_runner_sigkilled_with_an_open_session_leaves_nothing(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = f"""
import anyio, sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from coding_genesis import CodingGenesisAgent
from tests.session.twoway import TwoWayBackend
async def main():
    a = CodingGenesisAgent(TwoWayBackend(), cwd={str(tmp_path)!r}, ledger={str(tmp_path / "ledger")!r})
    async with a.session() as s:
        print(s.key, flush=True)
        await s.send("SLEEP 600")
anyio.run(main)
"""
    runner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert runner.stdout is not None
    key = runner.stdout.readline().decode().strip()
    for _ in range(100):
        if len(session_processes(key)) >= 2:
            break
        time.sleep(0.05)
    assert len(session_processes(key)) >= 2
    runner.kill()
    runner.wait()
    runner.stdout.close()
    # The CLI dies with its runner (parent-death signal); what it left (the
    # sleeper in its own session) is stopped by the next agent's sweep of the ledger.
    records = os.listdir(tmp_path / "ledger")
    assert any(key in name for name in records)
    later = CodingGenesisAgent("failer", cwd=str(tmp_path), ledger=str(tmp_path / "ledger"))
    later.run_sync("hello")
    for _ in range(100):
        if not session_processes(key):
            break
        time.sleep(0.05)
    assert session_processes(key) == []
    assert not any(key in name for name in os.listdir(tmp_path / "ledger"))


@pytest.mark.slow
async def test_a_failed_turn_counts_toward_the_circuit_breaker(tmp_path: Path) -> None:
    from coding_genesis import CircuitBreaker, FailureCategory

    breaker = CircuitBreaker(threshold=1, cooldown=60, trip_on=list(FailureCategory))
    a = agent(tmp_path, circuit_breaker=breaker)
    async with a.session() as s:
        died = await s.send_result("DIE")
        assert died.error == "incomplete" and died.failure is not None
        assert died.failure.category in FailureCategory
    assert a.state is AgentState.DEGRADED
    async with a.session() as s2:
        degraded = await s2.send("TEXT hello")
        assert degraded["status"] == 69 and degraded["error"] == "degraded"


@pytest.mark.slow
async def test_an_interrupt_withdraws_the_question_the_approver_still_ponders(
    tmp_path: Path,
) -> None:
    withdrawn = anyio.Event()

    async def pondering(request: ApprovalRequest) -> bool:
        try:
            await anyio.sleep(60)
        finally:
            withdrawn.set()
        return True

    a = agent(tmp_path, approver=pondering, approval_timeout=60)
    heard: list[ApprovalEvent] = []
    a.subscribe(lambda e: heard.append(e) if isinstance(e, ApprovalEvent) else None)
    async with a.session() as s:
        results: list[Any] = []
        started = time.monotonic()
        async with anyio.create_task_group() as tg:

            async def turn() -> None:
                results.append(await s.send_result('ASK Bash {"command": "echo"}'))

            tg.start_soon(turn)
            await anyio.sleep(0.5)
            assert await s.interrupt() is True
        assert time.monotonic() - started < 10
        assert results[0].error == "interrupted"
        # the withdrawn question is in the turn's record, and was published
        (record,) = results[0].approvals
        assert (record["tool"], record["allowed"], record["source"], record["withdrawn"]) == (
            "Bash",
            False,
            "withdrawn",
            True,
        )
        assert [(e.tool, e.source) for e in heard] == [("Bash", "withdrawn")]
        with anyio.fail_after(5):
            await withdrawn.wait()
        assert (await s.send("TEXT next"))["status"] == 0


async def test_the_cli_sees_its_working_directory_in_pwd(tmp_path: Path) -> None:
    """Tools that read ``PWD`` rather than ask the kernel see where they run,
    not the runner's directory."""
    work = tmp_path / "work"
    work.mkdir()
    a = CodingGenesisAgent(
        TwoWayBackend(), cwd=str(work), timeout=20, grace=1.0, ledger=str(tmp_path / "ledger")
    )
    async with a.session() as s:
        r = await s.send("TEXT hi")
        assert r["status"] == 0, r
        (cli,) = [p for p in session_processes(s.key) if p.pid == r["pid"]]
        assert cli.environ()["PWD"] == str(work) == cli.cwd()


@pytest.mark.slow
async def test_wait_for_turn_returns_once_a_turn_runs(tmp_path: Path) -> None:
    """The public way to act on a turn another task sent (steer, interrupt): no polling,
    no private attribute."""
    async with agent(tmp_path).session() as s:
        assert not s.turn_running
        with anyio.move_on_after(0.3) as idle:
            await s.wait_for_turn()  # no turn: it waits
        assert idle.cancelled_caught
        async with anyio.create_task_group() as tg:
            results: list[Any] = []

            async def slow() -> None:
                results.append(await s.send("SLEEP 1"))

            tg.start_soon(slow)
            with anyio.fail_after(10):
                await s.wait_for_turn()
            assert s.turn_running
            assert await s.interrupt() is True
        assert results[0]["error"] == "interrupted"
        assert not s.turn_running
