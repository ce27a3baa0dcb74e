"""Isolated runs: a fresh ``git worktree`` per run, its changes read from git,
and its removal.

The lifecycle of one run's worktree::

    open_worktree   → a new branch ``coding-genesis/<run>`` at the base commit,
                      checked out under a private directory of ours (0700);
                      the caller's uncommitted changes carried over on request
    changes         → branch, base commit, changed files (added, modified,
                      deleted, renamed), diff stat, the agent's commits, the
                      full diff on request: all from git, untracked files
                      included (through a temporary index)
    close_worktree  → unless kept: what the agent left uncommitted is
                      committed to the branch (our author identity, no hooks,
                      no signing), the worktree is removed, the branch stays

Worktree creation and removal on one repository hold a lock (a file lock:
threads and processes).  :class:`WorktreeWrapper` wires this around a run's
attempts (see :mod:`coding_genesis._pipeline.wrappers`); the run ledger records each
worktree so that the sweep of a dead runner's runs removes it too
(:func:`reclaim`), keeping the branch.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coding_genesis._supervision.shield import shielded
from coding_genesis._util.files import (
    own_runtime_dir,
    private_dir,
)
from coding_genesis._workspace.gitops import (
    AUTHOR_EMAIL,
    AUTHOR_NAME,
    GitError,
    GitMissing,
    RepoLock,
    changed_files,
    git,
    snapshot_tree,
)
from coding_genesis._workspace.instructions import instruction_warnings
from coding_genesis.errors import ConfigError
from coding_genesis.options import Keep

__all__ = [
    "BRANCH_PREFIX",
    "KEEP_CHOICES",
    "Workspace",
    "WorkspaceTampered",
    "WorktreeRefused",
    "changes",
    "close_worktree",
    "default_worktrees_dir",
    "gitlink_status",
    "open_worktree",
]

BRANCH_PREFIX = "coding-genesis/"
KEEP_CHOICES = ("never", "on_failure", "always")
#: A full diff is cut at this many characters (the result says so).
MAX_DIFF_CHARS = 2_000_000
_MAX_FILES = 1000
_MAX_COMMITS = 200


def _fs_ns() -> Any:
    """Path helpers (local stat calls), kept out of the async functions' bodies."""
    return os.path


_fs: Any = _fs_ns()


class WorktreeRefused(Exception):
    """The run cannot be isolated (not a git repository, no git, a bad base):
    answered without starting the CLI."""

    def __init__(self, message: str, *, missing_git: bool = False) -> None:
        super().__init__(message)
        self.missing_git = missing_git


_WORKTREES_STEM = "coding-genesis-worktrees"


class WorkspaceTampered(GitError):
    """The worktree's ``.git`` is no longer our gitlink: nothing of it is run."""


class NotRunBranch(GitError):
    """The worktree's ``HEAD`` is not the run's branch: nothing is committed."""


def default_worktrees_dir() -> Path:
    """Our private directory under the temp directory
    (``coding-genesis-worktrees-<uid>[-<random>]``, ours and 0700, found once
    per process: see :func:`coding_genesis._util.files.own_runtime_dir`; one of
    another user's with that name is refused, named in a warning): outside
    every checkout, so the CLI finds no instruction file of the caller's
    repository above its cwd."""
    return own_runtime_dir(tempfile.gettempdir(), _WORKTREES_STEM)


