"""The failure taxonomy's tables: which categories a retry may fix and why, the
specs' names for each category, and what we tell people about each.

The user's three vocabularies meet here (the retry strategies' error types, the
always-responds error contexts, the failure-recovery categories); :data:`SPEC_NAMES` and the taxonomy table
of ``docs/failures.md`` give the mapping.  The categories themselves are
:class:`coding_genesis.status.FailureCategory`; how many times each is retried
is :data:`coding_genesis.retry.DEFAULT_RETRIES`.
"""

from __future__ import annotations

import re

from coding_genesis.retry import DEFAULT_RETRIES
from coding_genesis.status import FailureCategory

__all__ = [
    "LAST_RESORT_MESSAGES",
    "RETRY_SUGGESTIONS",
    "SPEC_NAMES",
    "USER_HINTS",
    "category_from_name",
    "retry_verdict",
]

#: Why a category is not retried as-is (the reason of a ``retryable=False`` verdict).
_NOT_RETRYABLE_BECAUSE: dict[FailureCategory, str] = {
    FailureCategory.AUTH: "auth failures need a login, key or permission change first",
    FailureCategory.INVALID_TASK: "the request itself must change first",
    FailureCategory.CONTEXT_OVERFLOW: "the conversation exceeds the model's context window: "
    "start a new session or shorten the request first",
    FailureCategory.MISSING_CONTEXT: "the request needs more context first",
    FailureCategory.TOOL_ERROR: "the environment must be fixed first (a retry as-is fails the same way)",
    FailureCategory.MISSING: "what is missing must be installed or created first",
    FailureCategory.BUDGET_EXCEEDED: "the budget is spent: a retry would spend more; raise the budget first",
    FailureCategory.WORKSPACE_TAMPERED: "the run replaced its worktree's .git: inspect the kept worktree first",
    FailureCategory.CANCELLED: "the caller cancelled the run: run it again when wanted",
    FailureCategory.INTERRUPTED: "the caller interrupted the turn: send the next turn when wanted",
    FailureCategory.PERMISSION_DENIED: "the approver refused a tool call: the same turn is refused "
    "again unless the approver or the request changes",
    FailureCategory.BUSY: "the agent was busy: send it again once the run in flight has ended",
    FailureCategory.DEGRADED: "the backend's circuit is open: send it again after the cooldown",
    FailureCategory.NOT_STARTED: "never started (a spent budget or a usage limit): raise the budget or "
    "wait for the reset first",
    FailureCategory.UNKNOWN: "the cause is unknown: analyze it before retrying",
}


def retry_verdict(category: FailureCategory, *, progress: bool) -> tuple[bool, str]:
    """Whether a failure of ``category`` is worth retrying as-is, and why.

    ``progress``: the attempt made at least one tool call (a timeout
    with no progress is likely an invalid task, so it is not retried)."""
    if category not in DEFAULT_RETRIES:
        return False, f"{category}: {_NOT_RETRYABLE_BECAUSE.get(category, 'not retried as-is')}"
    if category is FailureCategory.TIMEOUT and not progress:
        return False, (
            "timeout with no progress (0 tool calls): likely too big a task; "
            "break it into smaller subtasks"
        )
    if category is FailureCategory.STALLED:
        return True, (
            "stalled (silent and idle): a hung CLI or tool; retried once whatever the "
            "progress, continuing the session"
        )
    if category is FailureCategory.VERIFY_FAILED:
        return True, (
            "the verify command failed: retried once, resuming the session with its output"
        )
    if category is FailureCategory.INVALID_OUTPUT:
        return True, (
            "the answer does not match the output schema: retried once, resuming the "
            "session with the validation error"
        )
    if category is FailureCategory.TIMEOUT:
        return True, "timeout after progress: retry with a longer timeout, continuing the session"
    return True, f"{category} failures are usually transient"


#: The names each vocabulary uses for a category: (retry strategies, always
#: responds, failure recovery).
SPEC_NAMES: dict[FailureCategory, tuple[str | None, str | None, str | None]] = {
    FailureCategory.TIMEOUT: ("timeout", "timeout", "timeout"),
    FailureCategory.STALLED: (None, None, None),
    FailureCategory.RATE_LIMIT: ("rate_limit", "rate_limit", None),
    FailureCategory.NETWORK: ("network", "connection", None),
    FailureCategory.AUTH: ("permission", None, None),
    FailureCategory.INVALID_TASK: ("validation", "data", "invalid_task"),
    FailureCategory.CONTEXT_OVERFLOW: (None, None, None),
    FailureCategory.MISSING_CONTEXT: (None, None, "missing_context"),
    FailureCategory.TOOL_ERROR: (None, None, "tool_error"),
    FailureCategory.MISSING: ("not_found", "not_found", None),
    FailureCategory.PARTIAL: (None, None, "partial"),
    FailureCategory.VERIFY_FAILED: (None, None, None),
    FailureCategory.INVALID_OUTPUT: (None, None, None),
    FailureCategory.AGENT_ERROR: ("internal", None, None),
    FailureCategory.BUDGET_EXCEEDED: (None, None, None),
    FailureCategory.WORKSPACE_TAMPERED: (None, None, None),
    FailureCategory.CANCELLED: (None, None, None),
    FailureCategory.INTERRUPTED: (None, None, None),
    FailureCategory.PERMISSION_DENIED: (None, None, None),
    FailureCategory.BUSY: (None, None, None),
    FailureCategory.DEGRADED: (None, None, None),
    FailureCategory.NOT_STARTED: (None, None, None),
    FailureCategory.UNKNOWN: ("unknown", "unknown", None),
}

