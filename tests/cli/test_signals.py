"""Ctrl-C and SIGTERM of `genesis run` and `genesis run-many` (issue 28), also when started with
SIGINT ignored (as a script's background job is): the process trees are stopped, every result so
far and the summary are printed, the exit code is 128+N, each ending is named ``cancelled`` and
`genesis stats` counts those runs apart from the failures."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import FakeCLI, marked_processes

pytestmark = [pytest.mark.timeout(60), pytest.mark.slow]

#: Becomes `genesis` with SIGINT ignored: the disposition survives exec, as a shell gives it
#: to a background job.
IGNORING_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "os.execv(sys.executable, [sys.executable, '-m', 'coding_genesis._cli.main', *sys.argv[1:]])"
)


def genesis(args: list[str], env: dict[str, str], *, ignore_sigint: bool) -> subprocess.Popen[str]:
    prefix = (
        [sys.executable, "-c", IGNORING_SIGINT]
        if ignore_sigint
        else [sys.executable, "-m", "coding_genesis._cli.main"]
    )
    return subprocess.Popen(
        [*prefix, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("ignore_sigint", [False, True], ids=["sigint-default", "sigint-ignored"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("command", ["run", "run-many"])
def test_a_signal_stops_the_trees_prints_and_exits_128_plus_n(
    command: str, signum: int, ignore_sigint: bool, tmp_path: Path
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, {"hang": True}])
    log = tmp_path / "runs.jsonl"
    env = {
        **os.environ,
        **fake.env(),
        # What `genesis run` reads, read by run-many too: the backend and its binary.
        "GENESIS_BACKEND": "claude",
        "GENESIS_CLAUDE_PATH": fake.path,
        "GENESIS_TRANSCRIPTS": str(tmp_path / "runs"),
        "GENESIS_RUN_LOG": str(log),
    }
    if command == "run":
        args, runs = ["run", "--grace", "0.5", "--timeout", "120", "go"], 1
    else:
        batch = tmp_path / "batch.jsonl"
        batch.write_text('{"prompt": "one"}\n{"prompt": "two"}\n')
        args, runs = ["run-many", str(batch), "--grace", "0.5", "--timeout", "120"], 2
    proc = genesis(args, env, ignore_sigint=ignore_sigint)

    def clis() -> list[int]:  # the fake CLIs (genesis carries the mark too: not it)
        return [p.pid for p in marked_processes([fake.mark]) if p.pid != proc.pid]

    try:
        deadline = time.monotonic() + 30
        while len(clis()) < runs and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(clis()) == runs
        time.sleep(0.3)  # the signal handlers are up once the CLIs run
        started = time.monotonic()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signum, err
    assert took < 10, (took, err)
    assert "Traceback" not in err
    assert clis() == []  # every tree stopped
    if command == "run-many":
        results = [json.loads(line) for line in out.splitlines()]
        assert [r["index"] for r in results] == [0, 1]
        assert {r["failure"]["category"] for r in results} == {"cancelled"}
        name = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
        assert err.splitlines()[-1] == (
            f"genesis run-many: 0 succeeded, 0 failed, 2 cancelled (stopped by {name})"
        )
    else:
        assert "stopped by" in err and "process tree stopped" in err
    # The recorded runs are named cancelled, and `genesis stats` counts them apart.
    recorded = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(recorded) == runs
    assert {r["category"] for r in recorded} == {"cancelled"}
    stats = subprocess.run(
        [sys.executable, "-m", "coding_genesis._cli.main", "stats", "--since", "all", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=True,
    )
    counted = json.loads(stats.stdout)
    assert (counted["runs"], counted["failures"], counted["cancelled"]) == (runs, 0, runs)
