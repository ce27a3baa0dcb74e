"""Issue 22: another user's file, a forged ledger record, a repository's own
programs and a CLI that replaces its worktree's ``.git`` must never make us
delete, commit, stop or run anything.

Every test here drives ``genesis`` as a subprocess (real git, real
processes).  The cross-user tests either chown a decoy to another uid (as
root) or, with ``CI`` or ``GENESIS_TEST_USERS=1``, run as two throwaway users
made with ``useradd`` and removed with ``userdel -r``.  When those users cannot
run our interpreter (it lives under a private home), they run ``genesis``
with a venv built once per session from the system Python
(tests/security/users_support.py)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import coding_genesis
from coding_genesis._supervision.ledger import _boot_id, _pid_namespace
from tests.security.users_support import (
    BuildError,
    SharedPython,
    build_shared_python,
    check_runnable,
    end_processes_of,
    remove_traces,
    remove_users,
    shared_entries,
)
from tests.support import FAKE_BIN

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

REPO_ROOT = str(Path(__file__).parent.parent.parent)
GENESIS = [sys.executable, "-m", "coding_genesis._cli.main"]
FAILER = str(Path(coding_genesis.__file__).with_name("failer.py"))
#: A uid that is not ours (nor root's) for decoys chowned away.
STRANGER = 54321


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.invalid", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def make_repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("a\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "init")
    return path


def base_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GENESIS_") or k in ("GENESIS_TEST_SESSION",)
    }
    env.pop("XDG_RUNTIME_DIR", None)
    env.update(
        {
            "GENESIS_TRANSCRIPTS": "off",
            "GENESIS_RUN_LOG": "off",
            "GENESIS_FAILER_STATE_DIR": str(tmp_path / "failer"),
            "TMPDIR": str(tmp_path),
            **extra,
        }
    )
    return env


def genesis(
    args: list[str], env: dict[str, str], cwd: str | Path = REPO_ROOT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*GENESIS, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def forged_record(
    directory: Path, victim: Path, *, transcript: Path | None = None, mode: int = 0o600
) -> Path:
    """A record of a dead runner (pid 1 did not start at t=1 s) naming ``victim``
    as its run's worktree (and transcript), with this boot's id and namespace."""
    run_id = uuid.uuid4().hex
    entry: dict[str, Any] = {
        "run_id": f"{run_id}.worktree",
        "marker": run_id,
        "runner_pid": 1,
        "runner_started": 1.0,
        "cli_pid": None,
        "cli_started": None,
        "boot_id": _boot_id(),
        "pid_ns": _pid_namespace(),
        "transcript": str(transcript) if transcript else None,
        "written_ts": 1.0,
        "worktree": {
            "repo": str(victim),
            "common_dir": str(victim / ".git"),
            "home": str(victim.parent),
            "path": str(victim),
            "branch": f"coding-genesis/{victim.name}",
            "run_id": run_id,
        },
    }
    path = directory / f"1-1000-{run_id}.worktree.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    os.write(fd, json.dumps(entry).encode())
    os.close(fd)
    os.chmod(path, mode)
    return path


def checkout_state(repo: Path) -> tuple[str, str, str]:
    return (
        git(repo, "rev-parse", "HEAD"),
        git(repo, "status", "--porcelain=v1", "--untracked-files=all"),
        git(repo, "for-each-ref"),
    )


# -- finding 2: the same user's forged record ----------------------------------------


@pytest.mark.slow
def test_reap_leaves_a_directory_a_record_names_that_is_not_our_worktree(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    ledger.mkdir(mode=0o700)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    plain = scratch / "victim"
    plain.mkdir()
    (plain / "precious.txt").write_text("mine\n")
    checkout = make_repo(scratch / "checkout")
    (checkout / "a.txt").write_text("uncommitted work\n")
    (checkout / "new.txt").write_text("untracked work\n")
    before = checkout_state(checkout)
    forged_record(ledger, plain)
    forged_record(ledger, checkout)
    env = base_env(tmp_path, GENESIS_LEDGER=str(ledger))
    reap = genesis(["reap"], env)
    assert reap.returncode == 0, reap.stderr
    assert (plain / "precious.txt").read_text() == "mine\n"
    assert (checkout / "a.txt").read_text() == "uncommitted work\n"
    assert (checkout / "new.txt").exists()
    assert checkout_state(checkout) == before  # nothing committed, no ref moved
    assert reap.stdout.count("left its worktree") == 2, reap.stdout
    assert "nothing deleted or committed" in reap.stdout
    assert "removed its worktree" not in reap.stdout


@pytest.mark.slow
def test_reap_ignores_and_counts_records_we_did_not_write(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    ledger.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("mine\n")
    forged_record(ledger, victim, mode=0o644)  # open to others: not ours
    target = forged_record(tmp_path, victim)
    os.symlink(target, ledger / "1-1000-linked.json")  # a link: not ours
    os.mkfifo(ledger / "1-1000-fifo.json")  # not a regular file: never blocks us
    env = base_env(tmp_path, GENESIS_LEDGER=str(ledger))
    reap = genesis(["reap"], env)
    assert reap.returncode == 0, reap.stderr
    assert (victim / "precious.txt").exists()
    assert "ignored 3 entries" in reap.stdout, reap.stdout
    assert "removed its worktree" not in reap.stdout


@pytest.mark.slow
def test_a_forged_marker_is_never_stopped(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    ledger.mkdir(mode=0o700)
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        env={**os.environ, "GENESIS_RUN_ID": "chosen-by-someone-else"},
    )
    try:
        entry = {
            "run_id": "chosen-by-someone-else",
            "marker": "chosen-by-someone-else",
            "runner_pid": 1,
            "runner_started": 1.0,
            "boot_id": _boot_id(),
            "pid_ns": _pid_namespace(),
        }
        path = ledger / "1-1000-chosen-by-someone-else.json"
        path.write_text(json.dumps(entry))
        path.chmod(0o600)
        reap = genesis(["reap"], base_env(tmp_path, GENESIS_LEDGER=str(ledger)))
        assert reap.returncode == 0, reap.stderr
        assert sleeper.poll() is None, "a process was stopped by a marker we never wrote"
        assert "left alone" in reap.stdout and "not one of ours" in reap.stdout
    finally:
        sleeper.kill()
        sleeper.wait()


# -- finding 3: the repository's own programs ----------------------------------------


def hostile_repo(path: Path, marks: Path) -> Path:
    """A repository whose config and attributes name hooks, filters, an
    external diff, a textconv and an fsmonitor: each touches a marker."""
    repo = make_repo(path)
    (repo / ".gitattributes").write_text("* filter=pwn diff=pwn\n*.p filter=proc\n")
    (repo / "x.p").write_text("p\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "attributes")
    hooks = repo / "hooks"
    hooks.mkdir()
    for hook in (
        "post-checkout",
        "reference-transaction",
        "post-index-change",
        "pre-commit",
        "post-commit",
        "pre-auto-gc",
        "post-rewrite",
    ):
        script = hooks / hook
        script.write_text(f"#!/bin/sh\ntouch '{marks}/hook-{hook}'\n")
        script.chmod(0o755)
    for key, value in (
        ("core.hooksPath", str(hooks)),
        ("filter.pwn.clean", f"sh -c 'touch {marks}/clean; cat'"),
        ("filter.pwn.smudge", f"sh -c 'touch {marks}/smudge; cat'"),
        ("filter.pwn.required", "true"),
        ("filter.proc.process", f"sh -c 'touch {marks}/process'"),
        ("diff.external", f"sh -c 'touch {marks}/external-diff'"),
        ("diff.pwn.textconv", f"sh -c 'touch {marks}/textconv; cat'"),
        ("diff.pwn.command", f"sh -c 'touch {marks}/diff-command'"),
        ("core.fsmonitor", f"sh -c 'touch {marks}/fsmonitor'"),
        ("core.pager", f"sh -c 'touch {marks}/pager; cat'"),
    ):
        git(repo, "config", key, value)
    (repo / "a.txt").write_text("uncommitted\n")  # carried over
    (repo / "b.txt").write_text("untracked\n")
    return repo


@pytest.mark.slow
def test_isolate_runs_none_of_the_repositorys_programs(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    repo = hostile_repo(tmp_path / "repo", marks)
    env = base_env(tmp_path, GENESIS_LEDGER=str(tmp_path / "ledger"))
    run = genesis(
        [
            "run",
            "--backend",
            "failer",
            "--isolate",
            "--carry-uncommitted",
            "--diff",
            "--json",
            "hi",
        ],
        env,
        cwd=repo,
    )
    assert sorted(os.listdir(marks)) == [], run.stderr
    result = json.loads(run.stdout)
    assert run.returncode == 0, result
    assert result["worktree"]["carried_uncommitted"] and result["worktree"]["removed"]
    assert "uncommitted" in result["changes"]["diff"]
    assert sorted(os.listdir(marks)) == []


# -- finding 4: a CLI that replaces its worktree's .git --------------------------------


@pytest.mark.slow
def test_a_cli_replacing_its_git_makes_us_run_nothing_of_it(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    repo = make_repo(tmp_path / "repo")
    base = git(repo, "rev-parse", "HEAD").strip()
    env = base_env(
        tmp_path,
        GENESIS_LEDGER=str(tmp_path / "ledger"),
        GITSWAP_MARKS=str(marks),
        GITSWAP_FAILER=FAILER,
    )
    run = genesis(
        [
            *("run", "--backend", "failer", "--cli-path", str(FAKE_BIN / "gitswap")),
            *("--isolate", "--diff", "--json", "hello"),
        ],
        env,
        cwd=repo,
    )
    result = json.loads(run.stdout)
    assert sorted(os.listdir(marks)) == [], (result, run.stderr)
    assert run.returncode == 1 and result["status"] == 1, result
    assert result["error"] == "workspace_tampered"
    assert result["failure"]["category"] == "workspace_tampered"
    assert result["failure"]["retryable"] is False
    worktree = result["worktree"]
    assert worktree["tampered"] and "replaced" in worktree["tampered"], worktree
    assert any(".git was replaced" in w for w in result["warnings"]), result["warnings"]
    branch = worktree["branch"]
    assert git(repo, "rev-parse", f"refs/heads/{branch}").strip() == base  # left as it was
    assert worktree["kept"] and not worktree["removed"]
    assert "changes" not in result or result["changes"] is None


# -- finding 1: another user's directories -------------------------------------------


@pytest.fixture
def as_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("chowning a decoy to another uid needs root")


@pytest.mark.slow
def test_another_users_ledger_and_worktrees_dirs_are_refused_not_used(
    tmp_path: Path, as_root: None
) -> None:
    """A runtime ledger directory and a worktrees directory made by another
    uid (open, with a planted record naming a directory of ours): neither is
    read; the run warns naming them and their owner, records in a private
    directory of its own, and ``--isolate`` works."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    decoy = runtime / "coding-genesis"
    decoy.mkdir(mode=0o755)
    shared = tmp_path / "shared"  # the temp directory: world-writable, sticky
    shared.mkdir()
    shared.chmod(0o1777)
    worktrees_decoy = shared / f"coding-genesis-worktrees-{os.getuid()}"
    worktrees_decoy.mkdir(mode=0o755)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("mine\n")
    forged_record(decoy, victim, transcript=victim, mode=0o644)
    for path in (decoy, *decoy.iterdir(), worktrees_decoy):
        os.chown(path, STRANGER, STRANGER)
    repo = make_repo(tmp_path / "repo")
    env = base_env(tmp_path, XDG_RUNTIME_DIR=str(runtime), TMPDIR=str(shared))
    plain = genesis(["run", "--backend", "failer", "--json", "hello"], env, cwd=repo)
    assert plain.returncode == 0, plain.stderr
    assert (victim / "precious.txt").exists() and sorted(os.listdir(victim)) == ["precious.txt"]
    assert f"refusing the run ledger {decoy}: it belongs to uid {STRANGER}" in plain.stderr
    reap = genesis(["reap"], env)
    assert reap.returncode == 0 and (victim / "precious.txt").exists(), reap.stderr
    assert "nothing to reap" in reap.stdout
    isolated = genesis(["run", "--backend", "failer", "--isolate", "--json", "hello"], env, repo)
    assert isolated.returncode == 0, isolated.stdout + isolated.stderr
    assert f"refusing {worktrees_decoy} (it belongs to uid {STRANGER}" in isolated.stderr
    result = json.loads(isolated.stdout)
    assert result["worktree"]["removed"]
    assert Path(result["worktree"]["path"]).parent.parent.name.startswith(
        f"coding-genesis-worktrees-{os.getuid()}-"
    )
    assert sorted(os.listdir(worktrees_decoy)) == []


