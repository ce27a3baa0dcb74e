"""The table-driven classifier that maps a failed run onto the failure taxonomy.

The user's three vocabularies meet in the taxonomy (the retry strategies' error
types, the always-responds error contexts, the failure-recovery categories);
:data:`coding_genesis._failures.taxonomy.SPEC_NAMES` and the taxonomy
table of ``docs/failures.md`` give the mapping:

=============== ============ ============ =============== ===============================
category        retry        responds     recovery        retryable
=============== ============ ============ =============== ===============================
timeout         timeout      timeout      TIMEOUT         yes (only with progress)
rate_limit      rate_limit   rate_limit   —               yes, after the announced wait
network         network      connection   —               yes, at once
auth            permission   —            —               no: escalate
invalid_task    validation   data         INVALID_TASK    no: fix the request
context_overflow —           —            —               no: new session or a shorter request
missing_context —            —            MISSING_CONTEXT no: add context to the prompt
tool_error      —            —            TOOL_ERROR      yes, after fixing the environment
not_found       not_found    not_found    —               no: check and escalate
partial         —            —            PARTIAL_SUCCESS yes, continue the remaining work
internal        internal     —            —               partial: once, then escalate
budget_exceeded —            —            —               no: raise the budget first
unknown         unknown      unknown      —               no: escalate
=============== ============ ============ =============== ===============================

(and, ours alone: ``workspace_tampered``, an isolated run's CLI replaced its
worktree's ``.git``, escalated; ``permission_denied``, the approver refused a
tool call and ended the turn, not retried; ``invalid_output``, the answer does
not match the request's ``output_schema``, retried once; the endings that are no failure of
the run, ``cancelled``, ``interrupted``, ``busy``, ``degraded`` and
``not_started``: not retried, the caller decides.)

Evidence the run was stopped on (``RunResult.stopped_on``: the CLI's own retry
events proved a failure no retry can fix, see
:mod:`coding_genesis._pipeline.evidence`) decides first.

Evidence is read in a fixed order (:data:`RULES`): our own runner's verdict
(timeouts, missing binary, invalid request), the HTTP status the CLI reported,
the backend's hint (each CLI's own wording), the terminal event's subtype,
permission denials, text rules over the error text, signals, then tool
failures.  Backends contribute hints; the core decides.
"""

from __future__ import annotations

import re
import signal as _signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from coding_genesis._failures.retryafter import extract_retry_after
from coding_genesis._failures.taxonomy import category_from_name
from coding_genesis._failures.usagelimits import reset_at
from coding_genesis._util.display import signal_name
from coding_genesis.errors import ConfigError, UnknownBackendError
from coding_genesis.retry import DEFAULT_RETRIES
from coding_genesis.status import FailureCategory

if TYPE_CHECKING:
    from coding_genesis.result import RunResult

__all__ = [
    "RULES",
    "Classification",
    "Evidence",
    "classify",
    "classify_evidence",
    "classify_exception",
]


# -- evidence and rules -------------------------------------------------


@dataclass(frozen=True, slots=True)
class Classification:
    category: FailureCategory
    #: Evidence that decided it, for logs and reports.
    reason: str
    #: Seconds the CLI or the API asked us to wait, when the output says so.
    retry_after_s: float | None = None
    #: When a usage limit resets (Unix time), when the output says so
    #: (coding_genesis._failures.usagelimits); ``retry_after_s`` is then the wait until it.
    retry_at: float | None = None


