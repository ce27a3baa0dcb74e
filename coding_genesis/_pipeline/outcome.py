"""From an attempt's outcome to its result: what happened, said once.

Input: an :class:`~coding_genesis._pipeline.attempt.AttemptOutcome` (the process's end
and the tally of its events).  Output: a :class:`~coding_genesis.result.RunResult`
whose ``status`` only ever holds our documented codes: a CLI's own non-zero
exit is status 1 with the code in ``exit_code``; 128+N means the CLI was
killed by signal N that we did not send, decided from how the process ended.
Failure analysis comes after, on failed results only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from coding_genesis._pipeline.attempt import AttemptOutcome, TurnEnd
from coding_genesis._pipeline.decode import Decoder
from coding_genesis._pipeline.tally import RunTally
from coding_genesis._supervision.values import ProcessOutcome, StopReason
from coding_genesis._util.display import signal_name
from coding_genesis._util.redact import Redactor
from coding_genesis._util.words import counted
from coding_genesis.backend import Backend
from coding_genesis.events import Event, ResultEvent
from coding_genesis.request import Request, RequestSettings
from coding_genesis.result import RunResult
from coding_genesis.status import ErrorCode, Status

__all__ = [
    "ResultContext",
    "build_result",
    "how_far",
    "replayed_outcome",
    "tally_facts",
    "with_best_usage",
]


@dataclass(frozen=True, slots=True)
class ResultContext:
    """The names and limits a result is told in."""

    run_id: str
    agent: str
    backend: str
    redactor: Redactor
    idle_timeout: float | None = None
    linger: float | None = None
    #: The backend's count of its CLI's own API retries told on stderr only
    #: (gemini), for a CLI that has no retry events.
    stderr_retries: Callable[[str], int] | None = None

    @classmethod
    def from_request(
        cls,
        settings: RequestSettings,
        *,
        run_id: str,
        agent: str,
        backend: Backend,
        redactor: Redactor,
    ) -> ResultContext:
        """How the results of a request (or of an agent's settings: a replay)
        are told: its limits, its backend's names."""
        return cls(
            run_id=run_id,
            agent=agent,
            backend=backend.name,
            redactor=redactor,
            idle_timeout=settings.idle_timeout,
            linger=settings.linger,
            stderr_retries=backend.stderr_retries,
        )


def build_result(attempt: AttemptOutcome, ctx: ResultContext) -> RunResult:
    """The result of one attempt (failure analysis comes next, on failures only)."""
    result = _build_result(attempt, ctx)
    if attempt.warnings:
        result = result.model_copy(update={"warnings": [*attempt.warnings, *result.warnings]})
    return result


def _build_result(attempt: AttemptOutcome, ctx: ResultContext) -> RunResult:
    outcome = attempt.process
    tally = attempt.tally
    timeout = attempt.timeout
    redactor = ctx.redactor
    name = ctx.backend
    run_id = ctx.run_id
    rc = outcome.returncode
    stderr_tail = _stderr_tail(outcome, redactor)
    common: dict[str, Any] = {
        "backend": name,
        "agent": ctx.agent,
        "run_id": run_id,
        "exit_code": rc,
        "signal": signal_name(-rc) if rc is not None and rc < 0 else None,
        "duration_s": round(outcome.duration_s, 6),
        "skipped_lines": attempt.skipped_lines,
        "lines": attempt.lines,
        "tool_calls": tally.tool_calls,
        "tool_usage": dict(tally.tool_usage),
        "files_modified": redactor.deep(list(tally.files)),
        "last_successful_tool": tally.last_successful_tool,
        "session_id": tally.session_id,
        "model": tally.model,
        "num_turns": tally.num_turns,
        "turn_id": tally.result.turn_id if tally.result is not None else None,
        "usage": tally.usage,
        "cost_usd": tally.cost_usd,
        "cli_retries": tally.cli_retries or _stderr_retries(ctx, outcome.stderr_tail),
        "stop_reason": outcome.stop_reason.value if outcome.stop_reason else None,
        "completed": tally.result is not None,
        "stderr_tail": stderr_tail,
        "leftovers_stopped": outcome.leftovers_stopped,
        "signals_sent": list(outcome.signals_sent),
        "pid": outcome.pid,
        "api_error_status": tally.api_error_status,
        "cli_errors": [redactor.text(e) for e in tally.errors[-5:]],
        "failed_tools": list(tally.failed_tools),
        "permission_denials": len(tally.result.permission_denials) if tally.result else 0,
        "denied_tools": _denied_tools(tally.result),
        "approvals": redactor.deep([a.to_dict() for a in attempt.approvals]),
        "mcp_servers": redactor.deep(list(tally.mcp_servers.values())),
        "questions": redactor.deep([dict(q) for q in attempt.questions]),
        "hooks": redactor.deep([h.to_dict() for h in attempt.hooks]),
        "completed_steps": redactor.deep(tally.steps),
        "unfinished_steps": redactor.deep(
            tally.unfinished_steps(
                outcome.stop_reason in (StopReason.TIMEOUT, StopReason.IDLE, StopReason.STALLED)
            )
        ),
        "last_tool_error": redactor.text(tally.last_tool_error or "") or None,
        "cli_retry_delay_s": tally.retry_delay_s,
        "timeout_s": timeout,
        "result_subtype": tally.result.subtype if tally.result else None,
    }
    warnings: list[str] = []
    text = tally.final_text()

    request = attempt.stop.request if attempt.stop is not None else None
    if attempt.refusal is not None:
        refusal = attempt.refusal
        return RunResult(
            status=refusal.status,
            message=redactor.text(refusal.message),
            is_error=True,
            error=refusal.error,
            stopped_on=request.category if request is not None else None,
            **common,
        )
    if outcome.spawn_error is not None:
        return _not_started(outcome.spawn_error, ctx, common)

    ended = attempt.ended
    if ended is not None and (
        ended.how in ("interrupted", "denied", "fault")
        or (ended.how == "died" and outcome.stop_reason is None)
        or (ended.how == "failed" and tally.result is None)  # said so, with no result line
    ):
        return _turn_end(attempt, ended, common, redactor, name)

    if outcome.stop_reason in (StopReason.TIMEOUT, StopReason.IDLE, StopReason.STALLED):
        message, error = _deadline_message(attempt, ctx)
        return RunResult(
            status=Status.TIMEOUT,
            message=redactor.text(message),
            is_error=True,
            error=error,
            **common,
        )

    if outcome.stop_reason is StopReason.REQUESTED and request is not None:
        stopped = ", ".join(outcome.signals_sent) or "it had already exited"
        return RunResult(
            status=Status.FAILED,
            message=redactor.text(
                f"{request.message}; process tree stopped ({stopped}); "
                f"{counted(tally.tool_calls, 'tool call')} made before the stop"
            ),
            is_error=True,
            error=request.error,
            stopped_on=request.category,
            **common,
        )

    result = tally.result
    if result is not None:
        if result.is_error:
            status = int(Status.FAILED)
            message = (
                text or "; ".join(str(e) for e in result.errors) or f"{name} reported an error"
            )
            return RunResult(
                status=status,
                message=redactor.text(message),
                is_error=True,
                error=_SUBTYPE_ERRORS.get(result.subtype or "", ErrorCode.CLI_ERROR),
                data=RunTally.parse_data(redactor.text(text or "")),
                **common,
            )
        if rc not in (0, None) and outcome.stop_reason is not StopReason.LINGER:
            warnings.append(f"{name} exited with code {rc} after a successful result")
        if outcome.stop_reason is StopReason.LINGER:
            warnings.append(
                f"{name} kept running after its result; stopped after {ctx.linger or 0:g}s"
            )
        if common["denied_tools"]:
            denied = ", ".join(dict.fromkeys(common["denied_tools"]))
            warnings.append(f"permission denied for tool call(s): {denied}")
        message = redactor.text(text or "")
        return RunResult(
            status=Status.OK,
            message=message,
            data=RunTally.parse_data(message),
            warnings=warnings,
            **common,
        )

    last_err = _last_line(stderr_tail)
    if rc is not None and rc < 0:
        sig = -rc
        message = f"{name} was killed by signal {signal_name(sig)}" + (
            f": {last_err}" if last_err else ""
        )
        return RunResult(
            status=Status.for_signal(sig),
            message=message,
            is_error=True,
            error=ErrorCode.KILLED,
            **common,
        )
    if rc not in (0, None):
        assert rc is not None
        message = f"{name} exited with code {rc}" + (
            f": {last_err}" if last_err else " (no error output)"
        )
        # The CLI's own exit code is in exit_code; status keeps to our codes.
        return RunResult(
            status=Status.FAILED,
            message=message,
            is_error=True,
            error=ErrorCode.CLI_ERROR,
            **common,
        )
    if not tally.events_seen:
        detail = f" ({attempt.skipped_lines} unparseable line(s))" if attempt.skipped_lines else ""
        return RunResult(
            status=Status.OK,
            message=f"{name} exited 0 without producing any events{detail}",
            error=ErrorCode.EMPTY_OUTPUT,
            warnings=["no_output"],
            **common,
        )
    message = f"{name} exited before finishing (no result event)"
    if text:
        message += f"; last output: {redactor.text(text)[:2000]}"
    return RunResult(
        status=Status.FAILED,
        message=redactor.text(message),
        is_error=True,
        error=ErrorCode.INCOMPLETE,
        **common,
    )


#: A CLI's error result whose subtype says more than "the CLI failed".
_SUBTYPE_ERRORS = {"error_max_turns": ErrorCode.MAX_TURNS}


def _stderr_tail(outcome: ProcessOutcome, redactor: Redactor) -> str:
    """The stderr tail, masked (a tail cut off the front is masked from its start)."""
    stderr_tail = redactor.text(outcome.stderr_tail)
    if outcome.stderr_bytes > len(outcome.stderr_tail.encode("utf-8", "replace")):
        # The tail was cut off the front: the end of a secret may start it.
        stderr_tail = redactor.cut_start(stderr_tail)
    return stderr_tail


def _not_started(exc: OSError, ctx: ResultContext, common: dict[str, Any]) -> RunResult:
    """The CLI could not be started: not found, or not executable."""
    missing = isinstance(exc, FileNotFoundError)
    return RunResult(
        status=Status.NOT_FOUND if missing else Status.NOT_EXECUTABLE,
        message=ctx.redactor.text(f"could not start {ctx.backend} CLI: {exc.strerror or exc}"),
        is_error=True,
        error=ErrorCode.NOT_FOUND if missing else ErrorCode.NOT_EXECUTABLE,
        **common,
    )


def _deadline_message(attempt: AttemptOutcome, ctx: ResultContext) -> tuple[str, ErrorCode]:
    """What a run stopped at one of its deadlines (wall, idle, stall) says, and its error."""
    outcome = attempt.process
    name = ctx.backend
    stopped = ", ".join(outcome.signals_sent) or "it had already exited"
    progress = f"{counted(attempt.tally.tool_calls, 'tool call')} made before the stop"
    if outcome.stop_reason is StopReason.STALLED:
        message = (
            f"{name} stalled: no output on stdout or stderr for "
            f"{outcome.stall_silent_s or 0:g}s while its process tree used "
            f"{outcome.stall_cpu_s or 0:g} CPU seconds; process tree stopped ({stopped}); "
            f"{progress}"
        )
        return message, ErrorCode.STALLED
    if outcome.stop_reason is StopReason.TIMEOUT:
        message = f"{name} timed out after {attempt.timeout:g}s; process tree stopped ({stopped}); {progress}"
        return message, ErrorCode.TIMEOUT
    idle = ctx.idle_timeout or 0.0
    message = f"{name} was idle for {idle:g}s with no output; process tree stopped ({stopped}); {progress}"
    return message, ErrorCode.IDLE_TIMEOUT


def _turn_end(
    attempt: AttemptOutcome,
    ended: TurnEnd,
    common: dict[str, Any],
    redactor: Redactor,
    name: str,
) -> RunResult:
    """A live session's turn that ended otherwise than by the CLI's own answer."""
    progress = f"{counted(attempt.tally.tool_calls, 'tool call')} made"
    closed = attempt.process.returncode is not None or attempt.process.stop_reason is not None
    if ended.how == "interrupted":
        after = (
            "the CLI did not end it in time: process tree stopped, the session is closed"
            if closed
            else "the session goes on"
        )
        return RunResult(
            status=Status.CANCELLED,
            message=redactor.text(f"{name} turn interrupted; {progress}; {after}"),
            is_error=True,
            error=ErrorCode.INTERRUPTED,
            **common,
        )
    if ended.how == "denied":
        return RunResult(
            status=Status.FAILED,
            message=redactor.text(f"{ended.message}; {progress}"),
            is_error=True,
            error=ErrorCode.PERMISSION_DENIED,
            **common,
        )
    if ended.how == "fault":
        return RunResult(
            status=Status.FAILED,
            message=redactor.text(f"{ended.message}; the turn was ended; {progress}"),
            is_error=True,
            error=ErrorCode.CLI_ERROR,
            **common,
        )
    last_err = _last_line(redactor.text(attempt.process.stderr_tail))
    return RunResult(
        status=Status.FAILED,
        message=redactor.text(
            f"{ended.message}; {progress}" + (f"; stderr: {last_err}" if last_err else "")
        ),
        is_error=True,
        error=ErrorCode.INCOMPLETE,
        **common,
    )


def _stderr_retries(ctx: ResultContext, stderr: str) -> int:
    if ctx.stderr_retries is None or not stderr:
        return 0
    try:
        return max(0, int(ctx.stderr_retries(stderr)))
    except Exception:  # noqa: BLE001 (a plug-in's counter must not cost the result)
        return 0


def _denied_tools(result: ResultEvent | None) -> list[str]:
    """Tool names of claude's ``permission_denials`` in the terminal event."""
    denials = result.permission_denials if result is not None else ()
    return [str(d.get("tool_name") or "unknown") for d in denials if isinstance(d, Mapping)][:50]


def _last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()[:500]
    return ""


def with_best_usage(result: RunResult) -> RunResult:
    """``result`` with its best-known usage and where it came from: the CLI's
    own totals, else metering's count (a run stopped before the CLI's total),
    else ``unknown``."""
    if result.usage:
        source, usage = "cli", result.usage
    else:
        metering = result.metering or {}
        tokens = metering.get("tokens") if isinstance(metering, Mapping) else None
        counts = (
            {k: tokens.get(k) or 0 for k in ("input", "output", "cache_read", "cache_write")}
            if isinstance(tokens, Mapping)
            else {}
        )
        if any(counts.values()):
            source = "metering"
            usage = {  # our four counts, in claude's words (cache apart from input)
                "input_tokens": counts["input"],
                "output_tokens": counts["output"],
                "cache_read_input_tokens": counts["cache_read"],
                "cache_creation_input_tokens": counts["cache_write"],
            }
        else:
            source, usage = "unknown", None
    if result.usage_source == source and result.usage is usage:
        return result
    return result.model_copy(update={"usage": usage, "usage_source": source})


def how_far(facts: Mapping[str, Any], seconds: float) -> str:
    """How far a run got before it was cancelled, in words: its time, tool
    calls and changed files, the last tool that worked."""
    files = list(facts.get("files_modified") or ())
    text = (
        f"it had run {seconds:.1f}s, made {counted(int(facts.get('tool_calls') or 0), 'tool call')}"
        f" and changed {counted(len(files), 'file')}"
    )
    if files:
        text += " (" + ", ".join(files[:5]) + (", …" if len(files) > 5 else "") + ")"
    last = facts.get("last_successful_tool")
    return text + (f"; last tool that worked: {last}" if last else "")


def tally_facts(tally: RunTally, redactor: Redactor) -> dict[str, Any]:
    """What an attempt did so far, for the answer to a run cancelled mid-way."""
    return {
        "tool_calls": tally.tool_calls,
        "tool_usage": dict(tally.tool_usage),
        "files_modified": redactor.deep(list(tally.files)),
        "last_successful_tool": tally.last_successful_tool,
        "failed_tools": list(tally.failed_tools),
        "session_id": tally.session_id,
        "model": tally.model,
        "usage": tally.usage,
        "cost_usd": tally.cost_usd,
        "cli_retries": tally.cli_retries,
    }


def replayed_outcome(
    config: RequestSettings,
    backend: Backend,
    stdout: bytes,
    *,
    returncode: int | None,
    stderr: str,
    cwd: str,
    stop_reason: StopReason | None,
    duration_s: float,
    on_event: Callable[[Event], object] | None = None,
) -> AttemptOutcome:
    """The outcome of an attempt whose stdout, stderr and end are known (a
    recording): decoded by the same pipeline as a live run."""
    tally = RunTally(cwd)
    decoder = Decoder(
        backend.translator(), tally, max_line_bytes=config.max_line_bytes, on_event=on_event
    ).feed_all(stdout)
    tail = config.stderr_tail_bytes
    err = stderr.encode("utf-8", "replace")
    process = ProcessOutcome(
        returncode=returncode,
        stop_reason=stop_reason,
        stderr_tail=err[-tail:].decode("utf-8", "replace") if tail else "",
        stderr_bytes=len(err),
        stdout_bytes=len(stdout),
        stdout_eof=True,
        duration_s=duration_s,
    )
    request = Request.of(config, prompt="(replay)", cwd=cwd, backend=backend.name)
    return AttemptOutcome(
        request,
        config.timeout,
        tally,
        process,
        lines=decoder.lines,
        skipped_lines=decoder.skipped,
    )
