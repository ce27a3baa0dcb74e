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

from coding_genesis._supervision import spawn
from tests.support import FakeCLI, exits_within

pytestmark = pytest.mark.skipif(
    not spawn.pdeathsig_supported(), reason="PR_SET_PDEATHSIG is Linux-only"
)

HOST = textwrap.dedent(
    """
    import json, sys
    from coding_genesis import CodingGenesisAgent
    from coding_genesis.backends import get_backend
    from coding_genesis._supervision import spawn
    settings = json.loads(sys.argv[1])
    if settings.pop("arm", None) == "preexec":  # as where setpriv is not installed
        spawn._setpriv = lambda: None
    backend = get_backend("claude")
    if "pdeath_signal" in settings:  # a backend that declares another signal
        backend = type("Declared", (type(backend),), {"pdeath_signal": settings.pop("pdeath_signal")})()
    agent = CodingGenesisAgent(backend, **settings)
    agent.run_sync("hello")
    """
)


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
        cwd=str(Path(__file__).parents[2]),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


#: How the signal is armed: setpriv as an exec prefix, or the preexec_fn fallback.
ARMS = [
    pytest.param(
        "setpriv",
        marks=pytest.mark.skipif(spawn._setpriv() is None, reason="no setpriv --pdeathsig here"),
    ),
    "preexec",
]


@pytest.mark.slow
@pytest.mark.parametrize("arm", ARMS)
def test_cli_dies_with_its_sigkilled_runner(tmp_path: Path, arm: str) -> None:
    fake = FakeCLI(tmp_path)
    fake.script([{"init": True}, {"hang": True}])
    host = start_host(fake, tmp_path, arm=arm)
    try:
        cli = wait_records(fake, "argv")[0]["pid"]
        assert psutil.Process(cli).ppid() == host.pid
        host.send_signal(signal.SIGKILL)
        host.wait()
        assert exits_within(cli, 1.0), "the CLI outlived its runner by more than 1 s"
    finally:
        host.kill()
        host.wait()


def spawn_quiet(argv: list[str]) -> subprocess.Popen[bytes]:
    """``argv`` started as the runner starts a CLI (SIGTERM at parent death), no stdio."""
    return spawn.spawn(
        argv,
        cwd=os.getcwd(),
        env=os.environ,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pdeath_signal=signal.SIGTERM,
    )


def _sleeper(ready: threading.Event, box: list[subprocess.Popen[bytes]], direct: bool) -> None:
    argv = [sys.executable, "-c", "import time; time.sleep(30)"]
    if direct:  # the naive way: fork from this short-lived thread
        box.append(
            subprocess.Popen(
                argv, start_new_session=True, preexec_fn=spawn._pdeath_preexec(signal.SIGTERM)
            )
        )
    else:
        box.append(spawn_quiet(argv))
    ready.set()


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("arm", ARMS)
@pytest.mark.parametrize("declared", [signal.SIGKILL, signal.SIGTERM])
def test_parent_death_signal_is_the_backends(tmp_path: Path, declared: int, arm: str) -> None:
    """A backend declares its signal: SIGKILL takes down a CLI that ignores
    SIGTERM; with SIGTERM that CLI outlives its runner (the sweep's job)."""
    from coding_genesis.backends import get_backend

    for name in ("claude", "codex", "failer"):
        assert get_backend(name).pdeath_signal == signal.SIGTERM
    fake = FakeCLI(tmp_path)
    fake.script([{"ignore_sigterm": True}, {"init": True}, {"hang": True}])
    host = start_host(fake, tmp_path, pdeath_signal=int(declared), arm=arm)
    cli = wait_records(fake, "argv")[0]["pid"]
    try:
        wait_records(fake, "stdin_len")
        time.sleep(0.2)  # SIGTERM is ignored by now
        host.send_signal(signal.SIGKILL)
        host.wait()
        assert exits_within(cli, 1.0) is (declared == signal.SIGKILL)
    finally:
        host.kill()
        host.wait()
        with contextlib.suppress(psutil.Error):
            psutil.Process(cli).kill()


# -- the run ledger and the sweep ---------------------------------------------------------------

#: A CLI whose setsid grandchild ignores SIGTERM: the parent-death signal does not reach it.
ESCAPING: list[dict[str, Any]] = [
    {"init": True},
    {"grandchild": {"setsid": True, "ignore_sigterm": True, "hold_stdout": False, "sleep": 600}},
    {"await_records": {"key": "grandchild", "count": 1}},
    {"hang": True},
]
REPO = str(Path(__file__).parents[2])


