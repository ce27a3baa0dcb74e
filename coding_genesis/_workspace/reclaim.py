"""What is ours, and what is left: a dead run's worktree reclaimed only when it
is one of ours (under a worktrees directory of ours, on the run's own branch,
registered by its repository, its gitlink intact both ways), our worktrees
listed, and what is left pruned (``genesis worktrees``)."""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from coding_genesis._util.files import find_own_runtime_dir, is_own_private
from coding_genesis._workspace.gitops import GitError, git
from coding_genesis._workspace.isolation import (
    _WORKTREES_STEM,
    BRANCH_PREFIX,
    NotRunBranch,
    _fs,
    _inside,
    _remove_path,
    _repo_home,
    _repo_of,
    commit_leftovers,
    gitlink_status,
)

__all__ = ["check_reclaim", "list_ours", "prune", "prune_branches", "reclaim"]

log = logging.getLogger("coding_genesis._workspace.isolation")


async def _verify_reclaim(
    record: Mapping[str, Any], roots: Sequence[str | os.PathLike[str]]
) -> tuple[str | None, str]:
    """(the worktree's git dir, "") when what ``record`` names is one of our
    worktrees; else (None, why not).  Ours: under our worktrees directory (or
    one of ``roots``, or a private directory of ours) in the repository's
    home, not through a link, on the
    run's branch ``coding-genesis/<name>``, registered by ``git worktree
    list`` of its repository, its gitlink pointing at that repository's
    ``worktrees/<name>`` and back."""
    path, repo, home = record.get("path"), record.get("repo"), record.get("home")
    branch = record.get("branch")
    if not all(isinstance(v, str) and v for v in (path, repo, home, branch)):
        return None, "the record names no complete worktree"
    assert isinstance(path, str) and isinstance(repo, str) and isinstance(home, str)
    assert isinstance(branch, str)
    if branch != f"{BRANCH_PREFIX}{_fs.basename(path)}":
        return None, f"its branch {branch!r} is not the run's branch for {path}"
    if not _fs.isdir(path) or _fs.islink(path):
        return None, f"{path} is not a directory (gone, or a link)"
    real_home = _fs.realpath(home)
    # The worktrees directory: ours, a configured one, or the record's own
    # when it is a private directory of ours (``worktrees_dir`` of the run's
    # config, made 0700 by us): what is in it must still be registered below.
    allowed = set()
    existing = find_own_runtime_dir(tempfile.gettempdir(), _WORKTREES_STEM)  # none made
    for root in (*([existing] if existing else []), *roots, _fs.dirname(real_home)):
        with contextlib.suppress(OSError):
            if is_own_private(os.lstat(root)):
                allowed.add(_fs.realpath(root))
    if not _inside(path, home) or _fs.islink(home) or _fs.dirname(real_home) not in allowed:
        return None, f"{path} is not in our worktrees directory"
    if not _fs.isdir(repo):
        return None, f"its repository {repo} is gone"
    marker = "coding-genesis-reclaim"
    found = await git(["rev-parse", "--git-common-dir"], cwd=repo, check=False, marker=marker)
    if not found.ok:
        return None, f"{repo} is not a git repository"
    common = found.text.strip()
    if not _fs.isabs(common):
        common = _fs.normpath(_fs.join(repo, common))
    git_dir, why = gitlink_status(path, common)
    if git_dir is None:
        return None, why or "its gitlink is not ours"
    listing = await git(["worktree", "list", "--porcelain", "-z"], cwd=repo, marker=marker)
    want = _fs.realpath(path)
    current: dict[str, str] = {}
    for item in [*listing.text.split("\0"), ""]:
        if not item:
            if (
                current.get("worktree")
                and _fs.realpath(current["worktree"]) == want
                and current.get("branch") == f"refs/heads/{branch}"
            ):
                return git_dir, ""
            current = {}
            continue
        key, _, value = item.partition(" ")
        current[key] = value
    return None, f"{path} is not registered as a worktree on {branch} by {repo}"


async def check_reclaim(
    record: Mapping[str, Any], *, roots: Sequence[str | os.PathLike[str]] = ()
) -> str | None:
    """Why the worktree a ledger record names is not ours to reclaim (None: it is)."""
    git_dir, why = await _verify_reclaim(record, roots)
    return None if git_dir is not None else why


async def reclaim(
    record: Mapping[str, Any], *, roots: Sequence[str | os.PathLike[str]] = ()
) -> bool:
    """The sweep's part: a dead runner's worktree, its leftovers committed to
    its branch (kept), removed: only when it is ours (:func:`check_reclaim`;
    otherwise nothing is committed or deleted).  True if it was removed."""
    git_dir, _why = await _verify_reclaim(record, roots)
    if git_dir is None:
        return False
    path, repo, home = str(record["path"]), str(record["repo"]), str(record["home"])
    marker = "coding-genesis-reclaim"
    try:
        await commit_leftovers(
            path,
            home,
            f"coding-genesis: uncommitted work of run {record.get('run_id')} (its runner died)",
            marker,
            git_dir=git_dir,
            branch=str(record["branch"]),
        )
    except NotRunBranch:
        return False  # its leftovers would be lost: it stays
    except (GitError, OSError):
        pass
    with contextlib.suppress(GitError, OSError):
        await _remove_path(repo, home, path, marker, rmtree_ok=True)
    return True


