"""One failure taxonomy, and the table-driven classifier that maps a failed run onto it.

The user's three vocabularies meet here (spec 002 error types, spec 003 error
contexts, spec 004 failure categories); :data:`SPEC_NAMES` and the README's
"Failures" section give the mapping:

=============== ============ ============ =============== ===============================
category        spec 002     spec 003     spec 004        retryable
=============== ============ ============ =============== ===============================
timeout         timeout      timeout      TIMEOUT         yes (spec 004: only with progress)
rate_limit      rate_limit   rate_limit   —               yes, after the announced wait
network         network      connection   —               yes, at once
auth            permission   —            —               no: escalate
invalid_task    validation   data         INVALID_TASK    no: fix the request
missing_context —            —            MISSING_CONTEXT no: add context to the prompt
tool_error      —            —            TOOL_ERROR      yes, after fixing the environment
not_found       not_found    not_found    —               no: check and escalate
partial         —            —            PARTIAL_SUCCESS yes, continue the remaining work
internal        internal     —            —               partial: once, then escalate
budget_exceeded —            —            —               no: raise the budget first
unknown         unknown      unknown      —               no: escalate
=============== ============ ============ =============== ===============================

(and ``workspace_tampered``, ours alone: an isolated run's CLI replaced its
worktree's ``.git``; not retried, escalated.)

Evidence is read in a fixed order (:data:`RULES`): our own runner's verdict
(timeouts, missing binary, invalid request), the HTTP status the CLI reported,
the backend's hint (each CLI's own wording), the terminal event's subtype,
permission denials, text rules over the error text, signals, then tool
failures.  Backends contribute hints; the core decides.
"""

from __future__ import annotations

import datetime as _dt
import email.utils
import enum
import math
import re
import signal as _signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .result import RunResult

__all__ = [
    "DEFAULT_RETRIES",
    "LAST_RESORT_MESSAGES",
    "RETRY_SUGGESTIONS",
    "RULES",
    "SPEC_NAMES",
    "USER_HINTS",
    "Classification",
    "Evidence",
    "FailureCategory",
    "category_from_name",
    "classify",
    "classify_evidence",
    "classify_exception",
    "extract_retry_after",
    "retry_verdict",
]


class FailureCategory(enum.StrEnum):
    TIMEOUT = "timeout"
    #: The whole process tree was silent and idle for ``stall_timeout``.
    STALLED = "stalled"
    RATE_LIMIT = "rate_limit"
    NETWORK = "network"
    AUTH = "auth"
    INVALID_TASK = "invalid_task"
    MISSING_CONTEXT = "missing_context"
    TOOL_ERROR = "tool_error"
    NOT_FOUND = "not_found"
    PARTIAL = "partial"
    #: The agent finished, but the caller's verify command failed.
    VERIFY_FAILED = "verify_failed"
    INTERNAL = "internal"
    #: A budget of ours (coding_genesis.budget) was spent: the run was stopped or not started.
    BUDGET_EXCEEDED = "budget_exceeded"
    #: The CLI replaced its worktree's ``.git`` (isolation): nothing of it was run.
    WORKSPACE_TAMPERED = "workspace_tampered"
    UNKNOWN = "unknown"


C = FailureCategory

#: Retries ``RetryPolicy.default()`` makes per category; a category absent here is
#: not retried as-is.  This is the one table retryability is read from: the
#: failure analysis decides ``failure.retryable`` with it (:func:`retry_verdict`)
#: and the default policy retries exactly these categories, so the two agree.
#: (Spec 002 calls ``internal`` "Partiel": analyse and decide.  We decided: one
#: retry after a pause.  Spec 004's tool errors are retryable "after fixing the
#: environment": not as-is, so not by a policy.)
DEFAULT_RETRIES: dict[FailureCategory, int] = {
    C.TIMEOUT: 2,
    C.STALLED: 1,
    C.NETWORK: 3,
    C.RATE_LIMIT: 5,
    C.INTERNAL: 1,
    C.PARTIAL: 1,
    C.VERIFY_FAILED: 1,
}

