"""The process tree of a run: finding its processes, stopping them all, reaping.

A :class:`Tree` holds every process of one run it has found: the CLI's
descendants and the orphans that carry the run's marker
(:data:`~coding_genesis._supervision.childenv.RUN_MARKER_ENV`), reparented to
us by the subreaper or, without one, found among every process of our user.
Its stop is the sequence the supervisor's guarantee promises (see
:mod:`coding_genesis._supervision.process`): a fresh snapshot, each stop
signal (then SIGCONT) to every process group and process, a bounded wait,
another snapshot, SIGKILL rounds within ``kill_wait``, then reaping.

pid reuse: processes are held as ``psutil.Process`` objects (pid plus start
time) and checked before each signal; the main pids of runs in flight
(:data:`~coding_genesis._supervision.table.TABLE`) are never ``waitpid``-ed
here.  A zombie of unknown origin is reaped once it stayed one for
``_ORPHAN_SETTLE`` seconds.  When the run is over, a child of ours caught
exiting (its environment gone, not a zombie yet) is waited for, bounded, and
the run's children still running are handed to the table's keeper, which
reaps each when it exits.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial

import anyio
import psutil

from coding_genesis._supervision import procscan
from coding_genesis._supervision.childenv import RUN_MARKER_ENV
from coding_genesis._supervision.epoch import Epoch
from coding_genesis._supervision.table import TABLE, keep, subreaper_enabled

__all__ = ["Tree", "in_session", "stop_marked"]

log = logging.getLogger("coding_genesis._supervision.tree")

#: Seconds a zombie of unknown origin must stay unreaped before we take it.
_ORPHAN_SETTLE = 0.1


def _has_marker(proc: psutil.Process, marker: str) -> bool:
    try:
        return proc.environ().get(RUN_MARKER_ENV) == marker
    except (psutil.Error, OSError):
        return False


def in_session(pid: int, root: int | None, marker: str) -> bool:
    """Whether process ``pid`` is one of a live session's: a descendant of its
    CLI ``root``, or a process carrying its ``marker`` (one reparented after
    its parent ended).  Who may reach what the session serves its CLI."""
    try:
        proc = psutil.Process(pid)
        if root is not None and any(parent.pid == root for parent in proc.parents()):
            return True
    except psutil.Error:
        return False
    return _has_marker(proc, marker)


def _argv(proc: psutil.Process) -> list[str]:
    try:
        return list(proc.cmdline())
    except (psutil.Error, OSError):
        return []


def _alive(proc: psutil.Process) -> bool:
    """Still the same process (pid + start time) and not a zombie."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class _PidFds:
    """pidfds of processes waited for (readable once the process has exited)."""

    __slots__ = ("_fds",)

    def __init__(self) -> None:
        self._fds: dict[int, int | None] = {}

    def of(self, proc: psutil.Process) -> int | None:
        pid = proc.pid
        if pid in self._fds:
            return self._fds[pid]
        fd: int | None = None
        with contextlib.suppress(AttributeError, OSError):
            fd = os.pidfd_open(pid)
        if fd is not None and not _same_process_alive(proc):
            os.close(fd)  # gone, or the pid was reused before we opened it
            fd = None
        self._fds[pid] = fd
        return fd

    def close(self) -> None:
        for fd in self._fds.values():
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._fds.clear()


def _same_process_alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running()
    except psutil.Error:
        return False


def _myself() -> psutil.Process:
    """This process (psutil's handle, made once per process)."""
    me = _MYSELF.get(os.getpid())
    if me is None:
        _MYSELF.clear()
        me = _MYSELF[os.getpid()] = psutil.Process()
    return me


_MYSELF: dict[int, psutil.Process] = {}


def _same_process(proc: psutil.Process, born: float) -> bool:
    try:
        return abs(proc.create_time() - born) < 0.01
    except psutil.Error:
        return False


def _session_and_group(pid: int) -> tuple[int, int] | None:
    try:
        return os.getsid(pid), os.getpgid(pid)
    except OSError:
        return None


