"""The sweep: what runs of runners that died left behind, stopped and cleaned.

For each record of the run ledger (:mod:`coding_genesis._supervision.ledger`)
whose runner is gone, it stops every process of our user that carries the
run's marker (the supervisor's tree stop: pid-reuse safe, TERM, grace, KILL),
reclaims the run's worktree when it is ours, removes the run's settings
overlay directory when it is ours (``is_own_overlay``: named for the run, a
private directory of ours directly in the temp directory, not a link), marks
the run's transcript as ended by the runner's death and removes the record.  Only a record we wrote is
read, and only a marker we wrote for its own run is stopped.  With nothing to
do it costs one directory listing.  The agent sweeps at its first run;
``genesis reap`` on demand.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import orjson

from coding_genesis._observers.transcript import ENDED
from coding_genesis._pipeline.overlay import is_own_overlay
from coding_genesis._supervision.childenv import RUN_MARKER_ENV
from coding_genesis._supervision.ledger import Ledger, not_ours
from coding_genesis._supervision.tree import stop_marked

__all__ = ["SweptRun", "sweep", "sweep_sync"]

log = logging.getLogger("coding_genesis._workspace.sweep")


@dataclass(frozen=True, slots=True)
class SweptRun:
    """A run whose runner was found dead, and what the sweep did about it."""

    run_id: str
    marker: str
    runner_pid: int
    #: pids stopped (empty in a dry run: those that would be).
    stopped: tuple[int, ...]
    transcript: str | None
    found_ts: float
    #: The run's git worktree, removed by the sweep (its branch kept).
    worktree: str | None = None
    #: Why nothing was done for this record (it names what is not ours); None: acted on.
    refused: str | None = None
    #: Why the worktree it names was left alone (not ours, not registered...).
    worktree_refused: str | None = None
    #: The run's settings overlay directory, removed by the sweep.
    overlay: str | None = None
    #: Why the overlay it names was left alone (not ours, not in the temp dir...).
    overlay_refused: str | None = None


def _mark_transcript(directory: str, entry: dict[str, Any], swept: SweptRun) -> None:
    """Write ``ended.json`` into the run's transcript directory: only a
    directory of ours (not a link) named after the run, with no result yet."""
    path = Path(directory)
    if path.name != swept.run_id.removesuffix(".worktree"):
        return
    try:
        dir_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if os.fstat(dir_fd).st_uid != os.getuid():
            return
        with contextlib.suppress(FileNotFoundError):
            os.stat("result.json", dir_fd=dir_fd, follow_symlinks=False)
            return
        data = orjson.dumps(
            {
                "ended_by": "runner_death",
                "runner_pid": entry.get("runner_pid"),
                "found_ts": swept.found_ts,
                "stopped": len(swept.stopped),
            },
            option=orjson.OPT_INDENT_2,
        )
        with contextlib.suppress(OSError):
            # O_NONBLOCK: a FIFO planted as ended.json fails the open (ENXIO)
            # instead of blocking the sweep; anything but a regular file is left.
            fd = os.open(
                ENDED,
                os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                0o600,
                dir_fd=dir_fd,
            )
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    os.ftruncate(fd, 0)
                    os.write(fd, data)
            finally:
                os.close(fd)
    finally:
        os.close(dir_fd)


async def sweep(
    ledger: Ledger,
    *,
    dry_run: bool = False,
    grace: float = 1.0,
    worktrees_dirs: Sequence[str | os.PathLike[str]] = (),
) -> list[SweptRun]:
    """Stop what runs of dead runners left behind; one listing when nothing is.

    Only records we wrote are read (:attr:`Ledger.ignored` counts the others),
    only a marker we wrote for its own run is stopped, and only a worktree
    that is ours (under our worktrees directory or one of ``worktrees_dirs``,
    registered with its repository, its gitlink intact) is reclaimed."""
    if not dry_run:
        ledger.drop_torn_writes()
    dead = ledger.dead()
    ignored = ledger.ignored
    if not dead:
        return []
    live = ledger.live_run_ids()
    swept: list[SweptRun] = []
    for path, entry in dead:
        marker = str(entry["marker"])
        refused = not_ours(path.name, entry, live)
        stopped: list[int] = []
        if refused is None:
            stopped = await stop_marked(marker, grace=grace, dry_run=dry_run)
        run = _swept_run(entry, marker, stopped, refused)
        if refused is not None:
            log.warning("run ledger %s: record %s left alone: %s", ledger.path, path.name, refused)
            swept.append(run)
            continue
        worktree = entry.get("worktree")
        if isinstance(worktree, dict):
            run = await _reclaim_worktree(run, worktree, worktrees_dirs, dry_run)
        overlay = entry.get("overlay")
        if overlay is not None:
            run = _remove_overlay(run, overlay, marker, dry_run)
        swept.append(run)
        if dry_run:
            continue
        if run.transcript:
            _mark_transcript(run.transcript, entry, run)
        ledger.unlink(path.name)
        log.info(
            "run %s: its runner (pid %s) died; stopped %d process(es) carrying %s=%s",
            run.run_id,
            run.runner_pid,
            len(stopped),
            RUN_MARKER_ENV,
            marker,
        )
    ledger.ignored = ignored
    return swept


def _swept_run(
    entry: dict[str, Any], marker: str, stopped: list[int], refused: str | None
) -> SweptRun:
    """What the sweep found of one dead run's record (its fields bounded)."""
    worktree = entry.get("worktree")
    return SweptRun(
        run_id=str(entry.get("run_id") or marker)[:200],
        marker=marker[:200],
        runner_pid=entry["runner_pid"] if isinstance(entry.get("runner_pid"), int) else 0,
        stopped=tuple(stopped),
        transcript=entry.get("transcript") if isinstance(entry.get("transcript"), str) else None,
        found_ts=time.time(),
        worktree=str(worktree.get("path")) if isinstance(worktree, dict) else None,
        refused=refused,
    )


