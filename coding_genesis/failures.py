"""One failure taxonomy, and the classifier that maps a failed run onto it.

The user's three vocabularies meet here (spec 002 error types, spec 003 error
contexts, spec 004 failure categories):

============== ===================== ================== =========
category       spec 002              spec 003           retryable
============== ===================== ================== =========
timeout        timeout               timeout            yes (spec 004: only with progress)
rate_limit     rate_limit            rate_limit         yes
network        network               connection         yes
auth           permission            (unknown)          no
invalid_task   validation            data               no
missing_context —                    —                  no
tool_error     —                     —                  yes, after fixing the environment
not_found      not_found             not_found          no
partial        —                     —                  yes
internal       internal              —                  partial (once, then escalate)
unknown        unknown               unknown            no
============== ===================== ================== =========

Backends contribute hints (``Backend.failure_hint``); the core decides.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["RETRYABLE", "Classification", "FailureCategory", "classify", "extract_retry_after"]


class FailureCategory(enum.StrEnum):
    TIMEOUT = "timeout"
    RATE_LIMIT = "rate_limit"
    NETWORK = "network"
    AUTH = "auth"
    INVALID_TASK = "invalid_task"
    MISSING_CONTEXT = "missing_context"
    TOOL_ERROR = "tool_error"
    NOT_FOUND = "not_found"
    PARTIAL = "partial"
    INTERNAL = "internal"
    UNKNOWN = "unknown"


#: "yes", "no" or "partial", as the spec's tables say.
RETRYABLE: dict[FailureCategory, str] = {
    FailureCategory.TIMEOUT: "yes",
    FailureCategory.RATE_LIMIT: "yes",
    FailureCategory.NETWORK: "yes",
    FailureCategory.AUTH: "no",
    FailureCategory.INVALID_TASK: "no",
    FailureCategory.MISSING_CONTEXT: "no",
    FailureCategory.TOOL_ERROR: "yes",
    FailureCategory.NOT_FOUND: "no",
    FailureCategory.PARTIAL: "yes",
    FailureCategory.INTERNAL: "partial",
    FailureCategory.UNKNOWN: "no",
}


@dataclass(frozen=True, slots=True)
class Classification:
    category: FailureCategory
    #: Evidence that decided it, for logs and reports.
    reason: str
    #: Seconds the CLI or the API asked us to wait, when the output says so.
    retry_after_s: float | None = None

    @property
    def retryable(self) -> str:
        return RETRYABLE[self.category]


#: Our own error codes (RunResult.error) that decide on their own.
_BY_ERROR_CODE: dict[str, FailureCategory] = {
    "timeout": FailureCategory.TIMEOUT,
    "idle_timeout": FailureCategory.TIMEOUT,
    "not_found": FailureCategory.NOT_FOUND,
    "not_executable": FailureCategory.NOT_FOUND,
    "invalid_request": FailureCategory.INVALID_TASK,
    "busy": FailureCategory.INVALID_TASK,
    "degraded": FailureCategory.INTERNAL,
    "internal": FailureCategory.INTERNAL,
    "incomplete": FailureCategory.PARTIAL,
    "killed": FailureCategory.INTERNAL,
}

#: Text evidence, checked in order (first match wins).
_TEXT_RULES: tuple[tuple[FailureCategory, re.Pattern[str]], ...] = (
    (
        FailureCategory.RATE_LIMIT,
        re.compile(r"\b429\b|too many requests|rate[ _-]?limit|quota|overloaded|\b529\b", re.I),
    ),
    (
        FailureCategory.AUTH,
        re.compile(
            r"\b40[13]\b|unauthori[sz]ed|forbidden|authenticat|invalid (x-)?api[ _-]?key|permission denied|not logged in|/login",
            re.I,
        ),
    ),
    (
        FailureCategory.NETWORK,
        re.compile(
            r"stream disconnected|connection (refused|reset|error|closed)|econn(refused|reset)|enotfound|"
            r"getaddrinfo|network|reconnecting|socket hang up|dns|fetch failed|timed? ?out waiting",
            re.I,
        ),
    ),
    (
        FailureCategory.TOOL_ERROR,
        re.compile(r"modulenotfounderror|command not found|no module named|enoent", re.I),
    ),
    (FailureCategory.NOT_FOUND, re.compile(r"\b404\b|not found|no such file", re.I)),
    (FailureCategory.INVALID_TASK, re.compile(r"\b4(00|13|22)\b|invalid request|validation", re.I)),
    (FailureCategory.INTERNAL, re.compile(r"\b5\d\d\b|internal server error|internal error", re.I)),
)

_RETRY_AFTER = (
    re.compile(
        r"retry[ _-]?after[\"']?\s*[:=]?\s*(\d+(?:\.\d+)?)\s*(ms|milliseconds|s|sec|seconds)?", re.I
    ),
    re.compile(
        r"try again in\s*(\d+(?:\.\d+)?)\s*(ms|milliseconds|s|sec|seconds|m|min|minutes)?", re.I
    ),
)


def _status_category(status: int) -> FailureCategory | None:
    if status == 429 or status == 529:
        return FailureCategory.RATE_LIMIT
    if status in (401, 403):
        return FailureCategory.AUTH
    if status == 404:
        return FailureCategory.NOT_FOUND
    if status in (400, 413, 422):
        return FailureCategory.INVALID_TASK
    if status == 408:
        return FailureCategory.NETWORK
    if 500 <= status <= 599:
        return FailureCategory.INTERNAL
    return None


def extract_retry_after(*texts: str, data: Mapping[str, Any] | None = None) -> float | None:
    """Seconds to wait before retrying, if the output says (body field or text)."""
    if data:
        for key in ("retry_after_seconds", "retry_after", "retry_after_s"):
            value = data.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
                return float(value)
    for text in texts:
        if not text:
            continue
        for pattern in _RETRY_AFTER:
            match = pattern.search(text)
            if match:
                value = float(match.group(1))
                unit = (match.group(2) or "s").lower()
                if unit in ("ms", "milliseconds"):
                    value /= 1000
                elif unit in ("m", "min", "minutes"):
                    value *= 60
                return value
    return None


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
) -> Classification:
    """Decide the category of a failed run from all the evidence we have."""
    retry_after = extract_retry_after(message, stderr_tail, *cli_errors, data=data)
    if error in _BY_ERROR_CODE and error not in ("killed",):
        return Classification(_BY_ERROR_CODE[error], f"runner: {error}", retry_after)
    if backend_hint:
        try:
            return Classification(
                FailureCategory(backend_hint), f"backend hint: {backend_hint}", retry_after
            )
        except ValueError:
            pass
    if api_error_status is not None:
        category = _status_category(api_error_status)
        if category is not None:
            return Classification(category, f"API status {api_error_status}", retry_after)
    if result_subtype == "error_max_turns":
        return Classification(FailureCategory.PARTIAL, "max turns reached", retry_after)
    if permission_denials:
        return Classification(
            FailureCategory.AUTH, f"{permission_denials} permission denial(s)", retry_after
        )
    evidence = "\n".join((message, *cli_errors, stderr_tail))
    for category, pattern in _TEXT_RULES:
        match = pattern.search(evidence)
        if match:
            return Classification(category, f"text: {match.group(0)!r}", retry_after)
    if error == "killed":
        return Classification(FailureCategory.INTERNAL, "killed by a signal", retry_after)
    if failed_tools:
        return Classification(
            FailureCategory.TOOL_ERROR, f"{failed_tools} tool call(s) failed", retry_after
        )
    return Classification(FailureCategory.UNKNOWN, "no evidence matched", retry_after)
