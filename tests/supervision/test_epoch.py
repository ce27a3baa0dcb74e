"""An epoch tells the processes that existed when a turn was armed from those
started since, by a listing of pids and the start-time clock: real processes."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from coding_genesis._supervision import procscan
from coding_genesis._supervision.epoch import Epoch


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
    """pids wrap: a pid that was listed, now held by a process started after
    the epoch, is that later process's."""
    epoch = Epoch.now()
    time.sleep(0.05)  # past the start-time clock's resolution (a tick: 10 ms)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        proc = psutil.Process(child.pid)
        as_if_reused = Epoch(epoch.pids | {child.pid}, epoch.at)
        assert not as_if_reused.predates(proc)
    finally:
        child.kill()
        child.wait()


def test_a_gone_process_predates_nothing() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    proc = psutil.Process(child.pid)
    assert Epoch.now().predates(proc)
    child.kill()
    child.wait()
    assert not Epoch(frozenset({child.pid}), float("inf")).predates(proc)


def test_the_empty_epoch_is_predated_by_nothing(sleeper: psutil.Process) -> None:
    assert not Epoch.empty().predates(sleeper)


def test_an_epoch_lists_pids_without_scanning_the_process_table() -> None:
    """The point of an epoch: cheap enough for every turn's path."""
    scans = procscan.scan_count()
    epoch = Epoch.now()
    assert procscan.scan_count() == scans
    assert psutil.Process().pid in epoch.pids
    assert 1 in epoch.pids or psutil.Process().ppid() in epoch.pids
