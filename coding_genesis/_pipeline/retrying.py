"""The retry loop: run attempts until one succeeds or the retry policy gives up,
with the continuation prompts and the escalation record.

The loop (:func:`retrying`) knows nothing of processes or backends: it calls
an attempt function with an :class:`AttemptPlan`, reads the result's analyzed
failure and asks :class:`~coding_genesis.retry.RetryPolicy` what to do.  Time
comes from the clock it is handed (coding_genesis._util.clock, injectable).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from coding_genesis._util.clock import Clock, iso_utc
from coding_genesis.retry import Action, Decision, RetryPolicy

if TYPE_CHECKING:
    from coding_genesis.result import ChildFailure, RunResult

__all__ = [
    "AttemptPlan",
    "blocker",
    "completed_steps",
    "continuation_prompt",
    "escalation_record",
    "retrying",
]


# -- suggested actions, continuation prompts, escalation records --------------

_MAX_BLOCKER = 500


def blocker(result: RunResult) -> str:
    """A short description of what stopped an attempt."""
    # the data of an answer that did not match its schema is that answer
    data = (result.data or {}) if result.error != "invalid_output" else {}
    for key in ("error_message", "error"):
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()[:_MAX_BLOCKER]
    for line in (result.message or "").splitlines():
        if line.strip():
            return line.strip()[:_MAX_BLOCKER]
    return result.error or "unknown failure"


def completed_steps(result: RunResult) -> list[str]:
    """The "work completed before failure", from what the attempt did."""
    steps = [
        f"Used {name} {count} time{'s' if count != 1 else ''}"
        for name, count in result.tool_usage.items()
    ]
    steps += [f"Modified {path}" for path in result.files_modified[:50]]
    return steps


def continuation_prompt(original: str, result: RunResult, category: str | None = None) -> str:
    """The "Continue from previous attempt" prompt for a retry.

    The original request is repeated at the end, so the prompt also stands on
    its own when the retry cannot continue the same session.
    """
    steps = completed_steps(result)
    done = "\n".join(f"✓ {step}" for step in steps) if steps else "(nothing yet)"
    kind = f" ({category})" if category else ""
    verify = result.verify
    checked = ""
    if verify is not None and verify.get("status") != "passed":
        checked = (
            f"Verification `{' '.join(verify.get('argv') or [])}` "
            f"({verify.get('status')}, exit {verify.get('exit_code')}) printed:\n"
            f"```\n{str(verify.get('output_tail') or '').rstrip()}\n```\n\n"
        )
    if result.error == "invalid_output":
        checked += (
            "Your final answer did not have the required structured format:\n"
            f"```\n{result.message.strip()}\n```\n"
            "Give the final answer again, in exactly the required format.\n\n"
        )
    return (
        "Continue from previous attempt:\n\n"
        f"Already completed:\n{done}\n\n"
        f"Blocker encountered{kind}: {blocker(result)}\n\n"
        f"{checked}"
        "Please:\n1. Address the blocker\n2. Complete the remaining work\n"
        "3. Verify everything works\n\n"
        f"Original request:\n{original}"
    )


def escalation_record(
    *,
    run_id: str,
    failure: ChildFailure,
    reason: str,
    history: list[dict[str, Any]],
    now: float,
    agent: str = "",
    backend: str = "",
) -> dict[str, Any]:
    """The ``escalateError`` record: a view of the last attempt's failure."""
    return {
        "id": f"ESC-{run_id[:12] or 'run'}-{int(now * 1000)}",
        "run_id": run_id,
        "category": failure.category.value,
        "message": history[-1]["message"] if history else failure.message,
        "reason": reason,
        "created_at": iso_utc(now, zulu=True),
        "agent": agent,
        "backend": backend,
        "session_id": failure.session_id,
        "attempts": len(history),
        "error_history": [
            {
                "attempt": entry["attempt"],
                "category": entry["category"],
                "error": entry["error"],
                "message": entry["message"],
                "at": entry["at"],
            }
            for entry in history
        ],
        "suggested_actions": list(failure.suggested_actions),
    }


# -- the loop ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AttemptPlan:
    """What one attempt is asked to do."""

    #: 1-based.
    number: int
    prompt: str
    #: CLI session to continue (None: a fresh one).
    resume: str | None
    #: The attempt's wall-clock timeout (None: the agent's).
    timeout: float | None
    #: The prompt is a continuation of the original request.
    continuation: bool = False


@dataclass(slots=True)
class _Loop:
    history: list[dict[str, Any]] = field(default_factory=list)
    retries: int = 0
    fresh_fallback: bool = False


