"""The shared process-table scan: reused only when fresh enough, and finding
what psutil finds."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from coding_genesis._supervision import procscan


def test_a_scan_is_shared_only_with_callers_that_learnt_their_news_before_it() -> None:
    before = time.monotonic()
    procscan.parents()  # a new scan
    count = procscan.scan_count()
    procscan.parents(not_before=before)  # started after `before`: shared
    assert procscan.scan_count() == count
    procscan.parents(not_before=time.monotonic())  # news since: a new scan
    assert procscan.scan_count() == count + 1
    procscan.parents()  # None: always a new scan
    assert procscan.scan_count() == count + 2


@pytest.mark.slow
def test_children_match_psutil_and_a_fresh_child_is_never_missed() -> None:
    me = psutil.Process()
    procscan.parents()  # a scan from before the child exists
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time; "
            "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); "
            "print(g.pid, flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None
        grandchild = int(child.stdout.readline())
        born = time.monotonic()
        # A scan from before the child was born is not used for news after it.
        found = {p.pid for p in procscan.children(me, recursive=True, not_before=born)}
        assert {child.pid, grandchild} <= found
        assert found == {p.pid for p in me.children(recursive=True)}
        direct = {p.pid for p in procscan.children(me, not_before=born)}
        assert child.pid in direct and grandchild not in direct
        assert child.pid not in {p.pid for p in procscan.children(me, skip={child.pid})}
    finally:
        for pid in (child.pid, grandchild):
            psutil.Process(pid).kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()


@pytest.mark.slow
def test_a_zombie_child_is_seen_without_being_reaped() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert procscan.has_zombie_child() is True
    assert child.wait(timeout=5) == 0  # still ours to reap, exit status intact
    assert procscan.has_zombie_child() is False


def test_a_gone_process_has_no_children() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    proc = psutil.Process(child.pid)
    child.wait()
    with pytest.raises(psutil.NoSuchProcess):
        procscan.children(proc)
