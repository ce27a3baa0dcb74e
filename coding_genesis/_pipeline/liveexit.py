"""What a live CLI's exit says of the turn it ended: the words of its death,
and the supervisor's account of the process merged into the turn's own."""

from __future__ import annotations

from coding_genesis._supervision.process import ProcessOutcome

__all__ = ["death", "with_exit"]


def death(name: str, exit: ProcessOutcome | None) -> str:
    """Why the session is closed, in words, for a turn the CLI did not end."""
    if exit is None:
        return f"{name} ended mid-turn; the session is closed"
    if exit.stop_reason is not None:
        return f"{name} was stopped ({exit.stop_reason.value}); the session is closed"
    rc = exit.returncode
    how = f"was killed by signal {-rc}" if rc is not None and rc < 0 else f"exited with code {rc}"
    return f"{name} {how} mid-turn; the session is closed"


def with_exit(out: ProcessOutcome, exit: ProcessOutcome | None, strays: int) -> ProcessOutcome:
    """``out`` (the turn's own account) with what the supervisor saw of the
    process's end, once it is gone (``exit``; None: alive)."""
    if exit is None:
        return out
    out.returncode = exit.returncode
    out.stop_reason = exit.stop_reason
    out.spawn_error = exit.spawn_error
    out.signals_sent = list(exit.signals_sent)
    out.leftovers_stopped = exit.leftovers_stopped + strays
    out.stdout_eof = exit.stdout_eof
    out.stall_silent_s = exit.stall_silent_s
    out.stall_cpu_s = exit.stall_cpu_s
    if not out.stderr_tail and exit.stderr_tail:
        out.stderr_tail = exit.stderr_tail
    return out
