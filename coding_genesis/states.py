"""Agent states and the status codes a run returns."""

from __future__ import annotations

import enum

__all__ = ["AgentState", "Status"]


class AgentState(enum.StrEnum):
    """The agent's state machine.

    READY accepts work, BUSY runs one request, DEGRADED refuses work for a
    while because the backend keeps failing in ways a retry cannot fix.
    """

    READY = "READY"
    BUSY = "BUSY"
    DEGRADED = "DEGRADED"


class Status(enum.IntEnum):
    """Run status codes.  They mirror process exit-code conventions so that
    `genesis run` can exit with them unchanged.

    Any other non-zero value is the CLI's own exit code (1..125) passed through.
    """

    OK = 0
    #: The CLI reported an error (error result, turn.failed) or did not finish.
    FAILED = 1
    #: The request itself is invalid (empty prompt, NUL byte, bad cwd).
    USAGE = 64
    #: The backend is DEGRADED (circuit open): try again after the cooldown.
    UNAVAILABLE = 69
    #: An unexpected error inside coding-genesis itself.
    INTERNAL = 70
    #: The agent is BUSY with another request; nothing was started.
    BUSY = 75
    #: Wall-clock or idle timeout: the process tree was stopped.
    TIMEOUT = 124
    #: The CLI binary exists but cannot be executed.
    NOT_EXECUTABLE = 126
    #: The CLI binary was not found.
    NOT_FOUND = 127
    #: The run was cancelled by the caller (Ctrl-C).
    CANCELLED = 130

    @staticmethod
    def for_signal(signum: int) -> int:
        """128 + N: the process was killed by signal N (not by us)."""
        return 128 + signum
