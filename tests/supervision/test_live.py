"""Live processes: one CLI kept running across turns, its stdin held open
(:class:`LiveStdin`), its clocks running only while a turn is armed
(:class:`TurnClocks`).  Real subprocesses: ``tests/fakes/live_echo.py``,
short timeouts."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from coding_genesis._supervision import epoch, procscan
from coding_genesis._supervision.childenv import RUN_MARKER_ENV
from coding_genesis._supervision.live import LiveStdin, LiveStdinClosed
from coding_genesis._supervision.process import run_process
from coding_genesis._supervision.stop import StopHandle
from coding_genesis._supervision.values import ProcessOutcome, StopReason, SupervisorConfig
from coding_genesis._supervision.watchdog import TurnClocks
from coding_genesis.errors import InvalidTimeoutError
from tests.support import FAKES, marked_processes, present, zombie_children

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(20)]

ECHO = str(FAKES / "live_echo.py")
#: The run's own limits are short: with clocks they must not apply.
CONFIG = SupervisorConfig(
    timeout=0.4,
    idle_timeout=0.3,
    stall_timeout=0.3,
    linger=0.1,
    grace=0.3,
    eof_grace=0.3,
    kill_wait=1.0,
)


class Live:
    """One live run of the echo fake: its stdin, its clocks, the lines it wrote."""

    def __init__(self) -> None:
        self.stdin = LiveStdin()
        self.clocks = TurnClocks()
        self.stop = StopHandle()
        self.marker = uuid.uuid4().hex
        self.lines: list[dict[str, Any]] = []
        self.pid: int | None = None
        self.outcome: ProcessOutcome | None = None
        self.ended = anyio.Event()
        self._buf = b""
        self._line = anyio.Event()

    def sink(self, chunk: bytes) -> bool:
        *whole, self._buf = (self._buf + chunk).split(b"\n")
        self.lines += [json.loads(line) for line in whole if line]
        self._line.set()
        return False

    async def run(self, argv: list[str], cwd: str) -> None:
        def spawned(pid: int) -> None:
            self.pid = pid

        try:
            self.outcome = await run_process(
                argv,
                cwd=cwd,
                env={**os.environ, RUN_MARKER_ENV: self.marker},
                stdin=self.stdin,
                config=CONFIG,
                on_stdout=self.sink,
                marker=self.marker,
                on_spawn=spawned,
                stop_handle=self.stop,
                clocks=self.clocks,
            )
        finally:
            self.ended.set()

    async def line(self, within: float = 5.0) -> dict[str, Any]:
        """The next line the CLI writes (bounded)."""
        seen = len(self.lines)
        with anyio.fail_after(within):
            while len(self.lines) == seen:
                self._line = anyio.Event()
                await self._line.wait()
        return self.lines[seen]

    async def ask(self, within: float = 5.0, **line: Any) -> dict[str, Any]:
        await self.stdin.write(json.dumps(line).encode() + b"\n")
        return await self.line(within)

    async def tell(self, **line: Any) -> None:
        await self.stdin.write(json.dumps(line).encode() + b"\n")

    async def end(self, within: float = 5.0) -> ProcessOutcome:
        with anyio.fail_after(within):
            await self.ended.wait()
        return present(self.outcome)


@contextlib.asynccontextmanager
async def live_run(cwd: str | None = None) -> AsyncIterator[Live]:
    """The echo fake run as a background task for the life of the block."""
    live = Live()
    async with anyio.create_task_group() as tg:
        tg.start_soon(live.run, [sys.executable, ECHO], cwd or os.getcwd())
        yield live
        tg.cancel_scope.cancel()


def assert_all_gone(live: Live, *pids: int) -> None:
    assert marked_processes([live.marker]) == []
    assert zombie_children() == []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc = psutil.Process(pid)
            assert proc.environ().get(RUN_MARKER_ENV) != live.marker, f"{pid} alive"


@pytest.mark.slow
async def test_several_turns_over_one_process() -> None:
    async with live_run() as live:
        # Written before the CLI is spawned: the write waits for the pipe.
        await live.tell(text="first")
        assert live.pid is not None
        assert await live.line() == {"echo": "first"}
        pid = live.pid
        for turn in range(3):
            live.clocks.arm(timeout=5, idle_timeout=2, stall_timeout=2)
            assert live.clocks.armed
            assert await live.ask(text=f"turn {turn}") == {"echo": f"turn {turn}"}
            live.clocks.disarm()
            assert not live.clocks.armed
        assert live.pid == pid
        live.stdin.close()
        outcome = await live.end()
    assert outcome.pid == pid and outcome.returncode == 0 and outcome.stop_reason is None
    assert live.lines[-1] == {"eof": True}
    assert_all_gone(live)


@pytest.mark.slow
async def test_closing_stdin_lets_the_cli_exit_by_itself() -> None:
    async with live_run() as live:
        live.clocks.arm(timeout=5)
        assert await live.ask(text="hi") == {"echo": "hi"}
        live.stdin.close()
        live.stdin.close()  # idempotent
        assert live.stdin.closed
        outcome = await live.end()
    assert outcome.returncode == 0 and outcome.signals_sent == []
    assert outcome.stop_reason is None and outcome.stdout_eof
    assert live.lines[-1] == {"eof": True}
    with pytest.raises(LiveStdinClosed):
        await live.tell(text="late")


@pytest.mark.slow
async def test_write_after_the_cli_exited_raises() -> None:
    async with live_run() as live:
        live.clocks.arm(timeout=5)
        await live.tell(do="exit", code=3)
        outcome = await live.end()
        assert live.stdin.closed
        with anyio.fail_after(1), pytest.raises(LiveStdinClosed) as raised:
            await live.tell(text="anyone?")
    assert outcome.returncode == 3 and outcome.stop_reason is None
    assert isinstance(raised.value, BrokenPipeError)


@pytest.mark.slow
async def test_write_after_the_cli_closed_its_stdin_raises_while_it_runs() -> None:
    async with live_run() as live:
        live.clocks.arm(timeout=5)
        assert await live.ask(do="close_stdin", s=1.0) == {"closed_stdin": True}
        with anyio.fail_after(1), pytest.raises(LiveStdinClosed):
            await live.tell(text="x" * 100_000)  # more than the pipe holds: EPIPE, not a hang
        assert live.ended.is_set() is False  # the CLI still runs
        assert live.stdin.closed
        outcome = await live.end()
    assert outcome.returncode == 0 and outcome.signals_sent == []


async def test_a_write_waiting_for_a_cli_that_never_starts_raises(tmp_path: Path) -> None:
    async with live_run(str(tmp_path / "gone")) as live:  # no such cwd: Popen raises
        with anyio.fail_after(2), pytest.raises(LiveStdinClosed):
            await live.tell(text="hello?")
        outcome = await live.end()
    assert isinstance(outcome.spawn_error, FileNotFoundError) and outcome.pid is None


@pytest.mark.slow
async def test_a_turns_wall_timeout_stops_the_whole_tree() -> None:
    async with live_run() as live:
        live.clocks.arm(timeout=5)
        grandchild = (await live.ask(do="grandchild"))["grandchild"]
        live.clocks.disarm()
        live.clocks.arm(timeout=0.8)
        armed = time.monotonic()
        await live.tell(do="sleep", s=30)
        outcome = await live.end()
        took = time.monotonic() - armed
        with pytest.raises(LiveStdinClosed):
            await live.tell(text="after")
    assert outcome.stop_reason is StopReason.TIMEOUT
    assert "SIGTERM" in outcome.signals_sent
    assert 0.8 <= took < 3, took
    assert_all_gone(live, present(live.pid), grandchild)


@pytest.mark.slow
async def test_idle_timeout_counts_from_the_turns_arming() -> None:
    async with live_run() as live:
        live.clocks.arm(timeout=10, idle_timeout=0.6)
        ticks = await live.ask(do="tick", every=0.15, s=1.2)  # output keeps it alive
        assert ticks == {"tick": 0}
        await anyio.sleep(1.3)
        assert not live.ended.is_set() and len(live.lines) >= 6
        live.clocks.disarm()
        await anyio.sleep(0.8)  # silent longer than the idle timeout, between turns
        live.clocks.arm(timeout=10, idle_timeout=0.6)
        armed = time.monotonic()
        await live.tell(do="sleep", s=30)
        outcome = await live.end()
        took = time.monotonic() - armed
    assert outcome.stop_reason is StopReason.IDLE
    assert 0.6 <= took < 2.5, took
    assert_all_gone(live)


@pytest.mark.slow
async def test_nothing_times_out_between_turns() -> None:
    """Disarmed for longer than every limit (the turn's and the config's,
    which clocks replace): the process is still there for the next turn."""
    async with live_run() as live:
        live.clocks.arm(timeout=0.5, idle_timeout=0.3, stall_timeout=0.3)
        assert await live.ask(text="one") == {"echo": "one"}
        live.clocks.disarm()
        await anyio.sleep(1.2)
        assert not live.ended.is_set()
        live.clocks.arm(timeout=0.5, idle_timeout=0.3, stall_timeout=0.3)
        assert await live.ask(text="two") == {"echo": "two"}
        live.clocks.disarm()
        live.stdin.close()
        outcome = await live.end()
    assert outcome.stop_reason is None and outcome.returncode == 0
    assert outcome.signals_sent == []


@pytest.mark.slow
async def test_a_silent_idle_turn_is_stalled_a_busy_one_is_not() -> None:
    async with live_run() as live:
        live.clocks.arm(timeout=10, stall_timeout=0.6)
        assert await live.ask(do="busy", s=1.2) == {"busy": 1.2}
        armed = time.monotonic()
        await live.tell(do="sleep", s=30)
        outcome = await live.end()
        took = time.monotonic() - armed
    assert outcome.stop_reason is StopReason.STALLED
    assert present(outcome.stall_silent_s) >= 0.6
    assert 0.6 <= took < 3, took
    assert_all_gone(live)


@pytest.mark.slow
async def test_a_short_turn_scans_no_process_table() -> None:
    """Arming a turn and a quick answer cost no scan of every process (the
    stall window takes its base one sampling interval in; strays are listed
    by pid): a scan is 1.5-9 ms on each turn's path."""
    async with live_run() as live:
        live.clocks.arm(timeout=10, idle_timeout=5, stall_timeout=5)
        assert await live.ask(text="warm") == {"echo": "warm"}
        live.clocks.disarm()
        await anyio.sleep(0.1)  # the first turn's start-up is over
        scans = procscan.scan_count()
        for i in range(5):
            live.clocks.arm(timeout=10, idle_timeout=5, stall_timeout=5)
            assert await live.ask(text=str(i)) == {"echo": str(i)}
            live.clocks.disarm()
        assert procscan.scan_count() == scans
    assert_all_gone(live)