def gitlink_status(path: str, common_dir: str) -> tuple[str | None, str | None]:
    """(the worktree's git dir, None) when ``path/.git`` is still the gitlink
    git made: a regular file (not a link) ``gitdir: <common>/worktrees/<name>``
    whose ``gitdir`` file points back at it; else (None, why not)."""
    dotgit = _fs.join(path, ".git")
    try:
        fd = os.open(dotgit, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None, f"its .git ({dotgit}) was removed"
        return None, f"its .git ({dotgit}) was replaced (a link or not a file: {exc.strerror})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, f"its .git ({dotgit}) was replaced (a directory, not our gitlink file)"
        text = os.read(fd, 4097).decode("utf-8", "replace")
    finally:
        os.close(fd)
    if not text.startswith("gitdir: ") or len(text) > 4096:
        return None, f"its .git ({dotgit}) was replaced (not a gitlink)"
    target = text[len("gitdir: ") :].strip()
    if not _fs.isabs(target):
        target = _fs.normpath(_fs.join(path, target))
    target = _fs.realpath(target)
    if _fs.dirname(target) != _fs.realpath(_fs.join(common_dir, "worktrees")):
        return None, f"its .git ({dotgit}) points elsewhere ({target})"
    try:
        with open(_fs.join(target, "gitdir"), "rb") as back:
            back_path = back.read(4097).decode("utf-8", "replace").strip()
    except OSError:
        return None, f"the repository has no record of it ({target}/gitdir)"
    if _fs.realpath(back_path) != _fs.realpath(dotgit):
        return None, f"the repository's record of it ({target}/gitdir) points elsewhere"
    return target, None


@dataclass(slots=True)
class Workspace:
    """One run's worktree."""

    run_id: str
    #: Top level of the caller's checkout.
    repo: str
    #: The repository's common git directory (shared by all its worktrees).
    common_dir: str
    #: Our private directory for this repository (worktrees, lock, scratch).
    home: str
    path: str
    #: The run's directory: the worktree plus the caller's subpath in its checkout.
    cwd: str
    branch: str
    base: str
    base_commit: str
    marker: str
    carried_uncommitted: bool = False
    #: Uncommitted paths of the caller's checkout when the run started.
    uncommitted_in_checkout: int = 0
    warnings: list[str] = field(default_factory=list)
    removed: bool = False
    kept: bool = False
    final_commit: str | None = None
    #: The worktree's own git dir (``<common>/worktrees/<name>``), checked at creation.
    git_dir: str = ""
    #: Why the worktree's ``.git`` is no longer ours (replaced by the run): then
    #: nothing of it was run, its changes were not read, its branch was left as
    #: it was and the worktree was kept for inspection.
    tampered: str | None = None

    def record(self) -> dict[str, Any]:
        """What the run ledger keeps to reclaim the worktree after a runner's death."""
        return {
            "repo": self.repo,
            "common_dir": self.common_dir,
            "home": self.home,
            "path": self.path,
            "branch": self.branch,
            "run_id": self.run_id,
        }

    def summary(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "cwd": self.cwd,
            "branch": self.branch,
            "base": self.base,
            "base_commit": self.base_commit,
            "repo": self.repo,
            "carried_uncommitted": self.carried_uncommitted,
            "uncommitted_in_checkout": self.uncommitted_in_checkout,
            "kept": self.kept,
            "removed": self.removed,
            "head": self.final_commit,
            "tampered": self.tampered,
        }


def _repo_home(base: Path, toplevel: str, common_dir: str) -> Path:
    digest = hashlib.sha256(os.fsencode(common_dir)).hexdigest()[:12]
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(toplevel).name)[:40]
    return base / f"{name or 'repo'}-{digest}"


async def _repo_of(cwd: str, marker: str) -> tuple[str, str]:
    """(top level, common git dir) of the checkout holding ``cwd``."""
    try:
        out = await git(
            ["rev-parse", "--show-toplevel", "--git-common-dir"],
            cwd=cwd,
            check=False,
            marker=marker,
        )
    except GitMissing as exc:
        raise WorktreeRefused(f"isolation='worktree' needs git: {exc}", missing_git=True) from None
    lines = out.text.splitlines()
    if not out.ok or len(lines) < 2:
        raise WorktreeRefused(
            f"isolation='worktree' needs a git repository: {cwd!r} is not inside one "
            f"({out.stderr.strip().splitlines()[-1] if out.stderr.strip() else 'git said no'})"
        )
    toplevel = lines[0]
    common = lines[1]
    if not _fs.isabs(common):
        common = _fs.normpath(_fs.join(cwd, common))
    return toplevel, _fs.realpath(common)