@dataclass(frozen=True, slots=True)
class Evidence:
    """Everything a failed run tells about why it failed."""

    #: Our own error code (RunResult.error): timeout, not_found, cli_error, killed...
    error: str | None = None
    message: str = ""
    stderr_tail: str = ""
    api_error_status: int | None = None
    cli_errors: tuple[str, ...] = ()
    backend_hint: str | None = None
    #: The final answer parsed as JSON (an error body such as the failer's).
    data: Mapping[str, Any] | None = None
    failed_tools: int = 0
    permission_denials: int = 0
    result_subtype: str | None = None
    exit_code: int | None = None
    #: The CLI's terminal event was seen.
    completed: bool = False
    last_tool_error: str | None = None
    files_modified: int = 0
    #: The CLI's own announced retry delay (claude ``api_retry.retry_delay_ms``).
    retry_delay_s: float | None = None
    #: The category the CLI's own events proved, on which the run was stopped
    #: at once (``RunResult.stopped_on``): it decides before anything else.
    stopped_on: FailureCategory | None = None

    @classmethod
    def from_result(cls, result: RunResult, backend_hint: str | None = None) -> Evidence:
        return cls(
            error=result.error,
            message=result.message,
            stderr_tail=result.stderr_tail,
            api_error_status=result.api_error_status,
            cli_errors=tuple(result.cli_errors),
            backend_hint=backend_hint,
            data=result.data,
            failed_tools=len(result.failed_tools),
            permission_denials=result.permission_denials,
            result_subtype=result.result_subtype,
            exit_code=result.exit_code,
            completed=result.completed,
            last_tool_error=result.last_tool_error,
            files_modified=len(result.files_modified),
            retry_delay_s=result.cli_retry_delay_s,
            stopped_on=result.stopped_on,
        )

    def text(self) -> str:
        """The error text the text rules read: the message, the CLI's last error
        line, the last failed tool's output, the end of stderr."""
        parts = [self.message]
        if self.cli_errors:
            parts.append(self.cli_errors[-1])
        if self.last_tool_error:
            parts.append(self.last_tool_error)
        parts.append(self.stderr_tail[-4000:])
        return "\n".join(p for p in parts if p)


Verdict = tuple[FailureCategory, str]
Rule = tuple[str, Callable[[Evidence], Verdict | None]]

#: Our runner's own error codes (RunResult.error) that decide on their own.
ERROR_CODES: dict[str, FailureCategory] = {
    "timeout": FailureCategory.TIMEOUT,
    "idle_timeout": FailureCategory.TIMEOUT,
    "stalled": FailureCategory.STALLED,
    "not_found": FailureCategory.MISSING,
    "not_executable": FailureCategory.TOOL_ERROR,
    "invalid_request": FailureCategory.INVALID_TASK,
    "busy": FailureCategory.BUSY,
    "degraded": FailureCategory.DEGRADED,
    "cancelled": FailureCategory.CANCELLED,
    "interrupted": FailureCategory.INTERRUPTED,
    "permission_denied": FailureCategory.PERMISSION_DENIED,
    "internal": FailureCategory.AGENT_ERROR,
    "budget_exceeded": FailureCategory.BUDGET_EXCEEDED,
    "usage_limit": FailureCategory.NOT_STARTED,
    "verify_failed": FailureCategory.VERIFY_FAILED,
    "invalid_output": FailureCategory.INVALID_OUTPUT,
    "workspace_tampered": FailureCategory.WORKSPACE_TAMPERED,
    "max_turns": FailureCategory.PARTIAL,
}

#: HTTP status reported by the CLI -> category.
STATUS_CODES: dict[int, FailureCategory] = {
    400: FailureCategory.INVALID_TASK,
    401: FailureCategory.AUTH,
    403: FailureCategory.AUTH,
    404: FailureCategory.MISSING,
    408: FailureCategory.NETWORK,
    413: FailureCategory.CONTEXT_OVERFLOW,
    422: FailureCategory.INVALID_TASK,
    429: FailureCategory.RATE_LIMIT,
    529: FailureCategory.RATE_LIMIT,  # Anthropic "overloaded": back off like a rate limit
}

#: The CLIs' words for a conversation too long for the model (claude "Prompt is
#: too long", OpenAI ``context_length_exceeded``, gemini "exceeds the maximum
#: number of tokens"...).
CONTEXT_WORDS = re.compile(
    r"prompt is too long|context[ _-]length|context[ _-]window|maximum context|"
    r"input is too long|exceeds the (?:model's )?(?:maximum|context)|too many (?:input )?tokens",
    re.I,
)

