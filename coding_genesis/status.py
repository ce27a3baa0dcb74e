"""The closed vocabularies of how a run ends: agent states, status codes, error
codes and failure categories."""

from __future__ import annotations

import enum

__all__ = ["NOT_RUN", "AgentState", "ErrorCode", "FailureCategory", "Status"]


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

    ``status`` only ever holds these codes (or 128+N for a signal we did not
    send): a CLI's own non-zero exit is status 1, with its code in ``exit_code``.
    """

    OK = 0
    #: The CLI failed: it reported an error, exited non-zero by itself, or did not finish
    #: (or the approver refused a tool call and ended the turn).
    FAILED = 1
    #: The request itself is invalid (empty prompt, NUL byte, bad cwd).
    USAGE = 64
    #: The backend is DEGRADED (circuit open): try again after the cooldown.
    UNAVAILABLE = 69
    #: An unexpected error inside coding-genesis itself.
    INTERNAL = 70
    #: The agent is BUSY with another request; nothing was started.
    BUSY = 75
    #: Wall-clock or idle timeout, or a stall: the process tree was stopped.
    TIMEOUT = 124
    #: The CLI binary exists but cannot be executed.
    NOT_EXECUTABLE = 126
    #: The CLI binary was not found.
    NOT_FOUND = 127
    #: The run was cancelled by the caller (Ctrl-C), or a live session's turn interrupted.
    CANCELLED = 130

    @staticmethod
    def for_signal(signum: int) -> int:
        """128 + N: the process was killed by signal N (not by us)."""
        return 128 + signum


class ErrorCode(enum.StrEnum):
    """``error`` of a response: what went wrong, in one machine-readable word."""

    #: The wall-clock timeout stopped the process tree.
    TIMEOUT = "timeout"
    #: No output for ``idle_timeout`` seconds: the process tree was stopped.
    IDLE_TIMEOUT = "idle_timeout"
    #: The whole process tree was silent and idle for ``stall_timeout`` seconds: stopped.
    STALLED = "stalled"
    #: The CLI reported an error or exited non-zero by itself.
    CLI_ERROR = "cli_error"
    #: The CLI was killed by a signal we did not send.
    KILLED = "killed"
    #: The CLI exited without its terminal event.
    INCOMPLETE = "incomplete"
    #: The CLI exited 0 without producing any event (status 0, a warning).
    EMPTY_OUTPUT = "empty_output"
    #: The CLI binary was not found.
    NOT_FOUND = "not_found"
    #: The CLI binary cannot be executed.
    NOT_EXECUTABLE = "not_executable"
    #: The request itself is invalid (status 64).
    INVALID_REQUEST = "invalid_request"
    #: The agent is busy with another request (status 75).
    BUSY = "busy"
    #: The agent is DEGRADED (status 69).
    DEGRADED = "degraded"
    #: A bug of ours (status 70).
    INTERNAL = "internal"
    #: The caller cancelled the run (status 130).
    CANCELLED = "cancelled"
    #: A budget (``Budget``) was spent: the process tree was stopped,
    #: or, for a run of a spent shared budget, nothing was started (status 1).
    BUDGET_EXCEEDED = "budget_exceeded"
    #: A request of a batch not started: the batch hit the account's usage
    #: limit, which resets after the batch's deadline (status 69).
    USAGE_LIMIT = "usage_limit"
    #: The caller's verify command failed after the agent finished (status 1).
    VERIFY_FAILED = "verify_failed"
    #: The CLI replaced its worktree's ``.git`` (isolation): nothing of it was run,
    #: its branch was left as it was, the worktree was kept (status 1).
    WORKSPACE_TAMPERED = "workspace_tampered"
    #: A turn of a live session was interrupted (status 130; the session goes on).
    INTERRUPTED = "interrupted"
    #: A refusal of a tool call ended the turn (status 1).
    PERMISSION_DENIED = "permission_denied"
    #: The answer does not match the request's ``output_schema`` (status 1).
    INVALID_OUTPUT = "invalid_output"
    #: The CLI stopped at its turn limit (``max_turns=``) before it finished
    #: (status 1; category ``partial``: what it did so far is in the result).
    MAX_TURNS = "max_turns"


#: The answers given without running anything: the agent was busy or
#: DEGRADED, or the request was invalid (a session records none of them).
NOT_RUN = frozenset({ErrorCode.BUSY, ErrorCode.DEGRADED, ErrorCode.INVALID_REQUEST})


class FailureCategory(enum.StrEnum):
    """Why a run failed: the one taxonomy every view of a failure uses (the
    failure classifier decides it; the retry policy keys on it)."""

    TIMEOUT = "timeout"
    #: The whole process tree was silent and idle for ``stall_timeout``.
    STALLED = "stalled"
    RATE_LIMIT = "rate_limit"
    NETWORK = "network"
    AUTH = "auth"
    INVALID_TASK = "invalid_task"
    #: The conversation no longer fits the model's context window (the CLI said so).
    CONTEXT_OVERFLOW = "context_overflow"
    MISSING_CONTEXT = "missing_context"
    TOOL_ERROR = "tool_error"
    #: Something the task needs is missing: the CLI (its error is ``not_found``, status
    #: 127), a file, a model (an API 404).  Named ``not_found`` before 0.2.
    MISSING = "missing"
    PARTIAL = "partial"
    #: The agent finished, but the caller's verify command failed.
    VERIFY_FAILED = "verify_failed"
    #: The coding agent, or what runs it, failed on its side: the agent's own error, an
    #: API 5xx, a death before its result, a batch executor that broke.  Named
    #: ``internal`` before 0.2 (the error word of status 70, a bug of ours).
    AGENT_ERROR = "agent_error"
    #: A budget of ours (``Budget``) was spent: the run was stopped or not started.
    BUDGET_EXCEEDED = "budget_exceeded"
    #: The CLI replaced its worktree's ``.git`` (isolation): nothing of it was run.
    WORKSPACE_TAMPERED = "workspace_tampered"
    #: The caller cancelled the run (Ctrl-C, a cancelled task): not a failure of the run.
    CANCELLED = "cancelled"
    #: The caller interrupted a live session's turn: not a failure of the turn.
    INTERRUPTED = "interrupted"
    #: The approver denied a tool call and ended the turn: the caller's policy, not the CLI's fault.
    PERMISSION_DENIED = "permission_denied"
    #: The answer does not match the request's ``output_schema`` (not JSON, or not of its shape).
    INVALID_OUTPUT = "invalid_output"
    #: The agent was busy with another request: nothing was started (status 75).
    BUSY = "busy"
    #: The agent is DEGRADED (circuit open): nothing was started (status 69).
    DEGRADED = "degraded"
    #: A batch's request a spent budget or a usage limit never started.
    NOT_STARTED = "not_started"
    UNKNOWN = "unknown"

    # The names before 0.2, kept for code that still says them (aliases).
    NOT_FOUND = "missing"
    INTERNAL = "agent_error"

    @classmethod
    def _missing_(cls, value: object) -> FailureCategory | None:
        """A value written before 0.2 (a run log, a stored policy) still reads."""
        renamed = _FORMER_CATEGORIES.get(value) if isinstance(value, str) else None
        return cls(renamed) if renamed is not None else None


#: Categories renamed in 0.2 (their words were status words: ``not_found`` is the
#: error of status 127, ``internal`` of status 70): the former value -> the value.
_FORMER_CATEGORIES = {"not_found": "missing", "internal": "agent_error"}