async def _reclaim_worktree(
    run: SweptRun,
    worktree: dict[str, Any],
    roots: Sequence[str | os.PathLike[str]],
    dry_run: bool,
) -> SweptRun:
    """A dead run's worktree removed when it is ours; else why it was left."""
    # lazy: git and the worktree machinery, only when a dead run left a worktree
    from coding_genesis._workspace.reclaim import check_reclaim, reclaim

    why = await check_reclaim(worktree, roots=roots)
    if why is not None:
        log.warning("run %s: its worktree left alone: %s", run.run_id, why)
        return dataclasses.replace(run, worktree_refused=why)
    if not dry_run:
        try:
            await reclaim(worktree, roots=roots)
        except Exception:
            log.exception("run %s: could not remove its worktree", run.run_id)
    return run


def _remove_overlay(run: SweptRun, overlay: Any, marker: str, dry_run: bool) -> SweptRun:
    """A dead run's settings overlay removed when it is its own; else why not."""
    why_not = is_own_overlay(overlay, marker)
    if why_not is None:
        if not dry_run:
            shutil.rmtree(overlay, ignore_errors=True)  # fd-based: no link followed
        return dataclasses.replace(run, overlay=overlay)
    if why_not != "gone":
        log.warning("run %s: its overlay %r left alone: %s", run.run_id, overlay, why_not)
        return dataclasses.replace(run, overlay_refused=why_not)
    return run


def sweep_sync(
    ledger: Ledger,
    *,
    dry_run: bool = False,
    worktrees_dirs: Sequence[str | os.PathLike[str]] = (),
) -> list[SweptRun]:
    """:func:`sweep` for code without an event loop (``genesis reap``)."""
    return anyio.run(lambda: sweep(ledger, dry_run=dry_run, worktrees_dirs=worktrees_dirs))