#: Text evidence, checked in order (first match wins).
TEXT_RULES: tuple[tuple[FailureCategory, re.Pattern[str]], ...] = (
    (FailureCategory.CONTEXT_OVERFLOW, CONTEXT_WORDS),
    (
        FailureCategory.RATE_LIMIT,
        re.compile(
            r"\b429\b|too many requests|rate[ _-]?limit|quota|overloaded|\b529\b|usage limit", re.I
        ),
    ),
    (
        FailureCategory.AUTH,
        re.compile(
            r"\b40[13]\b|unauthori[sz]ed|forbidden|authenticat|invalid[ _-](?:x-)?api[ _-]?key|"
            r"incorrect api key|not logged in|please (?:run /)?log ?in|access denied",
            re.I,
        ),
    ),
    (
        FailureCategory.NETWORK,
        re.compile(
            r"stream disconnected|connection ?(?:refused|reset|error|closed|aborted|failed)|"
            r"\beconn(?:refused|reset|aborted)\b|\benotfound\b|\beai_again\b|\betimedout\b|getaddrinfo|"
            r"network (?:error|is unreachable)|reconnecting|socket hang up|fetch failed|"
            r"request timed out|connection timed out|temporary failure in name resolution|"
            r"broken pipe",
            re.I,
        ),
    ),
    (
        FailureCategory.TOOL_ERROR,
        re.compile(
            r"modulenotfounderror|no module named|importerror|command not found|"
            r"permission denied|\beacces\b|\benoent\b|not installed|executable file not found",
            re.I,
        ),
    ),
    (
        FailureCategory.MISSING_CONTEXT,
        re.compile(
            r"missing context|not enough (?:context|information)|need(?:s)? more (?:context|information)|"
            r"(?:cannot|can't|could not|couldn't|unable to) (?:find|locate|identify|determine) "
            r"(?:the |which )?.{0,80}(?:mentioned|referred to|you (?:mean|refer))",
            re.I,
        ),
    ),
    (FailureCategory.MISSING, re.compile(r"\b404\b|not found|no such file|does not exist", re.I)),
    (
        FailureCategory.INVALID_TASK,
        re.compile(
            r"\b4(?:00|13|22)\b|invalid request|validation|"
            r"contradictory|impossible",
            re.I,
        ),
    ),
    (
        FailureCategory.AGENT_ERROR,
        re.compile(r"\b5\d\d\b|internal server error|internal error", re.I),
    ),
)

#: Error codes in a JSON error body (``{"error_code": "RATE_LIMIT", ...}``).
_BODY_KEYS = ("error_code", "failure_category", "category", "error_type")


def _by_stop(ev: Evidence) -> Verdict | None:
    if ev.stopped_on is None:
        return None
    return ev.stopped_on, f"stopped on the CLI's own evidence: {ev.stopped_on}"


def _by_error_code(ev: Evidence) -> Verdict | None:
    category = ERROR_CODES.get(ev.error or "")
    return (category, f"runner: {ev.error}") if category else None


def _by_status(ev: Evidence) -> Verdict | None:
    status = ev.api_error_status
    if status is None:
        return None
    category = STATUS_CODES.get(status)
    if category is FailureCategory.INVALID_TASK and CONTEXT_WORDS.search(ev.text()):
        category = FailureCategory.CONTEXT_OVERFLOW  # a 400 that says why
    if category is None and 500 <= status <= 599:
        category = FailureCategory.AGENT_ERROR
    return (category, f"API status {status}") if category else None


def _by_hint(ev: Evidence) -> Verdict | None:
    category = category_from_name(ev.backend_hint)
    return (category, f"backend hint: {ev.backend_hint}") if category else None


