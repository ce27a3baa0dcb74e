"""Cancellation through each event loop's own API (not anyio's): asyncio's
``Task.cancel()`` (once, and again and again during the cleanup),
``asyncio.wait_for`` and ``asyncio.timeout``; trio's own cancel scopes.

anyio's shielded scope does not stop a native ``Task.cancel()``; the cleanup
must still run to its end, then the cancellation comes out.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from coding_genesis import AgentState, CodingGenesisAgent
from coding_genesis.observer import Observer, RunInfo, RunObserver
from tests.support import EventLog, FakeCLI
from tests.tree_support import assert_tree_gone, run_pids, wait_for_record

pytestmark = pytest.mark.slow

HOLDER = {"setsid": True, "ignore_sigterm": True, "hold_stdout": True, "sleep": 600}
#: Both the CLI and its setsid grandchild ignore SIGTERM: the stop needs the whole grace.
STUBBORN: list[dict[str, Any]] = [
    {"init": True},
    {"ignore_sigterm": True},
    {"grandchild": HOLDER},
    {"hang": True},
]

asyncio_only = pytest.mark.parametrize("anyio_backend", ["asyncio"])
trio_only = pytest.mark.parametrize("anyio_backend", ["trio"])


def _cancelled_cleanly(agent: CodingGenesisAgent, log: EventLog, fake: FakeCLI) -> None:
    assert agent.state is AgentState.READY
    assert log.states()[-2:] == ["BUSY", "READY"]
    assert log.of("state")[-1]["reason"] == "run cancelled"
    assert log.of("run_finished")[-1]["cancelled"] is True
    assert len(run_pids(fake)["child"]) == 1  # the escapee existed
    assert_tree_gone(fake)


@pytest.mark.anyio
@asyncio_only
@pytest.mark.timeout(15)
async def test_task_cancel_stops_the_tree(fake_claude: FakeCLI) -> None:
    fake_claude.script(STUBBORN)
    agent = fake_claude.agent(timeout=30.0, grace=0.3)
    log = EventLog(agent)
    task = asyncio.create_task(agent.run("go"))
    await wait_for_record(fake_claude, "grandchild")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    _cancelled_cleanly(agent, log, fake_claude)


@pytest.mark.anyio
@asyncio_only
@pytest.mark.timeout(15)
async def test_repeated_task_cancel_cannot_interrupt_the_cleanup(fake_claude: FakeCLI) -> None:
    """Cancel, then cancel again every 20 ms while the stop waits out its 1 s
    grace: the cleanup still finishes (SIGKILL, reaping) before the task ends."""
    fake_claude.script(STUBBORN)
    agent = fake_claude.agent(timeout=30.0, grace=1.0)
    log = EventLog(agent)
    task = asyncio.create_task(agent.run("go"))
    await wait_for_record(fake_claude, "grandchild")
    cancels = 0
    while not task.done():
        task.cancel()
        cancels += 1
        await asyncio.sleep(0.02)
    assert cancels > 10  # the cleanup really was hit while it ran
    with pytest.raises(asyncio.CancelledError):
        await task
    _cancelled_cleanly(agent, log, fake_claude)


@pytest.mark.anyio
@asyncio_only
@pytest.mark.timeout(15)
async def test_wait_for_stops_the_tree(fake_claude: FakeCLI) -> None:
    fake_claude.script(STUBBORN)
    agent = fake_claude.agent(timeout=30.0, grace=0.3)
    log = EventLog(agent)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(agent.run("go"), 2.0)
    _cancelled_cleanly(agent, log, fake_claude)


@pytest.mark.anyio
@asyncio_only
@pytest.mark.timeout(15)
async def test_asyncio_timeout_stops_the_tree(fake_claude: FakeCLI) -> None:
    fake_claude.script(STUBBORN)
    agent = fake_claude.agent(timeout=30.0, grace=0.3)
    log = EventLog(agent)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(2.0):
            await agent.run("go")
    _cancelled_cleanly(agent, log, fake_claude)


@pytest.mark.anyio
@asyncio_only
@pytest.mark.timeout(15)
async def test_task_group_sibling_failure_stops_the_tree(fake_claude: FakeCLI) -> None:
    """An asyncio.TaskGroup cancels the run when a sibling task fails."""
    fake_claude.script(STUBBORN)
    agent = fake_claude.agent(timeout=30.0, grace=0.3)
    log = EventLog(agent)

    async def sibling() -> None:
        await wait_for_record(fake_claude, "grandchild")
        raise LookupError("sibling failed")

    with pytest.raises(ExceptionGroup) as caught:  # noqa: PT012  (the group raises on exit)
        async with asyncio.TaskGroup() as tg:
            tg.create_task(agent.run("go"))
            tg.create_task(sibling())
    assert caught.group_contains(LookupError)
    _cancelled_cleanly(agent, log, fake_claude)


@pytest.mark.anyio
@trio_only
@pytest.mark.timeout(15)
async def test_trio_cancel_scope_stops_the_tree(fake_claude: FakeCLI) -> None:
    import trio

    fake_claude.script(STUBBORN)
    agent = fake_claude.agent(timeout=30.0, grace=0.3)
    log = EventLog(agent)
    with trio.move_on_after(2.0) as scope:
        await agent.run("go")
    assert scope.cancelled_caught
    _cancelled_cleanly(agent, log, fake_claude)


@pytest.mark.anyio
@asyncio_only
@pytest.mark.timeout(15)
async def test_repeated_task_cancel_during_a_timeout_stop(fake_claude: FakeCLI) -> None:
    """The timeout's stop is under way (waiting out a 1 s grace: the CLI
    records SIGTERM and ignores it) when the caller starts cancelling again
    and again: the stop still completes, then the cancellation comes out."""
    fake_claude.script(
        [{"trap": "SIGTERM"}, {"grandchild": HOLDER}, {"init": True}, {"hang": True}]
    )
    agent = fake_claude.agent(timeout=0.5, grace=1.0)
    log = EventLog(agent)
    task = asyncio.create_task(agent.run("go"))
    await wait_for_record(fake_claude, "signal")  # the timeout's SIGTERM arrived
    cancels = 0
    while not task.done():
        task.cancel()
        cancels += 1
        await asyncio.sleep(0.02)
    assert cancels > 5
    with pytest.raises(asyncio.CancelledError):
        await task
    _cancelled_cleanly(agent, log, fake_claude)


@pytest.mark.anyio
@asyncio_only
@pytest.mark.timeout(15)
async def test_a_cancelled_run_is_named_cancelled_and_says_how_far_it_got(
    fake_claude: FakeCLI, tmp_path: Path
) -> None:
    """Issue 28: category ``cancelled`` (not ``unknown``: "no evidence matched", escalate), and
    the answer says how far the run got."""
    fake_claude.script(
        [
            {"init": True},
            {
                "emit": {
                    "type": "assistant",
                    "message": {
                        "content": [
                            {
                                "type": "tool_use",
                                "id": "t1",
                                "name": "Write",
                                "input": {"file_path": str(tmp_path / "done.txt")},
                            }
                        ]
                    },
                }
            },
            {
                "emit": {
                    "type": "user",
                    "message": {
                        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]
                    },
                }
            },
            {"grandchild": HOLDER},
            {"hang": True},
        ]
    )
    finished: list[dict[str, Any]] = []

    class Finish(RunObserver):
        def finish(self, response: Any) -> None:
            finished.append(dict(response))

    class Keep(Observer):
        def start(self, run: RunInfo) -> RunObserver:
            return Finish()

    agent = fake_claude.agent(timeout=30.0, grace=0.3, cwd=tmp_path, observers=[Keep()])
    log = EventLog(agent)
    task = asyncio.create_task(agent.run("go"))
    await wait_for_record(fake_claude, "grandchild")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert log.of("run_finished")[-1]["cancelled"] is True
    (response,) = finished
    assert response["status"] == 130 and response["error"] == "cancelled"
    assert response["failure"]["category"] == "cancelled"
    assert response["failure"]["retryable"] is False
    assert "made 1 tool call and changed 1 file (done.txt)" in response["message"]
    assert "last tool that worked: Write" in response["message"]
    assert_tree_gone(fake_claude)