async def open_worktree(
    cwd: str,
    run_id: str,
    *,
    base: str | None = None,
    carry_uncommitted: bool = False,
    worktrees_dir: str | None = None,
    marker: str | None = None,
) -> Workspace:
    """Create the run's branch and worktree; raise :class:`WorktreeRefused`."""
    marker = marker or run_id
    toplevel, common = await _repo_of(cwd, marker)
    base_ref = base or "HEAD"
    if base_ref.startswith("-"):
        raise WorktreeRefused(f"invalid base {base_ref!r}: it would read as an option")
    resolved = await git(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{base_ref}^{{commit}}"],
        cwd=toplevel,
        check=False,
        marker=marker,
    )
    if not resolved.ok:
        raise WorktreeRefused(
            f"base {base_ref!r} is not a commit of {toplevel}"
            + (" (the repository has no commit yet)" if base_ref == "HEAD" else "")
        )
    base_commit = resolved.text.strip()
    try:
        root = private_dir(Path(worktrees_dir) if worktrees_dir else default_worktrees_dir())
        home = private_dir(_repo_home(root, toplevel, common))
    except OSError as exc:
        raise WorktreeRefused(f"cannot use the worktrees directory: {exc}") from None
    short = run_id[:16]
    path = home / short
    branch = f"{BRANCH_PREFIX}{short}"
    try:
        async with RepoLock(home / ".lock").held():
            added = await git(
                ["worktree", "add", "--quiet", "--no-track", "-b", branch, str(path), base_commit],
                cwd=toplevel,
                check=False,
                marker=marker,
            )
    except BaseException:  # cancelled mid-way: nothing half-made stays behind
        await shielded(
            lambda: _undo_add(toplevel, str(home), str(path), branch, marker, base_commit)
        )
        raise
    if not added.ok:
        await _undo_add(toplevel, str(home), str(path), branch, marker, base_commit)
        raise WorktreeRefused(f"git worktree add failed: {added.stderr.strip()[-500:]}")
    os.chmod(path, 0o700)
    git_dir, why = gitlink_status(str(path), common)
    if git_dir is None:
        await _undo_add(toplevel, str(home), str(path), branch, marker, base_commit)
        raise WorktreeRefused(f"git worktree add made no gitlink we can check: {why}")
    rel = _fs.relpath(_fs.realpath(cwd), _fs.realpath(toplevel))
    run_cwd = str(path) if rel == "." else str(path / rel)
    workspace = Workspace(
        run_id=run_id,
        repo=toplevel,
        common_dir=common,
        home=str(home),
        path=str(path),
        cwd=run_cwd,
        branch=branch,
        base=base_ref,
        base_commit=base_commit,
        marker=marker,
        git_dir=git_dir,
    )
    try:
        status = await git(
            ["status", "--porcelain=v1", "-z", "--untracked-files=all"], cwd=toplevel, marker=marker
        )
        workspace.uncommitted_in_checkout = sum(
            1 for entry in status.stdout.split(b"\0") if len(entry) > 3 and entry[2:3] == b" "
        )
        if workspace.uncommitted_in_checkout:
            if carry_uncommitted:
                await _carry(workspace, toplevel)
                workspace.carried_uncommitted = True
            else:
                workspace.warnings.append(
                    f"the checkout has {workspace.uncommitted_in_checkout} uncommitted path(s); "
                    f"the worktree starts from {base_ref} ({base_commit[:12]}) without them "
                    "(carry_uncommitted=True, --carry-uncommitted, carries them over)"
                )
        os.makedirs(run_cwd, 0o700, exist_ok=True)
        workspace.warnings.extend(instruction_warnings(run_cwd, cwd))
    except BaseException:
        await shielded(
            lambda: _undo_add(toplevel, str(home), str(path), branch, marker, base_commit)
        )
        raise
    return workspace


async def _undo_add(
    repo: str, home: str, path: str, branch: str, marker: str, base_commit: str
) -> None:
    """Remove a worktree and branch that were just made (no work in them yet);
    a branch that is not where we made it is not ours to delete."""
    with contextlib.suppress(GitError, OSError):
        await _remove_path(repo, home, path, marker, rmtree_ok=True)
        ref = f"refs/heads/{branch}"
        tip = await git(["rev-parse", "--verify", "--quiet", ref], cwd=repo, check=False)
        if tip.ok and tip.text.strip() == base_commit:
            await git(["branch", "-D", "--", branch], cwd=repo, check=False, marker=marker)