def _by_body(ev: Evidence) -> Verdict | None:
    if not ev.data:
        return None
    for key in _BODY_KEYS:
        category = category_from_name(ev.data.get(key))
        if category is not None:
            return category, f"error body {key}: {ev.data.get(key)}"
    return None


def _by_subtype(ev: Evidence) -> Verdict | None:
    if ev.result_subtype == "error_max_turns":
        return FailureCategory.PARTIAL, "max turns reached"
    return None


def _by_denials(ev: Evidence) -> Verdict | None:
    if ev.permission_denials:
        return FailureCategory.AUTH, f"{ev.permission_denials} permission denial(s)"
    return None


def _by_text(ev: Evidence) -> Verdict | None:
    text = ev.text()
    for category, pattern in TEXT_RULES:
        match = pattern.search(text)
        if match:
            return category, f"text: {match.group(0)!r}"
    return None


#: Exit codes of a CLI that stops itself on a termination signal (node and shells
#: exit 128+N from their handler).  Only these: other codes above 128 are a CLI's
#: own (gemini exits with the HTTP status mod 256: 401 -> 145, 429 -> 173).
_STOPPED_BY_SIGNAL_CODES = {
    128 + int(s): s.name for s in (_signal.SIGHUP, _signal.SIGINT, _signal.SIGKILL, _signal.SIGTERM)
}


def _by_signal(ev: Evidence) -> Verdict | None:
    signum = _signal_of(ev.exit_code, ev.error, ev.completed)
    if signum is not None:
        return FailureCategory.AGENT_ERROR, f"killed by {signal_name(signum)} before its result"
    name = _STOPPED_BY_SIGNAL_CODES.get(ev.exit_code or 0)
    if name is not None and not ev.completed and ev.error == "cli_error":
        return FailureCategory.AGENT_ERROR, (
            f"exited with code {ev.exit_code} before its result, as a CLI stopped by {name} does"
        )
    return None


def _by_incomplete(ev: Evidence) -> Verdict | None:
    if ev.error == "incomplete":
        return FailureCategory.PARTIAL, "exited before its result event"
    return None


def _by_failed_tools(ev: Evidence) -> Verdict | None:
    if ev.failed_tools:
        return FailureCategory.TOOL_ERROR, f"{ev.failed_tools} tool call(s) failed"
    return None


#: The classifier, in order: the first rule with a verdict decides.
RULES: tuple[Rule, ...] = (
    ("stopped on evidence", _by_stop),
    ("runner error code", _by_error_code),
    ("API status", _by_status),
    ("backend hint", _by_hint),
    ("error body", _by_body),
    ("terminal subtype", _by_subtype),
    ("permission denials", _by_denials),
    ("error text", _by_text),
    ("signal", _by_signal),
    ("incomplete output", _by_incomplete),
    ("failed tools", _by_failed_tools),
)

#: Categories that become ``partial`` when the run had already changed files.
_PROGRESS_UPGRADES = frozenset(
    {FailureCategory.TOOL_ERROR, FailureCategory.UNKNOWN, FailureCategory.AGENT_ERROR}
)


def _signal_of(exit_code: int | None, error: str | None, completed: bool) -> int | None:
    """The signal that ended the CLI, from how the process ended (rc -N).

    An exit code above 128 is the CLI's own choice, not a signal: gemini exits
    with the HTTP status mod 256 (401 -> 145), a wrapper may pass on its child's
    128+N.  Only the process's own end by a signal counts."""
    if exit_code is None or completed or exit_code >= 0:
        return None
    return -exit_code


#: Categories a reset time means something for: a limit, or what a limit kept from starting.
_RESETTING = frozenset({FailureCategory.RATE_LIMIT, FailureCategory.NOT_STARTED})


