"""Crash soak (issue 12): 50 runner processes SIGKILLed at random moments
(before, during and after their CLI starts), then one sweep of the run
ledger: no process of those runs is left.  (Each runner also sweeps at its
first run, so runs of earlier waves may be swept before the last sweep.)  The figures are printed at the end
of the pytest run like the other reliability figures."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from coding_genesis._supervision import spawn
from coding_genesis._supervision.ledger import Ledger
from coding_genesis._workspace.sweep import sweep_sync
from tests.reliability import figures
from tests.support import FakeCLI, marked_processes, zombie_children

pytestmark = pytest.mark.slow

RUNNERS = 50
#: Runners alive at once (the machine may have 2 cores).
WAVE = 10
#: Each runner is killed this long after it was started, uniformly at random.
KILL_WITHIN_S = 5.0

HOST = """
import json, sys
from coding_genesis import CodingGenesisAgent
CodingGenesisAgent("claude", **json.loads(sys.argv[1])).run_sync("soak")
"""

ESCAPING: list[dict[str, Any]] = [
    {"init": True},
    {"grandchild": {"setsid": True, "ignore_sigterm": True, "hold_stdout": False, "sleep": 600}},
    {"await_records": {"key": "grandchild", "count": 1}},
    {"hang": True},
]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _kill_window(fake: FakeCLI, argv: list[str], cwd: str) -> float:
    """The span the kills are spread over: ``KILL_WITHIN_S``, or twice the time
    one runner takes to reach the middle of its run (its CLI's grandchild
    started) on this machine now, if longer: under load a runner may need more
    than 5 s to start, and kills that all land before any CLI started would
    test nothing.  The calibration runner is killed too, as the others are."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while time.monotonic() - started < 60:
            if any("grandchild" in r for r in fake.records()):
                break
            time.sleep(0.05)
        return max(KILL_WITHIN_S, 2 * (time.monotonic() - started))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


@pytest.mark.timeout(400)
@pytest.mark.skipif(not spawn.pdeathsig_supported(), reason="PR_SET_PDEATHSIG is Linux-only")
def test_fifty_runners_killed_at_random_then_one_sweep(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    record_property: Any,
) -> None:
    fake = FakeCLI(tmp_path)
    fake.script(ESCAPING)
    ledger_dir = tmp_path / "ledger"
    script = tmp_path / "host.py"
    script.write_text(HOST)
    settings = json.dumps(
        {
            "cli_path": fake.path,
            "env": fake.env(),
            "timeout": 120,
            "ledger": str(ledger_dir),
            "transcripts": str(tmp_path / "runs"),
        }
    )
    rng = random.Random(12)
    repo = str(Path(__file__).parent.parent.parent)
    window = _kill_window(fake, [sys.executable, str(script), settings], repo)
    before = len(fake.records())  # the calibration's run, not counted below
    started = time.monotonic()
    moments: list[float] = []
    for _wave in range(RUNNERS // WAVE):
        hosts = []
        for _ in range(WAVE):
            moment = rng.uniform(0.0, window)
            moments.append(moment)
            proc = subprocess.Popen(
                [sys.executable, str(script), settings],
                cwd=repo,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            hosts.append((time.monotonic() + moment, proc))
        for when, proc in sorted(hosts, key=lambda h: h[0]):
            time.sleep(max(0.0, when - time.monotonic()))
            proc.send_signal(signal.SIGKILL)
        for _, proc in hosts:
            proc.wait()
    killed_at = time.monotonic()
    records = fake.records()[before:]
    clis = [r["pid"] for r in records if "argv" in r]
    grandchildren = [int(r["grandchild"]) for r in records if "grandchild" in r]
    time.sleep(1.0)
    clis_alive_after_1s = [pid for pid in clis if _alive(pid)]
    left_before_sweep = marked_processes((fake.mark,), ("FAKE_CLI_MARK",))
    sweep_started = time.monotonic()
    swept = sweep_sync(Ledger(ledger_dir))
    sweep_s = round(time.monotonic() - sweep_started, 2)
    deadline = time.monotonic() + 2.0
    while marked_processes((fake.mark,), ("FAKE_CLI_MARK",)) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = marked_processes((fake.mark,), ("FAKE_CLI_MARK",))
    described = []
    for leftover in left:
        try:
            described.append(f"{leftover.pid} {' '.join(leftover.cmdline())[:80]}")
            leftover.kill()
        except psutil.Error:
            continue
    figure = {
        "test": "crash_soak",
        "runs": RUNNERS,
        "clis_started": len(clis),
        "grandchildren_started": len(grandchildren),
        "clis_alive_1s_after_kill": len(clis_alive_after_1s),
        "left_before_sweep": len(left_before_sweep),
        #: Later runners sweep at their first run too: runs marked by any sweep.
        "runs_marked_ended": len(list((tmp_path / "runs").glob("*/ended.json"))),
        "runs_swept_by_the_last_sweep": len(swept),
        "processes_stopped_by_sweep": sum(len(s.stopped) for s in swept),
        "sweep_seconds": sweep_s,
        "leaked_processes": len(left),
        "zombies": len(zombie_children()),
        "fd_delta": None,
        "thread_delta": None,
        "not_ready": None,
        "kill_moments_s": [min(moments), max(moments)],
        "kill_window_s": round(window, 1),
        "seconds": round(killed_at - started, 1),
    }
    figure["json"] = str(figures.add(figure, tmp_path_factory.getbasetemp()))
    record_property("reliability", figure)
    print(json.dumps(figure))
    assert not described, f"processes of killed runs left after the sweep: {described}"
    assert not clis_alive_after_1s, f"CLIs outlived their runner by 1 s: {clis_alive_after_1s}"
    assert len(clis) > 0 and len(grandchildren) > 0, figure  # the kills did land mid-run
    assert list(Ledger(ledger_dir).entries()) == []