@pytest.mark.slow
@pytest.mark.parametrize("armed", [True, False])
async def test_cancelling_the_task_stops_and_reaps_the_tree(armed: bool) -> None:
    async with live_run() as live:
        live.clocks.arm(timeout=5)
        grandchild = (await live.ask(do="grandchild"))["grandchild"]
        if not armed:
            live.clocks.disarm()
        await live.tell(do="sleep", s=30)
        # leaving the block cancels the run's task
    assert live.ended.is_set() and live.outcome is None  # cancelled: no outcome
    assert live.stdin.closed
    assert_all_gone(live, present(live.pid), grandchild)


async def test_the_stop_handle_stops_the_tree_between_turns() -> None:
    async with live_run() as live:
        live.clocks.arm(timeout=5)
        grandchild = (await live.ask(do="grandchild"))["grandchild"]
        live.clocks.disarm()
        assert live.stop.stop("cancelled", "the session is closing")
        outcome = await live.end()
    assert outcome.stop_reason is StopReason.REQUESTED
    assert_all_gone(live, present(live.pid), grandchild)


@pytest.mark.slow
@pytest.mark.parametrize("ended_by", ["close", "timeout"])
async def test_a_write_blocked_on_a_full_pipe_raises_when_stdin_closes(ended_by: str) -> None:
    """The CLI reads nothing while a write waits for room: closing our end,
    or the run ending (a turn's timeout), wakes the write with the error."""
    failed = anyio.Event()

    async def flood() -> None:
        with pytest.raises(LiveStdinClosed):
            await live.stdin.write(b"x" * 1_000_000)
        failed.set()

    async with live_run() as live:
        live.clocks.arm(timeout=5)
        assert await live.ask(do="grandchild")  # it holds stdin too: no EPIPE
        await live.tell(do="sleep", s=30)
        async with anyio.create_task_group() as tg:
            tg.start_soon(flood)
            await anyio.sleep(0.3)
            assert not failed.is_set()  # blocked: the pipe is full
            if ended_by == "close":
                live.stdin.close()
            else:
                live.clocks.arm(timeout=0.2)
            with anyio.fail_after(3):
                await failed.wait()
        live.stop.stop("cancelled", "test over")
        outcome = await live.end()
    expected = StopReason.REQUESTED if ended_by == "close" else StopReason.TIMEOUT
    assert outcome.stop_reason is expected
    assert_all_gone(live)