class Tree:
    """The processes of one run: snapshots, signals, bounded waits, reaping."""

    def __init__(
        self,
        root: psutil.Process | None,
        pid: int,
        marker: str,
        since: float,
        *,
        scan_all: bool = False,
    ) -> None:
        #: Find marked processes among every process of our user, not only our children.
        self.scan_all = scan_all
        #: The CLI, identified while it was our unreaped child (no pid reuse possible then).
        self.root = root
        self.pid = pid
        self.marker = marker
        #: Wall-clock start of the run (psutil start times are wall-clock).
        self.since = since
        #: Every process of the run ever found, by pid (each holds its start time).
        self.members: dict[int, psutil.Process] = {}
        #: Sessions and process groups that processes of the run were found in.
        self.sessions: set[int] = {pid}
        self.groups: set[int] = {pid}
        #: Highest CPU seconds seen per process (pid, start time): a process that
        #: exits keeps its share, so the tree's total never goes down.
        self.cpu_seen: dict[tuple[int, float], float] = {}
        self._me = os.getpid()
        self._own_sid = os.getsid(0)
        self._own_pgrp = os.getpgrp()
        self._lock = anyio.Lock()

    def snapshot(self, not_before: float | None = None) -> dict[int, psutil.Process]:
        """The run's live processes: the CLI's descendants and the marked
        orphans, from a scan of the process table that started at or after
        ``not_before`` (``time.monotonic()``; None: a new scan; see
        :mod:`coding_genesis._supervision.procscan`)."""
        if not_before is None:
            not_before = time.monotonic()
        found: dict[int, psutil.Process] = {}
        root = self.root
        if root is not None:
            try:
                if _alive(root):
                    found[root.pid] = root
                # checks root's identity
                for child in procscan.children(root, recursive=True, not_before=not_before):
                    found[child.pid] = child
            except psutil.Error:
                pass
        for orphan in self._marked_orphans(not_before):
            found[orphan.pid] = orphan
            try:
                for child in procscan.children(orphan, recursive=True, not_before=not_before):
                    found[child.pid] = child
            except psutil.Error:
                pass
        procs: dict[int, psutil.Process] = {}
        for pid, proc in found.items():
            ids = _session_and_group(pid)
            if ids is None or ids[0] == self._own_sid or pid == self._me:
                continue  # gone, or ours: nothing of a run lives in our session
            self.sessions.add(ids[0])
            self.groups.add(ids[1])
            if pid != self.pid:
                self.members.setdefault(pid, proc)
            if _alive(proc):
                procs[pid] = proc
        return procs

    def cpu_seconds(self) -> float:
        """CPU seconds used so far by the run's processes: the CLI, its
        descendants (their reaped children included) and, with the subreaper,
        its marked orphans.  Cheap: no scan of the whole process table."""
        procs: list[psutil.Process] = []
        root = self.root
        # A sample, not a stop: a scan another run made in the last 50 ms will do.
        recent = time.monotonic() - 0.05
        if root is not None:
            procs.append(root)
            with contextlib.suppress(psutil.Error):
                procs.extend(procscan.children(root, recursive=True, not_before=recent))
        if subreaper_enabled() and not self.scan_all:
            for orphan in self._marked_orphans(recent):
                procs.append(orphan)
                with contextlib.suppress(psutil.Error):
                    procs.extend(procscan.children(orphan, recursive=True, not_before=recent))
        seen = self.cpu_seen
        for proc in procs:
            try:
                t = proc.cpu_times()
                key = (proc.pid, proc.create_time())
            except psutil.Error:
                continue
            used = t.user + t.system + t.children_user + t.children_system
            if used > seen.get(key, 0.0):
                seen[key] = used
        return sum(seen.values())

    def _marked_orphans(self, not_before: float | None = None) -> list[psutil.Process]:
        if subreaper_enabled() and not self.scan_all:
            try:
                candidates = procscan.children(
                    _myself(), not_before=not_before, skip=TABLE.active_mains
                )
            except psutil.Error:
                return []
        else:
            uid = os.getuid()
            candidates = []
            for proc in psutil.process_iter():
                try:
                    if proc.uids().real == uid and proc.pid != self._me:
                        candidates.append(proc)
                except psutil.Error:
                    continue
        children = subreaper_enabled() and not self.scan_all
        return [
            p
            for p in candidates
            if p.pid != self.pid
            and p.pid not in TABLE.active_mains
            and (_has_marker(p, self.marker) or (children and self._in_our_session(p)))
        ]

    def _in_our_session(self, proc: psutil.Process) -> bool:
        """A child of ours (an orphan reparented to us) in one of the run's
        sessions, born during the run: the run's, although its marker cannot
        be read (a process in the middle of exiting has no environment left,
        one that ran ``env -i`` has none of ours); the host's own children
        live in its session, never in the run's."""
        ids = _session_and_group(proc.pid)
        if ids is None or ids[0] == self._own_sid or ids[0] not in self.sessions:
            return False
        try:
            return proc.create_time() >= self.since - 1.0
        except psutil.Error:
            return False

    async def stop_strays(
        self,
        before: Epoch,
        signals: Sequence[int],
        grace: float,
        kill_wait: float,
        keep: Callable[[list[str]], bool] | None = None,
    ) -> int:
        """Stop the run's processes that do not predate ``before``, the CLI
        spared (and any whose argv ``keep`` accepts: a server the session
        serves the CLI, launched during the turn), and groups the CLI is in
        signaled one member at a time; how many were found.  Bounded like
        :meth:`stop`."""

        def strays() -> dict[int, psutil.Process]:
            return {
                pid: proc
                for pid, proc in self.snapshot().items()
                if pid != self.pid
                and not before.predates(proc)
                and not (keep is not None and keep(_argv(proc)))
            }

        ids = _session_and_group(self.pid)
        spare = ids[1] if ids is not None else None
        async with self._lock:
            procs = strays()
            count = len(procs)
            for signum in signals:
                if not procs:
                    break
                self.signal(procs, signum, spare_group=spare)
                self.signal(procs, signal.SIGCONT, spare_group=spare)
                procs = {**await self.wait_gone(procs, grace), **strays()}
            deadline = anyio.current_time() + kill_wait
            while procs and anyio.current_time() < deadline:
                self.signal(procs, signal.SIGKILL, spare_group=spare)
                alive = await self.wait_gone(procs, deadline - anyio.current_time())
                procs = {**alive, **strays()}
            self.reap()
        return count

    def signal(
        self, procs: Mapping[int, psutil.Process], signum: int, spare_group: int | None = None
    ) -> None:
        """Signal every process group of the live members (each member itself
        where its group cannot be signaled, or is ``spare_group``)."""
        # Once each: a second SIGINT means "abort now" to many CLIs.
        by_group: dict[int, list[psutil.Process]] = {}
        for pid, proc in procs.items():
            ids = _session_and_group(pid) if _alive(proc) else None
            if ids is not None and ids[0] != self._own_sid:
                by_group.setdefault(ids[1], []).append(proc)
        for pgid, members in by_group.items():
            if pgid > 1 and pgid != self._own_pgrp and pgid != spare_group:
                try:
                    # A group also reaches members born after the snapshot.
                    os.killpg(pgid, signum)
                    continue
                except OSError:
                    pass
            for proc in members:
                with contextlib.suppress(psutil.Error, OSError):
                    proc.send_signal(signum)  # psutil re-checks the start time first

    async def wait_gone(
        self, procs: Mapping[int, psutil.Process], timeout: float
    ) -> dict[int, psutil.Process]:
        deadline = anyio.current_time() + max(timeout, 0.0)
        delay = 0.005
        pidfds = _PidFds()
        readable: set[int] = set()
        try:
            while True:
                alive = {pid: p for pid, p in procs.items() if _alive(p)}
                self.reap()
                if not alive or anyio.current_time() >= deadline:
                    return alive
                remaining = max(deadline - anyio.current_time(), 0.0)
                # Woken by the exit itself where the kernel has pidfds; else polled.
                fd = pidfds.of(next(iter(alive.values())))
                if fd is not None and fd not in readable:
                    with anyio.move_on_after(remaining):
                        await anyio.wait_readable(fd)
                        readable.add(fd)  # exited: the next look finds it gone
                    continue
                await anyio.sleep(min(delay, remaining))
                delay = min(delay * 2, 0.05)
        finally:
            pidfds.close()

    async def stop(self, signals: Sequence[int], grace: float, kill_wait: float) -> list[str]:
        """Stop everything of the run; bounded by ``len(signals) * grace + 2 * kill_wait``."""
        async with self._lock:
            return await self._stop(signals, grace, kill_wait)

    async def _stop(self, signals: Sequence[int], grace: float, kill_wait: float) -> list[str]:
        sent: list[str] = []
        procs = self.snapshot()
        for signum in signals:
            if not procs:
                break
            self.signal(procs, signum)
            self.signal(procs, signal.SIGCONT)  # a stopped process cannot act on it otherwise
            sent.append(signal.Signals(signum).name)
            alive = await self.wait_gone(procs, grace)
            # Children born during the wait (or reparented to us) join the next round.
            procs = {**alive, **self.snapshot()}
        # SIGKILL rounds until nothing new turns up (late forks), within kill_wait.
        deadline = anyio.current_time() + kill_wait
        while procs:
            self.signal(procs, signal.SIGKILL)
            if not sent or sent[-1] != "SIGKILL":
                sent.append("SIGKILL")
            alive = await self.wait_gone(procs, deadline - anyio.current_time())
            procs = {**alive, **self.snapshot()}
            if anyio.current_time() >= deadline:
                if procs:
                    log.warning("processes survived SIGKILL: %s", sorted(procs))
                break
        self.reap()
        return sent

    def reap(self) -> list[int]:
        """Reap zombies of the run that are our children; return the zombies
        left: unknown ones, and known ones not reapable yet (a multi-threaded
        process's leader shows as a zombie until its other threads are gone)."""
        waiting: list[int] = []
        for pid, proc in list(self.members.items()):
            if pid in TABLE.active_mains:
                continue
            try:
                if not proc.is_running():
                    del self.members[pid]  # gone, reaped elsewhere (or the pid was reused)
                    continue
                if proc.ppid() != self._me or proc.status() != psutil.STATUS_ZOMBIE:
                    continue
            except psutil.Error:
                del self.members[pid]
                continue
            if _waitpid(pid):
                del self.members[pid]
            else:
                waiting.append(pid)
        if subreaper_enabled():
            return waiting + self._reap_orphan_zombies()
        return waiting

    def _reap_orphan_zombies(self) -> list[int]:
        """Reap zombies reparented to us (subreaper) that died unseen.

        They have no readable environment any more: recognized by their
        session or group (one of the run's), else by the settle rule.
        """
        pending: list[int] = []
        checked = time.monotonic()
        if procscan.has_zombie_child() is False:
            return pending  # the kernel says: no child of ours has exited unreaped
        try:
            children = procscan.children(_myself(), not_before=checked, skip=TABLE.active_mains)
        except psutil.Error:
            return pending
        now = time.monotonic()
        for child in children:
            pid = child.pid
            if pid in TABLE.active_mains:
                continue
            try:
                if child.status() != psutil.STATUS_ZOMBIE:
                    continue
                born = child.create_time()
            except psutil.Error:
                continue
            ids = _session_and_group(pid)
            if ids is None or ids[0] == self._own_sid:
                continue  # a child of the host program, not of a run
            sid, pgid = ids
            member = self.members.get(pid)
            known = member is not None and _same_process(member, born)
            if known or sid in self.sessions or pgid in self.groups:
                _waitpid(pid)
                continue
            if born < self.since - 1.0:
                continue
            if TABLE.spawning:
                pending.append(pid)  # it could be a run's main not yet registered
                continue
            key = (pid, born)
            first = TABLE.unknown_zombies.setdefault(key, now)
            if now - first >= _ORPHAN_SETTLE:
                _waitpid(pid)
                TABLE.unknown_zombies.pop(key, None)
            else:
                pending.append(pid)
        if len(TABLE.unknown_zombies) > 1024:  # forget entries whose zombie went away
            TABLE.unknown_zombies.clear()
        return pending

    async def reap_all(self, exit_wait: float = 0.0, not_before: float | None = None) -> None:
        """Reap the run's zombies, waiting out the settle time of unknown ones
        and the last threads of known ones and, up to ``exit_wait`` seconds, the exit of children of ours caught
        exiting (not zombies yet, so no reap pass would see them); then hand
        the run's children still running to the keeper, which reaps each when
        it exits.  Bounded: ``exit_wait + 5 * _ORPHAN_SETTLE``.  ``not_before``:
        how fresh the scan of our children must be (see :mod:`procscan`)."""
        exiting, running = self._children_left(not_before)
        deadline = anyio.current_time() + exit_wait
        settled: float | None = None
        while True:
            # First who is still exiting, then the reap: one that turns zombie between is reaped.
            exiting = [p for p in exiting if procscan.exiting(p.pid)]
            pending = self.reap()
            now = anyio.current_time()
            if exiting:
                if now >= deadline:
                    log.warning("processes still exiting: %s", sorted(p.pid for p in exiting))
                    break
                await anyio.sleep(min(_ORPHAN_SETTLE / 20, deadline - now))
                continue
            if settled is None:
                settled = now + 5 * _ORPHAN_SETTLE
            if not pending or now >= settled:
                break
            await anyio.sleep(_ORPHAN_SETTLE / 4)
        for proc in running:
            keep(proc.pid, partial(_same_process_alive, proc))  # a zombie by now: reaped at once

    def _children_left(
        self, not_before: float | None
    ) -> tuple[list[psutil.Process], list[psutil.Process]]:
        """Children of ours (subreaper) once the run is over, not the host's:
        those exiting that may be the run's (born during it, or in one of its
        sessions or groups), and the run's still running (its marker, or seen
        as one of its members)."""
        exiting: list[psutil.Process] = []
        running: list[psutil.Process] = []
        if not subreaper_enabled() or self.scan_all:
            return exiting, running
        try:
            children = procscan.children(_myself(), not_before=not_before, skip=TABLE.active_mains)
        except psutil.Error:
            return exiting, running
        for child in children:
            ids = _session_and_group(child.pid)
            if ids is None or ids[0] == self._own_sid or child.pid in TABLE.active_mains:
                continue  # gone, or the host's own
            try:
                born = child.create_time()
            except psutil.Error:
                continue
            member = self.members.get(child.pid)
            known = member is not None and _same_process(member, born)
            if procscan.exiting(child.pid):
                ours = ids[0] in self.sessions or ids[1] in self.groups
                if known or ours or born >= self.since - 1.0:
                    exiting.append(child)
            elif _alive(child) and (known or _has_marker(child, self.marker)):
                running.append(child)
        return exiting, running


async def stop_marked(marker: str, *, grace: float = 1.0, dry_run: bool = False) -> list[int]:
    """Stop every process of our user carrying ``marker`` (a run whose runner
    died): the usual tree stop, pid-reuse safe.  Returns the pids found (in a
    dry run, those that would be stopped)."""
    tree = Tree(None, -1, marker, time.time(), scan_all=True)
    found = sorted(tree.snapshot())
    if found and not dry_run:
        await tree.stop((signal.SIGTERM,), grace, 2.0)
    return found


def _waitpid(pid: int) -> bool:
    """Reap ``pid`` if it is a zombie child of ours; True if it was reaped."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except OSError:
        return False  # not our child, or already reaped
    return done != 0
