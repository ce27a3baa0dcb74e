"""Driving `genesis` the way a person does: in a real pseudo-terminal, or in pipes."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator, Mapping, Sequence

import pyte
import pytest

GENESIS = [sys.executable, "-m", "coding_genesis._cli.main"]

#: Makes the pty the controlling terminal of a new session, then becomes `genesis`
#: (exec keeps the pid), so Ctrl-C typed into it is a real SIGINT from the tty.
_LAUNCHER = (
    "import fcntl, os, sys, termios; os.setsid(); fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)

#: The same terminal, with `genesis` a background job on it: in a process group
#: of its own, not the terminal's foreground one (like `genesis run ... &` in a
#: shell).  The launcher stays in the foreground, passes SIGTERM on and exits
#: with genesis's code.
_BACKGROUND_LAUNCHER = """
import fcntl, os, signal, sys, termios
os.setsid()
fcntl.ioctl(0, termios.TIOCSCTTY, 0)
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    os.execv(sys.argv[1], sys.argv[1:])
signal.signal(signal.SIGTERM, lambda *_: os.kill(pid, signal.SIGTERM))
while True:
    try:
        _, status = os.waitpid(pid, os.WUNTRACED)
    except InterruptedError:
        continue
    if os.WIFSTOPPED(status):  # stopped (SIGTTOU): say so and end it
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        sys.exit(125)
    sys.exit(os.waitstatus_to_exitcode(status))
"""


def genesis(
    args: Sequence[str],
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
    stdin: bytes | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """`genesis ARGS` in pipes (stdout and stderr captured, not a terminal)."""
    return subprocess.run(
        [*GENESIS, *args],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        check=False,
    )


class Terminal:
    """`genesis ARGS` attached to a pseudo-terminal of ``cols`` x ``rows``; what
    it draws goes through a terminal emulator (pyte), so :attr:`screen` is what
    a person would see now, and :attr:`seen` everything that was ever visible."""

    def __init__(
        self,
        args: Sequence[str],
        env: Mapping[str, str] | None = None,
        cols: int = 120,
        rows: int = 40,
        *,
        background: bool = False,
    ) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        full_env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(cols), **(env or {})}
        full_env.pop("NO_COLOR", None)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _BACKGROUND_LAUNCHER if background else _LAUNCHER,
                *GENESIS,
                *args,
            ],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=full_env,
            close_fds=True,
        )
        os.close(slave)
        self.raw = b""
        self._screen = pyte.Screen(cols, rows)
        self._stream = pyte.ByteStream(self._screen)
        self.frames: list[str] = []

    @property
    def screen(self) -> str:
        """The visible screen now, trailing blanks removed."""
        return "\n".join(line.rstrip() for line in self._screen.display).strip("\n")

    @property
    def seen(self) -> str:
        """Every screen shown so far, one after the other."""
        return "\n".join(self.frames)

    def _read(self, wait: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], wait)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the other side is closed
            return False
        self.raw += data
        self._stream.feed(data)
        self.frames.append(self.screen)
        return bool(data)

    def wait_for(self, text: str, timeout: float = 20) -> bool:
        """Wait until ``text`` is on the screen."""
        deadline = time.monotonic() + timeout
        while text not in self.screen:
            if time.monotonic() > deadline:
                return False
            if not self._read(0.05) and self.proc.poll() is not None:
                return text in self.screen
        return True

    def wait_below(self, anchor: str, text: str, timeout: float = 20) -> bool:
        """Wait until ``text`` is on the screen below the last ``anchor`` (a line
        that repeats, e.g. a turn's closing line, after the turn that matters)."""
        deadline = time.monotonic() + timeout

        def shown() -> bool:
            _, found, after = self.screen.rpartition(anchor)
            return bool(found) and text in after

        while not shown():
            if time.monotonic() > deadline:
                return False
            if not self._read(0.05) and self.proc.poll() is not None:
                return shown()
        return True

    def send(self, data: bytes) -> None:
        os.write(self.master, data)

    def wait(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.05)
        code = self.proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        while self._read(0.01) and len(self.raw) < 10_000_000:
            if not select.select([self.master], [], [], 0)[0]:
                break
        return code

    def close(self) -> None:
        """Stop `genesis` the polite way (it then stops its tree), then for sure."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        with contextlib.suppress(OSError):
            os.close(self.master)


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    """The terminals a test opened (append each), closed after it."""
    opened: list[Terminal] = []
    yield opened
    for terminal in opened:
        terminal.close()
