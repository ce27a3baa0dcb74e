"""Failure analysis: the one :class:`~coding_genesis.result.ChildFailure` value of
a failed attempt, decided once.

Every view renders this value and none decides again: the response's
``failure`` dict, ``error_context``, the text failure report,
the escalation record and the CLI's lines; the retry policy reads
``failure.retryable`` and ``failure.retry_after_s``.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from coding_genesis._failures.classify import Classification, Evidence, classify_evidence
from coding_genesis._failures.errorcontext import error_context_for_failure, last_resort_message
from coding_genesis._failures.report import format_failure_report
from coding_genesis._failures.taxonomy import LAST_RESORT_MESSAGES, retry_verdict
from coding_genesis._util.clock import iso_utc
from coding_genesis._util.redact import Redactor
from coding_genesis.result import ChildFailure, RunResult
from coding_genesis.status import ErrorCode, FailureCategory

if TYPE_CHECKING:
    from coding_genesis.backend import Backend

__all__ = [
    "analyze",
    "analyze_failure",
    "describe_failure",
    "failed_result",
    "fallback_failure",
    "suggest_actions",
]

log = logging.getLogger("coding_genesis._failures.analysis")

_STDERR_TAIL = 2000
_MAX_MESSAGE = 2000


def _timeout_retry_action(timeout: float | None) -> str:
    if timeout is None:
        return "Retry with a doubled timeout"
    return f"Retry with timeout={timeout * 2:g}s"


_MODULE = re.compile(r"No module named ['\"]?([\w.]+)")


def suggest_actions(
    category: FailureCategory,
    *,
    progress: bool = False,
    timeout: float | None = None,
    idle: float | None = None,
    retry_after_s: float | None = None,
    blocked_on: str | None = None,
    backend: str = "",
    install_hint: str = "",
    denied_tools: Sequence[str] = (),
    evidence_text: str = "",
    refused: str = "",
) -> list[str]:
    """The recovery actions (with the escalation steps) for one failure;
    ``refused``: why the request itself was refused before anything started
    (an invalid request: a bad setting, an unknown backend), not a task the
    agent could not do."""
    fixed = _FIXED_ACTIONS.get(category)
    if fixed is not None:
        return list(fixed)
    suggest = _ACTIONS.get(category)
    if suggest is None:
        return ["Analyze the error manually", "Escalate to a person"]
    facts = _Facts(
        progress,
        timeout,
        idle,
        retry_after_s,
        blocked_on,
        backend,
        install_hint,
        denied_tools,
        evidence_text,
        refused,
    )
    return suggest(facts)


@dataclass(frozen=True, slots=True)
class _Facts:
    """What a category's actions may depend on (see :func:`suggest_actions`)."""

    progress: bool
    timeout: float | None
    idle: float | None
    retry_after_s: float | None
    blocked_on: str | None
    backend: str
    install_hint: str
    denied_tools: Sequence[str]
    evidence_text: str
    refused: str


def _timeout_actions(f: _Facts) -> list[str]:
    if f.idle is not None:
        return [
            f"Retry with idle_timeout={f.idle * 2:g}s",
            "Check what the agent was waiting on (a hung tool or a stalled network)",
            "Break task into smaller subtasks",
        ]
    if f.progress:
        return [_timeout_retry_action(f.timeout), "Break task into smaller subtasks"]
    return [
        "Break task into smaller subtasks",
        "Check the load on the agent's API",
        _timeout_retry_action(f.timeout),
    ]


def _rate_limit_actions(f: _Facts) -> list[str]:
    wait = (
        f"Wait {f.retry_after_s:g}s before retrying (the API said so)"
        if f.retry_after_s is not None
        else "Wait about a minute before retrying, backing off exponentially"
    )
    return [wait, "Lower the request rate or concurrency", "Check the account's usage limits"]


def _auth_actions(f: _Facts) -> list[str]:
    if f.denied_tools:
        tools = ", ".join(dict.fromkeys(f.denied_tools))
        return [
            f"Allow the denied tool(s) for this run: {tools} (allowed_tools / permission_mode)",
            "Or change the task so it does not need them",
        ]
    who = f"the {f.backend} CLI" if f.backend else "the agent"
    return [
        f"Check the API key or login of {who}",
        "Request the permissions the task needs",
        "Escalate to a person if it keeps failing",
    ]


