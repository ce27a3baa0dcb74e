"""What the supervisor must never do: signal a process of the host program's
own session (or its process group), or take the exit status of a child that
someone else is waiting for; and what it still does without the subreaper.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from coding_genesis import Event
from coding_genesis._supervision import procscan
from coding_genesis._supervision.childenv import RUN_MARKER_ENV
from coding_genesis._supervision.table import (
    _PR_GET_CHILD_SUBREAPER,
    _PR_SET_CHILD_SUBREAPER,
    _prctl,
    keep,
    subreaper_enabled,
)
from coding_genesis._supervision.tree import Tree
from tests.support import FakeCLI, marked_processes
from tests.tree_support import assert_tree_gone, describe, run_pids

pytestmark = pytest.mark.anyio

ESCAPE: list[dict[str, Any]] = [
    {"init": True},
    {"grandchild": {"double_fork": True, "ignore_sigterm": True, "sleep": 600}},
    {"grandchild": {"setsid": True, "ignore_sigterm": True, "sleep": 600}},
    {"hang": True},
]


@pytest.mark.timeout(15)
async def test_a_marked_process_in_our_own_session_is_never_signaled(tmp_path: Path) -> None:
    """Even carrying the run's marker and being our child, a process of our own
    session (and group) is not part of any run: a stop leaves it alone."""
    marker = "not-a-run-" + os.urandom(4).hex()
    env = {**os.environ, RUN_MARKER_ENV: marker}
    ours = subprocess.Popen(  # noqa: ASYNC220 - a host-program child, on purpose
        [sys.executable, "-c", "import time; time.sleep(30)"], env=env
    )
    try:
        assert os.getpgid(ours.pid) == os.getpgrp()
        await anyio.sleep(0.1)  # let it exec, so its environment is readable
        tree = Tree(None, 2**22 + 1, marker, time.time())
        assert tree.snapshot() == {}
        sent = await tree.stop((signal.SIGTERM,), grace=0.1, kill_wait=0.5)
        assert sent == []
        assert ours.poll() is None
    finally:
        ours.kill()
        ours.wait()


LEADER_GONE_FIRST = """
import ctypes, threading, time
time.sleep(0.3)
threading.Thread(target=time.sleep, args=(0.3,)).start()
ctypes.CDLL(None).pthread_exit(None)  # the main thread ends, the other one lives on
"""


@pytest.mark.timeout(15)
async def test_a_zombie_leader_is_reaped_once_its_last_thread_is_gone(tmp_path: Path) -> None:
    """A multi-threaded process whose main thread ended shows as a zombie but
    cannot be reaped until its other threads are gone (claude-agent-acp's
    claude, when its adapter exits): the run's reaping waits for it (bounded)
    instead of leaving its zombie behind."""
    marker = "leader-" + os.urandom(4).hex()
    env = {**os.environ, RUN_MARKER_ENV: marker}
    child = subprocess.Popen(  # noqa: ASYNC220 - a run's process, reaped by the tree
        [sys.executable, "-c", LEADER_GONE_FIRST], env=env, start_new_session=True
    )
    try:
        tree = Tree(None, 2**22 + 1, marker, time.time())
        for _ in range(100):  # found while alive (its environment readable)
            if child.pid in tree.snapshot():
                break
            await anyio.sleep(0.02)
        assert child.pid in tree.members
        for _ in range(500):
            if psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE:
                break
            await anyio.sleep(0.01)
        await tree.reap_all()
        with pytest.raises(ChildProcessError):  # reaped by the tree
            os.waitpid(child.pid, os.WNOHANG)  # noqa: ASYNC222 - WNOHANG: never blocks
    finally:
        if child.pid in {p.pid for p in psutil.Process().children()}:
            child.kill()
            child.wait()
        child.returncode = 0  # reaped above: Popen must not wait on it again


@pytest.mark.slow
@pytest.mark.timeout(20)
async def test_foreign_children_keep_their_exit_status(fake_claude: FakeCLI) -> None:
    """While runs stop escapees and reap orphans: a child of the host program
    in its own session that nobody has waited for yet keeps its zombie (and
    exit code 7); a child in a new session awaited by its owner gets its 9."""
    subreaper_enabled()
    plain = subprocess.Popen([sys.executable, "-c", "raise SystemExit(7)"])  # noqa: ASYNC220
    fake_claude.script(
        [
            {"init": True},
            {"grandchild": {"double_fork": True, "hold_stdout": False, "sleep": 0.05}},
            {"sleep": 0.5},
            {"answer": "done"},
        ]
    )
    agent = fake_claude.agent(timeout=10.0)
    codes: list[int] = []

    async def owner() -> None:
        for _ in range(5):
            proc = await anyio.open_process(
                [sys.executable, "-c", "raise SystemExit(9)"], start_new_session=True
            )
            codes.append(await proc.wait())
            await proc.aclose()

    async with anyio.create_task_group() as tg:
        tg.start_soon(owner)
        results = [await agent.run("go") for _ in range(2)]
    assert [r["status"] for r in results] == [0, 0], [describe(r) for r in results]
    assert codes == [9] * 5
    assert plain.wait(timeout=5) == 7
    assert_tree_gone(fake_claude)


SCRIPT = textwrap.dedent(
    """
    import json, sys
    import anyio
    from coding_genesis import CodingGenesisAgent
    from coding_genesis._supervision.table import set_subreaper, subreaper_enabled

    async def main():
        if sys.argv[3] == "off":
            set_subreaper(False)  # in code: the library reads no GENESIS_SUBREAPER
        agent = CodingGenesisAgent(
            "claude", cli_path=sys.argv[1], timeout=0.5, grace=0.2, env=json.loads(sys.argv[2])
        )
        result = await agent.run("go")
        print(json.dumps({"subreaper": subreaper_enabled(), "result": result}))

    anyio.run(main)
    """
)


@pytest.mark.slow
@pytest.mark.timeout(30)
def test_without_the_subreaper_the_marker_scan_finds_the_escapees(
    fake_claude: FakeCLI,
) -> None:
    """set_subreaper(False) (what GENESIS_SUBREAPER=0 does for `genesis`):
    orphans are not ours, yet the scan of our user's processes by the run
    marker finds and stops them."""
    fake_claude.script(ESCAPE)
    env = dict(os.environ)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, fake_claude.path, json.dumps(fake_claude.env()), "off"],
        env=env,
        capture_output=True,
        timeout=25,
        check=False,
        cwd=Path(__file__).parents[2],
    )
    assert done.returncode == 0, done.stderr.decode()
    out = json.loads(done.stdout)
    assert out["subreaper"] is False
    assert out["result"]["status"] == 124, describe(out["result"])
    # Without a subreaper the killed orphans' zombies belong to init (or to
    # whichever subreaper is above), which reaps them in its own time: what
    # matters is that none of them still runs.
    pids = run_pids(fake_claude)
    assert len(pids["grandchild"]) == 2
    left = [p.pid for p in marked_processes([fake_claude.mark], env_names=("FAKE_CLI_MARK",))]
    assert not left, f"still alive: {left}"
    for role, group in pids.items():
        for pid in group:
            try:
                proc = psutil.Process(pid)
                zombie = proc.status() == psutil.STATUS_ZOMBIE
                ours = proc.ppid() == os.getpid()
            except psutil.NoSuchProcess:
                continue
            assert zombie or not _same_mark(pid, fake_claude), (role, pid)
            if zombie and ours:
                os.waitpid(pid, 0)


def _same_mark(pid: int, fake: FakeCLI) -> bool:
    try:
        return psutil.Process(pid).environ().get("FAKE_CLI_MARK") == fake.mark
    except psutil.Error:
        return False


@pytest.mark.slow
@pytest.mark.timeout(30)
def test_runs_in_several_threads_at_once(tmp_path: Path) -> None:
    """run_sync from a thread pool: one event loop per thread, one registry of
    run main pids for all; exit codes stay exact and nothing is left."""
    from concurrent.futures import ThreadPoolExecutor

    fakes = [FakeCLI(tmp_path, "claude") for _ in range(4)]
    for i, fake in enumerate(fakes):
        fake.script(
            [
                {"grandchild": {"double_fork": True, "hold_stdout": False, "sleep": 0.05}},
                {"grandchild": {"setsid": True, "ignore_sigterm": True, "sleep": 600}},
                {"init": True},
                {"sleep": 0.2},
                {"exit": 10 + i},
            ]
        )
    agents = [fake.agent(timeout=10.0, grace=0.2) for fake in fakes]
    with ThreadPoolExecutor(len(agents)) as pool:
        results = list(pool.map(lambda a: a.run_sync("go"), agents))
    assert [r["exit_code"] for r in results] == [10, 11, 12, 13], [describe(r) for r in results]
    assert {r["status"] for r in results} == {1}  # the CLI's own exit: status 1
    assert all(r["leftovers_stopped"] >= 1 for r in results)
    for fake in fakes:
        assert_tree_gone(fake)


@pytest.mark.slow
@pytest.mark.timeout(15)
@pytest.mark.parametrize("host_had_it", [False, True], ids=["host-off", "host-on"])
async def test_the_host_is_a_subreaper_only_while_runs_are_in_flight(
    fake_claude: FakeCLI, host_had_it: bool
) -> None:
    """Orphans of the host's other children are not ours between runs; a host
    that made itself a subreaper stays one."""
    if not subreaper_enabled():
        pytest.skip("no child subreaper on this system")
    if host_had_it:
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    try:
        during: list[int | None] = []

        def look(event: Event) -> None:
            if event.kind == "run_started":
                during.append(_prctl(_PR_GET_CHILD_SUBREAPER))

        agent = fake_claude.agent()
        agent.subscribe(look)
        before = _prctl(_PR_GET_CHILD_SUBREAPER)
        result = await agent.run("go")
        after = _prctl(_PR_GET_CHILD_SUBREAPER)
        assert result["status"] == 0, describe(result)
        assert (before, during, after) == (int(host_had_it), [1], int(host_had_it))
    finally:
        _prctl(_PR_SET_CHILD_SUBREAPER, 0)


def _exit_after(seconds: float, code: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", f"import time, sys; time.sleep({seconds}); sys.exit({code})"]
    )


def test_the_keeper_reaps_only_the_process_it_was_given() -> None:
    """A kept leftover is reaped when it exits (waitid on its own pidfd); a
    child beside it keeps its zombie, so its owner still gets its exit status."""
    kept, other = _exit_after(0.2, 0), _exit_after(0.2, 3)
    try:
        assert keep(kept.pid, lambda: True)
        assert not keep(other.pid, lambda: False), "not that process any more: not kept"
        deadline = time.monotonic() + 5

        def other_done() -> bool:
            return psutil.Process(other.pid).status() == psutil.STATUS_ZOMBIE

        while (psutil.pid_exists(kept.pid) or not other_done()) and time.monotonic() < deadline:
            time.sleep(0.02)  # both exited: the one kept reaped, the other a zombie
        assert not psutil.pid_exists(kept.pid), "the kept child was not reaped"
        time.sleep(0.1)  # the keeper had time to (wrongly) reap the other too
        assert other_done(), "the keeper reaped a process it was not given"
        assert not procscan.exiting(other.pid), "a zombie is done exiting"
        assert other.wait(5) == 3
    finally:
        for proc in (kept, other):
            proc.kill()
            proc.wait(5)
    assert not procscan.exiting(os.getpid())
