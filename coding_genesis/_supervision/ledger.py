"""The run ledger: one runtime record per run in flight, read back only
through a checked reader (the sweep that acts on the records of runners that
died is :mod:`coding_genesis._workspace.sweep`).

Like pid files, records live in ``$XDG_RUNTIME_DIR/coding-genesis/`` (a
per-user tmpfs that the system empties at logout and boot) when that runtime
directory is ours and private, else in a private directory of ours with a
random name (``coding-genesis-<uid>-XXXXXXXX``, made by ``mkdtemp``, 0700)
in ``/dev/shm`` (memory, emptied at boot) or, without one, under the temp
directory.  Such a directory is found again by listing the entries with our
prefix that are ours and closed to others: another user can make one with
our prefix, but never one owned by us; it is refused and named, with its
owner, in a warning.  Never under ``HOME``: the library still writes
nothing there unless asked.  ``XDG_RUNTIME_DIR`` is read
as a platform location, the way :mod:`tempfile` reads ``TMPDIR``; the ledger
itself is configured by ``AgentConfig(ledger=...)``: a directory, ``None``
(the default location) or ``False`` (off: then the parent-death signal is the
only protection, and it does not reach the CLI's own children).

Every reader (:func:`read_records`) opens the directory through an
``O_DIRECTORY | O_NOFOLLOW`` descriptor checked to be ours and closed to
others, and each record relative to it, never through a link: a regular
file of ours, closed to others, at most 64 KiB.  Anything else was not
written by us: it is ignored and counted (``Ledger.ignored``).  A record is
acted on only when its marker is one we write (a run id, the record's own)
and not that of a live run; the worktree it names is reclaimed only when
it is ours (see :func:`coding_genesis._workspace.isolation.reclaim`).

A record (``<run id>.json``, mode 0600, written atomically) holds the
runner's pid and start time, the CLI's pid and start time (once started),
the run's marker, the boot id and the pid namespace, and the run's settings
overlay directory once it has one.  It is written before
the CLI starts and removed when the run ends.

A record is dead when its runner is gone (no process with that pid and start
time), from this boot and this pid namespace (containers may share a temp
directory): :meth:`Ledger.dead` lists those with one directory listing.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from coding_genesis._supervision import owners
from coding_genesis._util.files import (
    UnsafeDirectory,
    is_own_private,
    open_own_dir,
    own_runtime_dir,
    owner_name,
    read_regular,
)

__all__ = [
    "Ledger",
    "LedgerError",
    "RecordScan",
    "default_ledger_dir",
    "not_ours",
    "read_records",
]

log = logging.getLogger("coding_genesis._supervision.ledger")

_SUFFIX = ".json"
#: A record is at most this big (ours are well under 2 KiB).
MAX_RECORD = 64 * 1024
#: The markers we write: a run id (``uuid4().hex``).
_MARKER = re.compile(r"[0-9a-f]{32}")


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
    """``$XDG_RUNTIME_DIR/coding-genesis`` if that runtime directory is ours
    and private (and the ``coding-genesis`` in it, if present, too), else our
    private random-named directory in ``/dev/shm`` where it is a shared
    (sticky, writable) directory, else under the temp directory (see
    :func:`coding_genesis._util.files.own_runtime_dir`: found once per process).

    Memory first: a record lives for one run, and on a disk file system its
    write, replace and removal cost journal work (on a loaded ext4 ``/tmp``,
    200 concurrent runs paid 2.6 ms of blocked event loop per removal)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        try:
            st = os.stat(runtime)
            if is_own_private(st):
                target = Path(runtime) / "coding-genesis"
                try:
                    here = os.lstat(target)
                except FileNotFoundError:
                    return target
                if is_own_private(here):
                    return target
                log.warning(
                    "refusing the run ledger %s: it belongs to %s (mode %o); "
                    "a private directory of ours is used instead",
                    target,
                    owner_name(here.st_uid),
                    stat.S_IMODE(here.st_mode),
                )
        except OSError:
            pass
    return own_runtime_dir(_shared_base(), "coding-genesis")