def _invalid_task_actions(f: _Facts) -> list[str]:
    if f.refused:
        return [
            f"Fix the request: {f.refused}",
            "Nothing was started: the same request fails the same way",
        ]
    return [
        "Clarify task requirements",
        "Break into simpler, well-defined tasks",
        "Provide specific success criteria",
    ]


def _tool_error_actions(f: _Facts) -> list[str]:
    module = _MODULE.search(f.evidence_text)
    if module:
        name = module.group(1).split(".")[0]
        return [
            "Install missing dependencies",
            f"Run: pip install {name}",
            f"Verify installation: python -c 'import {name}'",
        ]
    return [
        "Check file permissions",
        "Install missing dependencies",
        "Verify command exists: which <command>",
    ]


def _missing_actions(f: _Facts) -> list[str]:
    actions = ["Verify the resource exists", "Update the references"]
    if f.install_hint:
        actions.insert(0, f.install_hint[0].upper() + f.install_hint[1:])
    return actions


def _partial_actions(f: _Facts) -> list[str]:
    return [
        "Complete remaining work: continue from the completed steps",
        f"Fix blocker: {f.blocked_on}" if f.blocked_on else "Fix the blocker, then continue",
        "Review the files modified so far",
    ]


def _permission_denied_actions(f: _Facts) -> list[str]:
    tools = ", ".join(dict.fromkeys(f.denied_tools)) or "the tool it refused"
    return [
        f"Allow {tools} in the approver (allow_tools, writes_under) if the task needs it",
        "Or ask for work that does not need it",
        "Continue the session: the turn's work so far is kept",
    ]


#: The actions of a category that depend on the failure's facts.
_ACTIONS: dict[FailureCategory, Callable[[_Facts], list[str]]] = {
    FailureCategory.TIMEOUT: _timeout_actions,
    FailureCategory.RATE_LIMIT: _rate_limit_actions,
    FailureCategory.AUTH: _auth_actions,
    FailureCategory.INVALID_TASK: _invalid_task_actions,
    FailureCategory.TOOL_ERROR: _tool_error_actions,
    FailureCategory.MISSING: _missing_actions,
    FailureCategory.PARTIAL: _partial_actions,
    FailureCategory.PERMISSION_DENIED: _permission_denied_actions,
}

#: The actions of a category that are the same for every failure of it.
_FIXED_ACTIONS: dict[FailureCategory, tuple[str, ...]] = {
    FailureCategory.STALLED: (
        "Retry once, continuing the session",
        "Check what the agent was waiting on (a hung tool, a lock, the network)",
        "Raise stall_timeout if a tool legitimately waits in silence this long",
    ),
    FailureCategory.NETWORK: (
        "Retry now (network errors are usually transient)",
        "Check connectivity to the agent's API endpoint",
    ),
    FailureCategory.MISSING_CONTEXT: (
        "Include specific file paths in prompt",
        "Provide full context (child has no access to parent history)",
        "Add example of expected output",
    ),
    FailureCategory.AGENT_ERROR: (
        "Retry once after a short wait",
        "If it fails again, escalate with the stderr tail",
    ),
    FailureCategory.WORKSPACE_TAMPERED: (
        "Inspect the kept worktree without running git in it (its .git is not ours)",
        "Remove the worktree by hand; the run's branch is as it was before the run",
    ),
    FailureCategory.INTERRUPTED: (
        "Send the next turn (or this one again) when wanted: the session goes on",
    ),
    FailureCategory.INVALID_OUTPUT: (
        "Continue the session with the validation error (a retry does, once)",
        "Say more about the expected answer in the prompt, or simplify output_schema",
        "Read the answer the agent gave in the message and data",
    ),
    FailureCategory.BUDGET_EXCEEDED: (
        "Raise the budget (max_cost_usd, max_tokens, max_turns, max_tool_calls) if the work "
        "is worth it",
        "Continue the session (resume) with a smaller task",
    ),
}