#: Why a category is not retried as-is (the reason of a ``retryable=False`` verdict).
_NOT_RETRYABLE_BECAUSE: dict[FailureCategory, str] = {
    C.AUTH: "auth failures need a login, key or permission change first",
    C.INVALID_TASK: "the request itself must change first",
    C.MISSING_CONTEXT: "the request needs more context first",
    C.TOOL_ERROR: "the environment must be fixed first (a retry as-is fails the same way)",
    C.NOT_FOUND: "what is missing must be installed or created first",
    C.BUDGET_EXCEEDED: "the budget is spent: a retry would spend more; raise the budget first",
    C.WORKSPACE_TAMPERED: "the run replaced its worktree's .git: inspect the kept worktree first",
    C.UNKNOWN: "the cause is unknown: analyse it before retrying",
}


def retry_verdict(category: FailureCategory, *, progress: bool) -> tuple[bool, str]:
    """Whether a failure of ``category`` is worth retrying as-is, and why.

    ``progress``: the attempt made at least one tool call (spec 004: a timeout
    with no progress is likely an invalid task, so it is not retried)."""
    if category not in DEFAULT_RETRIES:
        return False, f"{category}: {_NOT_RETRYABLE_BECAUSE.get(category, 'not retried as-is')}"
    if category is C.TIMEOUT and not progress:
        return False, (
            "timeout with no progress (0 tool calls): likely too big a task; "
            "break it into smaller subtasks"
        )
    if category is C.STALLED:
        return True, (
            "stalled (silent and idle): a hung CLI or tool; retried once whatever the "
            "progress, continuing the session"
        )
    if category is C.VERIFY_FAILED:
        return True, (
            "the verify command failed: retried once, resuming the session with its output"
        )
    if category is C.TIMEOUT:
        return True, "timeout after progress: retry with a longer timeout, continuing the session"
    return True, f"{category} failures are usually transient"


#: The names each spec uses for a category: (spec 002, spec 003, spec 004).
SPEC_NAMES: dict[FailureCategory, tuple[str | None, str | None, str | None]] = {
    C.TIMEOUT: ("timeout", "timeout", "timeout"),
    C.STALLED: (None, None, None),
    C.RATE_LIMIT: ("rate_limit", "rate_limit", None),
    C.NETWORK: ("network", "connection", None),
    C.AUTH: ("permission", None, None),
    C.INVALID_TASK: ("validation", "data", "invalid_task"),
    C.MISSING_CONTEXT: (None, None, "missing_context"),
    C.TOOL_ERROR: (None, None, "tool_error"),
    C.NOT_FOUND: ("not_found", "not_found", None),
    C.PARTIAL: (None, None, "partial"),
    C.VERIFY_FAILED: (None, None, None),
    C.INTERNAL: ("internal", None, None),
    C.BUDGET_EXCEEDED: (None, None, None),
    C.WORKSPACE_TAMPERED: (None, None, None),
    C.UNKNOWN: ("unknown", "unknown", None),
}

_ALIASES: dict[str, FailureCategory] = {
    **{c.value: c for c in C},
    **{name: c for c, names in SPEC_NAMES.items() for name in names if name},
    "partial_success": C.PARTIAL,
    "permission_denied": C.AUTH,
    "unauthorized": C.AUTH,
    "authentication": C.AUTH,
    "forbidden": C.AUTH,
    "transient_error": C.NETWORK,
    "transient": C.NETWORK,
    "agent_error": C.INTERNAL,
    "invalid_command": C.INVALID_TASK,
    "invalid_request": C.INVALID_TASK,
    "bad_request": C.INVALID_TASK,
    "too_many_requests": C.RATE_LIMIT,
    "quota": C.RATE_LIMIT,
}


def category_from_name(name: object) -> FailureCategory | None:
    """A category from any of the specs' names or an error code (``RATE_LIMIT``,
    ``permission``, ``connection``, ``partial_success``...), else None."""
    if not isinstance(name, str):
        return None
    key = re.sub(r"[\s-]+", "_", name.strip().lower())
    return _ALIASES.get(key)


# -- what we tell people ------------------------------------------------

