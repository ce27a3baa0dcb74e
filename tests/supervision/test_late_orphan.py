"""A child the CLI leaves behind that exits a moment after the CLI (an MCP
server shutting down, say): after the run no zombie of it is left with us.

The CLI starts the child (in its own session or the CLI's) and exits at once,
with or without its ``result`` line; the child sleeps 0.3 s (so it exits
during the pipes' ``eof_grace`` or the leftovers' stop), then exits.  With the
subreaper on, the child is reparented to us when the CLI exits, so a zombie of
it would be ours.
"""

from __future__ import annotations

import time

import psutil
import pytest

from tests.support import FakeCLI
from tests.tree_support import kill_and_reap, run_pids

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def _zombie_descendants(within: float = 2.0) -> list[int]:
    """Our zombie descendants still there after ``within`` seconds (polled)."""
    deadline = time.monotonic() + within
    while True:
        zombies = []
        for child in psutil.Process().children(recursive=True):
            try:
                if child.status() == psutil.STATUS_ZOMBIE:
                    zombies.append(child.pid)
            except psutil.Error:
                continue
        if not zombies or time.monotonic() >= deadline:
            return zombies
        time.sleep(0.05)


def _script(fake: FakeCLI, *, setsid: bool, hold_stdout: bool, result: bool) -> None:
    steps: list[dict[str, object]] = [
        {"init": True},
        {"grandchild": {"setsid": setsid, "hold_stdout": hold_stdout, "sleep": 0.3}},
    ]
    if result:
        steps.append({"result": "done"})
    fake.script(steps)


@pytest.mark.timeout(15)
@pytest.mark.parametrize(
    ("setsid", "hold_stdout", "result"),
    [(True, False, True), (True, False, False), (False, False, True), (False, False, False)],
)
async def test_a_child_exiting_just_after_the_cli_is_reaped(
    fake_claude: FakeCLI, setsid: bool, hold_stdout: bool, result: bool
) -> None:
    _script(fake_claude, setsid=setsid, hold_stdout=hold_stdout, result=result)
    await fake_claude.agent().run("do the task")
    assert run_pids(fake_claude).get("child"), "the child never started"
    assert _zombie_descendants() == []


#: Runs per test of the race: before the fix about 1 run in 12 left a zombie.
_RACE_RUNS = 24


@pytest.mark.timeout(90)
@pytest.mark.parametrize("setsid", [False, True], ids=["cli-session", "own-session"])
async def test_a_child_exiting_as_the_pipes_close_is_reaped(
    fake_claude: FakeCLI, setsid: bool
) -> None:
    """The child holds stdout and exits while the pipes get their ``eof_grace``:
    the readers end as it closes stdout, when its environment (its memory) is
    already gone and it is not a zombie yet.  The cleanup waits (bounded) for
    such an exiting child of ours, then reaps it."""
    pids: list[int] = []
    left: list[int] = []  # the runs that left a zombie
    try:
        for run in range(_RACE_RUNS):
            _script(fake_claude, setsid=setsid, hold_stdout=True, result=True)
            await fake_claude.agent().run("do the task")
            pids = run_pids(fake_claude).get("child", [])
            assert pids, "the child never started"
            if _zombie_descendants(within=0.2):
                left.append(run)
                kill_and_reap(pids)  # the next run starts clean
    finally:
        kill_and_reap(pids)
    assert left == [], f"{len(left)} of {_RACE_RUNS} runs left a zombie"


def _wait_exited(pid: int, within: float = 5.0) -> None:
    """Wait (bounded) until ``pid`` has exited (a zombie or gone)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.Error:
            return
        time.sleep(0.02)


@pytest.mark.timeout(15)
@pytest.mark.parametrize("setsid", [False, True], ids=["cli-session", "own-session"])
async def test_a_leftover_kept_running_is_reaped_when_it_exits(
    fake_claude: FakeCLI, setsid: bool
) -> None:
    """kill_leftovers=False: the child outlives the run, reparented to us by the
    subreaper; when it exits after the run, with no other run to come, it is
    reaped (the host never accumulates zombies)."""
    _script(fake_claude, setsid=setsid, hold_stdout=False, result=True)
    agent = fake_claude.agent(kill_leftovers=False)
    pids: list[int] = []
    try:
        await agent.run("do the task")
        pids = run_pids(fake_claude).get("child", [])
        assert pids, "the child never started"
        assert psutil.Process(pids[0]).status() != psutil.STATUS_ZOMBIE, "kept running"
        _wait_exited(pids[0])
        assert _zombie_descendants(within=1.0) == []
    finally:
        kill_and_reap(pids)  # the autouse leak check must not see it