async def test_concurrent_writes_do_not_interleave() -> None:
    async with live_run() as live:
        live.clocks.arm(timeout=5)
        texts = [str(i) * 70_000 for i in range(4)]  # each more than the pipe holds
        async with anyio.create_task_group() as tg:
            for text in texts:
                tg.start_soon(functools.partial(live.tell, text=text))
        with anyio.fail_after(5):
            while len(live.lines) < len(texts):
                await live.line()
        live.stdin.close()
        await live.end()
    assert sorted(line["echo"] for line in live.lines[:4]) == texts


def test_turn_clocks_take_only_positive_finite_limits() -> None:
    clocks = TurnClocks()
    for bad in ({"timeout": 0}, {"timeout": float("inf")}, {"timeout": 1, "idle_timeout": -1}):
        with pytest.raises(InvalidTimeoutError):
            clocks.arm(**bad)
    assert not clocks.armed


async def test_a_live_stdin_serves_one_run() -> None:
    async with live_run() as live:
        live.stdin.close()
        await live.end()
        with pytest.raises(RuntimeError):
            await run_process(
                [sys.executable, ECHO],
                cwd=os.getcwd(),
                env=dict(os.environ),
                stdin=live.stdin,
                config=CONFIG,
                on_stdout=live.sink,
                marker=live.marker,
            )