# -- finding 1 as two real users -----------------------------------------------------


def _users_wanted() -> bool:
    return bool(os.environ.get("CI")) or os.environ.get("GENESIS_TEST_USERS") == "1"


@pytest.fixture(scope="session")
def shared_python() -> Iterator[SharedPython]:
    """Built once per session, and only when the other users cannot run our
    interpreter: a venv from a system Python, with the runtime dependencies
    and a copy of the package, in a directory under /tmp open to everyone
    (removed at the end of the session).  Skips, with the reason, only when it
    cannot be built here (no system Python >= 3.11, no network)."""
    root = Path(tempfile.mkdtemp(prefix="genesis-shared-python-", dir="/tmp"))
    try:
        root.chmod(0o755)
        try:
            shared = build_shared_python(root)
        except BuildError as exc:
            pytest.skip(f"our Python cannot be run by another user and none could be built: {exc}")
        yield shared
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def two_users(request: pytest.FixtureRequest) -> Iterator[tuple[str, str, SharedPython]]:
    """Two throwaway users and a Python the second can run ``genesis`` with;
    afterwards their processes are ended, the users removed (``userdel -r``)
    and everything of theirs or named for them in /dev/shm and /tmp removed,
    whether the test passed or not."""
    if not _users_wanted():
        pytest.skip("cross-user tests make throwaway users: set CI or GENESIS_TEST_USERS=1")
    if os.geteuid() != 0 or shutil.which("useradd") is None or shutil.which("runuser") is None:
        pytest.skip("cross-user tests need root, useradd and runuser")
    tag = uuid.uuid4().hex[:6]
    names = (f"cgA{tag}", f"cgB{tag}")
    made: list[str] = []
    uids: list[int] = []
    before = shared_entries()
    try:
        for name in names:
            subprocess.run(["useradd", "-m", name], check=True, capture_output=True)
            made.append(name)
            uids.append(pwd.getpwnam(name).pw_uid)
        shared = SharedPython(sys.executable, REPO_ROOT)
        if check_runnable(names[1], shared) is not None:
            shared = request.getfixturevalue("shared_python")
            why = check_runnable(names[1], shared)
            if why is not None:
                pytest.fail(f"{names[1]} cannot run the Python built for others: {why}")
        yield names[0], names[1], shared
    finally:
        end_processes_of(uids)
        left = remove_users(made)
        remove_traces(uids, before)
        assert not left, f"throwaway users left behind: {left}"