async def _carry(ws: Workspace, toplevel: str) -> None:
    """Apply the checkout's uncommitted changes (untracked files too) to the
    worktree, read through a temporary index: the caller's index is untouched."""
    tree = await snapshot_tree(toplevel, ws.home, marker=ws.marker)
    diff = await git(
        ["diff", "--binary", "--full-index", "--no-renames", "HEAD", tree, "--"],
        cwd=toplevel,
        marker=ws.marker,
    )
    if diff.stdout.strip():
        applied = await git(
            ["apply", "--binary", "--whitespace=nowarn", "-"],
            cwd=ws.path,
            git_dir=ws.git_dir,
            work_tree=ws.path,
            stdin=diff.stdout,
            check=False,
            marker=ws.marker,
        )
        if not applied.ok:
            raise WorktreeRefused(
                f"the checkout's uncommitted changes do not apply on {ws.base}: "
                f"{applied.stderr.strip()[-300:]}"
            )


def check_intact(ws: Workspace) -> None:
    """Raise :class:`WorkspaceTampered` (and say so in the workspace) when the
    worktree's ``.git`` is no longer our gitlink."""
    if ws.tampered is None:
        git_dir, why = gitlink_status(ws.path, ws.common_dir)
        if git_dir is not None and git_dir == ws.git_dir:
            return
        ws.tampered = why or f"its .git points at another git dir ({git_dir})"
        ws.warnings.append(
            f"the worktree's .git was replaced during the run: {ws.tampered}; nothing of it "
            f"was run, its changes were not read, its branch {ws.branch} was left as it was, "
            f"and the worktree {ws.path} was kept for inspection"
        )
    raise WorkspaceTampered(f"the worktree's .git is not ours: {ws.tampered}")


async def changes(ws: Workspace, *, include_diff: bool = False) -> dict[str, Any]:
    """What the run changed, from git: against the base commit, committed and
    uncommitted work (untracked files included).  :class:`WorkspaceTampered`
    if the worktree's ``.git`` is no longer ours."""
    check_intact(ws)
    marker = ws.marker
    where: dict[str, Any] = {"cwd": ws.path, "git_dir": ws.git_dir, "work_tree": ws.path}
    tree = await snapshot_tree(ws.path, ws.home, marker=marker, git_dir=ws.git_dir)
    head = (await git(["rev-parse", "HEAD"], marker=marker, **where)).text.strip()
    names = await git(
        ["diff", "--name-status", "-z", "-M", ws.base_commit, tree, "--"],
        marker=marker,
        **where,
    )
    files = changed_files(names.stdout)
    stat = await git(
        ["diff", "--stat=200", "--summary", "-M", ws.base_commit, tree, "--"],
        marker=marker,
        **where,
    )
    log = await git(
        ["log", "--format=%H%x00%an%x00%s%x00", "-z", f"{ws.base_commit}..{head}", "--"],
        check=False,
        marker=marker,
        **where,
    )
    commits = []
    fields = log.text.split("\0")
    for i in range(0, len(fields) - 2, 3):
        sha = fields[i].strip()
        if sha:
            commits.append({"sha": sha, "author": fields[i + 1], "subject": fields[i + 2]})
    head_tree = (await git(["rev-parse", "HEAD^{tree}"], marker=marker, **where)).text.strip()
    out: dict[str, Any] = {
        "branch": ws.branch,
        "base_commit": ws.base_commit,
        "head": head,
        "files": files[:_MAX_FILES],
        "files_total": len(files),
        "diff_stat": stat.text.rstrip("\n"),
        "commits": commits[-_MAX_COMMITS:],
        "uncommitted": tree != head_tree,
    }
    if include_diff:
        diff = await git(
            ["diff", "--binary", "-M", ws.base_commit, tree, "--"], marker=marker, **where
        )
        text = diff.text
        out["diff"] = text[:MAX_DIFF_CHARS]
        out["diff_truncated"] = diff.truncated or len(text) > MAX_DIFF_CHARS
    return out