@pytest.mark.slow
async def test_write_nowait_writes_what_the_pipe_takes_at_once() -> None:
    """Nothing before the spawn or while a write waits (0: the caller queues),
    then all of a line at once; after the CLI closed its stdin, it raises."""
    line = json.dumps({"text": "now"}).encode() + b"\n"
    async with live_run() as live:
        assert live.stdin.write_nowait(line) == 0  # not spawned yet: nothing written
        live.clocks.arm(timeout=5)
        assert await live.ask(text="up") == {"echo": "up"}
        assert live.stdin.write_nowait(line) == len(line)
        assert await live.line() == {"echo": "now"}
        await live.tell(do="sleep", s=30)  # it reads nothing: the pipe fills
        blocked = anyio.Event()

        async def flood() -> None:
            blocked.set()
            with pytest.raises(LiveStdinClosed):
                await live.stdin.write(b"x" * 1_000_000)

        async with anyio.create_task_group() as tg:
            tg.start_soon(flood)
            await blocked.wait()
            await anyio.sleep(0.2)
            assert live.stdin.write_nowait(line) == 0  # a write waits for room: not now
            live.stdin.close()
        with pytest.raises(LiveStdinClosed):
            live.stdin.write_nowait(line)
        live.stop.stop("cancelled", "test over")
        await live.end()
    assert_all_gone(live)


@pytest.mark.parametrize("by", ["last pid", "listing"])
async def test_stop_strays_stops_what_the_turn_started_and_spares_the_rest(
    by: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process of the tree started before the turn was armed lives on; one
    the turn started is stopped; the CLI answers the next turn.  The epoch
    tells them by the last pid handed out, or (a container's /proc/loadavg)
    by a listing of pids."""
    if by == "listing":
        monkeypatch.setattr(epoch, "_PID_MAX", None)
    async with live_run() as live:
        live.clocks.arm(timeout=10)
        older = (await live.ask(do="grandchild"))["grandchild"]
        live.clocks.disarm()
        live.clocks.arm(timeout=10)
        newer = (await live.ask(do="grandchild"))["grandchild"]
        assert await live.clocks.stop_strays() == 1
        assert not psutil.pid_exists(newer) or psutil.Process(newer).status() == "zombie"
        assert psutil.Process(older).is_running()
        assert (await live.ask(text="still here")) == {"echo": "still here"}
        live.clocks.disarm()
        live.clocks.arm(timeout=10)
        assert await live.clocks.stop_strays() == 0  # the older one predates this turn too
    assert_all_gone(live, present(live.pid), older, newer)