def classify_evidence(ev: Evidence, *, now: float | None = None) -> Classification:
    """Decide the category of a failed run from all the evidence we have."""
    clock = time.time() if now is None else now
    texts = (ev.message, *ev.cli_errors[-3:], ev.stderr_tail[-4000:])
    retry_at = reset_at(*texts, data=ev.data, now=clock)
    retry_after = (
        max(0.0, retry_at - clock)
        if retry_at is not None
        else extract_retry_after(*texts, data=ev.data, now=now)
    )
    verdict: Verdict = (FailureCategory.UNKNOWN, "no evidence matched")
    for _name, rule in RULES:
        found = rule(ev)
        if found is not None:
            verdict = found
            break
    category, reason = verdict
    if (
        category in _PROGRESS_UPGRADES
        and ev.files_modified
        and ev.error not in ERROR_CODES
        and not reason.startswith("API status")
    ):
        reason = f"{reason}, after changing {ev.files_modified} file(s)"
        category = FailureCategory.PARTIAL
    if retry_after is None and ev.retry_delay_s is not None and category in DEFAULT_RETRIES:
        retry_after = ev.retry_delay_s
    if retry_at is not None and category not in _RESETTING:
        retry_at = None  # a reset time only means something for a limit
    return Classification(category, reason, retry_after, retry_at)


def classify(
    *,
    error: str | None,
    message: str,
    stderr_tail: str = "",
    api_error_status: int | None = None,
    cli_errors: tuple[str, ...] = (),
    backend_hint: str | None = None,
    data: Mapping[str, Any] | None = None,
    failed_tools: int = 0,
    permission_denials: int = 0,
    result_subtype: str | None = None,
    exit_code: int | None = None,
    completed: bool = False,
    last_tool_error: str | None = None,
    files_modified: int = 0,
    retry_delay_s: float | None = None,
    now: float | None = None,
) -> Classification:
    """Keyword form of :func:`classify_evidence`."""
    return classify_evidence(
        Evidence(
            error=error,
            message=message,
            stderr_tail=stderr_tail,
            api_error_status=api_error_status,
            cli_errors=tuple(cli_errors),
            backend_hint=backend_hint,
            data=data,
            failed_tools=failed_tools,
            permission_denials=permission_denials,
            result_subtype=result_subtype,
            exit_code=exit_code,
            completed=completed,
            last_tool_error=last_tool_error,
            files_modified=files_modified,
            retry_delay_s=retry_delay_s,
        ),
        now=now,
    )


# -- exceptions (graph nodes, our own failures) -----------------------------


def classify_exception(exc: BaseException) -> Classification:
    """Category of an exception raised by a node or by the runner itself.

    The always-responds ``classify_error`` and the failure-recovery exception analysis: the type
    decides first (TimeoutError, ConnectionError, PermissionError...), then
    the text rules read the message.
    """
    name = type(exc).__name__
    text = str(exc)
    by_type: FailureCategory | None = None
    if isinstance(exc, TimeoutError) or "timeout" in name.lower():
        by_type = FailureCategory.TIMEOUT
    elif isinstance(exc, ConnectionError):
        by_type = FailureCategory.NETWORK
    elif isinstance(exc, PermissionError):
        by_type = FailureCategory.TOOL_ERROR  # the recovery advice: "Check file permissions"
    elif isinstance(exc, FileNotFoundError | UnknownBackendError):
        by_type = FailureCategory.MISSING
    elif isinstance(exc, ModuleNotFoundError | ImportError):
        by_type = FailureCategory.TOOL_ERROR
    elif isinstance(exc, ConfigError):
        by_type = FailureCategory.INVALID_TASK
    if by_type is not None:
        return Classification(by_type, f"exception {name}", extract_retry_after(text))
    ev = Evidence(message=f"{name}: {text}")
    found = _by_text(ev)
    if found is None and isinstance(exc, ValueError | TypeError | KeyError | LookupError):
        found = (FailureCategory.INVALID_TASK, f"exception {name}")
    if found is None and isinstance(exc, OSError):
        found = (FailureCategory.TOOL_ERROR, f"exception {name}")
    category, reason = found or (FailureCategory.UNKNOWN, f"exception {name}")
    return Classification(category, reason, extract_retry_after(text))