async def retrying(
    policy: RetryPolicy,
    clock: Clock,
    attempt: Callable[[AttemptPlan], Awaitable[RunResult]],
    first: AttemptPlan,
    *,
    can_resume: bool,
    on_attempt: Callable[[dict[str, Any]], object] = lambda entry: None,
    escalation: Mapping[str, str] | None = None,
) -> RunResult:
    """Run ``attempt`` until it succeeds or ``policy`` gives up (the retry
    strategies' ``handleError``/``executeRetry`` loop, the continuation).

    Every failed result handed back by ``attempt`` carries its analyzed
    ``failure``; the loop reads it and decides nothing else about the failure.
    ``on_attempt`` hears each attempt start (``phase="started"``) and end.
    ``escalation``: ``run_id``, ``agent`` and ``backend`` for the escalation record.
    """
    started = clock.monotonic()
    loop = _Loop()
    plan = first
    original_resume = first.resume
    ids = dict(escalation or {})
    while True:
        on_attempt(
            {
                "phase": "started",
                "attempt": plan.number,
                "timeout": plan.timeout,
                "resume_session": plan.resume,
                "continuation": plan.continuation,
            }
        )
        result = await attempt(plan)
        failure = result.failure
        if not result.is_error or failure is None:
            on_attempt(
                {
                    "phase": "finished",
                    "attempt": plan.number,
                    "status": result.status,
                    "action": "succeed" if not result.is_error else "fail",
                    "session_id": result.session_id,
                }
            )
            return result.model_copy(
                update={
                    "retry_count": loop.retries,
                    "attempts": loop.retries + 1,
                    "retry_history": loop.history,
                }
            )
        decision = policy.decide(
            failure,
            retries_done=loop.retries,
            timeout_s=plan.timeout,
            elapsed_s=clock.monotonic() - started,
        )
        resumed_by_us = (
            plan.number > 1 and plan.resume is not None and plan.resume != original_resume
        )
        if (
            decision.action is not Action.RETRY
            and resumed_by_us
            and result.lines == 0
            and not loop.fresh_fallback
            and result.error not in ("timeout", "idle_timeout", "stalled", "invalid_request")
        ):
            # The CLI rejected the session (codex: unknown id, exit 1, no output):
            # start over in a fresh session once, at once.
            loop.fresh_fallback = True
            can_resume = False
            decision = Decision(
                Action.RETRY,
                f"resuming session {plan.resume} failed with no output; "
                "retrying in a fresh session",
                0.0,
                plan.timeout,
            )
        now = clock.time()
        retrying_now = decision.action is Action.RETRY
        next_resume = (result.session_id or plan.resume) if can_resume else None
        entry: dict[str, Any] = {
            "attempt": plan.number,
            "category": failure.category.value,
            "error": result.error,
            "status": result.status,
            "message": blocker(result),
            "at": iso_utc(now, zulu=True),
            "duration_s": result.duration_s,
            "tool_calls": result.tool_calls,
            "cli_retries": result.cli_retries,
            "session_id": result.session_id,
            "timeout_s": plan.timeout,
            "retryable": failure.retryable,
            "action": decision.action.value,
            "reason": decision.reason,
            "delay_s": round(decision.delay_s, 3) if retrying_now else None,
            "scheduled_at": iso_utc(now + decision.delay_s, zulu=True) if retrying_now else None,
            "next_timeout_s": decision.next_timeout_s if retrying_now else None,
            "resume_session": next_resume if retrying_now else None,
        }
        if result.verify is not None:
            entry["verify"] = result.verify
        if not retrying_now:
            entry["suggested_actions"] = list(failure.suggested_actions)
        loop.history.append(entry)
        on_attempt({"phase": "finished", **entry})
        if not retrying_now:
            update: dict[str, Any] = {
                "retry_count": loop.retries,
                "attempts": loop.retries + 1,
                "retry_history": loop.history,
            }
            if decision.action is Action.ESCALATE:
                update["escalation"] = escalation_record(
                    run_id=ids.get("run_id", ""),
                    failure=failure,
                    reason=decision.reason,
                    history=loop.history,
                    now=now,
                    agent=ids.get("agent", ""),
                    backend=ids.get("backend", ""),
                )
            return result.model_copy(update=update)
        loop.retries += 1
        await clock.sleep(decision.delay_s)
        made_progress = result.tool_calls > 0 or bool(result.files_modified)
        # A failed verify, an answer of the wrong shape, is always continued:
        # its output, the validation error, is what the retry needs.
        continuation = (
            next_resume is not None
            or made_progress
            or result.verify is not None
            or result.error == "invalid_output"
        )
        plan = AttemptPlan(
            number=plan.number + 1,
            prompt=(
                continuation_prompt(first.prompt, result, failure.category.value)
                if continuation
                else first.prompt
            ),
            resume=next_resume,
            timeout=decision.next_timeout_s
            if decision.next_timeout_s is not None
            else plan.timeout,
            continuation=continuation,
        )