def as_user(user: str, args: list[str], env: dict[str, str], cwd: str) -> Any:
    return subprocess.run(
        ["runuser", "-u", user, "--", "env", *(f"{k}={v}" for k, v in env.items()), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
@pytest.mark.timeout(600)  # the first use in a session may build the shared Python
def test_a_second_user_cannot_make_our_run_or_reap_touch_our_files(
    two_users: tuple[str, str, SharedPython],
) -> None:
    user_a, user_b, shared = two_users
    genesis_b = [shared.python, "-m", "coding_genesis._cli.main"]
    uid_b = int(subprocess.run(["id", "-u", user_b], capture_output=True, text=True).stdout)
    home_b = Path(f"/home/{user_b}")
    victim = home_b / "victim"
    env_b = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home_b),
        "PYTHONPATH": shared.pythonpath,
        "GENESIS_TRANSCRIPTS": "off",
        "GENESIS_RUN_LOG": "off",
    }
    subprocess.run(["runuser", "-u", user_b, "--", "mkdir", "-p", str(victim)], check=True)
    subprocess.run(
        ["runuser", "-u", user_b, "--", "touch", str(victim / "precious.txt")], check=True
    )
    # User A makes the names B's ledger and worktrees used to have, open, and plants a record.
    decoy = Path("/dev/shm") / f"coding-genesis-{uid_b}"
    planted = Path("/tmp") / f"coding-genesis-worktrees-{uid_b}"
    plant = (
        "import json, os, sys\n"
        "for d in sys.argv[1:3]:\n"
        "    os.mkdir(d); os.chmod(d, 0o755)\n"
        "entry = json.loads(sys.argv[3])\n"
        "p = os.path.join(sys.argv[1], '1-1000-' + entry['run_id'] + '.json')\n"
        "open(p, 'w').write(json.dumps(entry)); os.chmod(p, 0o644)\n"
    )
    run_id = uuid.uuid4().hex
    entry = {
        "run_id": f"{run_id}.worktree",
        "marker": run_id,
        "runner_pid": 1,
        "runner_started": 1.0,
        "boot_id": _boot_id(),
        "pid_ns": _pid_namespace(),
        "transcript": str(victim),
        "worktree": {
            "repo": str(victim),
            "home": str(home_b),
            "path": str(victim),
            "branch": "coding-genesis/victim",
            "run_id": run_id,
        },
    }
    try:
        subprocess.run(
            [
                *("runuser", "-u", user_a, "--", shared.python, "-c", plant),
                *(str(decoy), str(planted), json.dumps(entry)),
            ],
            check=True,
            cwd="/",
        )
        run = as_user(user_b, [*genesis_b, "run", "--backend", "failer", "hello"], env_b, "/")
        assert run.returncode == 0, run.stderr
        assert sorted(os.listdir(victim)) == ["precious.txt"]  # no .lock, no ended.json
        assert f"refusing {decoy} (it belongs to uid" in run.stderr and user_a in run.stderr
        reap = as_user(user_b, [*genesis_b, "reap"], env_b, "/")
        assert reap.returncode == 0 and sorted(os.listdir(victim)) == ["precious.txt"]
        # B's own ledger: a private directory of B's.
        [own] = [
            p
            for p in Path("/dev/shm").glob(f"coding-genesis-{uid_b}-*")
            if p.lstat().st_uid == uid_b
        ]
        assert stat.S_IMODE(own.lstat().st_mode) == 0o700
        repo = home_b / "repo"
        for cmd in (
            ["git", "init", "-q", str(repo)],
            [
                *("git", "-C", str(repo), "-c", "user.name=B", "-c", "user.email=b@x"),
                *("commit", "-q", "--allow-empty", "-m", "init"),
            ],
        ):
            subprocess.run(["runuser", "-u", user_b, "--", *cmd], check=True, capture_output=True)
        isolated = as_user(
            user_b,
            [*genesis_b, "run", "--backend", "failer", "--isolate", "--json", "hello"],
            env_b,
            str(repo),
        )
        assert isolated.returncode == 0, isolated.stdout + isolated.stderr
        assert f"refusing {planted}" in isolated.stderr
    finally:
        shutil.rmtree(decoy, ignore_errors=True)
        shutil.rmtree(planted, ignore_errors=True)