async def commit_leftovers(
    ws_path: str, scratch: str, message: str, marker: str, *, git_dir: str, branch: str
) -> str | None:
    """Commit what is uncommitted in a worktree (untracked files too) to the
    run's branch ``refs/heads/<branch>`` (only if the worktree's ``HEAD`` is
    that branch: never another ref), as coding-genesis, with no hook and no
    signature; the new commit (None: nothing to commit)."""
    where: dict[str, Any] = {"cwd": ws_path, "git_dir": git_dir, "work_tree": ws_path}
    ref = f"refs/heads/{branch}"
    current = await git(["symbolic-ref", "--quiet", "HEAD"], check=False, marker=marker, **where)
    if not branch.startswith(BRANCH_PREFIX) or current.text.strip() != ref:
        raise NotRunBranch(
            f"the worktree's HEAD is not the run's branch {branch}: nothing committed"
        )
    tree = await snapshot_tree(ws_path, scratch, marker=marker, git_dir=git_dir)
    head = await git(["rev-parse", "--verify", "--quiet", ref], check=False, marker=marker, **where)
    parent = head.text.strip() if head.ok else None
    if parent is not None:
        head_tree = await git(["rev-parse", f"{parent}^{{tree}}"], marker=marker, **where)
        if head_tree.text.strip() == tree:
            return None
    args = ["commit-tree", "--no-gpg-sign", tree, "-m", message]
    if parent is not None:
        args[3:3] = ["-p", parent]
    commit = (await git(args, marker=marker, **where)).text.strip()
    update = ["update-ref", "-m", "coding-genesis: uncommitted work", ref, commit]
    update.append(parent if parent is not None else "0" * 40)
    await git(update, marker=marker, **where)
    return commit


async def remove(ws: Workspace, *, keep_branch: bool = True) -> None:
    """Remove the worktree (under the repository's lock); the branch stays
    unless ``keep_branch`` is False."""
    await _remove_path(ws.repo, ws.home, ws.path, ws.marker, rmtree_ok=True)
    if not keep_branch:
        await git(["branch", "-D", "--", ws.branch], cwd=ws.repo, check=False, marker=ws.marker)
    ws.removed = True


def _inside(path: str, home: str) -> bool:
    """``path`` is an entry of ``home`` itself (not a link, nothing escaping)."""
    return not _fs.islink(path) and _fs.dirname(_fs.realpath(path)) == _fs.realpath(home)


async def _remove_path(
    repo: str, home: str, path: str, marker: str, *, rmtree_ok: bool = False
) -> None:
    """``git worktree remove``; what git leaves is deleted only when
    ``rmtree_ok`` (a path we made or verified) and it lies in our ``home``."""
    async with RepoLock(Path(home) / ".lock").held():
        out = await git(
            ["worktree", "remove", "--force", "--force", path],
            cwd=repo,
            check=False,
            marker=marker,
        )
        if not out.ok or _fs.lexists(path):
            if not (rmtree_ok and _inside(path, home)):
                return
            shutil.rmtree(path, ignore_errors=True)
            await git(["worktree", "prune"], cwd=repo, check=False, marker=marker)


async def close_worktree(
    ws: Workspace, *, keep: bool, keep_branch: bool = True, failed: bool = False
) -> None:
    """The end of the run's worktree: kept as is, or its leftovers committed
    to the branch and the worktree removed."""
    try:
        check_intact(ws)
    except WorkspaceTampered:
        ws.kept = True  # nothing of it is run; kept for inspection, its branch as it was
        return
    where: dict[str, Any] = {"cwd": ws.path, "git_dir": ws.git_dir, "work_tree": ws.path}
    if keep:
        ws.kept = True
        with contextlib.suppress(GitError):
            head = await git(["rev-parse", "HEAD"], marker=ws.marker, **where)
            ws.final_commit = head.text.strip()
        return
    outcome = "failed" if failed else "finished"
    try:
        await commit_leftovers(
            ws.path,
            ws.home,
            f"coding-genesis: uncommitted work of run {ws.run_id} ({outcome})",
            ws.marker,
            git_dir=ws.git_dir,
            branch=ws.branch,
        )
        head = await git(["rev-parse", "HEAD"], marker=ws.marker, **where)
        ws.final_commit = head.text.strip()
    except NotRunBranch as exc:  # its leftovers would be lost: the worktree stays
        ws.warnings.append(f"{exc}; the worktree {ws.path} is kept")
        ws.kept = True
        return
    except GitError as exc:
        ws.warnings.append(f"could not commit the run's leftovers: {exc}")
    await remove(ws, keep_branch=keep_branch)


def check_keep(value: object) -> Keep:
    if value not in KEEP_CHOICES:
        raise ConfigError(f"keep must be one of {', '.join(KEEP_CHOICES)}, got {value!r}")
    return value  # type: ignore[return-value]


def author() -> str:
    return f"{AUTHOR_NAME} <{AUTHOR_EMAIL}>"