#: Spec 003 ``user_hint``: a pre-written hint for whoever talks to the user.
USER_HINTS: dict[FailureCategory, str] = {
    C.TIMEOUT: "The coding agent ran out of time before finishing the task.",
    C.STALLED: "The coding agent hung: no output and no work for a long time, so it was stopped.",
    C.RATE_LIMIT: "The coding agent's API is rate-limiting requests right now.",
    C.NETWORK: "The coding agent lost its connection to its API.",
    C.AUTH: "The coding agent is not authorised to do this (login, API key or permissions).",
    C.INVALID_TASK: "The request could not be carried out as given.",
    C.MISSING_CONTEXT: "The coding agent did not have enough context to do the task.",
    C.TOOL_ERROR: "A tool the coding agent needed failed or is missing.",
    C.NOT_FOUND: "Something the task needs (the agent's CLI, a file, a model) was not found.",
    C.PARTIAL: "The coding agent did part of the work, then hit a blocker.",
    C.VERIFY_FAILED: "The coding agent finished, but the verification command failed.",
    C.INTERNAL: "The coding agent failed on its side.",
    C.BUDGET_EXCEEDED: "The coding agent was stopped because its budget (cost, tokens, turns or "
    "tool calls) was spent.",
    C.WORKSPACE_TAMPERED: "The coding agent replaced its worktree's git repository; its work was "
    "not read or committed.",
    C.UNKNOWN: "Something unexpected happened while running the coding agent.",
}

#: Spec 003 ``retry_suggestion``: what the user can do next.
RETRY_SUGGESTIONS: dict[FailureCategory, str] = {
    C.TIMEOUT: "Try again with a longer timeout, or split the task into smaller steps.",
    C.STALLED: "Try again (the session continues); if it hangs again, check the tool it ran.",
    C.RATE_LIMIT: "Wait a minute and try again.",
    C.NETWORK: "This is usually temporary: try again in a moment.",
    C.AUTH: "Check the agent's login or API key and its permissions, then try again.",
    C.INVALID_TASK: "Rephrase the request with clear, consistent requirements.",
    C.MISSING_CONTEXT: "Add the missing details (file paths, configuration) to the request.",
    C.TOOL_ERROR: "Fix the environment (install what is missing, check permissions), then retry.",
    C.NOT_FOUND: "Check that the CLI, files and names the task refers to exist.",
    C.PARTIAL: "Ask the agent to continue from where it stopped.",
    C.VERIFY_FAILED: "Let the agent continue with the verify output (a retry does).",
    C.INTERNAL: "Try once more; if it fails again, report it.",
    C.BUDGET_EXCEEDED: "Raise the budget, or continue the session with a smaller task.",
    C.WORKSPACE_TAMPERED: "Inspect the kept worktree without running git in it, then remove it.",
    C.UNKNOWN: "Try again shortly, or rephrase the request.",
}

#: Spec 003 ``LAST_RESORT_MESSAGES``: a response is never empty, whatever broke.
LAST_RESORT_MESSAGES: dict[FailureCategory, str] = {
    C.TIMEOUT: "The coding agent is running slowly and ran out of time. Try again in a moment; "
    "if it keeps happening, give it more time or a smaller task.",
    C.STALLED: "The coding agent stopped responding and did no work for a long time, so it was "
    "stopped. Please try again; if it hangs again, check the tool it was running.",
    C.RATE_LIMIT: "The coding agent is receiving too many requests and needs a moment to catch "
    "up. Please try again in about a minute.",
    C.NETWORK: "The coding agent is having trouble connecting to its services. This is usually "
    "temporary: please try again in a minute or two.",
    C.AUTH: "The coding agent could not authenticate or was not allowed to do what the task "
    "needs. Check its login, API key and permissions.",
    C.INVALID_TASK: "The coding agent could not carry out this request as given. Please rephrase "
    "it with clear, specific requirements.",
    C.MISSING_CONTEXT: "The coding agent needs more context to do this task. Please include the "
    "file paths and details it needs.",
    C.TOOL_ERROR: "A tool the coding agent relies on failed. Please check the environment and try "
    "again.",
    C.NOT_FOUND: "Something the coding agent needs could not be found. Please check that the "
    "agent is installed and the task's references exist.",
    C.PARTIAL: "The coding agent finished part of the task before it was blocked. You can ask it "
    "to continue from where it stopped.",
    C.VERIFY_FAILED: "The coding agent finished, but its work did not pass the verification "
    "command. It can continue from the verification output.",
    C.INTERNAL: "The coding agent ran into an internal problem. Please try again; if it keeps "
    "failing, report it.",
    C.BUDGET_EXCEEDED: "The coding agent reached its spending limit and was stopped. Raise the "
    "budget to let it continue.",
    C.WORKSPACE_TAMPERED: "The coding agent replaced the git repository of its workspace, so its "
    "work was neither read nor committed. The workspace was kept for inspection.",
    C.UNKNOWN: "The coding agent ran into an unexpected issue. Please try again, and if the "
    "problem continues, try rephrasing the request.",
}