def run_env(fake: FakeCLI, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        **fake.env(),
        "GENESIS_LEDGER": str(tmp_path / "ledger"),
        "GENESIS_TRANSCRIPTS": str(tmp_path / "runs"),
        "GENESIS_RUN_LOG": "off",
    }


def kill_runner_mid_run(fake: FakeCLI, runner: subprocess.Popen[bytes]) -> tuple[int, int]:
    """SIGKILL the runner once the tree is in place; the CLI must be gone within 1 s."""
    try:
        cli = wait_records(fake, "argv")[0]["pid"]
        grandchild = int(wait_records(fake, "grandchild")[0]["grandchild"])
        time.sleep(0.2)  # the grandchild ignores SIGTERM by now
        runner.send_signal(signal.SIGKILL)
        runner.wait()
    finally:
        runner.kill()
        runner.wait()
    assert exits_within(cli, 1.0), "the CLI outlived its runner by more than 1 s"
    assert not exits_within(grandchild, 0.3), "the grandchild should need the sweep"
    return cli, grandchild


def runs_json(genesis: list[str], env: dict[str, str]) -> list[dict[str, Any]]:
    out = subprocess.run(
        [*genesis, "runs", "--json"], cwd=REPO, env=env, capture_output=True, check=True
    )
    return [json.loads(line) for line in out.stdout.splitlines()]


def ours_left(fake: FakeCLI) -> list[int]:
    from tests.support import marked_processes

    return [p.pid for p in marked_processes((fake.mark,), ("FAKE_CLI_MARK",))]


def ended_runs(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in (tmp_path / "runs").glob("*/ended.json")]


@pytest.mark.slow
def test_library_host_killed_next_agents_first_run_sweeps(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path)
    fake.script(ESCAPING)
    ledger = str(tmp_path / "ledger")
    transcripts = str(tmp_path / "runs")
    host = start_host(fake, tmp_path, ledger=ledger, transcripts=transcripts)
    _cli, grandchild = kill_runner_mid_run(fake, host)
    records = os.listdir(ledger)
    assert len(records) == 1 and oct(os.stat(ledger).st_mode & 0o777) == "0o700"
    assert os.stat(os.path.join(ledger, records[0])).st_mode & 0o777 == 0o600

    nxt = FakeCLI(tmp_path)  # the next agent, in a new process, same ledger
    follower = start_host(nxt, tmp_path, ledger=ledger, transcripts=transcripts)
    assert follower.wait(30) == 0
    assert exits_within(grandchild, 1.0), "the next agent's first run did not sweep the grandchild"
    assert ours_left(fake) == []
    assert os.listdir(ledger) == []
    [ended] = ended_runs(tmp_path)
    assert ended["ended_by"] == "runner_death" and ended["stopped"] >= 1