# -- leftovers go to the run's branch only -------------------------------------------


def test_leftovers_are_committed_only_to_the_runs_own_branch(tmp_path: Path) -> None:
    """An agent that detached its worktree's HEAD: nothing is committed to that
    HEAD or any other ref, and the worktree (with the work) is kept."""
    import anyio

    from coding_genesis._workspace.isolation import close_worktree, open_worktree

    repo = make_repo(tmp_path / "repo")
    base = git(repo, "rev-parse", "HEAD").strip()

    async def scenario() -> Any:
        ws = await open_worktree(
            str(repo), uuid.uuid4().hex, worktrees_dir=str(tmp_path / "worktrees")
        )
        git(Path(ws.path), "checkout", "-q", "--detach")
        (Path(ws.path) / "work.txt").write_text("the agent's work\n")
        await close_worktree(ws, keep=False)
        return ws

    ws = anyio.run(scenario)
    refs = git(repo, "for-each-ref", "--format=%(refname) %(objectname)").split("\n")
    assert f"refs/heads/{ws.branch} {base}" in refs
    assert all(line.endswith(base) for line in refs if line)  # no ref moved
    assert ws.kept and not ws.removed
    assert (Path(ws.path) / "work.txt").exists()
    assert any("not the run's branch" in w for w in ws.warnings), ws.warnings


