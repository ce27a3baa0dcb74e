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

import anyio
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


@pytest.mark.xfail(
    strict=False,
    reason=(
        "a race, seen about once in 12 runs: the child closes stdout as it exits, the "
        "readers end, the sweep's snapshot cannot read its environment (its memory is "
        "gone) so finds no leftover, and reap_all sees no zombie yet (waitid WNOWAIT: "
        "not one until exit_notify); it turns zombie just after, reparented to us, and "
        "no later run reaps it (born over 1 s before that run)"
    ),
)
@pytest.mark.timeout(30)
async def test_a_child_exiting_as_the_pipes_close_is_reaped(fake_claude: FakeCLI) -> None:
    """The child holds stdout and exits while the pipes get their ``eof_grace``."""
    pids: list[int] = []
    try:
        for _ in range(10):
            _script(fake_claude, setsid=False, hold_stdout=True, result=True)
            await fake_claude.agent().run("do the task")
            pids = run_pids(fake_claude).get("child", [])
            assert pids, "the child never started"
            assert _zombie_descendants(within=0.2) == []
    finally:
        kill_and_reap(pids)


@pytest.mark.xfail(
    strict=True,
    reason=(
        "kill_leftovers=False: the child outlives the run, reparented to us by the "
        "subreaper while the run was in flight; when it exits after the run nothing "
        "waits for it (a later run's reap skips zombies born over 1 s before it "
        "started), so it stays our zombie until the host exits"
    ),
)
@pytest.mark.timeout(15)
async def test_a_leftover_kept_running_is_reaped_when_it_exits(fake_claude: FakeCLI) -> None:
    _script(fake_claude, setsid=True, hold_stdout=False, result=True)
    agent = fake_claude.agent(kill_leftovers=False)
    pids: list[int] = []
    try:
        await agent.run("do the task")
        pids = run_pids(fake_claude).get("child", [])
        assert pids, "the child never started"
        # The child exits 0.3 s after it started; a run starting over 1 s after its
        # birth takes it for the host's own (born before the run): not reaped either.
        await anyio.sleep(1.2)
        fake_claude.script([{"result": "again"}])
        await agent.run("the next run")
        assert _zombie_descendants() == []
    finally:
        kill_and_reap(pids)  # the autouse leak check must not see it