# -- evidence and rules -------------------------------------------------


@dataclass(frozen=True, slots=True)
class Classification:
    category: FailureCategory
    #: Evidence that decided it, for logs and reports.
    reason: str
    #: Seconds the CLI or the API asked us to wait, when the output says so.
    retry_after_s: float | None = None
    #: When a usage limit resets (Unix time), when the output says so
    #: (coding_genesis.usagelimits); ``retry_after_s`` is then the wait until it.
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
    "timeout": C.TIMEOUT,
    "idle_timeout": C.TIMEOUT,
    "stalled": C.STALLED,
    "not_found": C.NOT_FOUND,
    "not_executable": C.TOOL_ERROR,
    "invalid_request": C.INVALID_TASK,
    "busy": C.INVALID_TASK,
    "degraded": C.INTERNAL,
    "internal": C.INTERNAL,
    "budget_exceeded": C.BUDGET_EXCEEDED,
    "usage_limit": C.RATE_LIMIT,
    "verify_failed": C.VERIFY_FAILED,
    "workspace_tampered": C.WORKSPACE_TAMPERED,
}

#: HTTP status reported by the CLI -> category.
STATUS_CODES: dict[int, FailureCategory] = {
    400: C.INVALID_TASK,
    401: C.AUTH,
    403: C.AUTH,
    404: C.NOT_FOUND,
    408: C.NETWORK,
    413: C.INVALID_TASK,
    422: C.INVALID_TASK,
    429: C.RATE_LIMIT,
    529: C.RATE_LIMIT,  # Anthropic "overloaded": back off like a rate limit
}

#: Text evidence, checked in order (first match wins).
TEXT_RULES: tuple[tuple[FailureCategory, re.Pattern[str]], ...] = (
    (
        C.RATE_LIMIT,
        re.compile(
            r"\b429\b|too many requests|rate[ _-]?limit|quota|overloaded|\b529\b|usage limit", re.I
        ),
    ),
    (
        C.AUTH,
        re.compile(
            r"\b40[13]\b|unauthori[sz]ed|forbidden|authenticat|invalid[ _-](?:x-)?api[ _-]?key|"
            r"incorrect api key|not logged in|please (?:run /)?log ?in|access denied",
            re.I,
        ),
    ),
    (
        C.NETWORK,
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
        C.TOOL_ERROR,
        re.compile(
            r"modulenotfounderror|no module named|importerror|command not found|"
            r"permission denied|\beacces\b|\benoent\b|not installed|executable file not found",
            re.I,
        ),
    ),
    (
        C.MISSING_CONTEXT,
        re.compile(
            r"missing context|not enough (?:context|information)|need(?:s)? more (?:context|information)|"
            r"(?:cannot|can't|could not|couldn't|unable to) (?:find|locate|identify|determine) "
            r"(?:the |which )?.{0,80}(?:mentioned|referred to|you (?:mean|refer))",
            re.I,
        ),
    ),
    (C.NOT_FOUND, re.compile(r"\b404\b|not found|no such file|does not exist", re.I)),
    (
        C.INVALID_TASK,
        re.compile(
            r"\b4(?:00|13|22)\b|invalid request|validation|prompt is too long|context length|"
            r"contradictory|impossible",
            re.I,
        ),
    ),
    (C.INTERNAL, re.compile(r"\b5\d\d\b|internal server error|internal error", re.I)),
)

#: Error codes in a JSON error body (``{"error_code": "RATE_LIMIT", ...}``).
_BODY_KEYS = ("error_code", "failure_category", "category", "error_type")


def _by_error_code(ev: Evidence) -> Verdict | None:
    category = ERROR_CODES.get(ev.error or "")
    return (category, f"runner: {ev.error}") if category else None