@pytest.mark.slow
def test_a_refused_ledger_leaves_the_parent_death_signal_and_a_ledger_of_ours(
    tmp_path: Path, as_root: None
) -> None:
    """With the runtime ledger directory made by another uid, ``genesis run``
    warns, records its run in a private directory of its own (the sweep can
    find it), and its CLI still dies with its runner (the parent-death signal)."""
    import signal
    import time

    from tests.support import FakeCLI, exits_within

    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    decoy = runtime / "coding-genesis"
    decoy.mkdir(mode=0o755)
    os.chown(decoy, STRANGER, STRANGER)
    fake = FakeCLI(tmp_path)
    fake.script([{"init": True}, {"hang": True}])
    env = {**base_env(tmp_path, XDG_RUNTIME_DIR=str(runtime)), **fake.env()}
    runner = subprocess.Popen(
        [*GENESIS, "run", "-b", "claude", "--cli-path", fake.path, "--timeout", "60", "hi"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while not [r for r in fake.records() if "argv" in r]:
            assert time.monotonic() < deadline and runner.poll() is None, "the CLI never started"
            time.sleep(0.05)
        cli = next(r for r in fake.records() if "argv" in r)["pid"]
        time.sleep(0.3)
        ours = [
            p
            for p in Path("/dev/shm" if os.path.isdir("/dev/shm") else str(tmp_path)).glob(
                f"coding-genesis-{os.getuid()}*"
            )
            if any(p.glob(f"{runner.pid}-*.json"))
        ]
        assert ours, "the run is recorded in no ledger of ours"
        assert stat.S_IMODE(ours[0].lstat().st_mode) == 0o700
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        assert exits_within(cli, 1.0), "the CLI outlived its runner: no parent-death signal"
        assert runner.stderr is not None
        stderr = runner.stderr.read().decode()
        assert f"refusing the run ledger {decoy}: it belongs to uid {STRANGER}" in stderr
        assert os.listdir(decoy) == []
        for record in ours[0].glob(f"{runner.pid}-*.json"):
            record.unlink()
    finally:
        runner.kill()
        runner.wait()
        if runner.stderr is not None:
            runner.stderr.close()


# -- the checked reader, reusable by every kind of record ------------------------------


def test_read_records_reads_only_records_we_wrote(tmp_path: Path) -> None:
    from coding_genesis._supervision.ledger import MAX_RECORD, LedgerError, read_records

    directory = tmp_path / "records"
    directory.mkdir(mode=0o700)

    def write(name: str, data: bytes, mode: int = 0o600) -> Path:
        path = directory / name
        path.write_bytes(data)
        path.chmod(mode)
        return path

    write("good.json", b'{"marker": "m"}')
    write("open.json", b'{"marker": "m"}', 0o644)
    write("big.json", b'{"pad": "' + b"x" * MAX_RECORD + b'"}')
    write("list.json", b"[1, 2]")
    (directory / "dir.json").mkdir()
    os.symlink(write("target.txt", b'{"marker": "m"}'), directory / "link.json")
    os.mkfifo(directory / "fifo.json")
    scan = read_records(directory)
    assert [name for name, _ in scan.records] == ["good.json"]
    assert scan.ignored == 6
    assert read_records(tmp_path / "missing").records == []
    directory.chmod(0o750)
    with pytest.raises(LedgerError, match="open to others"):
        read_records(directory)
    directory.chmod(0o700)
    os.symlink(directory, tmp_path / "linked")
    with pytest.raises(LedgerError, match="link"):
        read_records(tmp_path / "linked")
    if os.geteuid() == 0:
        os.chown(directory, STRANGER, STRANGER)
        with pytest.raises(LedgerError, match=f"belongs to uid {STRANGER}"):
            read_records(directory)