#: Every category's own value names it (last: it wins over the other vocabularies).
_ALIASES: dict[str, FailureCategory] = {
    **{name: c for c, names in SPEC_NAMES.items() for name in names if name},
    "partial_success": FailureCategory.PARTIAL,
    "unauthorized": FailureCategory.AUTH,
    "authentication": FailureCategory.AUTH,
    "forbidden": FailureCategory.AUTH,
    "transient_error": FailureCategory.NETWORK,
    "transient": FailureCategory.NETWORK,
    "agent_error": FailureCategory.AGENT_ERROR,
    "invalid_command": FailureCategory.INVALID_TASK,
    "invalid_request": FailureCategory.INVALID_TASK,
    "bad_request": FailureCategory.INVALID_TASK,
    "too_many_requests": FailureCategory.RATE_LIMIT,
    "quota": FailureCategory.RATE_LIMIT,
    "context_length_exceeded": FailureCategory.CONTEXT_OVERFLOW,
    "prompt_too_long": FailureCategory.CONTEXT_OVERFLOW,
    **{c.value: c for c in FailureCategory},
}


def category_from_name(name: object) -> FailureCategory | None:
    """A category from any of the specs' names or an error code (``RATE_LIMIT``,
    ``permission``, ``connection``, ``partial_success``...), else None."""
    if not isinstance(name, str):
        return None
    key = re.sub(r"[\s-]+", "_", name.strip().lower())
    return _ALIASES.get(key)


# -- what we tell people ------------------------------------------------

#: The ``user_hint``: a pre-written hint for whoever talks to the user.
USER_HINTS: dict[FailureCategory, str] = {
    FailureCategory.TIMEOUT: "The coding agent ran out of time before finishing the task.",
    FailureCategory.STALLED: "The coding agent hung: no output and no work for a long time, so it was stopped.",
    FailureCategory.RATE_LIMIT: "The coding agent's API is rate-limiting requests right now.",
    FailureCategory.NETWORK: "The coding agent lost its connection to its API.",
    FailureCategory.AUTH: "The coding agent is not authorized to do this (login, API key or permissions).",
    FailureCategory.INVALID_TASK: "The request could not be carried out as given.",
    FailureCategory.CONTEXT_OVERFLOW: "The conversation grew too long for the coding agent's model.",
    FailureCategory.MISSING_CONTEXT: "The coding agent did not have enough context to do the task.",
    FailureCategory.TOOL_ERROR: "A tool the coding agent needed failed or is missing.",
    FailureCategory.MISSING: "Something the task needs (the agent's CLI, a file, a model) was not found.",
    FailureCategory.PARTIAL: "The coding agent did part of the work, then hit a blocker.",
    FailureCategory.VERIFY_FAILED: "The coding agent finished, but the verification command failed.",
    FailureCategory.INVALID_OUTPUT: "The coding agent's answer does not have the shape that was asked "
    "for (its output schema).",
    FailureCategory.AGENT_ERROR: "The coding agent failed on its side.",
    FailureCategory.BUDGET_EXCEEDED: "The coding agent was stopped because its budget (cost, tokens, turns or "
    "tool calls) was spent.",
    FailureCategory.WORKSPACE_TAMPERED: "The coding agent replaced its worktree's git repository; its work was "
    "not read or committed.",
    FailureCategory.CANCELLED: "The run was cancelled before it finished.",
    FailureCategory.INTERRUPTED: "The turn was interrupted before it finished; the session goes on.",
    FailureCategory.PERMISSION_DENIED: "A tool call the coding agent asked for was refused, which "
    "ended the turn.",
    FailureCategory.BUSY: "The coding agent was busy with another request; this one was not started.",
    FailureCategory.DEGRADED: "The coding agent is paused after repeated failures; this request was not "
    "started.",
    FailureCategory.NOT_STARTED: "This request was never started (its budget was spent or the account's "
    "usage limit was reached).",
    FailureCategory.UNKNOWN: "Something unexpected happened while running the coding agent.",
}

