"""Spawning the CLI: a new session, forked by one long-lived spawner thread,
with a parent-death signal armed so the CLI dies with this process even when
nothing here gets to run.

The signal is armed by util-linux's ``setpriv --pdeathsig`` as an exec prefix
where it is installed (the CLI is then vforked, cheap), else by a
``preexec_fn`` (forked).  Linux delivers it when the *thread* that forked
exits, hence the one spawner thread (its pool lives in
:data:`~coding_genesis._supervision.table.TABLE`).  Also here: the CLI's
widened stdout pipe, reading ``setpriv``'s exec failures back as the
``OSError`` a direct exec raises, and :class:`Child`, the started CLI whose
exit is awaited without blocking.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio

from coding_genesis._supervision.table import TABLE

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "Child",
    "pdeathsig_supported",
    "setpriv_exec_error",
    "setpriv_used",
    "spawn",
    "stdout_pipe",
]

_PR_SET_PDEATHSIG = 1


def stdout_pipe(size: int) -> tuple[int, int]:
    """The CLI's stdout pipe: our (non-blocking) read end and its write end.

    Widened to ``size`` where Linux allows (``F_SETPIPE_SZ``; up to
    ``/proc/sys/fs/pipe-max-size``, 1 MiB by default): a fast CLI then wakes
    us once per MiB instead of once per 64 KiB.
    """
    r, w = os.pipe()
    os.set_blocking(r, False)
    setpipe = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if setpipe is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(w, setpipe, size)
    return r, w


def pdeathsig_supported() -> bool:
    """Whether the CLI can get a parent-death signal here (Linux only)."""
    return sys.platform.startswith("linux") and _libc_prctl() is not None


@functools.cache
def _libc_prctl() -> Any:
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - exotic libc
        return None
    prctl.restype = ctypes.c_int
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return prctl


def _pdeath_preexec(signum: int) -> Callable[[], None]:
    """The ``preexec_fn`` that arms the parent-death signal, between fork and
    exec: the fallback where ``setpriv --pdeathsig`` is not installed (see
    :func:`_setpriv`).

    It closes the race the prefix leaves open: if this process died between
    the fork and the ``prctl``, the signal was never armed, so the child checks
    that its parent is still the process that forked it and otherwise acts as
    if the signal had come.  The function only calls ``prctl`` (resolved
    before the fork), ``getppid`` and, in that race, ``kill``/``_exit``:
    nothing that takes a lock another thread could hold at fork time.  Its
    cost: CPython forks instead of using ``vfork`` when a ``preexec_fn`` is
    given, about 4 ms of this process's CPU per run, and the spawns queue
    behind each other (``python -m benchmarks``, concurrency figure).

    Linux delivers the signal when the *thread* that forked exits, not the
    process: every CLI is therefore forked by one dedicated spawner thread
    (:func:`spawn`) that lives as long as the process.
    """
    prctl = _libc_prctl()
    parent = os.getpid()
    getppid, kill, exit_, me = os.getppid, os.kill, os._exit, os.getpid

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if getppid() != parent:  # the runner died before the signal was armed
            kill(me(), signum)
            exit_(128 + signum)

    return arm


def _spawner() -> ThreadPoolExecutor:
    """The process's spawner thread: one worker that never exits while the
    process lives (a ``ThreadPoolExecutor`` worker does not time out), so the
    parent-death signal of a CLI fires with the process, never because some
    short-lived thread (a ``to_thread`` worker, trio's thread cache, a thread
    that called ``run_sync``) ended."""
    with TABLE.lock:
        if TABLE.spawner is None:
            TABLE.spawner = ThreadPoolExecutor(1, thread_name_prefix="genesis-spawner")
        return TABLE.spawner


def _forget_spawner() -> None:  # pragma: no cover - runs in a forked child
    TABLE.spawner = None
    TABLE.lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_spawner)


#: Where util-linux's ``setpriv`` may be (a fixed list: the library reads no
#: environment, and a ``setpriv`` found on a user's PATH could be anything).
_SETPRIV_PATHS = ("/usr/bin/setpriv", "/bin/setpriv", "/usr/sbin/setpriv", "/sbin/setpriv")
#: What ``setpriv`` writes when it cannot execute the CLI (then exits 127).
_SETPRIV_FAILED = "setpriv: failed to execute "


@functools.cache
def _setpriv() -> str | None:
    """``setpriv`` if it is installed and arms a parent-death signal
    (util-linux >= 2.33), checked once per process.

    As an exec prefix it arms the signal in the CLI's own process (``setpriv
    --pdeathsig SIG -- CLI ...`` execs the CLI in place: same pid, parent and
    session), so the CLI can be started by ``vfork`` without a ``preexec_fn``.
    What it cannot do is the preexec's parent check: if this process dies in
    the millisecond between the spawn and setpriv's ``prctl``, the CLI gets no
    signal; the run ledger's sweep is there for what the signal cannot reach.
    """
    if not pdeathsig_supported():
        return None
    for path in _SETPRIV_PATHS:
        if os.access(path, os.X_OK):
            try:
                done = subprocess.run(  # noqa: S603 - a fixed path, fixed arguments
                    [path, "--pdeathsig", "SIGTERM", "--", path, "--version"],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    timeout=10,
                    check=False,
                )
            except (OSError, subprocess.SubprocessError):
                return None
            return path if done.returncode == 0 else None
    return None


def setpriv_used(pdeath_signal: int | None) -> bool:
    """Whether a CLI started with ``pdeath_signal`` runs behind ``setpriv``
    (then an exit status 127 may be setpriv's own exec failure)."""
    return pdeath_signal is not None and pdeathsig_supported() and _setpriv() is not None


def setpriv_exec_error(stderr_tail: str) -> OSError | None:
    """The exec failure ``setpriv`` reported for the CLI, as the ``OSError``
    a direct ``execve`` would have raised (None if it reported none)."""
    for line in stderr_tail.splitlines():
        if line.startswith(_SETPRIV_FAILED):
            what, _, reason = line[len(_SETPRIV_FAILED) :].rpartition(": ")
            code = _ERRNO_OF.get(reason.strip())
            if code is None:
                return OSError(f"cannot execute {what}: {reason}")
            return OSError(code, os.strerror(code), what)
    return None


_ERRNO_OF = {os.strerror(code): code for code in sorted(errno.errorcode, reverse=True)}


def spawn(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    stdin: int,
    stdout: int,
    stderr: int,
    pdeath_signal: int | None,
) -> subprocess.Popen[bytes]:
    """Start the CLI in a new session, forked by the spawner thread, with the
    parent-death signal armed where supported: by ``setpriv`` as an exec
    prefix where it is installed (the CLI is then vforked), else by a
    ``preexec_fn`` (forked).  Blocks for the fork and exec (as asyncio's own
    subprocess start does); raises ``OSError`` when the program cannot be
    started (through ``setpriv``, an exec failure shows as exit status 127:
    see :func:`setpriv_exec_error`)."""
    preexec = None
    command = list(argv)
    if pdeath_signal is not None and pdeathsig_supported():
        setpriv = _setpriv()
        if setpriv is not None:
            name = signal.Signals(pdeath_signal).name
            command = [setpriv, "--pdeathsig", name, "--", *command]
        else:
            preexec = _pdeath_preexec(pdeath_signal)

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(  # noqa: S603 - argv is the backend's command
            command,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
            close_fds=True,
            preexec_fn=preexec,
        )

    return _spawner().submit(start).result()


class Child:
    """The CLI process: its exit awaited without blocking (a pidfd where the
    kernel has them, else polling), reaped by us through ``Popen``."""

    def __init__(self, popen: subprocess.Popen[bytes], stdin_fd: int | None) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.stdin_fd = stdin_fd
        self._pidfd: int | None = None
        with contextlib.suppress(AttributeError, OSError):
            self._pidfd = os.pidfd_open(popen.pid)

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    async def wait(self) -> int:
        delay = 0.002
        while True:
            code = self.popen.poll()
            if code is not None:
                return code
            if self._pidfd is not None:
                await anyio.wait_readable(self._pidfd)
                if self.popen.poll() is None:
                    await anyio.sleep(0.001)  # readable but not reapable yet: brief
            else:
                await anyio.sleep(delay)
                delay = min(delay * 2, 0.05)

    def close_stdin(self) -> None:
        fd, self.stdin_fd = self.stdin_fd, None
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        self.close_stdin()
        fd, self._pidfd = self._pidfd, None
        if fd is not None:
            os.close(fd)
