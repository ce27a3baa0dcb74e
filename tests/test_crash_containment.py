"""Crash containment (issue 12): nothing of a run survives its runner.

Real processes throughout: a host process runs an agent on the fake CLI and
is SIGKILLed mid-run; the parent-death signal takes the CLI down with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from coding_genesis import process
from tests.support import FakeCLI

pytestmark = pytest.mark.skipif(
    not process.pdeathsig_supported(), reason="PR_SET_PDEATHSIG is Linux-only"
)

HOST = textwrap.dedent(
    """
    import json, sys
    from coding_genesis import CodingGenesisAgent
    from coding_genesis.backends import get_backend
    settings = json.loads(sys.argv[1])
    backend = get_backend("claude")
    if "pdeath_signal" in settings:  # a backend that declares another signal
        backend = type("Declared", (type(backend),), {"pdeath_signal": settings.pop("pdeath_signal")})()
    agent = CodingGenesisAgent(backend, **settings)
    agent.run_sync("hello")
    """
)


def gone(pid: int, within: float) -> bool:
    """True once ``pid`` has exited (a zombie counts: it runs nothing) within the limit."""
    deadline = time.monotonic() + within
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def wait_records(fake: FakeCLI, key: str, count: int = 1, within: float = 20.0) -> list[Any]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = [r for r in fake.records() if key in r]
        if len(found) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no {key!r} record within {within}s: {fake.records()}")


def start_host(fake: FakeCLI, tmp_path: Path, **settings: Any) -> subprocess.Popen[bytes]:
    script = tmp_path / "host.py"
    script.write_text(HOST)
    settings = {"cli_path": fake.path, "env": fake.env(), "timeout": 60, **settings}
    return subprocess.Popen(
        [sys.executable, str(script), json.dumps(settings)],
        cwd=str(Path(__file__).parent.parent),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_cli_dies_with_its_sigkilled_runner(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path)
    fake.script([{"init": True}, {"hang": True}])
    host = start_host(fake, tmp_path)
    try:
        cli = wait_records(fake, "argv")[0]["pid"]
        assert psutil.Process(cli).ppid() == host.pid
        host.send_signal(signal.SIGKILL)
        host.wait()
        assert gone(cli, 1.0), "the CLI outlived its runner by more than 1 s"
    finally:
        host.kill()
        host.wait()


def _sleeper(ready: threading.Event, box: list[subprocess.Popen[bytes]], direct: bool) -> None:
    argv = [sys.executable, "-c", "import time; time.sleep(30)"]
    if direct:  # the naive way: fork from this short-lived thread
        box.append(
            subprocess.Popen(
                argv, start_new_session=True, preexec_fn=process._pdeath_preexec(signal.SIGTERM)
            )
        )
    else:
        box.append(
            process.spawn(
                argv,
                cwd=os.getcwd(),
                env=os.environ,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pdeath_signal=signal.SIGTERM,
            )
        )
    ready.set()


@pytest.mark.parametrize("direct", [False, True], ids=["spawner-thread", "naive-control"])
def test_a_worker_thread_exiting_does_not_kill_the_cli(direct: bool) -> None:
    """The runner's main thread stays alive while the worker thread that
    spawned a run exits: the CLI is not killed by that.  The control forks
    from the worker thread itself and shows the kernel would kill it."""
    ready = threading.Event()
    box: list[subprocess.Popen[bytes]] = []
    worker = threading.Thread(target=_sleeper, args=(ready, box, direct))
    worker.start()
    worker.join()
    assert ready.is_set()
    child = box[0]
    try:
        time.sleep(0.5)
        if direct:
            assert child.wait(5) == -signal.SIGTERM
        else:
            assert child.poll() is None, "the CLI died with the thread that spawned it"
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("declared", [signal.SIGKILL, signal.SIGTERM])
def test_parent_death_signal_is_the_backends(tmp_path: Path, declared: int) -> None:
    """A backend declares its signal: SIGKILL takes down a CLI that ignores
    SIGTERM; with SIGTERM that CLI outlives its runner (the sweep's job)."""
    from coding_genesis.backends import get_backend

    for name in ("claude", "codex", "failer"):
        assert getattr(get_backend(name), "pdeath_signal", None) == signal.SIGTERM
    fake = FakeCLI(tmp_path)
    fake.script([{"ignore_sigterm": True}, {"init": True}, {"hang": True}])
    host = start_host(fake, tmp_path, pdeath_signal=int(declared))
    cli = wait_records(fake, "argv")[0]["pid"]
    try:
        wait_records(fake, "stdin_len")
        time.sleep(0.2)  # SIGTERM is ignored by now
        host.send_signal(signal.SIGKILL)
        host.wait()
        assert gone(cli, 1.0) is (declared == signal.SIGKILL)
    finally:
        host.kill()
        host.wait()
        with contextlib.suppress(psutil.Error):
            psutil.Process(cli).kill()
