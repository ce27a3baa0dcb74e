"""Whole-tree supervision (issue 3): every way a run can end stops every process
it started, reaps every zombie, and returns.  Real subprocesses (the fake CLI
in tests/fakes), on both anyio backends.

"Gone" is checked at once after ``run`` returns (``assert_tree_gone``), not
eventually: the autouse leak check would forgive a process that dies late.
Time bounds are pytest-timeout marks, never wall-clock assertions.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import anyio
import psutil
import pytest

from coding_genesis import AgentState, Event, RunStartedEvent
from tests.fakes import fakecli
from tests.support import EventLog, FakeCLI
from tests.tree_support import (
    RssPeak,
    assert_tree_gone,
    describe,
    kill_and_reap,
    run_pids,
    wait_for_record,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

HOLDER = {"setsid": True, "ignore_sigterm": True, "hold_stdout": True, "sleep": 600}


# -- the "done when" ---------------------------------------------------


@pytest.mark.timeout(8)
async def test_done_when_sigterm_ignoring_cli_and_setsid_grandchild_holding_stdout(
    fake_claude: FakeCLI,
) -> None:
    """CLI ignores SIGTERM; its setsid grandchild ignores SIGTERM and holds stdout.
    timeout 1 s, grace 1 s: a "timed out" response (in about 3 s: the
    pytest-timeout bound), and afterwards neither process exists."""
    fake_claude.script(
        [{"init": True}, {"ignore_sigterm": True}, {"grandchild": HOLDER}, {"hang": True}]
    )
    agent = fake_claude.agent(timeout=1.0, grace=1.0)
    result = await agent.run("do the task")

    assert result["status"] == 124, describe(result)
    assert "timed out" in result["message"]
    assert result["error"] == "timeout"
    assert result["stop_reason"] == "timeout"
    assert result["signals_sent"] == ["SIGTERM", "SIGKILL"]
    assert result["signal"] == "SIGKILL"
    pids = run_pids(fake_claude)
    assert len(pids["main"]) == 1 and len(pids["grandchild"]) == 1
    assert_tree_gone(fake_claude)
    assert agent.state is AgentState.READY


# -- whole-tree stop -------------------------------------------------------------


@pytest.mark.timeout(15)
async def test_timeout_stops_double_fork_escapees_and_many_children(fake_claude: FakeCLI) -> None:
    """Double-forked (reparented to us), setsid and plain children, all ignoring
    SIGTERM, some holding stdout: all stopped, all reaped."""
    fake_claude.script(
        [
            {"trap_sigterm": 143},
            {"grandchild": {**HOLDER, "double_fork": True}},
            {"grandchild": {**HOLDER, "count": 5}},
            {"grandchild": {"setsid": False, "ignore_sigterm": True, "count": 5}},
            {"grandchild": {"setsid": True, "hold_stdout": False, "count": 3}},
            {"await_records": {"key": "grandchild", "count": 14}},
            {"emit": {"type": "stream_event", "tree": "in place"}},
            {"hang": True},
        ]
    )
    agent = fake_claude.agent(timeout=3.0, grace=0.3)
    result = await agent.run("go")
    assert result["status"] == 124, describe(result)
    pids = run_pids(fake_claude)
    assert len(pids["grandchild"]) == 14 and len(pids["intermediate"]) == 1
    assert_tree_gone(fake_claude)


@pytest.mark.timeout(15)
async def test_fork_bomb_is_stopped_whole(fake_claude: FakeCLI) -> None:
    """A grandchild that ignores SIGTERM and keeps forking (each child in its own
    session) while we stop it: late forks join the next round."""
    fake_claude.script(
        [
            {"init": True},
            {"fork_bomb": {"count": 40, "interval": 0.02, "setsid": True}},
            {"fork_bomb": {"count": 40, "interval": 0.02, "setsid": False}},
            {"hang": True},
        ]
    )
    agent = fake_claude.agent(timeout=1.5, grace=0.3)
    result = await agent.run("go")
    assert result["status"] == 124, describe(result)
    assert len(run_pids(fake_claude)["bomb"]) > 2
    assert_tree_gone(fake_claude)


@pytest.mark.timeout(15)
async def test_external_sigkill_of_the_cli_still_stops_its_grandchild(
    fake_claude: FakeCLI,
) -> None:
    """The CLI is SIGKILLed by someone else; its setsid grandchild holds stdout
    and ignores SIGTERM: the run ends, says "killed", and nothing is left."""
    fake_claude.script([{"grandchild": HOLDER}, {"init": True}, {"hang": True}])
    agent = fake_claude.agent(timeout=30.0, grace=0.3)
    main: dict[str, int] = {}

    def killer(event: Event) -> None:
        if isinstance(event, RunStartedEvent):
            main["pid"] = event.pid
        elif event.kind == "session":
            os.kill(main["pid"], signal.SIGKILL)

    agent.subscribe(killer)
    result = await agent.run("go")
    assert result["status"] == 128 + signal.SIGKILL, describe(result)
    assert result["error"] == "killed"
    assert result["leftovers_stopped"] == 1
    assert result["stop_reason"] is None
    assert_tree_gone(fake_claude)


# -- a run ends when the CLI ends -----------------------------------------------


@pytest.mark.timeout(15)
async def test_run_ends_when_cli_ends_although_grandchild_holds_stdout(
    fake_claude: FakeCLI,
) -> None:
    fake_claude.script(
        [{"grandchild": {"setsid": True, "hold_stdout": True, "sleep": 600}}, {"answer": "done"}]
    )
    agent = fake_claude.agent(timeout=30.0, eof_grace=0.2)
    result = await agent.run("go")
    assert result["status"] == 0, describe(result)
    assert result["message"] == "done"
    assert result["leftovers_stopped"] == 1
    assert result["signals_sent"] == []  # the CLI was not stopped: it exited
    assert_tree_gone(fake_claude)


@pytest.mark.timeout(15)
async def test_without_kill_leftovers_the_run_still_ends_and_the_holder_is_left(
    fake_claude: FakeCLI,
) -> None:
    """kill_leftovers=False: the holder of stdout is left alone, yet the run ends."""
    fake_claude.script([{"grandchild": {"setsid": True, "sleep": 600}}, {"answer": "done"}])
    agent = fake_claude.agent(timeout=30.0, eof_grace=0.2, kill_leftovers=False)
    result = await agent.run("go")
    holder = run_pids(fake_claude)["child"]
    try:
        assert result["status"] == 0, describe(result)
        assert result["leftovers_stopped"] == 0
        assert [psutil.Process(pid).is_running() for pid in holder] == [True]
    finally:
        kill_and_reap(holder)


@pytest.mark.timeout(15)
async def test_orphans_that_die_on_their_own_are_reaped(fake_claude: FakeCLI) -> None:
    """Double-fork escapees are reparented to us (subreaper) and die before any
    snapshot sees them: their zombies are reaped by the end of the run."""
    fake_claude.script(
        [
            {"init": True},
            {"grandchild": {"double_fork": True, "hold_stdout": False, "sleep": 0.05}},
            {"grandchild": {"double_fork": True, "hold_stdout": False, "sleep": 0.3}},
            {"await_records": {"key": "grandchild", "count": 2}},
            {"sleep": 0.6},
            {"answer": "done"},
        ]
    )
    agent = fake_claude.agent(timeout=30.0)
    result = await agent.run("go")
    assert result["status"] == 0, describe(result)
    pids = run_pids(fake_claude)
    assert len(pids["intermediate"]) == 2 and len(pids["grandchild"]) == 2
    assert_tree_gone(fake_claude)


@pytest.mark.timeout(15)
async def test_an_orphan_without_the_marker_in_the_runs_session_is_stopped(
    fake_claude: FakeCLI,
) -> None:
    """A grandchild left in the CLI's session whose environment has no marker
    (``env -i``, or one in the middle of exiting, whose environment is gone:
    claude-agent-acp's claude, seen when its adapter exits) is reparented to
    us when the CLI exits: found by its session, stopped and reaped."""
    fake_claude.script(
        [
            {"grandchild": {"setsid": False, "bare_env": True, "hold_stdout": False}},
            {"answer": "done"},
        ]
    )
    agent = fake_claude.agent(timeout=30.0, eof_grace=0.2)
    result = await agent.run("go")
    (child,) = run_pids(fake_claude)["child"]
    try:
        assert result["status"] == 0, describe(result)
        assert result["leftovers_stopped"] == 1, describe(result)
        assert not psutil.pid_exists(child), describe(result)
    finally:
        kill_and_reap([child])


# -- linger and idle -------------------------------------------------------------


@pytest.mark.timeout(15)
async def test_linger_stop_keeps_the_successful_result(fake_claude: FakeCLI) -> None:
    fake_claude.script(
        [
            {"ignore_sigterm": True},
            {"grandchild": HOLDER},
            {"await_records": {"key": "grandchild"}},
            {"answer": "all done"},
            {"hang": True},
        ]
    )
    agent = fake_claude.agent(timeout=30.0, linger=0.3, grace=0.3)
    result = await agent.run("go")
    assert result["status"] == 0, describe(result)
    assert result["is_error"] is False
    assert result["message"] == "all done"
    assert result["stop_reason"] == "linger"
    assert result["signals_sent"] == ["SIGTERM", "SIGKILL"]
    assert any("kept running after its result" in w for w in result["warnings"])
    assert_tree_gone(fake_claude)


@pytest.mark.timeout(15)
async def test_codex_linger_after_turn_completed(fake_codex: FakeCLI) -> None:
    fake_codex.script([{"answer": "codex done"}, {"hang": True}])
    agent = fake_codex.agent(timeout=30.0, linger=0.2, grace=5.0)
    result = await agent.run("go")
    assert result["status"] == 0, describe(result)
    assert result["message"] == "codex done"
    assert result["stop_reason"] == "linger"
    assert result["signals_sent"] == ["SIGTERM"]
    assert_tree_gone(fake_codex)


@pytest.mark.timeout(15)
async def test_idle_timeout_says_idle_not_timed_out(fake_claude: FakeCLI) -> None:
    fake_claude.script(
        [{"init": True}, {"stderr": "thinking"}, {"grandchild": HOLDER}, {"hang": True}]
    )
    agent = fake_claude.agent(timeout=30.0, idle_timeout=0.5, grace=0.3)
    result = await agent.run("go")
    assert result["status"] == 124, describe(result)
    assert result["error"] == "idle_timeout"
    assert result["stop_reason"] == "idle"
    assert "idle for 0.5s" in result["message"]
    assert "timed out" not in result["message"]
    assert_tree_gone(fake_claude)


@pytest.mark.timeout(15)
async def test_output_keeps_the_idle_clock_from_firing(fake_claude: FakeCLI) -> None:
    """Lines every 0.1 s for about 1.5 s, idle timeout 1 s: never idle."""
    steps: list[dict[str, Any]] = [{"init": True}]
    for i in range(15):
        steps += [{"emit": {"type": "stream_event", "n": i}}, {"sleep": 0.1}]
    fake_claude.script([*steps, {"answer": "kept talking"}])
    agent = fake_claude.agent(timeout=30.0, idle_timeout=1.0)
    result = await agent.run("go")
    assert result["status"] == 0, describe(result)
    assert result["message"] == "kept talking"
    assert result["stop_reason"] is None


# -- configurable stop sequence --------------------------------------------------


@pytest.mark.timeout(15)
async def test_stop_signal_sequence_is_configurable(fake_claude: FakeCLI) -> None:
    """SIGINT, then SIGTERM, then SIGKILL, each after the grace; in that order.
    (Stopped by the linger clock, which starts once the traps are in place.)"""
    fake_claude.script([{"trap": "SIGINT"}, {"trap": "SIGTERM"}, {"answer": "x"}, {"hang": True}])
    agent = fake_claude.agent(
        timeout=30.0, linger=0.1, grace=0.3, stop_signals=(signal.SIGINT, signal.SIGTERM)
    )
    result = await agent.run("go")
    assert result["stop_reason"] == "linger", describe(result)
    assert result["signals_sent"] == ["SIGINT", "SIGTERM", "SIGKILL"]
    received = [r["signal"] for r in fake_claude.records() if "signal" in r]
    assert received == ["SIGINT", "SIGTERM"]
    assert result["signal"] == "SIGKILL"
    assert_tree_gone(fake_claude)


@pytest.mark.timeout(15)
async def test_graceful_first_signal_ends_the_stop(fake_codex: FakeCLI) -> None:
    """codex stops cleanly on SIGINT: no SIGTERM or SIGKILL is needed."""
    fake_codex.script([{"trap": "SIGINT", "exit": 130}, {"answer": "done"}, {"hang": True}])
    agent = fake_codex.agent(timeout=30.0, linger=0.1, grace=5.0, stop_signals=(signal.SIGINT,))
    result = await agent.run("go")
    assert result["status"] == 0, describe(result)
    assert result["stop_reason"] == "linger"
    assert result["signals_sent"] == ["SIGINT"]
    assert result["exit_code"] == 130
    assert_tree_gone(fake_codex)


@pytest.mark.timeout(15)
async def test_zero_grace_and_no_signals_kill_at_once(fake_claude: FakeCLI) -> None:
    fake_claude.script([{"init": True}, {"trap": "SIGTERM"}, {"hang": True}])
    agent = fake_claude.agent(timeout=0.5, grace=0.0, stop_signals=())
    result = await agent.run("go")
    assert result["signals_sent"] == ["SIGKILL"], describe(result)
    assert not [r for r in fake_claude.records() if "signal" in r]
    assert_tree_gone(fake_claude)


# -- floods -----------------------------------------------------------------------


@pytest.mark.timeout(60)
async def test_stderr_flood_does_not_deadlock(fake_claude: FakeCLI) -> None:
    """50 MiB on stderr before the answer: drained as it comes, a tail kept."""
    fake_claude.script([{"stderr_flood": 50 * 2**20}, {"answer": "survived"}])
    agent = fake_claude.agent(timeout=60.0)
    async with RssPeak().sampling() as rss:
        result = await agent.run("go")
    assert result["status"] == 0, describe(result)
    assert result["message"] == "survived"
    assert 0 < len(result["stderr_tail"]) <= 64 * 1024
    assert rss.growth_mib < 100, f"memory grew by {rss.growth_mib:.0f} MiB"


@pytest.mark.timeout(90)
async def test_stdout_flood_streams_with_bounded_memory(fake_claude: FakeCLI) -> None:
    """200 MiB of JSON lines on stdout (1 GiB belongs to the benchmarks)."""
    total = 200 * 2**20
    fake_claude.script(
        [{"init": True}, {"stdout_flood": total, "line": 1000}, {"answer": "after the flood"}]
    )
    agent = fake_claude.agent(timeout=80.0)
    async with RssPeak().sampling() as rss:
        result = await agent.run("go")
    assert result["status"] == 0, describe(result)
    assert result["message"] == "after the flood"
    flood_lines = -(-total // len(fakecli.flood_line(1000)))
    assert result["lines"] == 1 + flood_lines + 3  # init, the flood, the answer's three
    assert result["skipped_lines"] == 0
    assert rss.growth_mib < 100, f"memory grew by {rss.growth_mib:.0f} MiB"


# -- cancellation from the caller -------------------------------------------------


async def _started(agent: Any, fake: FakeCLI) -> None:
    """Wait until the run's holder grandchild exists (the tree is in place)."""
    await wait_for_record(fake, "grandchild")
    assert agent.state is AgentState.BUSY


def _cancelled_cleanly(agent: Any, log: EventLog, fake: FakeCLI) -> None:
    assert len(run_pids(fake)["child"]) == 1  # the escapee existed
    assert agent.state is AgentState.READY
    assert log.states()[-2:] == ["BUSY", "READY"]
    assert log.of("state")[-1]["reason"] == "run cancelled"
    finished = log.of("run_finished")
    assert finished and finished[-1]["cancelled"] is True
    assert_tree_gone(fake)


CANCEL_SCRIPT: list[dict[str, Any]] = [
    {"init": True},
    {"ignore_sigterm": True},
    {"grandchild": HOLDER},
    {"hang": True},
]


@pytest.mark.timeout(15)
async def test_cancel_scope_stops_the_tree(fake_claude: FakeCLI) -> None:
    fake_claude.script(CANCEL_SCRIPT)
    agent = fake_claude.agent(timeout=30.0, grace=0.3)
    log = EventLog(agent)
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            await agent.run("go")
            raise AssertionError("run() returned although cancelled")

        tg.start_soon(run)
        await _started(agent, fake_claude)
        tg.cancel_scope.cancel()
    _cancelled_cleanly(agent, log, fake_claude)


@pytest.mark.timeout(15)
async def test_fail_after_around_run_stops_the_tree(fake_claude: FakeCLI) -> None:
    fake_claude.script(CANCEL_SCRIPT)
    agent = fake_claude.agent(timeout=30.0, grace=0.3)
    log = EventLog(agent)
    with pytest.raises(TimeoutError):
        with anyio.fail_after(2.0):
            await agent.run("go")
    _cancelled_cleanly(agent, log, fake_claude)


@pytest.mark.timeout(15)
async def test_move_on_after_around_run_stops_the_tree(fake_claude: FakeCLI) -> None:
    fake_claude.script(CANCEL_SCRIPT)
    agent = fake_claude.agent(timeout=30.0, grace=0.3)
    log = EventLog(agent)
    with anyio.move_on_after(2.0) as scope:
        await agent.run("go")
    assert scope.cancelled_caught
    _cancelled_cleanly(agent, log, fake_claude)


@pytest.mark.timeout(15)
async def test_agent_runs_again_after_a_cancellation(fake_claude: FakeCLI) -> None:
    fake_claude.script(CANCEL_SCRIPT)
    agent = fake_claude.agent(timeout=30.0, grace=0.3)
    with anyio.move_on_after(1.0):
        await agent.run("go")
    fake_claude.script([{"answer": "second run"}])
    result = await agent.run("again")
    assert result["status"] == 0, describe(result)
    assert result["message"] == "second run"
    assert_tree_gone(fake_claude)