def _by_status(ev: Evidence) -> Verdict | None:
    status = ev.api_error_status
    if status is None:
        return None
    category = STATUS_CODES.get(status)
    if category is None and 500 <= status <= 599:
        category = C.INTERNAL
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
        return C.PARTIAL, "max turns reached"
    return None


def _by_denials(ev: Evidence) -> Verdict | None:
    if ev.permission_denials:
        return C.AUTH, f"{ev.permission_denials} permission denial(s)"
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
        return C.INTERNAL, f"killed by {_signal_name(signum)} before its result"
    name = _STOPPED_BY_SIGNAL_CODES.get(ev.exit_code or 0)
    if name is not None and not ev.completed and ev.error == "cli_error":
        return C.INTERNAL, (
            f"exited with code {ev.exit_code} before its result, as a CLI stopped by {name} does"
        )
    return None


def _by_incomplete(ev: Evidence) -> Verdict | None:
    if ev.error == "incomplete":
        return C.PARTIAL, "exited before its result event"
    return None


def _by_failed_tools(ev: Evidence) -> Verdict | None:
    if ev.failed_tools:
        return C.TOOL_ERROR, f"{ev.failed_tools} tool call(s) failed"
    return None


#: The classifier, in order: the first rule with a verdict decides.
RULES: tuple[Rule, ...] = (
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
_PROGRESS_UPGRADES = frozenset({C.TOOL_ERROR, C.UNKNOWN, C.INTERNAL})


def _signal_of(exit_code: int | None, error: str | None, completed: bool) -> int | None:
    """The signal that ended the CLI, from how the process ended (rc -N).

    An exit code above 128 is the CLI's own choice, not a signal: gemini exits
    with the HTTP status mod 256 (401 -> 145), a wrapper may pass on its child's
    128+N.  Only the process's own end by a signal counts."""
    if exit_code is None or completed or exit_code >= 0:
        return None
    return -exit_code


def _signal_name(signum: int) -> str:
    try:
        return _signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def classify_evidence(ev: Evidence, *, now: float | None = None) -> Classification:
    """Decide the category of a failed run from all the evidence we have."""
    from .usagelimits import reset_at

    clock = time.time() if now is None else now
    texts = (ev.message, *ev.cli_errors[-3:], ev.stderr_tail[-4000:])
    retry_at = reset_at(*texts, data=ev.data, now=clock)
    retry_after = (
        max(0.0, retry_at - clock)
        if retry_at is not None
        else extract_retry_after(*texts, data=ev.data, now=now)
    )
    verdict: Verdict = (C.UNKNOWN, "no evidence matched")
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
        category = C.PARTIAL
    if retry_after is None and ev.retry_delay_s is not None and category in DEFAULT_RETRIES:
        retry_after = ev.retry_delay_s
    if retry_at is not None and category is not C.RATE_LIMIT:
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

    Spec 003's ``classify_error`` and spec 004's exception analysis: the type
    decides first (TimeoutError, ConnectionError, PermissionError...), then
    the text rules read the message.
    """
    from .errors import ConfigError, UnknownBackendError

    name = type(exc).__name__
    text = str(exc)
    by_type: FailureCategory | None = None
    if isinstance(exc, TimeoutError) or "timeout" in name.lower():
        by_type = C.TIMEOUT
    elif isinstance(exc, ConnectionError):
        by_type = C.NETWORK
    elif isinstance(exc, PermissionError):
        by_type = C.TOOL_ERROR  # spec 004: "Check file permissions"
    elif isinstance(exc, FileNotFoundError | UnknownBackendError):
        by_type = C.NOT_FOUND
    elif isinstance(exc, ModuleNotFoundError | ImportError):
        by_type = C.TOOL_ERROR
    elif isinstance(exc, ConfigError):
        by_type = C.INVALID_TASK
    if by_type is not None:
        return Classification(by_type, f"exception {name}", extract_retry_after(text))
    ev = Evidence(message=f"{name}: {text}")
    found = _by_text(ev)
    if found is None and isinstance(exc, ValueError | TypeError | KeyError | LookupError):
        found = (C.INVALID_TASK, f"exception {name}")
    if found is None and isinstance(exc, OSError):
        found = (C.TOOL_ERROR, f"exception {name}")
    category, reason = found or (C.UNKNOWN, f"exception {name}")
    return Classification(category, reason, extract_retry_after(text))


# -- retry-after ---------------------------------------------------------


def _unit_seconds(unit: str) -> float:
    unit = unit.lower()
    if unit == "ms" or unit.startswith("milli"):
        return 0.001
    if unit == "m" or unit.startswith("min"):
        return 60.0
    if unit.startswith("h"):
        return 3600.0
    if unit.startswith("d"):
        return 86400.0
    return 1.0


_NUMBER_UNIT = r"(\d+(?:\.\d+)?)\s*(milliseconds?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?|d)?\b"
_DURATION = re.compile(_NUMBER_UNIT, re.I)
_RETRY_AFTER_TEXT = (
    # "Retry-After: 30", "retry after 30 seconds", "retry_after=1.5s"
    re.compile(r"retry[ _-]?after[\"']?\s*[:=]?\s*(\d[^\n,;)]*)", re.I),
    # "try again in 2 hours 5 minutes", "retry in 30s", "wait 20 seconds"
    re.compile(r"(?:try again|retry|retrying) in\s+(\d[^\n,;)]*)", re.I),
    re.compile(r"\bwait\s+(\d[^\n,;)]*)", re.I),
)
# claude: "Claude AI usage limit reached|1767225600" (epoch of the reset)
_LIMIT_EPOCH = re.compile(r"limit reached\|(\d{9,11})\b", re.I)
# "resets at 2026-01-01T12:00:00Z", "reset at 1767225600"
_RESET_AT = re.compile(
    r"resets?\s+at\s+(\d{9,11}\b|\d{4}-\d\d-\d\d[T ][\d:.]+(?:Z|[+-]\d\d:?\d\d)?)", re.I
)
# Retry-After: Wed, 21 Oct 2015 07:28:00 GMT
_HTTP_DATE = re.compile(
    r"retry[ _-]?after[\"']?\s*[:=]\s*([A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} [\d:]{8} GMT)", re.I
)


def _duration(text: str) -> float | None:
    """Seconds in "30", "1.5s", "250 ms", "2 hours 5 minutes" (bare number = seconds)."""
    total = 0.0
    found = False
    for match in _DURATION.finditer(text):
        if found and not match.group(2):
            break
        total += float(match.group(1)) * _unit_seconds(match.group(2) or "s")
        found = True
        rest = text[match.end() :]
        if not re.match(r"\s*(?:and\s+)?\d", rest):
            break
    return total if found else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def extract_retry_after(
    *texts: str, data: Mapping[str, Any] | None = None, now: float | None = None
) -> float | None:
    """Seconds to wait before retrying, if the output says so: an error body
    field (``retry_after_seconds``...), a ``Retry-After`` value or date, "try
    again in N minutes", or a reset time."""
    if data:
        for key, factor in (
            ("retry_after_seconds", 1.0),
            ("retry_after_s", 1.0),
            ("retry_after", 1.0),
            ("retry_after_ms", 0.001),
        ):
            value = _number(data.get(key))
            if value is not None:
                return value * factor
        details = data.get("details")
        if isinstance(details, Mapping) and details is not data:
            nested = extract_retry_after(data=details, now=now)
            if nested is not None:
                return nested
    clock = time.time() if now is None else now
    for text in texts:
        if not text:
            continue
        match = _HTTP_DATE.search(text)
        if match:
            with_tz = email.utils.parsedate_to_datetime(match.group(1))
            return max(0.0, with_tz.timestamp() - clock)
        for pattern in _RETRY_AFTER_TEXT:
            match = pattern.search(text)
            if match:
                seconds = _duration(match.group(1))
                if seconds is not None:
                    return seconds
        match = _LIMIT_EPOCH.search(text) or _RESET_AT.search(text)
        if match:
            raw = match.group(1)
            if raw.isdigit():
                return max(0.0, float(raw) - clock)
            try:
                when = _dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
            except ValueError:
                continue
            if when.tzinfo is None:
                when = when.replace(tzinfo=_dt.UTC)
            return max(0.0, when.timestamp() - clock)
    return None
