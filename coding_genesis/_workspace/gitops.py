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
from typing import Any

import anyio

from coding_genesis._supervision.childenv import build_env
from coding_genesis._supervision.process import run_process
from coding_genesis._supervision.values import SupervisorConfig

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
    # Programs git would run on the environment's word.
    "GIT_EXTERNAL_DIFF",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_PROXY_COMMAND",
    "GIT_EXEC_PATH",
    "GIT_TEMPLATE_DIR",
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
#: ``-c`` settings of every call: no signing, no color, and none of the
#: repository's programs (hooks, fsmonitor, pager, editor, credential helper,
#: transports, automatic maintenance, submodule recursion).
_CONFIG = (
    "--no-pager",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.pager=cat",
    "-c",
    "core.editor=true",
    "-c",
    "sequence.editor=true",
    "-c",
    "credential.helper=",
    "-c",
    "protocol.allow=never",
    "-c",
    "submodule.recurse=false",
    "-c",
    "gc.auto=0",
    "-c",
    "maintenance.auto=false",
    "-c",
    "core.untrackedCache=false",
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


#: Diff-like commands: never an external diff or a textconv program.
_DIFF_LIKE = frozenset({"diff", "log", "show", "diff-tree", "diff-index", "diff-files"})
#: Commands that never read or write file contents through a filter: no need
#: to look up the filter drivers first (one ``git config`` fewer).
_NO_FILTERS = frozenset(
    {
        # Neither the index nor the working tree (``write-tree`` would: a racily
        # clean entry is compared through its clean filter).
        "rev-parse",
        "update-ref",
        "commit-tree",
        "symbolic-ref",
        "config",
        "for-each-ref",
        "--version",
    }
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


def _supervised(timeout: float, *, stderr_tail_bytes: int) -> SupervisorConfig:
    """How every git command of ours is supervised: a short grace, no stall or
    linger clock (git is quiet while it works), the parent-death signal."""
    return SupervisorConfig(
        timeout=timeout,
        grace=2.0,
        linger=None,
        stall_timeout=None,
        stderr_tail_bytes=stderr_tail_bytes,
        pdeath_signal=signal.SIGTERM,
    )


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
    git_dir: str | None = None,
    work_tree: str | None = None,
) -> GitOutput:
    """Run ``git ARGS`` in ``cwd`` (on ``git_dir``/``work_tree`` when given:
    paths the caller verified); raise :class:`GitError` if it fails and
    ``check``, :class:`GitMissing` if there is no git.  No program of the
    repository runs (see the module's description)."""
    location: list[str] = []
    if git_dir is not None:
        location.append(f"--git-dir={git_dir}")
    if work_tree is not None:
        location.append(f"--work-tree={work_tree}")
    command = list(args)
    if command and command[0] in _DIFF_LIKE:
        command[1:1] = ["--no-ext-diff", "--no-textconv"]
    extra: dict[str, str] = {}
    if not command or (command[0] not in _NO_FILTERS and command[:2] != ["worktree", "list"]):
        extra = await _no_filters(cwd, location, marker, program, timeout)
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

    child_env = build_env(
        _environ(), unset=_UNSET, add={**_QUIET, **(env or {}), **extra}, marker=marker
    )
    outcome = await run_process(
        [program, *_CONFIG, *location, *command],
        cwd=os.fspath(cwd),
        env=child_env,
        stdin=stdin,
        config=_supervised(timeout, stderr_tail_bytes=16 * 1024),
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


def _filter_names(listing: bytes) -> set[str]:
    """Filter driver names of ``git config --null --get-regexp ^filter\\.`` output
    (``filter.<name>.<key>\\n<value>\\0``; a name may hold dots)."""
    names = set()
    for item in listing.split(b"\0"):
        key = item.partition(b"\n")[0].decode("utf-8", "surrogateescape")
        if key.lower().startswith("filter.") and key.count(".") >= 2:
            names.add(key[len("filter.") : key.rindex(".")])
    return names


async def _no_filters(
    cwd: str | os.PathLike[str], location: list[str], marker: str, program: str, timeout: float
) -> dict[str, str]:
    """``GIT_CONFIG_*`` variables emptying every configured filter driver:
    its clean, smudge and process commands, and not required.  Git runs no
    filter for an attribute naming a driver that is not configured, so these
    are all the filters it could run."""
    env = build_env(_environ(), unset=_UNSET, add=_QUIET, marker=marker)
    outcome_chunks: list[bytes] = []

    def sink(chunk: bytes) -> bool:
        if chunk and sum(map(len, outcome_chunks)) < MAX_OUTPUT:
            outcome_chunks.append(chunk)
        return False

    outcome = await run_process(
        [program, *_CONFIG, *location, "config", "--null", "--get-regexp", r"^filter\."],
        stdin=None,
        cwd=os.fspath(cwd),
        env=env,
        config=_supervised(timeout, stderr_tail_bytes=4 * 1024),
        on_stdout=sink,
        marker=marker,
    )
    if outcome.spawn_error is not None:
        raise GitMissing(f"cannot run git: {outcome.spawn_error.strerror or outcome.spawn_error}")
    if outcome.returncode not in (0, 1):  # 1: no filter configured
        raise GitError(f"git config: cannot list the filter drivers: {outcome.stderr_tail[-300:]}")
    extra: dict[str, str] = {}
    count = 0
    for name in sorted(_filter_names(b"".join(outcome_chunks))):
        for key, value in (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")):
            extra[f"GIT_CONFIG_KEY_{count}"] = f"filter.{name}.{key}"
            extra[f"GIT_CONFIG_VALUE_{count}"] = value
            count += 1
    if count:
        extra["GIT_CONFIG_COUNT"] = str(count)
    return extra


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


async def snapshot_tree(
    worktree: str, scratch: str, *, marker: str, git_dir: str | None = None
) -> str:
    """The tree of ``worktree`` as it is now, untracked files included
    (ignored ones left out), made in a temporary index: the worktree's own
    index is never touched (a copy of it starts the temporary one, so that
    unchanged files are not hashed again).  ``git_dir``: the worktree's git
    dir, checked by the caller (then passed explicitly with the work tree)."""
    where: dict[str, Any] = {"git_dir": git_dir, "work_tree": worktree if git_dir else None}
    async with temporary_index(scratch) as index:
        env = {"GIT_INDEX_FILE": index}
        own = await git(["rev-parse", "--git-path", "index"], cwd=worktree, marker=marker, **where)
        copied = _copy_index(os.path.join(worktree, own.text.strip()), index)
        if not copied:
            await git(["read-tree", "HEAD"], cwd=worktree, env=env, marker=marker, **where)
        added = await git(
            ["add", "-A", "--", "."],
            cwd=worktree,
            env=env,
            check=not copied,
            marker=marker,
            **where,
        )
        if not added.ok:  # an index git cannot use from elsewhere: start from HEAD
            os.unlink(index)
            await git(["read-tree", "HEAD"], cwd=worktree, env=env, marker=marker, **where)
            await git(["add", "-A", "--", "."], cwd=worktree, env=env, marker=marker, **where)
        out = await git(["write-tree"], cwd=worktree, env=env, marker=marker, **where)
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
