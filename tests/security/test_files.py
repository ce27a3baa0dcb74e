"""Finding 6: private files and directories.  Every directory we create is
0700 at every level (even at umask 000), every file 0600, temporary files are
new and never symlinks, and a base directory another user controls is refused.
The attacks run as a second, unprivileged user."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from coding_genesis._observers.runlog import append_run
from coding_genesis._util.files import UnsafeDirectory, private_dir
from tests.support import FakeCLI, present

OTHER = "genesis-test-user"


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def other_user() -> str:
    """A second, unprivileged user (created when we are root, as in CI)."""
    if shutil.which("runuser") is None:
        pytest.skip("runuser is not installed: cannot act as a second user")
    exists = subprocess.run(["id", OTHER], capture_output=True, check=False).returncode == 0
    if not exists:
        if os.geteuid() != 0:
            pytest.skip(f"user {OTHER} does not exist and creating it needs root")
        subprocess.run(["useradd", "-m", OTHER], check=True, capture_output=True)
    if os.geteuid() != 0:
        pytest.skip("acting as another user (runuser) needs root")
    return OTHER


def as_user(user: str, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["runuser", "-u", user, "--", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory under /tmp every user can reach."""
    path = Path(tempfile.mkdtemp(prefix="genesis-shared-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def umask_000() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_every_level_we_create_is_0700_and_every_file_0600(tmp_path: Path, umask_000: None) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, {"stderr": "a warning"}, {"answer": "done"}])
    base = tmp_path / "a" / "b" / "transcripts"
    log = tmp_path / "c" / "d" / "runs.jsonl"
    result = fake.agent(transcripts=base, run_log=log).run_sync("x")
    assert result["status"] == 0, result
    run_dir = Path(present(result["transcript"]))
    for directory in (tmp_path / "a", tmp_path / "a" / "b", base, run_dir, log.parent.parent):
        assert mode(directory) == 0o700, directory
    assert mode(log.parent) == 0o700
    names = sorted(p.name for p in run_dir.iterdir())
    assert names == ["events.jsonl", "meta.json", "result.json", "stderr.txt", "stdout.jsonl"]
    for path in [*run_dir.iterdir(), log]:
        assert mode(path) == 0o600, path


def test_an_unsafe_base_is_refused_with_a_clear_error(shared: Path, other_user: str) -> None:
    shared.chmod(0o777)  # writable by all, no sticky bit
    with pytest.raises(UnsafeDirectory, match="writable by every user and has no sticky bit"):
        private_dir(shared / "runs")
    owned = shared / "theirs"
    owned.mkdir()
    shutil.chown(owned, other_user)
    with pytest.raises(UnsafeDirectory, match="owned by uid"):
        private_dir(owned / "runs")
    shared.chmod(0o1777)  # /tmp-like: sticky
    assert private_dir(shared / "mine") == shared / "mine"
    assert mode(shared / "mine") == 0o700


@pytest.mark.slow
def test_a_run_in_a_shared_directory_is_private(
    shared: Path, other_user: str, tmp_path: Path
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, {"answer": "the secret answer"}])
    # Without the sticky bit: refused, the run still answers and says why.
    shared.chmod(0o777)
    refused = fake.agent(transcripts=shared, run_log=shared / "runs.jsonl").run_sync("x")
    assert refused["status"] == 0 and refused["transcript"] is None
    assert any("no sticky bit" in w for w in refused["warnings"]), refused["warnings"]
    assert list(shared.iterdir()) == []
    # With it (/tmp-like): written, and the other user can neither read nor replace it.
    shared.chmod(0o1777)
    result = fake.agent(transcripts=shared).run_sync("x")
    run_dir = Path(present(result["transcript"]))
    assert (run_dir / "result.json").exists()
    read = as_user(other_user, f"cat {run_dir}/result.json")
    assert read.returncode != 0 and "the secret answer" not in read.stdout
    swap = as_user(other_user, f"mv {run_dir} {shared}/stolen || rm -rf {run_dir}")
    assert swap.returncode != 0
    assert (run_dir / "result.json").exists()


def test_a_symlinked_run_log_is_not_followed(shared: Path, other_user: str, tmp_path: Path) -> None:
    shared.chmod(0o1777)
    target = tmp_path / "victim-rc"
    target.write_text("# my shell rc\n")
    os.chmod(tmp_path, 0o755)  # the attacker can name the target
    made = as_user(other_user, f"ln -s {target} {shared}/runs.jsonl")
    assert made.returncode == 0, made.stderr
    assert not append_run(shared / "runs.jsonl", {"run_id": "x", "status": 0})
    assert target.read_text() == "# my shell rc\n"


def test_a_base_owned_by_another_user_is_refused_for_the_run_log(
    shared: Path, other_user: str
) -> None:
    theirs = shared / "theirs"
    theirs.mkdir()
    shutil.chown(theirs, other_user)
    assert not append_run(theirs / "runs.jsonl", {"run_id": "x", "status": 0})
    assert not (theirs / "runs.jsonl").exists()
