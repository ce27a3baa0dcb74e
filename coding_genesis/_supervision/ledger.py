"""The run ledger: one runtime record per run in flight, and the sweep that
stops what runners that died left behind.

Like pid files, records live in ``$XDG_RUNTIME_DIR/coding-genesis/`` (a
per-user tmpfs that the system empties at logout and boot), else in a private
per-user directory (``coding-genesis-<uid>``, whose owner and mode 0700 are
checked before use) in ``/dev/shm`` (memory, emptied at boot) or, without
one, under the temp directory.  Never under ``HOME``: the
library still writes nothing there unless asked.  ``XDG_RUNTIME_DIR`` is read
as a platform location, the way :mod:`tempfile` reads ``TMPDIR``; the ledger
itself is configured by ``AgentConfig(ledger=...)``: a directory, ``None``
(the default location) or ``False`` (off: then the parent-death signal is the
only protection, and it does not reach the CLI's own children).

A record (``<run id>.json``, mode 0600, written atomically) holds the
runner's pid and start time, the CLI's pid and start time (once started),
the run's marker, the boot id and the pid namespace.  It is written before
the CLI starts and removed when the run ends.

The sweep lists the directory; for each record whose runner is gone (no
process with that pid and start time), from this boot and this pid namespace
(containers may share a temp directory), it stops every process of our user
that carries the run's marker (the supervisor's tree stop: pid-reuse safe,
TERM, grace, KILL), marks the run's transcript as ended by the runner's death
and removes the record.  With nothing to do it costs one directory listing.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import orjson
import psutil

from coding_genesis._observers.transcript import ENDED
from coding_genesis._supervision.childenv import RUN_MARKER_ENV
from coding_genesis._supervision.tree import stop_marked

__all__ = [
    "ENDED",
    "Ledger",
    "LedgerError",
    "SweptRun",
    "default_ledger_dir",
    "sweep",
]

log = logging.getLogger("coding_genesis._supervision.ledger")

_SUFFIX = ".json"


class LedgerError(OSError):
    """The ledger directory is unsafe (not ours, or open to others) or unusable."""


@functools.cache
def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _pid_namespace() -> str | None:
    return _pid_namespace_of(os.getpid())


@functools.cache
def _pid_namespace_of(pid: int) -> str | None:  # cached per pid: a forked child looks again
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


#: Linux's shared-memory tmpfs: the runtime location when ``XDG_RUNTIME_DIR``
#: is not set (containers, CI, services).
SHM_DIR = "/dev/shm"


def default_ledger_dir() -> Path:
    """``$XDG_RUNTIME_DIR/coding-genesis`` if that runtime directory is ours,
    else ``/dev/shm/coding-genesis-<uid>`` where ``/dev/shm`` is a shared
    (sticky, writable) directory, else ``<tempdir>/coding-genesis-<uid>``.

    Memory first: a record lives for one run, and on a disk file system its
    write, replace and removal cost journal work (on a loaded ext4 ``/tmp``,
    200 concurrent runs paid 2.6 ms of blocked event loop per removal)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        try:
            st = os.stat(runtime)
            if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
                return Path(runtime) / "coding-genesis"
        except OSError:
            pass
    name = f"coding-genesis-{os.getuid()}"
    try:
        st = os.stat(SHM_DIR)
        if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX and os.access(SHM_DIR, os.W_OK):
            return Path(SHM_DIR) / name
    except OSError:
        pass
    return Path(tempfile.gettempdir()) / name


def _private_dir(path: Path) -> Path:
    """Create ``path`` (0700) or check that it is a directory of ours, closed to others."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise LedgerError(f"ledger {path} is not a directory")
    if st.st_uid != os.getuid():
        raise LedgerError(f"ledger {path} belongs to uid {st.st_uid}, not to us")
    if st.st_mode & 0o077:
        raise LedgerError(f"ledger {path} is open to others (mode {st.st_mode & 0o777:o})")
    return path


def _runner_of(name: str) -> tuple[int, int] | None:
    """(pid, start time in ms) from a record's file name, if it has them."""
    pid, _, rest = name.partition("-")
    born, _, _ = rest.partition("-")
    if pid.isdigit() and born.isdigit():
        return int(pid), int(born)
    return None


def _start_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


@functools.cache
def _own_start_time(pid: int) -> float | None:  # cached per pid: a forked child looks again
    return _start_time(pid)


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