def _blocked_on(found: Classification, result: RunResult) -> str:
    category = found.category
    unfinished = result.unfinished_steps[-1] if result.unfinished_steps else None
    during = f" (while: {unfinished})" if unfinished else ""
    if result.error == "timeout":
        return f"Time limit insufficient{during}"
    if result.error == "idle_timeout":
        return f"No output for the idle timeout{during}"
    if result.error == "budget_exceeded":
        first = result.message.strip().splitlines()[0] if result.message.strip() else ""
        return first[:300] or "Budget spent"
    if result.error == "stalled":
        return f"Hung: no output and no CPU for the stall timeout{during}"
    if category is FailureCategory.RATE_LIMIT:
        status = f" (HTTP {result.api_error_status})" if result.api_error_status else ""
        return f"API rate limit{status}"
    if category is FailureCategory.AUTH and result.permission_denials:
        return f"Permission denied for {result.permission_denials} tool call(s)"
    if result.last_tool_error and category in (FailureCategory.TOOL_ERROR, FailureCategory.PARTIAL):
        return result.last_tool_error
    if found.reason.startswith(("killed by", "exited with code")):
        return f"The CLI was {found.reason}{during}"
    return error_words(result.message)[:300] or found.reason


#: An error body's message, where a JSON line is cut or masked past parsing.
_ERROR_MESSAGE = re.compile(r'"error_message"\s*:\s*"((?:[^"\\]|\\.)*)"')