# -- what is ours, and pruning what is left -------------------------------------------


async def list_ours(cwd: str, *, worktrees_dir: str | None = None) -> list[dict[str, Any]]:
    """The worktrees of the repository at ``cwd`` that live under our directory."""
    toplevel, common = await _repo_of(cwd, "coding-genesis-list")
    found_root = (
        Path(worktrees_dir)
        if worktrees_dir
        else find_own_runtime_dir(tempfile.gettempdir(), _WORKTREES_STEM)
    )
    if found_root is None:
        return []  # no worktrees directory of ours: none made just to look
    home = _fs.realpath(_repo_home(found_root, toplevel, common))
    out = await git(["worktree", "list", "--porcelain", "-z"], cwd=toplevel)
    found: list[dict[str, Any]] = []
    entry: dict[str, Any] = {}
    for item in [*out.text.split("\0"), ""]:
        if not item:
            if entry.get("path"):
                path = _fs.realpath(entry["path"])
                if path.startswith(home + os.sep):
                    entry["exists"] = _fs.isdir(entry["path"])
                    found.append(entry)
            entry = {}
            continue
        key, _, value = item.partition(" ")
        if key == "worktree":
            entry["path"] = value
        elif key == "branch":
            entry["branch"] = value.removeprefix("refs/heads/")
        elif key == "HEAD":
            entry["head"] = value
        elif key in ("locked", "prunable", "detached"):
            entry[key] = value or True
    return found


async def prune(
    cwd: str,
    *,
    worktrees_dir: str | None = None,
    live: frozenset[str] = frozenset(),
    dry_run: bool = False,
) -> list[dict[str, Any]]:
    """Remove our worktrees of this repository that no live run uses (their
    leftovers committed to their branches, which stay)."""
    toplevel, common = await _repo_of(cwd, "coding-genesis-prune")
    found_root = (
        Path(worktrees_dir)
        if worktrees_dir
        else find_own_runtime_dir(tempfile.gettempdir(), _WORKTREES_STEM)
    )
    if found_root is None:
        return []
    root = found_root
    home = str(_repo_home(root, toplevel, common))
    removed = []
    for entry in await list_ours(cwd, worktrees_dir=worktrees_dir):
        if _fs.realpath(entry["path"]) in live:
            continue
        removed.append(entry)
        if dry_run:
            continue
        await reclaim(
            {
                "path": entry["path"],
                "repo": toplevel,
                "home": home,
                "branch": entry.get("branch"),
                "run_id": "prune",
            },
            roots=(root,),
        )
    if not dry_run:
        await git(["worktree", "prune"], cwd=toplevel, check=False)
    return removed


async def prune_branches(
    cwd: str,
    *,
    live: frozenset[str] = frozenset(),
    keep: frozenset[str] = frozenset(),
    force: bool = False,
    dry_run: bool = False,
    free: frozenset[str] | None = None,
) -> list[dict[str, Any]]:
    """The branches of finished runs (``coding-genesis/<run>``, checked out in
    no worktree and no live run's) in the repository at ``cwd``: each with
    ``unique`` (its commits no other branch reaches) and ``removed``.  One
    whose commits another branch reaches loses nothing and is removed; the
    rest only with ``force``; ``dry_run``: only said.  ``keep``: branches
    still in use; ``free``: branches whose worktree a dry run of the prune
    would have removed (counted as free)."""
    marker = "coding-genesis-prune"
    toplevel, _common = await _repo_of(cwd, marker)
    listing = await git(
        ["for-each-ref", "--format=%(refname)", f"refs/heads/{BRANCH_PREFIX}"],
        cwd=toplevel,
        marker=marker,
    )
    used = set(keep)
    worktrees = await git(["worktree", "list", "--porcelain", "-z"], cwd=toplevel, marker=marker)
    for item in worktrees.text.split("\0"):
        if item.startswith("branch refs/heads/"):
            name = item.removeprefix("branch refs/heads/")
            if free is None or name not in free:
                used.add(name)
    found: list[dict[str, Any]] = []
    for ref in listing.text.split():
        branch = ref.removeprefix("refs/heads/")
        if not ref.startswith(f"refs/heads/{BRANCH_PREFIX}") or branch in used or branch in live:
            continue
        # Its commits that no other branch reaches: what removing it would lose.
        unique = await git(
            ["rev-list", "--count", ref, "--not", f"--exclude={branch}", "--branches"],
            cwd=toplevel,
            marker=marker,
        )
        count = int(unique.text.strip() or 0)
        entry: dict[str, Any] = {"branch": branch, "unique": count, "removed": False}
        if (count == 0 or force) and not dry_run:
            done = await git(["branch", "-D", "--", branch], cwd=toplevel, check=False)
            entry["removed"] = done.ok
        found.append(entry)
    return found