class Ledger:
    """The records of this process's runs in one directory."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_ledger_dir()
        self._ready = False
        self._me = os.getpid()
        self._me_started = _own_start_time(self._me)

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"

    def _dir(self) -> Path:
        if not self._ready:
            _private_dir(self.path)
            self._ready = True
        return self.path

    def _name(self, run_id: str) -> str:
        """``<runner pid>-<runner start time, ms>-<run id>.json``: a sweep tells a
        live runner's records without reading them."""
        return f"{self._own_prefix()}{run_id}{_SUFFIX}"

    def _is_me(self) -> bool:
        """Whether this object's process is the one running (not a forked child)
        and its start time, hence its records' names, is known."""
        return os.getpid() == self._me and self._me_started is not None

    def _own_prefix(self) -> str:
        """The start of the names of this process's records (and temporary files)."""
        born = round((self._me_started or 0.0) * 1000)
        return f"{self._me}-{born}-"

    def _file(self, run_id: str) -> Path:
        return self._dir() / self._name(run_id)

    def record(
        self,
        run_id: str,
        *,
        marker: str,
        transcript: str | None = None,
        cli_pid: int | None = None,
        worktree: dict[str, Any] | None = None,
    ) -> None:
        """Write (or rewrite, once the CLI's pid is known) the run's record."""
        entry: dict[str, Any] = {
            "run_id": run_id,
            "marker": marker,
            "runner_pid": self._me,
            "runner_started": self._me_started,
            "cli_pid": cli_pid,
            "cli_started": _start_time(cli_pid) if cli_pid is not None else None,
            "boot_id": _boot_id(),
            "pid_ns": _pid_namespace(),
            "transcript": transcript,
            "written_ts": time.time(),
        }
        if worktree is not None:
            entry["worktree"] = worktree
        target = self._file(run_id)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, orjson.dumps(entry))
        finally:
            os.close(fd)
        os.replace(tmp, target)

    def remove(self, run_id: str) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.path / self._name(run_id))

    def entries(self, *, skip_live: bool = False) -> Iterator[tuple[Path, dict[str, Any]]]:
        """The records present (unreadable ones skipped); ``skip_live``: without
        reading those whose runner (named in the file name) is alive."""
        try:
            names = os.listdir(self.path)
        except OSError:
            return
        alive: dict[tuple[int, int], bool] = {}
        # This process's own records (every run in flight here) belong to a
        # live runner: told by their name alone, without a /proc look.
        own = self._own_prefix() if skip_live and self._is_me() else None
        for name in names:
            if not name.endswith(_SUFFIX) or name.startswith("."):
                continue
            if own is not None and name.startswith(own):
                continue
            if skip_live:
                key = _runner_of(name)
                if key is not None:
                    if key not in alive:
                        born = _start_time(key[0])
                        alive[key] = born is not None and abs(born * 1000 - key[1]) <= 10
                    if alive[key]:
                        continue
            path = self.path / name
            try:
                entry = orjson.loads(path.read_bytes())
            except (OSError, orjson.JSONDecodeError):
                continue
            if isinstance(entry, dict) and isinstance(entry.get("marker"), str):
                yield path, entry

    def drop_torn_writes(self) -> int:
        """Remove temporary files of records whose runner died mid-write."""
        try:
            names = [n for n in os.listdir(self.path) if n.startswith(".") and n.endswith(".tmp")]
        except OSError:
            return 0
        dropped = 0
        own = "." + self._own_prefix() if self._is_me() else None
        for name in names:
            if own is not None and name.startswith(own):
                continue  # this process is alive (and may be writing it now)
            key = _runner_of(name[1:])
            if key is None:
                continue
            born = _start_time(key[0])
            if born is not None and abs(born * 1000 - key[1]) <= 10:
                continue  # its runner is alive (and may be writing it now)
            with contextlib.suppress(OSError):
                os.unlink(self.path / name)
                dropped += 1
        return dropped

    def dead(self) -> list[tuple[Path, dict[str, Any]]]:
        """Records of this boot and pid namespace whose runner is gone."""
        boot, ns = _boot_id(), _pid_namespace()
        found = []
        for path, entry in self.entries(skip_live=True):
            if entry.get("boot_id") != boot or entry.get("pid_ns") != ns:
                continue  # another boot (the system cleaned up) or another container
            pid, born = entry.get("runner_pid"), entry.get("runner_started")
            if isinstance(pid, int) and isinstance(born, int | float):
                now_born = _start_time(pid)
                if now_born is not None and abs(now_born - born) < 0.01:
                    continue  # its runner is alive
            found.append((path, entry))
        return found


def _mark_transcript(directory: str, entry: dict[str, Any], swept: SweptRun) -> None:
    path = Path(directory)
    if not path.is_dir() or (path / "result.json").exists():
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
        fd = os.open(path / ENDED, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


async def sweep(ledger: Ledger, *, dry_run: bool = False, grace: float = 1.0) -> list[SweptRun]:
    """Stop what runs of dead runners left behind; one listing when nothing is."""
    if not dry_run:
        ledger.drop_torn_writes()
    dead = ledger.dead()
    if not dead:
        return []
    swept: list[SweptRun] = []
    for path, entry in dead:
        marker = entry["marker"]
        stopped = await stop_marked(marker, grace=grace, dry_run=dry_run)
        worktree = entry.get("worktree")
        run = SweptRun(
            run_id=str(entry.get("run_id") or marker),
            marker=marker,
            runner_pid=int(entry.get("runner_pid") or 0),
            stopped=tuple(stopped),
            transcript=entry.get("transcript"),
            found_ts=time.time(),
            worktree=str(worktree.get("path")) if isinstance(worktree, dict) else None,
        )
        swept.append(run)
        if dry_run:
            continue
        if isinstance(worktree, dict):
            from coding_genesis._workspace.isolation import reclaim

            try:
                await reclaim(worktree)
            except Exception:
                log.exception("run %s: could not remove its worktree", run.run_id)
        if run.transcript:
            _mark_transcript(run.transcript, entry, run)
        with contextlib.suppress(OSError):
            os.unlink(path)
        log.info(
            "run %s: its runner (pid %s) died; stopped %d process(es) carrying %s=%s",
            run.run_id,
            run.runner_pid,
            len(stopped),
            RUN_MARKER_ENV,
            marker,
        )
    return swept


def sweep_sync(ledger: Ledger, *, dry_run: bool = False) -> list[SweptRun]:
    """:func:`sweep` for code without an event loop (``genesis reap``)."""
    return anyio.run(lambda: sweep(ledger, dry_run=dry_run))