def _shared_base() -> str:
    try:
        st = os.stat(SHM_DIR)
        if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX and os.access(SHM_DIR, os.W_OK):
            return SHM_DIR
    except OSError:
        pass
    return tempfile.gettempdir()


def _private_dir(path: Path) -> Path:
    """Create ``path`` (0700) or check that it is a directory of ours, closed to others."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    os.close(_open_dir(path))
    return path


def _open_dir(path: Path) -> int:
    """A checked descriptor of the ledger directory (:class:`LedgerError` if it
    is not ours, is open to others, or is a link)."""
    try:
        return open_own_dir(path)
    except UnsafeDirectory as exc:
        raise LedgerError(f"run ledger: {exc}") from None
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):  # a file, or a link
            raise LedgerError(f"run ledger: {path} is not a directory (or is a link)") from None
        raise


@dataclass(slots=True)
class RecordScan:
    """What :func:`read_records` found: the records, and how many entries were
    ignored because we did not write them (a link, not a regular file, not
    ours, open to others, too big, not a record)."""

    records: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    ignored: int = 0


def read_records(
    directory: str | os.PathLike[str],
    *,
    skip: Callable[[str], bool] | None = None,
    suffix: str = _SUFFIX,
) -> RecordScan:
    """The records (``*.json``, dot files aside) of a ledger-like directory,
    read the checked way: the directory through an ``O_DIRECTORY|O_NOFOLLOW``
    descriptor that must be ours and closed to others (:class:`LedgerError`
    otherwise; a missing directory has no record), each record relative to it
    with ``O_NOFOLLOW|O_NONBLOCK``: a regular file of ours, closed to others,
    at most :data:`MAX_RECORD` bytes, a JSON object.  ``skip``: names not to
    read.  Reusable by every kind of record (runs, sessions)."""
    scan = RecordScan()
    try:
        fd = _open_dir(Path(directory))
    except FileNotFoundError:
        return scan
    try:
        names = os.listdir(fd)
        for name in names:
            if not name.endswith(suffix) or name.startswith("."):
                continue
            if skip is not None and skip(name):
                continue
            entry = _read_one(fd, name)
            if entry is None:
                scan.ignored += 1
                continue
            scan.records.append((name, entry))
    finally:
        os.close(fd)
    return scan


def _read_one(dir_fd: int, name: str) -> dict[str, Any] | None:
    try:
        data = read_regular(name, MAX_RECORD, dir_fd=dir_fd, private=True)
    except OSError:
        return None
    try:
        entry = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return entry if isinstance(entry, dict) else None


class Ledger:
    """The records of this process's runs in one directory."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_ledger_dir()
        self._ready = False
        self._me = os.getpid()
        self._me_started = owners.own_start_time(self._me)
        #: Entries of the last reading that we did not write (ignored, never acted on).
        self.ignored = 0

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
        overlay: str | None = None,
    ) -> None:
        """Write (or rewrite, once the CLI's pid is known) the run's record;
        ``overlay``: the run's settings overlay directory, for the sweep."""
        entry: dict[str, Any] = {
            "run_id": run_id,
            "marker": marker,
            "runner_pid": self._me,
            "runner_started": self._me_started,
            "cli_pid": cli_pid,
            "cli_started": owners.start_time(cli_pid) if cli_pid is not None else None,
            "boot_id": _boot_id(),
            "pid_ns": _pid_namespace(),
            "transcript": transcript,
            "written_ts": time.time(),
        }
        if worktree is not None:
            entry["worktree"] = worktree
        if overlay is not None:
            entry["overlay"] = overlay
        self._dir()
        name = self._name(run_id)
        tmp = f".{name}.{os.getpid()}.tmp"
        dir_fd = _open_dir(self.path)
        try:
            fd = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
                dir_fd=dir_fd,
            )
            try:
                os.write(fd, orjson.dumps(entry))
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        finally:
            os.close(dir_fd)

    def remove(self, run_id: str) -> None:
        self.unlink(self._name(run_id))

    def unlink(self, name: str) -> bool:
        """Remove one of our entries, relative to the checked directory."""
        try:
            dir_fd = _open_dir(self.path)
        except OSError:
            return False
        try:
            os.unlink(name, dir_fd=dir_fd)
            return True
        except OSError:
            return False
        finally:
            os.close(dir_fd)

    def entries(self, *, skip_live: bool = False) -> Iterator[tuple[Path, dict[str, Any]]]:
        """The records present, read the checked way (:func:`read_records`:
        :class:`LedgerError` if the directory is not ours or is open to others;
        entries we did not write are counted in :attr:`ignored`); ``skip_live``:
        without reading those whose runner (named in the file name) is alive."""
        scan = read_records(self.path, skip=self._live_filter() if skip_live else None)
        self.ignored = scan.ignored
        for name, entry in scan.records:
            if isinstance(entry.get("marker"), str):
                yield self.path / name, entry

    def _live_filter(self) -> Callable[[str], bool]:
        alive: dict[tuple[int, int], bool] = {}
        # This process's own records (every run in flight here) belong to a
        # live runner: told by their name alone, without a /proc look.
        own = self._own_prefix() if self._is_me() else None

        def live(name: str) -> bool:
            if own is not None and name.startswith(own):
                return True
            key = owners.owner_of(name)
            if key is None:
                return False
            if key not in alive:
                alive[key] = owners.alive(key)
            return alive[key]

        return live

    def live_run_ids(self) -> set[str]:
        """Run ids of the records whose runner is alive, from the names alone."""
        try:
            dir_fd = _open_dir(self.path)
        except FileNotFoundError:
            return set()
        try:
            names = os.listdir(dir_fd)
        finally:
            os.close(dir_fd)
        live = self._live_filter()
        found = set()
        for name in names:
            if name.endswith(_SUFFIX) and not name.startswith(".") and live(name):
                run_id = name[: -len(_SUFFIX)].split("-", 2)[-1]
                found.add(run_id.removesuffix(".worktree"))
        return found

    def drop_torn_writes(self) -> int:
        """Remove temporary files of records whose runner died mid-write (only
        regular files of ours, relative to the checked directory)."""
        try:
            dir_fd = _open_dir(self.path)
        except FileNotFoundError:
            return 0
        dropped = 0
        try:
            names = [n for n in os.listdir(dir_fd) if n.startswith(".") and n.endswith(".tmp")]
            own = "." + self._own_prefix() if self._is_me() else None
            for name in names:
                if own is not None and name.startswith(own):
                    continue  # this process is alive (and may be writing it now)
                key = owners.owner_of(name[1:])
                if key is None or owners.alive(key):
                    continue  # its runner is alive (and may be writing it now)
                try:
                    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
                    continue
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=dir_fd)
                    dropped += 1
        finally:
            os.close(dir_fd)
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
                now_born = owners.start_time(pid)
                if now_born is not None and abs(now_born - born) < 0.01:
                    continue  # its runner is alive
            found.append((path, entry))
        return found


def not_ours(name: str, entry: dict[str, Any], live: set[str]) -> str | None:
    """Why a record cannot be acted on (its marker is not one we wrote for
    it), or None.  We write ``marker`` = the run id, a ``uuid4().hex``; the
    record's ``run_id`` is that id (``.worktree`` for a worktree's record),
    and the file's name ends with it."""
    marker, run_id = entry.get("marker"), entry.get("run_id")
    if not isinstance(marker, str) or not _MARKER.fullmatch(marker):
        return f"its marker {str(marker)[:80]!r} is not one of ours (a run id)"
    if run_id not in (marker, f"{marker}.worktree"):
        return "its marker is not its own run's id"
    if not name.endswith(f"-{run_id}{_SUFFIX}"):
        return "its file name does not name its run"
    if marker in live:
        return f"its marker is that of a live run ({marker})"
    return None
