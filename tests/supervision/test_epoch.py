"""An epoch tells the processes that existed when a turn was armed from those
started since, by the start-time clock and the last pid handed out (or a
listing of pids): real processes."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from coding_genesis._supervision import epoch as epoch_mod, procscan
from coding_genesis._supervision.epoch import Epoch, handed_out_by


@pytest.fixture
def sleeper() -> Iterator[psutil.Process]:
    """A process that lives until the test ends."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield psutil.Process(child.pid)
    finally:
        child.kill()
        child.wait()


def test_a_process_started_before_the_epoch_predates_it(sleeper: psutil.Process) -> None:
    assert Epoch.now().predates(sleeper)
    assert Epoch.now().predates(psutil.Process())


def test_a_process_started_after_the_epoch_does_not(sleeper: psutil.Process) -> None:
    epoch = Epoch.now()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not epoch.predates(psutil.Process(child.pid))
        assert Epoch.now().predates(psutil.Process(child.pid))
    finally:
        child.kill()
        child.wait()


def test_a_listed_pid_reused_by_a_later_process_does_not_predate() -> None:
    """pids wrap: a pid that existed at the epoch, now held by a process started
    after it, is that later process's."""
    epoch = Epoch.now()
    time.sleep(0.05)  # past the start-time clock's resolution (a tick: 10 ms)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        proc = psutil.Process(child.pid)
        as_if_reused = Epoch(epoch.pids | {child.pid}, epoch.at, child.pid + 5)
        assert not as_if_reused.predates(proc)
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not epoch_mod._TICKS, reason="Linux start-time ticks")
def test_within_the_epochs_own_tick_the_pid_order_decides(sleeper: psutil.Process) -> None:
    """A process started in the epoch's own clock tick: by the last pid handed
    out (or, without it, by the listing)."""
    start = epoch_mod._start_ticks(sleeper.pid)
    assert start is not None
    pid = sleeper.pid
    assert Epoch(frozenset(), float(start), pid).predates(sleeper)
    assert Epoch(frozenset(), float(start), pid + 3).predates(sleeper)
    assert not Epoch(frozenset(), float(start), pid - 1).predates(sleeper)
    assert Epoch(frozenset({pid}), float(start)).predates(sleeper)
    assert not Epoch(frozenset(), float(start)).predates(sleeper)
    # An earlier or a later tick decides by itself.
    assert Epoch(frozenset(), float(start + 1), pid - 1).predates(sleeper)
    assert not Epoch(frozenset(), float(start - 1), pid + 3).predates(sleeper)


def test_the_pid_order_is_cyclic() -> None:
    assert handed_out_by(100, 100, 32768)
    assert handed_out_by(90, 100, 32768)
    assert not handed_out_by(101, 100, 32768)
    assert not handed_out_by(305, 32760, 32768)  # handed out after the wrap
    assert handed_out_by(32765, 310, 32768)  # handed out before the wrap
    assert handed_out_by(4_000_000, 12, 4_194_304)  # the large pid space, before its wrap
    assert not handed_out_by(13, 12, 4_194_304)


def test_a_gone_process_predates_nothing() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    proc = psutil.Process(child.pid)
    assert Epoch.now().predates(proc)
    child.kill()
    child.wait()
    assert not Epoch(frozenset({child.pid}), float("inf"), child.pid).predates(proc)


def test_the_empty_epoch_is_predated_by_nothing(sleeper: psutil.Process) -> None:
    assert not Epoch.empty().predates(sleeper)


def test_an_epoch_lists_pids_without_scanning_the_process_table() -> None:
    """The point of an epoch: cheap enough for every turn's path."""
    scans = procscan.scan_count()
    epoch = Epoch.now()
    assert procscan.scan_count() == scans
    assert Epoch.now().predates(psutil.Process())
    if epoch_mod._PID_MAX is not None:  # the kernel's /proc/loadavg: no listing at all
        assert epoch.pids == frozenset() and epoch.last_pid is not None


def test_where_loadavg_is_not_the_kernels_the_epoch_lists_pids(
    monkeypatch: pytest.MonkeyPatch, sleeper: psutil.Process
) -> None:
    monkeypatch.setattr(epoch_mod, "_PID_MAX", None)
    epoch = Epoch.now()
    assert epoch.last_pid is None
    assert {psutil.Process().pid, sleeper.pid} <= epoch.pids
    assert epoch.predates(sleeper)