#: The ``retry_suggestion``: what the user can do next.
RETRY_SUGGESTIONS: dict[FailureCategory, str] = {
    FailureCategory.TIMEOUT: "Try again with a longer timeout, or split the task into smaller steps.",
    FailureCategory.STALLED: "Try again (the session continues); if it hangs again, check the tool it ran.",
    FailureCategory.RATE_LIMIT: "Wait a minute and try again.",
    FailureCategory.NETWORK: "This is usually temporary: try again in a moment.",
    FailureCategory.AUTH: "Check the agent's login or API key and its permissions, then try again.",
    FailureCategory.INVALID_TASK: "Rephrase the request with clear, consistent requirements.",
    FailureCategory.CONTEXT_OVERFLOW: "Start a new session, or shorten the request and what it reads.",
    FailureCategory.MISSING_CONTEXT: "Add the missing details (file paths, configuration) to the request.",
    FailureCategory.TOOL_ERROR: "Fix the environment (install what is missing, check permissions), then retry.",
    FailureCategory.MISSING: "Check that the CLI, files and names the task refers to exist.",
    FailureCategory.PARTIAL: "Ask the agent to continue from where it stopped.",
    FailureCategory.VERIFY_FAILED: "Let the agent continue with the verify output (a retry does).",
    FailureCategory.INVALID_OUTPUT: "Let the agent answer again with the validation error (a retry "
    "does); if it fails again, simplify the schema or say more about it in the prompt.",
    FailureCategory.AGENT_ERROR: "Try once more; if it fails again, report it.",
    FailureCategory.BUDGET_EXCEEDED: "Raise the budget, or continue the session with a smaller task.",
    FailureCategory.WORKSPACE_TAMPERED: "Inspect the kept worktree without running git in it, then remove it.",
    FailureCategory.CANCELLED: "Run it again if it is still wanted.",
    FailureCategory.INTERRUPTED: "Send the next turn (or the same one again) when wanted.",
    FailureCategory.PERMISSION_DENIED: "Allow the tool in the approver, or ask for work that does "
    "not need it.",
    FailureCategory.BUSY: "Send it again once the agent's current run has ended.",
    FailureCategory.DEGRADED: "Send it again after the cooldown, once the backend works again.",
    FailureCategory.NOT_STARTED: "Raise the budget or wait for the usage limit to reset, then run it.",
    FailureCategory.UNKNOWN: "Try again shortly, or rephrase the request.",
}

#: The ``LAST_RESORT_MESSAGES``: a response is never empty, whatever broke.
LAST_RESORT_MESSAGES: dict[FailureCategory, str] = {
    FailureCategory.TIMEOUT: "The coding agent is running slowly and ran out of time. Try again in a moment; "
    "if it keeps happening, give it more time or a smaller task.",
    FailureCategory.STALLED: "The coding agent stopped responding and did no work for a long time, so it was "
    "stopped. Please try again; if it hangs again, check the tool it was running.",
    FailureCategory.RATE_LIMIT: "The coding agent is receiving too many requests and needs a moment to catch "
    "up. Please try again in about a minute.",
    FailureCategory.NETWORK: "The coding agent is having trouble connecting to its services. This is usually "
    "temporary: please try again in a minute or two.",
    FailureCategory.AUTH: "The coding agent could not authenticate or was not allowed to do what the task "
    "needs. Check its login, API key and permissions.",
    FailureCategory.INVALID_TASK: "The coding agent could not carry out this request as given. Please rephrase "
    "it with clear, specific requirements.",
    FailureCategory.CONTEXT_OVERFLOW: "The conversation became too long for the coding agent's model. Please "
    "start a new session or shorten the request.",
    FailureCategory.MISSING_CONTEXT: "The coding agent needs more context to do this task. Please include the "
    "file paths and details it needs.",
    FailureCategory.TOOL_ERROR: "A tool the coding agent relies on failed. Please check the environment and try "
    "again.",
    FailureCategory.MISSING: "Something the coding agent needs could not be found. Please check that the "
    "agent is installed and the task's references exist.",
    FailureCategory.PARTIAL: "The coding agent finished part of the task before it was blocked. You can ask it "
    "to continue from where it stopped.",
    FailureCategory.VERIFY_FAILED: "The coding agent finished, but its work did not pass the verification "
    "command. It can continue from the verification output.",
    FailureCategory.INVALID_OUTPUT: "The coding agent finished, but its answer did not have the shape "
    "that was asked for. It can answer again with the validation error.",
    FailureCategory.AGENT_ERROR: "The coding agent ran into an internal problem. Please try again; if it keeps "
    "failing, report it.",
    FailureCategory.BUDGET_EXCEEDED: "The coding agent reached its spending limit and was stopped. Raise the "
    "budget to let it continue.",
    FailureCategory.WORKSPACE_TAMPERED: "The coding agent replaced the git repository of its workspace, so its "
    "work was neither read nor committed. The workspace was kept for inspection.",
    FailureCategory.CANCELLED: "The request was cancelled before the coding agent finished.",
    FailureCategory.INTERRUPTED: "The turn was interrupted before the coding agent finished. The "
    "session can go on with the next turn.",
    FailureCategory.PERMISSION_DENIED: "The coding agent needed a tool call that was not allowed, so "
    "the turn ended. Allow the tool, or ask for work that does not need it.",
    FailureCategory.BUSY: "The coding agent is busy with another request. Please try again in a moment.",
    FailureCategory.DEGRADED: "The coding agent is paused after repeated failures. Please try again after a "
    "short while.",
    FailureCategory.NOT_STARTED: "This request was not started because its budget was spent or the usage "
    "limit was reached.",
    FailureCategory.UNKNOWN: "The coding agent ran into an unexpected issue. Please try again, and if the "
    "problem continues, try rephrasing the request.",
}