@pytest.mark.slow
def test_genesis_run_killed_then_genesis_reap(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path)
    fake.script(ESCAPING)
    env = run_env(fake, tmp_path)
    genesis = [sys.executable, "-m", "coding_genesis._cli.main"]
    runner = subprocess.Popen(
        [*genesis, "run", "-b", "claude", "--cli-path", fake.path, "--timeout", "60", "hi"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _cli, grandchild = kill_runner_mid_run(fake, runner)
    [before] = runs_json(genesis, env)
    assert before["finished"] is False and before["ended_by"] is None
    dry = subprocess.run(
        [*genesis, "reap", "--dry-run"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert dry.returncode == 0 and f"would stop 1 process(es): {grandchild}" in dry.stdout
    assert not exits_within(grandchild, 0.2)
    reap = subprocess.run([*genesis, "reap"], cwd=REPO, env=env, capture_output=True, text=True)
    assert reap.returncode == 0 and f"stopped 1 process(es): {grandchild}" in reap.stdout
    assert "runner pid" in reap.stdout
    assert exits_within(grandchild, 1.0)
    assert ours_left(fake) == []
    [ended] = ended_runs(tmp_path)
    assert ended["ended_by"] == "runner_death"
    [after] = runs_json(genesis, env)
    assert after["ended_by"] == "runner_death" and after["swept_at"] == ended["found_ts"]
    listing = subprocess.run([*genesis, "runs"], cwd=REPO, env=env, capture_output=True, text=True)
    assert "runner died (swept " in listing.stdout
    show = subprocess.run(
        [*genesis, "show", after["run_id"]], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert "ended by the runner's death (runner pid " in show.stdout
    assert "found by the sweep at " in show.stdout and "stopped 1 process(es)" in show.stdout
    again = subprocess.run([*genesis, "reap"], cwd=REPO, env=env, capture_output=True, text=True)
    assert "nothing to reap" in again.stdout


@pytest.mark.slow
def test_ledger_is_written_during_a_run_and_removed_after(tmp_path: Path) -> None:
    from coding_genesis._supervision.ledger import Ledger

    fake = FakeCLI(tmp_path)
    fake.script([{"init": True}, {"sleep": 0.5}, {"result": "ok"}])
    ledger = Ledger(tmp_path / "ledger")
    seen: list[dict[str, Any]] = []
    agent = fake.agent(ledger=str(ledger.path))

    def look(event: Any) -> None:
        if event.kind == "run_started":
            seen.extend(entry for _, entry in ledger.entries())

    agent.subscribe(look)
    assert agent.run_sync("hi")["status"] == 0
    [entry] = seen
    assert entry["runner_pid"] == os.getpid() and entry["cli_pid"]
    assert entry["boot_id"] and entry["pid_ns"] and entry["marker"] == entry["run_id"]
    assert list(ledger.entries()) == []
    assert ledger.dead() == []


def test_sweep_skips_other_boots_namespaces_and_live_runners(tmp_path: Path) -> None:
    from coding_genesis._supervision.ledger import Ledger
    from coding_genesis._workspace.sweep import sweep_sync

    ledger = Ledger(tmp_path / "ledger")
    ledger.record("live", marker="live")  # this process: alive
    for name, change in (("boot", {"boot_id": "another"}), ("ns", {"pid_ns": "pid:[1]"})):
        ledger.record(name, marker=name)
        [path] = ledger.path.glob(f"*-{name}.json")
        path.write_text(json.dumps({**json.loads(path.read_text()), "runner_pid": 1, **change}))
    assert ledger.dead() == []
    assert sweep_sync(ledger) == []
    assert len(list(ledger.entries())) == 3


def test_unsafe_ledger_directory_is_refused(tmp_path: Path) -> None:
    from coding_genesis._supervision.ledger import Ledger, LedgerError

    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    with pytest.raises(LedgerError, match="open to others"):
        Ledger(loose).record("x", marker="x")
    fake = FakeCLI(tmp_path)
    result = fake.agent(ledger=str(loose)).run_sync("hi")  # the run goes on without it
    assert result["status"] == 0


@pytest.mark.slow
def test_a_run_on_trio_outlives_the_worker_thread_that_used_to_spawn_it(tmp_path: Path) -> None:
    """On trio, ``open_process`` forks from a cached worker thread that exits
    after 10 s idle; with the parent-death signal that would kill the CLI
    mid-run.  Every CLI is forked by the spawner thread instead: a CLI silent
    for 12 s still answers."""
    import anyio

    fake = FakeCLI(tmp_path)
    fake.script([{"init": True}, {"sleep": 12}, {"result": "still here"}])
    agent = fake.agent(timeout=60)
    result = anyio.run(agent.run, "hi", backend="trio")
    assert result["status"] == 0, result["message"]
    assert not [r for r in fake.records() if "signal" in r]


def test_sweep_drops_records_torn_by_a_runner_dying_mid_write(tmp_path: Path) -> None:
    from coding_genesis._supervision.ledger import Ledger
    from coding_genesis._workspace.sweep import sweep_sync

    ledger = Ledger(tmp_path / "ledger")
    ledger.record("mine", marker="mine")
    [mine] = os.listdir(ledger.path)
    torn = ledger.path / ".1-1000-dead.json.1.tmp"  # pid 1 did not start at t=1 s
    torn.write_text("{")
    live = ledger.path / f".{mine}.{os.getpid()}.tmp"  # ours, maybe being written
    live.write_text("{")
    assert sweep_sync(ledger) == []
    assert sorted(os.listdir(ledger.path)) == sorted([mine, live.name])


def test_a_sweep_tells_this_process_records_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many agents of one process sweep one ledger full of that process's runs
    in flight: those records (and their temporary files) are told as live by
    their names, with no look at the process table; a dead runner's record is
    still found."""
    from coding_genesis._supervision import owners
    from coding_genesis._supervision.ledger import Ledger

    ledger = Ledger(tmp_path / "ledger")
    for i in range(50):
        ledger.record(f"run{i}", marker=f"run{i}")
    (ledger.path / f".{os.listdir(ledger.path)[0]}.{os.getpid()}.tmp").write_text("{")
    ledger.record("gone", marker="gone")
    [gone] = ledger.path.glob("*-gone.json")
    dead_name = gone.with_name("1-1000-gone.json")  # pid 1 did not start at t=1 s
    gone.rename(dead_name)
    dead_name.write_text(json.dumps({**json.loads(dead_name.read_text()), "runner_pid": 1}))
    looked: list[int] = []
    real = owners.start_time  # where the ledger looks a runner up

    def counted(pid: int) -> float | None:
        looked.append(pid)
        return real(pid)

    monkeypatch.setattr(owners, "start_time", counted)
    assert [path.name for path, _ in ledger.dead()] == ["1-1000-gone.json"]
    assert ledger.drop_torn_writes() == 0
    assert os.getpid() not in looked and looked, looked
    assert len(list(ledger.entries())) == 51


def test_the_default_ledger_is_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without XDG_RUNTIME_DIR the records go to /dev/shm (where Linux has it),
    not to a disk: a private directory there, checked like any other."""
    from coding_genesis._supervision.ledger import Ledger, default_ledger_dir

    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert default_ledger_dir() == runtime / "coding-genesis"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm here")
    default = default_ledger_dir()
    assert default.parent == Path("/dev/shm") and default == default_ledger_dir()
    assert default.name.startswith(f"coding-genesis-{os.getuid()}")
    assert default.lstat().st_uid == os.getuid() and default.lstat().st_mode & 0o777 == 0o700
    ledger = Ledger()
    ledger.record("in-memory", marker="in-memory")
    try:
        [record] = ledger.path.glob("*-in-memory.json")
        assert record.stat().st_mode & 0o777 == 0o600
        assert ledger.path.stat().st_mode & 0o777 == 0o700
    finally:
        ledger.remove("in-memory")
    assert not list(ledger.path.glob("*-in-memory.json"))


# -- setpriv as the exec prefix ------------------------------------------------------------------


@pytest.mark.skipif(spawn._setpriv() is None, reason="no setpriv --pdeathsig here")
def test_setpriv_execs_the_cli_in_place_its_pid_parent_and_session_ours() -> None:
    child = spawn_quiet([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        proc = psutil.Process(child.pid)
        deadline = time.monotonic() + 10
        while "setpriv" in proc.name() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proc.cmdline()[1:] == ["-c", "import time; time.sleep(30)"]
        assert proc.ppid() == os.getpid()
        assert os.getsid(child.pid) == child.pid  # its own session, as before
    finally:
        child.kill()
        child.wait()


def test_an_exec_failure_behind_setpriv_answers_as_a_direct_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CLI whose interpreter is missing: the same answer (not found, why)
    whether setpriv or the preexec_fn armed the signal."""
    from coding_genesis import CodingGenesisAgent

    cli = tmp_path / "claude"
    cli.write_text("#!/nonexistent/interpreter\n")
    cli.chmod(0o755)
    answers: list[dict[str, Any]] = []
    for arm in ("setpriv", "preexec"):
        if arm == "preexec":
            monkeypatch.setattr(spawn, "_setpriv", lambda: None)
        result = CodingGenesisAgent("claude", cli_path=str(cli), timeout=10).run_sync("hi")
        answers.append(
            {
                "status": result["status"],
                "error": result["error"],
                "message": result["message"],
                "exit_code": result["exit_code"],
            }
        )
    assert answers[0] == answers[1]
    assert answers[0]["error"] == "not_found" and "No such file" in answers[0]["message"]


def test_setpriv_exec_errors_are_read_back_as_oserrors() -> None:
    error = spawn.setpriv_exec_error("setpriv: failed to execute /x/y: Permission denied\n")
    assert isinstance(error, PermissionError) and error.filename == "/x/y"
    assert isinstance(
        spawn.setpriv_exec_error("setpriv: failed to execute a: No such file or directory"),
        FileNotFoundError,
    )
    assert spawn.setpriv_exec_error("some CLI's own error") is None
