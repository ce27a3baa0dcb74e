"""The real ``git``, run under supervision: the commands isolated runs need.

Every call is an argv list run by :func:`coding_genesis._supervision.process.run_process`
(never a shell), with a timeout, never prompting (``GIT_TERMINAL_PROMPT=0``,
no editor, no pager), never signing, never running the repository's hooks
where a command could.  Nothing here touches the caller's index: snapshots of
a working tree go through a temporary index (``GIT_INDEX_FILE``).

:class:`RepoLock` serializes ``git worktree add``/``remove`` on one
repository across threads and processes (an ``flock`` on a file of ours).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from coding_genesis._supervision.childenv import build_env
from coding_genesis._supervision.process import SupervisorConfig, run_process

__all__ = [
    "AUTHOR_EMAIL",
    "AUTHOR_NAME",
    "GitError",
    "GitMissing",
    "GitOutput",
    "RepoLock",
    "changed_files",
    "git",
    "snapshot_tree",
]

AUTHOR_NAME = "coding-genesis"
AUTHOR_EMAIL = "coding-genesis@localhost"
#: One git command's wall-clock limit.
GIT_TIMEOUT = 120.0
#: Output of one git command kept at most (a bigger diff is cut, and says so).
MAX_OUTPUT = 16 * 1024 * 1024

#: Inherited variables that would redirect git to another repository or index.
_UNSET = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_KEY_*",
    "GIT_CONFIG_VALUE_*",
)
_QUIET = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_EDITOR": "true",
    "GIT_SEQUENCE_EDITOR": "true",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_ASKPASS": "true",
    "SSH_ASKPASS": "true",
    "LC_ALL": "C",
    # ``git status`` and friends must not refresh (rewrite) the caller's index.
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_AUTHOR_NAME": AUTHOR_NAME,
    "GIT_AUTHOR_EMAIL": AUTHOR_EMAIL,
    "GIT_COMMITTER_NAME": AUTHOR_NAME,
    "GIT_COMMITTER_EMAIL": AUTHOR_EMAIL,
}
#: ``-c`` settings of every call: no signing, no fsmonitor daemon, no colour.
_CONFIG = (
    "-c",
    "commit.gpgsign=false",
    "-c",
    "tag.gpgsign=false",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "color.ui=false",
    "-c",
    "core.quotepath=false",
)


class GitError(RuntimeError):
    """A git command failed (its stderr says why)."""


class GitMissing(GitError):
    """No ``git`` executable."""


@dataclass(frozen=True, slots=True)
class GitOutput:
    returncode: int | None
    stdout: bytes
    stderr: str
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")


def _environ() -> Mapping[str, str]:
    return os.environ


async def git(
    args: Sequence[str],
    *,
    cwd: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    check: bool = True,
    marker: str = "coding-genesis-git",
    timeout: float = GIT_TIMEOUT,
    program: str = "git",
) -> GitOutput:
    """Run ``git ARGS`` in ``cwd``; raise :class:`GitError` if it fails and
    ``check``, :class:`GitMissing` if there is no git."""
    chunks: list[bytes] = []
    size = 0
    truncated = False

    def sink(chunk: bytes) -> bool:
        nonlocal size, truncated
        if chunk and size < MAX_OUTPUT:
            chunks.append(chunk[: MAX_OUTPUT - size])
            truncated = truncated or size + len(chunk) > MAX_OUTPUT
            size += len(chunk)
        elif chunk:
            truncated = True
        return False

    child_env = build_env(_environ(), unset=_UNSET, add={**_QUIET, **(env or {})}, marker=marker)
    outcome = await run_process(
        [program, *_CONFIG, *args],
        cwd=os.fspath(cwd),
        env=child_env,
        stdin=stdin,
        config=SupervisorConfig(
            timeout=timeout,
            grace=2.0,
            linger=None,
            stall_timeout=None,
            stderr_tail_bytes=16 * 1024,
            pdeath_signal=signal.SIGTERM,
        ),
        on_stdout=sink,
        marker=marker,
    )
    if outcome.spawn_error is not None:
        raise GitMissing(f"cannot run git: {outcome.spawn_error.strerror or outcome.spawn_error}")
    out = GitOutput(outcome.returncode, b"".join(chunks), outcome.stderr_tail, truncated)
    if check and not out.ok:
        why = out.stderr.strip().splitlines()[-1:] or [f"exit {out.returncode}"]
        if outcome.stop_reason is not None:
            why = [f"stopped ({outcome.stop_reason.value})"]
        raise GitError(f"git {' '.join(args[:3])} failed: {why[0]}")
    return out


@contextlib.asynccontextmanager
async def temporary_index(directory: str | os.PathLike[str]) -> AsyncIterator[str]:
    """A private temporary index file path (removed afterwards)."""
    fd, path = tempfile.mkstemp(prefix=".index-", dir=os.fspath(directory))
    os.close(fd)
    os.unlink(path)  # git wants to create it itself
    try:
        yield path
    finally:
        for leftover in (path, path + ".lock"):
            with contextlib.suppress(OSError):
                os.unlink(leftover)


async def snapshot_tree(worktree: str, scratch: str, *, marker: str) -> str:
    """The tree of ``worktree`` as it is now, untracked files included
    (ignored ones left out), made in a temporary index: the worktree's own
    index is never touched (a copy of it starts the temporary one, so that
    unchanged files are not hashed again)."""
    async with temporary_index(scratch) as index:
        env = {"GIT_INDEX_FILE": index}
        own = await git(["rev-parse", "--git-path", "index"], cwd=worktree, marker=marker)
        copied = _copy_index(os.path.join(worktree, own.text.strip()), index)
        if not copied:
            await git(["read-tree", "HEAD"], cwd=worktree, env=env, marker=marker)
        added = await git(["add", "-A", "--", "."], cwd=worktree, env=env, check=not copied)
        if not added.ok:  # an index git cannot use from elsewhere: start from HEAD
            os.unlink(index)
            await git(["read-tree", "HEAD"], cwd=worktree, env=env, marker=marker)
            await git(["add", "-A", "--", "."], cwd=worktree, env=env, marker=marker)
        out = await git(["write-tree"], cwd=worktree, env=env, marker=marker)
    return out.text.strip()


def _copy_index(source: str, target: str) -> bool:
    """Copy an index file (read only: its owner's index is never written)."""
    try:
        with open(source, "rb") as src:
            data = src.read()
    except OSError:
        return False
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    return True


_KINDS = {"A": "added", "M": "modified", "D": "deleted", "R": "renamed", "C": "copied"}


def changed_files(name_status_z: bytes) -> list[dict[str, str]]:
    """``git diff --name-status -z -M`` output → ``[{path, kind[, old_path]}]``."""
    parts = name_status_z.split(b"\0")
    files: list[dict[str, str]] = []
    i = 0
    while i < len(parts):
        status = parts[i].decode("utf-8", "replace")
        if not status:
            i += 1
            continue
        letter = status[0]
        if letter in "RC" and i + 2 < len(parts):
            old = parts[i + 1].decode("utf-8", "replace")
            new = parts[i + 2].decode("utf-8", "replace")
            files.append({"path": new, "kind": _KINDS[letter], "old_path": old})
            i += 3
            continue
        if i + 1 >= len(parts):
            break
        path = parts[i + 1].decode("utf-8", "replace")
        files.append({"path": path, "kind": _KINDS.get(letter, "modified")})
        i += 2
    return files


class RepoLock:
    """An exclusive lock on one repository's worktree bookkeeping: an ``flock``
    on ``path`` (each acquisition opens its own file description, so threads
    of one process exclude each other too).  Polled, so a waiting run stays
    cancellable."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            delay = 0.005
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    await anyio.sleep(delay)
                    delay = min(delay * 2, 0.1)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
