"""What a run produced: the typed response model, built once at the end of a
run from its tally (what the run's pipeline counted of its events)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, TypedDict, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator

from coding_genesis.options import Trigger
from coding_genesis.status import ErrorCode, FailureCategory

__all__ = ["ChildFailure", "ContextUsage", "CostSource", "RunResponse", "RunResult"]

#: Where a run's ``cost_usd`` comes from: the CLI's own figure, tokens x the
#: price table, or unknown (no price for the model).
CostSource: TypeAlias = Literal["reported", "computed", "unknown"]


class ChildFailure(BaseModel):
    """The ``ChildFailure``: what failed, what got done, what to do next.

    Its text failure report is :func:`coding_genesis.format_failure_report`."""

    model_config = ConfigDict(frozen=True)

    category: FailureCategory
    message: str
    session_id: str | None = None
    #: Seconds the run took.
    duration: float = 0.0
    # Partial progress
    completed_steps: list[str] = Field(default_factory=list)
    files_modified: list[str] = Field(default_factory=list)
    # Recovery guidance
    blocked_on: str | None = None
    #: Whether a retry as-is may help (``failure["retryable"]`` in a response).
    suggested_retry: bool = False
    #: Why (or why not).
    retryable_reason: str = ""
    suggested_actions: list[str] = Field(default_factory=list)
    # Execution context
    tool_usage: dict[str, int] = Field(default_factory=dict)
    last_successful_tool: str | None = None
    exit_code: int | None = None
    stderr_tail: str = ""
    #: The evidence that decided the category.
    reason: str = ""
    #: Seconds the CLI or the API asked us to wait, when it said so.
    retry_after_s: float | None = None
    #: When a usage limit resets (ISO 8601, UTC): retry then, not before.
    retry_at: str | None = None

    @field_validator("session_id", "blocked_on", "last_successful_tool", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return None if value == "" else value

    @field_validator("files_modified")
    @classmethod
    def _no_empty_paths(cls, value: list[str]) -> list[str]:
        return [path for path in value if path]  # an empty path names no file

    @field_validator("duration")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value) or value < 0:
            raise ValueError("duration must be a finite number of seconds >= 0")
        return value

    @property
    def retryable(self) -> bool:
        """Whether a retry as-is may help: the one answer every view renders
        (``error_context.can_retry``, the report's "Retryable:" line, the CLI)
        and the retry policy reads (the ``suggested_retry``)."""
        return self.suggested_retry

    def to_dict(self) -> dict[str, Any]:
        """The ``failure`` dict of a response (keeps the classifier's keys first)."""
        data = self.model_dump(mode="json")
        return {
            "category": data.pop("category"),
            # the ``suggested_retry`` stays too: the same field, its spec name
            "retryable": self.suggested_retry,
            "reason": data.pop("reason"),
            "retry_after_s": data.pop("retry_after_s"),
            "retryable_reason": data.pop("retryable_reason"),
            **data,
        }


_MAX_FILES = 1000


class RunResult(BaseModel):
    """The response of one request.  ``to_dict()`` is what ``run()`` returns."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: int
    message: str
    tool_calls: int = 0
    session_id: str | None = None
    backend: str = ""
    agent: str = ""
    run_id: str = ""
    exit_code: int | None = None
    #: Name of the signal that ended the CLI, if one did.
    signal: str | None = None
    duration_s: float = 0.0
    skipped_lines: int = 0
    lines: int = 0
    #: The run's token usage: the best-known totals, the CLI's own when it
    #: reported them, else what metering counted (see ``usage_source``).
    usage: dict[str, Any] | None = None
    #: Where ``usage`` comes from: ``cli`` (the CLI's own totals), ``metering``
    #: (the messages metering counted: the CLI reported no total, e.g. a run
    #: stopped before its end) or ``unknown`` (nothing was reported).
    usage_source: str | None = None
    cost_usd: float | None = None
    #: Where ``cost_usd`` comes from: ``reported`` (by the CLI), ``computed``
    #: (tokens x the price table) or ``unknown`` (docs/metering.md).
    cost_source: CostSource | None = None
    #: Tokens (per model), turns, tool calls, context-window use and latency
    #: (docs/metering.md); None when metering is off.
    metering: dict[str, Any] | None = None
    #: With a budget: ``outcome`` (ran, stopped, not_started), ``reason``,
    #: ``limits``, ``exceeded``, what this run ``charged`` and what the budget
    #: has ``spent`` (``Budget``).
    budget: dict[str, Any] | None = None
    model: str | None = None
    num_turns: int | None = None
    #: The CLI's id of this turn (codex: its turn id; claude: the uuid of the
    #: turn's last assistant message): ``session.fork(at=...)`` resumes at it.
    turn_id: str | None = None
    #: Why the runner stopped the process ("timeout", "idle", "linger", "cancelled").
    stop_reason: str | None = None
    #: The CLI's terminal event was seen.
    completed: bool = False
    is_error: bool = False
    #: Short machine-readable error code; None on success.
    error: ErrorCode | None = None
    stderr_tail: str = ""
    tool_usage: dict[str, int] = Field(default_factory=dict)
    files_modified: list[str] = Field(default_factory=list)
    last_successful_tool: str | None = None
    #: API retries the CLI made by itself (claude ``api_retry`` lines, codex "Reconnecting").
    cli_retries: int = 0
    #: The final answer parsed as JSON, when it is a JSON object.
    data: dict[str, Any] | None = None
    #: The answer validated against ``output_schema=``: a dict, or an instance
    #: of the pydantic model given (its JSON dict in the response dict); None
    #: without a schema, or when the answer did not match (``invalid_output``).
    output: Any = None
    warnings: list[str] = Field(default_factory=list)
    leftovers_stopped: int = 0
    #: HTTP status of the API error the CLI reported, if any.
    api_error_status: int | None = None
    #: The CLI's error lines (last few), e.g. codex "Reconnecting..." messages.
    cli_errors: list[str] = Field(default_factory=list)
    #: Names of tools whose calls failed.
    failed_tools: list[str] = Field(default_factory=list)
    permission_denials: int = 0
    #: Tools whose calls the CLI's permission system denied (claude ``permission_denials``).
    denied_tools: list[str] = Field(default_factory=list)
    #: The tool calls the CLI asked about and what was decided (a live
    #: session's turn, a run with ``approver=``): tool, kind, allowed,
    #: decision, source, reason, message, elapsed_s (input not kept here).
    approvals: list[dict[str, Any]] = Field(default_factory=list)
    #: The hooks called (``hooks=``): event, hook, tool, tool_call_id, turn,
    #: outcome (continued, changed, blocked, error, timeout), message, error,
    #: not_applied (what the backend could not do of what the hook asked), elapsed_s.
    hooks: list[dict[str, Any]] = Field(default_factory=list)
    #: The MCP servers of the run as the CLI last reported each (claude's
    #: ``system/init``, codex's startup status): name, status, error.
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    #: The questions the CLI put to the user (``asker=``): question, kind,
    #: answered, answer (None when secret or none), source (asker, timeout,
    #: error, none), elapsed_s.
    questions: list[dict[str, Any]] = Field(default_factory=list)
    #: The turn's number in its live session (None: a one-shot run).
    turn: int | None = None
    #: Who started the run: the caller (``user``), or the CLI itself between
    #: the turns of a live session (``cli``: a background task that came back,
    #: say); such a turn is recorded like any other.
    trigger: Trigger = "user"
    #: The terminal event's subtype (claude ``error_max_turns``, codex ``turn.failed``...).
    result_subtype: str | None = None
    #: What the run was stopped on, when the stopper knew it: the failure the
    #: CLI's own events proved (auth, invalid request, ...: fail fast), or
    #: ``not_started``; the failure analysis names this category.
    stopped_on: FailureCategory | None = None
    #: The failure value (category, retryable and why, suggested actions, ...) on
    #: every failed response, analyzed once; ``error_context`` and
    #: ``failure_report`` are views of it.
    failure: ChildFailure | None = None
    #: Successful tool calls, one line each ("Ran Bash: pytest", "Wrote src/x.py").
    completed_steps: list[str] = Field(default_factory=list)
    #: Tool calls still running when the run ended (or, after our timeout, the
    #: last one if the stop made it fail).
    unfinished_steps: list[str] = Field(default_factory=list)
    #: First line of the last failed tool call's output.
    last_tool_error: str | None = None
    #: The delay the CLI announced before its last own API retry (claude ``retry_delay_ms``).
    cli_retry_delay_s: float | None = None
    #: The wall-clock timeout of the attempt, in seconds (None if it never started).
    timeout_s: float | None = None
    #: The error context on every failed response (failed_node, error_type, user_hint...).
    error_context: dict[str, Any] | None = None
    #: The text failure report on every failed response.
    failure_report: str | None = None
    #: Signals the runner sent to stop the process tree, in order.
    signals_sent: list[str] = Field(default_factory=list)
    #: The CLI's process id (gone by the time you read it).
    pid: int | None = None
    #: Retries coding-genesis made under its retry policy (attempts = retry_count + 1).
    retry_count: int = 0
    #: Attempts made for this request (retry_count + 1): the Process Failer's
    #: "retry_count" in its success body counts attempts the same way.
    attempts: int = 1
    #: One entry per failed attempt: attempt, category, error, message, at, action
    #: ("retry", "fail", "escalate"), reason, delay_s, scheduled_at, timeout_s, ...
    retry_history: list[dict[str, Any]] = Field(default_factory=list)
    #: The escalation record when the retry policy gave up by escalating.
    escalation: dict[str, Any] | None = None
    #: This run's transcript directory (``transcripts=``), if one was written.
    transcript: str | None = None
    #: The verify command's last run (argv, status, exit_code, output_tail, ...;
    #: ``history``: every run of it), when one was given.
    verify: dict[str, Any] | None = None
    #: The run's git worktree (isolation="worktree"): path, branch, base_commit, kept, removed...
    worktree: dict[str, Any] | None = None
    #: What an isolated run changed, from git: files with their kind, diff stat,
    #: the agent's commits, the full diff on request.
    changes: dict[str, Any] | None = None

    def to_dict(self) -> RunResponse:
        """The documented plain dict that ``run()`` returns."""
        out = self.model_dump()
        out["error"] = str(self.error) if self.error is not None else None
        out["failure"] = self.failure.to_dict() if self.failure is not None else None
        if isinstance(self.output, BaseModel):
            out["output"] = self.output.model_dump(mode="json")
        return cast("RunResponse", out)


class RunResponse(TypedDict):
    """The dict ``run()`` returns: :meth:`RunResult.to_dict`, key for key (a
    test checks both name the same keys); each key is documented on
    :class:`RunResult`.  ``error`` is the error code's text and ``failure``
    the failure value's dict (:meth:`ChildFailure.to_dict`)."""

    status: int
    message: str
    tool_calls: int
    session_id: str | None
    backend: str
    agent: str
    run_id: str
    exit_code: int | None
    signal: str | None
    duration_s: float
    skipped_lines: int
    lines: int
    usage_source: str | None
    usage: dict[str, Any] | None
    cost_usd: float | None
    cost_source: CostSource | None
    metering: dict[str, Any] | None
    budget: dict[str, Any] | None
    model: str | None
    num_turns: int | None
    turn_id: str | None
    stop_reason: str | None
    completed: bool
    is_error: bool
    error: str | None
    stderr_tail: str
    tool_usage: dict[str, int]
    files_modified: list[str]
    last_successful_tool: str | None
    cli_retries: int
    data: dict[str, Any] | None
    output: Any
    warnings: list[str]
    leftovers_stopped: int
    api_error_status: int | None
    cli_errors: list[str]
    failed_tools: list[str]
    permission_denials: int
    denied_tools: list[str]
    approvals: list[dict[str, Any]]
    hooks: list[dict[str, Any]]
    mcp_servers: list[dict[str, Any]]
    questions: list[dict[str, Any]]
    turn: int | None
    trigger: Trigger
    result_subtype: str | None
    failure: dict[str, Any] | None
    completed_steps: list[str]
    unfinished_steps: list[str]
    last_tool_error: str | None
    cli_retry_delay_s: float | None
    timeout_s: float | None
    stopped_on: FailureCategory | None
    error_context: dict[str, Any] | None
    failure_report: str | None
    signals_sent: list[str]
    pid: int | None
    retry_count: int
    attempts: int
    retry_history: list[dict[str, Any]]
    escalation: dict[str, Any] | None
    transcript: str | None
    verify: dict[str, Any] | None
    worktree: dict[str, Any] | None
    changes: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class ContextUsage:
    """A live session's context window now (``session.context_usage()``):
    ``used`` tokens of ``size`` (None: the CLI did not say its window), as
    ``source`` says it (the CLI's message it was read from: claude's
    ``get_context_usage`` answer, codex's last ``thread/tokenUsage/updated``,
    an ACP agent's ``usage_update``)."""

    used: int
    size: int | None
    source: str
