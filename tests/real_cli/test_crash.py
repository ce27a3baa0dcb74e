"""Crash containment with the real ``claude`` (issue 12), against the fake
model server: the runner is SIGKILLed while claude's Bash tool runs a long
``python3 -c 'import time; time.sleep(600)'`` in a session of its own; claude
gets its parent-death signal (SIGTERM: it cleans up its own tools, which
takes it 2-3.5 s) and the sweep leaves nothing of the run.  Skips when claude is not
installed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from coding_genesis._supervision import spawn
from coding_genesis._supervision.ledger import Ledger
from coding_genesis._workspace.sweep import sweep_sync
from tests.fakes.model_server import FakeModelServer
from tests.real_cli.test_claude_codex import (
    SLEEP_PROMPTS,
    Rig,
    hermetic_env,
    is_sleeper,
    processes_of_run,
)
from tests.support import exits_within

__all__ = ["hermetic_env"]  # the autouse fixture of test_real_cli applies here too

pytestmark = pytest.mark.skipif(
    not spawn.pdeathsig_supported(), reason="PR_SET_PDEATHSIG is Linux-only"
)

HOST = """
import json, sys
from coding_genesis import CodingGenesisAgent
settings = json.loads(sys.argv[1])
prompt = settings.pop("prompt")
agent = CodingGenesisAgent("claude", **settings)
def started(event):
    if event.kind == "run_started":
        print(json.dumps({"run_id": event.run_id, "pid": event.pid}), flush=True)
agent.subscribe(started)
agent.run_sync(prompt)
"""


def test_real_claude_mid_tool_dies_with_its_runner_and_the_sweep_stops_the_tool(
    real_claude: str, model_server: FakeModelServer, tmp_path: Path
) -> None:
    rig = Rig("claude", real_claude, model_server, tmp_path)
    ledger = tmp_path / "ledger"
    settings = {
        "prompt": SLEEP_PROMPTS["claude"],
        "cli_path": rig.cli,
        "cwd": str(rig.work),
        "timeout": 120,
        "env": rig.env(),
        "options": rig.options(True),
        "ledger": str(ledger),
    }
    script = tmp_path / "host.py"
    script.write_text(HOST)
    host = subprocess.Popen(
        [sys.executable, str(script), json.dumps(settings)],
        cwd=str(Path(__file__).parents[2]),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert host.stdout is not None
        started = json.loads(host.stdout.readline())
        run_id, cli = started["run_id"], started["pid"]
        deadline = time.monotonic() + 60
        sleeper = None
        while sleeper is None and time.monotonic() < deadline:
            for proc in processes_of_run(run_id):
                try:
                    if is_sleeper(proc.cmdline()):
                        sleeper = proc
                except psutil.Error:
                    continue
            time.sleep(0.1)
        assert sleeper is not None, "claude never started its Bash tool within 60 s"
        host.send_signal(signal.SIGKILL)
        host.wait()
    finally:
        host.kill()
        host.wait()
        if host.stdout is not None:
            host.stdout.close()
    # claude handles its SIGTERM (the parent-death signal claude declares) by
    # cleaning up its own tools first: measured 2-3.5 s with claude 2.1.330, so
    # the bound here is not the fake CLI's 1 s.
    t0 = time.monotonic()
    assert exits_within(cli, 10.0), "claude outlived its runner by more than 10 s"
    print(f"claude exited {time.monotonic() - t0:.2f} s after its runner's death")
    swept = sweep_sync(Ledger(ledger))
    assert [s.run_id for s in swept] == [run_id]
    assert exits_within(sleeper.pid, 2.0), "the tool survived claude's cleanup and the sweep"
    assert processes_of_run(run_id) == []


def test_real_claude_stalled_once_is_resumed_and_succeeds(
    real_claude: str, model_server: FakeModelServer, tmp_path: Path
) -> None:
    """The fake model server hangs claude's first request: claude sits silent
    and idle, is stopped as stalled, and the retry resumes its session and
    succeeds."""
    from coding_genesis import CodingGenesisAgent
    from coding_genesis.retry import RetryPolicy
    from coding_genesis.status import FailureCategory

    rig = Rig("claude", real_claude, model_server, tmp_path)
    policy = RetryPolicy.default().with_category(FailureCategory.STALLED, base_delay=0.01)
    agent = CodingGenesisAgent(
        "claude",
        cli_path=rig.cli,
        cwd=rig.work,
        timeout=60,
        grace=1.0,
        stall_timeout=3.0,
        retry=policy,
        env=rig.env(),
        ledger=str(tmp_path / "ledger"),
    )
    result = agent.run_sync("SCENARIO:hangonce resumed fine")
    assert result["status"] == 0, json.dumps(result, default=str)[:3000]
    assert result["retry_count"] == 1 and "resumed fine" in result["message"]
    (entry,) = result["retry_history"]
    assert entry["category"] == "stalled" and entry["error"] == "stalled"
    assert "no output on stdout or stderr for " in entry["message"]
    assert entry["resume_session"] == result["session_id"]
    assert [r.action for r in model_server.model_requests()][:1] == ["hang"]