def error_words(text: str) -> str:
    """A failure's first line as a person reads it: of an error body a CLI
    answered in JSON (the failer's), its message and code, not the JSON."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    if not first.startswith("{"):
        return first
    try:
        body = json.loads(first)
    except ValueError:
        found = _ERROR_MESSAGE.search(first)
        return found[1] if found else first
    said = body.get("error_message") or body.get("message") if isinstance(body, dict) else None
    if not isinstance(said, str) or not said:
        return first
    code = body.get("error_code")
    return f"{said} ({code})" if isinstance(code, str) and code else said


def analyze_failure(
    result: RunResult,
    *,
    backend_hint: str | None = None,
    timeout: float | None = None,
    idle_timeout: float | None = None,
    install_hint: str = "",
    retry_after_s: float | None = None,
    now: float | None = None,
) -> ChildFailure:
    """The ChildFailure record of a failed run (``retry_after_s`` overrides the
    wait read from the output)."""
    found = classify_evidence(Evidence.from_result(result, backend_hint), now=now)
    if retry_after_s is not None:
        found = Classification(found.category, found.reason, retry_after_s, found.retry_at)
    progress = result.tool_calls > 0
    retryable, why = retry_verdict(found.category, progress=progress)
    blocked_on = _blocked_on(found, result)
    denied = list(result.denied_tools)
    actions = suggest_actions(
        found.category,
        progress=progress,
        timeout=timeout,
        idle=idle_timeout if result.error == "idle_timeout" else None,
        retry_after_s=found.retry_after_s,
        blocked_on=blocked_on,
        backend=result.backend,
        install_hint=install_hint if result.error == "not_found" else "",
        denied_tools=denied,
        evidence_text=Evidence.from_result(result).text(),
        refused=error_words(result.message) if result.error == "invalid_request" else "",
    )
    message = result.message.strip() or LAST_RESORT_MESSAGES[found.category]
    return ChildFailure(
        category=found.category,
        message=message[:_MAX_MESSAGE],
        session_id=result.session_id,
        duration=result.duration_s,
        completed_steps=list(result.completed_steps),
        files_modified=list(result.files_modified),
        blocked_on=blocked_on,
        suggested_retry=retryable,
        retryable_reason=why,
        suggested_actions=actions,
        tool_usage=dict(result.tool_usage),
        last_successful_tool=result.last_successful_tool,
        exit_code=result.exit_code,
        stderr_tail=result.stderr_tail[-_STDERR_TAIL:],
        reason=found.reason,
        retry_after_s=found.retry_after_s,
        retry_at=iso_utc(found.retry_at, "seconds", zulu=True)
        if found.retry_at is not None
        else None,
    )


def describe_failure(
    result: RunResult,
    *,
    node: str,
    backend_hint: str | None = None,
    timeout: float | None = None,
    idle_timeout: float | None = None,
    install_hint: str = "",
    redactor: Redactor | None = None,
    retry_after_s: float | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """What a failed response gains: ``failure`` (the ChildFailure record),
    ``error_context``, ``failure_report``, and a ``message`` that is never empty."""
    failure = analyze_failure(
        result,
        backend_hint=backend_hint,
        timeout=timeout,
        idle_timeout=idle_timeout,
        install_hint=install_hint,
        retry_after_s=retry_after_s,
        now=now,
    )
    redactor = redactor or Redactor()
    if redactor.active:
        # Redact the record itself, before the report escapes any of its text.
        fields: dict[str, Any] = redactor.deep(failure.model_dump())
        fields["tool_usage"] = {redactor.text(k): v for k, v in failure.tool_usage.items()}
        failure = ChildFailure(**fields)
    update: dict[str, Any] = {
        "failure": failure,
        "error_context": dict(error_context_for_failure(failure, node=node, result=result)),
        "failure_report": format_failure_report(failure),
    }
    if not result.message.strip():
        update["message"] = last_resort_message(failure.category)
    return update


def fallback_failure(result: RunResult, *, node: str, error: BaseException) -> dict[str, Any]:
    """A minimal failure description for when :func:`describe_failure` itself broke."""
    category = FailureCategory.UNKNOWN
    detail = f"failure analysis failed: {type(error).__name__}"
    failure = ChildFailure(
        category=category,
        message=result.message.strip() or last_resort_message(category),
        session_id=result.session_id,
        duration=result.duration_s if math.isfinite(result.duration_s) else 0.0,
        suggested_retry=False,
        retryable_reason="the failure could not be analyzed",
        suggested_actions=["Analyze the error manually", "Escalate to a person"],
        exit_code=result.exit_code,
        reason=detail,
    )
    redactor = Redactor()
    update: dict[str, Any] = {
        "failure": failure,
        "error_context": redactor.deep(dict(error_context_for_failure(failure, node=node))),
        "failure_report": redactor.text(format_failure_report(failure)),
    }
    if not result.message.strip():
        update["message"] = failure.message
    return update


def failed_result(
    status: int,
    error: str,
    message: str,
    *,
    backend: str = "",
    agent: str = "",
    redactor: Redactor | None = None,
    **extra: Any,
) -> RunResult:
    """A failure answered without running anything (a bad request, a batch
    request that never started), analyzed like every other failure."""
    redactor = redactor or Redactor()
    result = RunResult(
        status=int(status),
        message=redactor.text(message),
        backend=backend,
        agent=agent,
        is_error=True,
        error=ErrorCode(error),
        **extra,
    )
    try:
        update = describe_failure(result, node=agent or backend or "genesis", redactor=redactor)
    except Exception as exc:  # noqa: BLE001  (the analysis must never cost the answer: a fallback failure instead)
        update = fallback_failure(result, node=agent or backend or "genesis", error=exc)
    return result.model_copy(update=update)


def analyze(
    result: RunResult,
    backend: Backend,
    *,
    node: str,
    timeout: float,
    idle_timeout: float | None = None,
    redactor: Redactor | None = None,
    retry_after_s: float | None = None,
    now: float | None = None,
) -> RunResult:
    """``result`` with its one failure value and the views of it, when it failed
    (a success, or a result already analyzed, comes back as is).  Asks
    ``backend.failure_hint`` for the CLI's own words.  Never raises."""
    if not result.is_error or result.failure is not None:
        return result
    original = result
    try:
        result = _without_noise(result, backend.stderr_noise)
        try:
            hint = backend.failure_hint(result)
        except Exception:
            log.exception("failure_hint of backend %s failed", backend.name)
            hint = None
        update = describe_failure(
            result,
            node=node,
            backend_hint=hint if isinstance(hint, str) else None,
            timeout=result.timeout_s if result.timeout_s is not None else timeout,
            idle_timeout=idle_timeout,
            install_hint=backend.install_hint(),
            redactor=redactor,
            retry_after_s=retry_after_s,
            now=now,
        )
    except Exception as exc:
        log.exception("failure analysis of run %s failed", result.run_id)
        update = fallback_failure(result, node=node, error=exc)
    return original.model_copy(update=update)


def _without_noise(result: RunResult, noise: re.Pattern[str] | None) -> RunResult:
    """``result`` with the stderr lines the backend calls noise (``stderr_noise``, a
    compiled pattern: start-up chatter such as "Ripgrep not available ... EACCES")
    left out of what the failure is analyzed from; the result keeps its whole tail."""
    if noise is None or not result.stderr_tail:
        return result
    kept = [line for line in result.stderr_tail.splitlines() if not noise.search(line)]
    return result.model_copy(update={"stderr_tail": "\n".join(kept)})
