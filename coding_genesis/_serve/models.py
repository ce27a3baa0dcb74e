"""The API's shapes, as pydantic models: the OpenAPI schema is generated from
them (``docs/openapi.json``, committed; a test fails when it drifts), and every
JSON response is built through them, so what is served is what is documented."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from coding_genesis.capabilities import UNTRUSTED_APPROVAL_TIMEOUT
from coding_genesis.options import Permissions

__all__ = [
    "Answer",
    "Approval",
    "ApprovalList",
    "CategoryStat",
    "Check",
    "Doctor",
    "Error",
    "Lost",
    "Run",
    "RunList",
    "RunRequest",
    "ServerInfo",
    "SessionList",
    "SessionRequest",
    "SessionView",
    "Stats",
    "SteerRequest",
    "Transcript",
    "Turn",
    "TurnRequest",
    "UsageStat",
]

RunState = Literal["queued", "running", "finished", "lost"]


class Error(BaseModel):
    """Every refusal: a short code and the words of why."""

    error: str = Field(description="a short code: invalid_request, not_found, queue_full, ...")
    message: str


class RunRequest(BaseModel):
    """A run to start: a ``genesis run-many`` line, read under the same rules.

    Unless the server was started with ``--trusted-input``, only these fields
    may be set (``options``: ``max_turns`` only); anything that chooses an
    executable, an argument, an environment variable, a permission or an
    approver is refused.  ``cwd`` (relative to the server's root, or absolute)
    must lie under ``--root``.  With ``--trusted-input`` every setting of
    ``CodingGenesisAgent`` is accepted.
    """

    model_config = ConfigDict(extra="allow")

    prompt: str | list[str | dict[str, Any]] = Field(
        description="what to ask the CLI: text, or text parts with images and files "
        '({"type": "image", "data": base64}; one naming a "path" needs --trusted-input)'
    )
    backend: str | None = Field(None, description="claude, codex, gemini, opencode, qwen, failer")
    model: str | None = None
    timeout: float | None = Field(None, description="wall-clock limit, seconds")
    idle_timeout: float | None = Field(None, description="stop after this many seconds of silence")
    cwd: str | None = Field(None, description="working directory, under the server's root")
    name: str | None = None
    resume: str | None = Field(None, description="a CLI session id to continue")
    request_key: str | None = None
    retry: str | int | dict[str, Any] | None = Field(
        None, description='"default", a number of retries, or a retry policy object'
    )
    options: dict[str, Any] | None = Field(None, description='untrusted: {"max_turns": N} only')
    isolation: Literal["worktree"] | None = None
    isolation_base: str | None = None
    keep: Literal["never", "on_failure", "always"] | None = None
    carry_uncommitted: bool | None = None
    include_diff: bool | None = None
    system_prompt: str | None = Field(None, description="replaces the CLI's system prompt")
    append_system_prompt: str | None = Field(None, description="added to the system prompt")
    approvals: Literal["inbox", "none"] | None = Field(
        None,
        description='"inbox": each tool call the CLI asks about waits in the approval inbox '
        '(GET /approvals) for an answer; "none" (the default): the permission level decides. '
        "inbox needs a backend with a two-way protocol (every built-in one has it)",
    )
    approval_timeout: float | None = Field(
        None,
        gt=0,
        le=UNTRUSTED_APPROVAL_TIMEOUT,
        description="seconds an approval of the inbox waits; then its default (deny) applies "
        "(default: the server's --approval-timeout)",
    )
    partial: bool | None = Field(
        None, description="text and thinking deltas (text_delta events) before each message"
    )


class Lost(BaseModel):
    """A run the server (or another runner) was stopped in the middle of."""

    found: float | None = Field(description="when it was found lost (epoch seconds)")
    was: str | None = Field(description="queued or running when its runner died")
    reason: str | None
    done: dict[str, Any] | None = Field(
        description="what it had done, from its transcript: attempts, tool_calls, "
        "tool_usage, files_modified, session_id, model, usage, cost_usd, stopped_processes"
    )


class Run(BaseModel):
    """One run: a request of this server (``source: api``) or a run recorded by
    the command line or an agent (``source: cli``)."""

    id: str = Field(description="the request's id (a cli run: its run id)")
    run_id: str | None = Field(description="the run's id in transcripts and the run log")
    source: Literal["api", "cli"]
    state: RunState
    backend: str | None
    model: str | None
    prompt: str = Field(description="its first line, at most 200 characters")
    cwd: str | None
    accepted: float | None = Field(description="epoch seconds")
    started: float | None
    finished: float | None
    position: int | None = Field(description="in the queue, 1 next (queued runs)")
    cancel_requested: bool
    status: int | None = Field(description="the response status: 0 ok (see docs/failures.md)")
    error: str | None
    category: str | None
    duration_s: float | None
    tool_calls: int | None
    lost: Lost | None
    result: dict[str, Any] | None = Field(
        None,
        description="the response dict of run() (GET /runs/{id} of a finished run)",
    )


class RunList(BaseModel):
    runs: list[Run]


class Transcript(BaseModel):
    """A run's recorded transcript: its events (decoded from the raw stdout
    as a live run decodes it; ``ts_estimated`` marks estimated times)."""

    run_id: str
    meta: dict[str, Any]
    events: list[dict[str, Any]]
    offset: int
    next_offset: int | None = Field(description="the offset of the next page (None: the end)")
    result: dict[str, Any] | None
    ended: dict[str, Any] | None = Field(description="set by the sweep when its runner died")
    stderr_tail: str
    damaged: list[str]


class CategoryStat(BaseModel):
    count: int
    share: float = Field(description="of the failures")
    rate: float = Field(description="of the runs")


class Blocker(BaseModel):
    blocked_on: str
    count: int


class UsageStat(BaseModel):
    runs: int
    failures: int
    failure_rate: float
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    runs_with_usage: int
    cost_usd: float
    runs_with_cost: int
    cost_sources: dict[str, int]


class Stats(BaseModel):
    """``genesis stats`` as data: failures by category, runs, tokens and cost
    by backend and by day (UTC), from the one run log."""

    model_config = ConfigDict(populate_by_name=True)

    log: str | None
    since_s: float | None
    from_: str | None = Field(alias="from")
    to: str
    backend: str | None
    runs: int
    failures: int
    cancelled: int
    not_started: int
    failure_rate: float
    by_category: dict[str, CategoryStat]
    top_blockers: list[Blocker]
    malformed_lines: int
    total: UsageStat
    by_backend: dict[str, UsageStat]
    by_day: dict[str, UsageStat]


class Check(BaseModel):
    backend: str = Field(description='a backend, or "*" for the machine')
    check: str
    status: Literal["ok", "warn", "FAIL"]
    detail: str
    fix: str


class Doctor(BaseModel):
    """``genesis doctor --json``."""

    checks: list[Check]
    can_run: dict[str, bool]


class QueueInfo(BaseModel):
    size: int
    queued: int
    running: int
    concurrency: int


class ServerInfo(BaseModel):
    version: str
    boot: str = Field(description="this start of the server (the prefix of its event ids)")
    root: str
    trusted_input: bool
    accepting: bool
    queue: QueueInfo
    identity: dict[str, str]
    answered: int = Field(description="runs answered since the start")
    sessions: int = Field(description="live sessions held now (opening, open, closing)")
    approvals_pending: int = Field(description="approvals waiting in the inbox now")


ApprovalState = Literal["pending", "answered", "expired", "withdrawn"]


class Approval(BaseModel):
    """One tool call a run asked about, in the approval inbox."""

    id: str
    state: ApprovalState = Field(
        description="pending; answered; expired (its deadline passed, or the server stopped "
        "while it waited: the default applied, the tool call did not run); withdrawn (its run "
        "ended first)"
    )
    run: str | None = Field(description="the request id of the run that asks")
    session: str | None
    turn: int | None
    call: dict[str, Any] = Field(
        description="the tool call: tool, kind, command, paths, input (redacted), cwd, backend, "
        "run_id, tool_call_id, reason"
    )
    asked: float | None = Field(description="epoch seconds")
    deadline: float | None = Field(description="epoch seconds: then the default applies")
    timeout_s: float | None
    default: Literal["deny"]
    answer: dict[str, Any] | None = Field(
        description="decision, allowed, always, message, end_turn, channel (api, cli, "
        "dashboard, mcp), by, via, at"
    )
    ended: float | None
    why: str | None = Field(description="why it ended unanswered")


class ApprovalList(BaseModel):
    approvals: list[Approval]


class Answer(BaseModel):
    """An answer to a pending approval; the first answer wins."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["allow", "allow_always", "deny"]
    message: str | None = Field(
        None, max_length=2000, description="deny: what the agent is told (its reason)"
    )
    end_turn: bool = Field(False, description="deny: also end the turn")
    by: str | None = Field(
        None, max_length=100, description="the caller's name, recorded with the answer"
    )


class SessionRequest(BaseModel):
    """A live session to open: a run's settings (a ``run-many`` line's, under
    the same rules) without a prompt or a run's one-shot fields (retry,
    request_key, isolation, verify); each turn brings its prompt."""

    model_config = ConfigDict(extra="allow")

    backend: str | None = Field(None, description="a backend with a two-way protocol")
    model: str | None = None
    timeout: float | None = Field(None, description="each turn's wall-clock limit, seconds")
    idle_timeout: float | None = None
    cwd: str | None = Field(None, description="working directory, under the server's root")
    name: str | None = None
    resume: str | None = Field(None, description="a CLI session id to continue")
    fork: bool | None = Field(None, description="with resume: a new session from its history")
    resume_at: str | None = Field(None, description="with fork: the turn id its history ends at")
    options: dict[str, Any] | None = Field(None, description='untrusted: {"max_turns": N} only')
    system_prompt: str | None = Field(None, description="replaces the CLI's system prompt")
    append_system_prompt: str | None = Field(None, description="added to the system prompt")
    approvals: Literal["inbox", "none"] | None = Field(
        None,
        description='"inbox" (the default): each tool call waits in the approval inbox; '
        '"none": the permission level decides',
    )
    approval_timeout: float | None = Field(None, gt=0, le=UNTRUSTED_APPROVAL_TIMEOUT)
    partial: bool | None = Field(
        None, description="text and thinking deltas (text_delta events) before each message"
    )
    keep_results: int | None = Field(
        None, ge=0, description="turns kept (default 100, at most the server's --session-history)"
    )


class Turn(BaseModel):
    """One turn of a session: running, finished or lost."""

    turn: int
    state: Literal["running", "finished", "lost"]
    prompt: str = Field(description="its first line, at most 200 characters")
    started: float | None
    finished: float | None
    status: int | None = Field(description="the turn's response status: 0 ok, 130 interrupted")
    error: str | None
    message: str | None = Field(description="the answer, at most 1000 characters")
    run_id: str | None
    result: dict[str, Any] | None = Field(
        None, description="the turn's response dict (GET /sessions/{id}/turns/{n})"
    )


SessionState = Literal["opening", "open", "closing", "closed", "failed", "lost"]


class SessionView(BaseModel):
    """A session of the server: held (opening, open, closing) or ended
    (closed, failed, lost: the server stopped while it was open)."""

    id: str
    state: SessionState
    backend: str
    model: str | None
    cwd: str
    name: str | None
    approvals: str
    approval_timeout_s: float
    keep_turns: int
    session_id: str | None = Field(description="the CLI's session id (what resume continues)")
    created: float
    ended: float | None
    turn_count: int
    turn_running: int | None
    can_steer: bool | None
    alive: bool
    resumed: int = Field(description="times it was resumed")
    why: str | None
    lost: dict[str, Any] | None
    turns: list[Turn] | None = Field(description="its last keep_turns turns, oldest first")


class SessionList(BaseModel):
    sessions: list[SessionView]


class TurnRequest(BaseModel):
    """A turn of a session: its prompt (text, or parts as a run's) and the
    options of ``send()`` for this turn.  ``model`` and ``permissions`` hold
    for the later turns too; ``output_schema`` is this turn's alone.  Unless
    the server was started with ``--trusted-input``, only the data of the one
    untrusted-input list may be set (``prompt``, ``timeout``, ``model``; no
    part naming a path).  A switch the session's backend cannot make answers
    the turn 64 in words; the session lives on."""

    model_config = ConfigDict(extra="forbid")

    prompt: (
        Annotated[str, Field(min_length=1, max_length=1_000_000)]
        | Annotated[list[str | dict[str, Any]], Field(min_length=1, max_length=1000)]
    ) = Field(
        description="text, or text parts with images and files, as a run's prompt "
        '({"type": "image", "data": base64}; one naming a "path" needs --trusted-input)'
    )
    timeout: float | None = Field(None, gt=0, le=86_400, description="this turn's limit, seconds")
    model: str | None = Field(
        None, max_length=200, description="the model of this turn and the next ones"
    )
    permissions: Permissions | None = Field(
        None, description="the level of this turn and the next ones; needs --trusted-input"
    )
    output_schema: dict[str, Any] | None = Field(
        None, description="the JSON schema of this turn's answer; needs --trusted-input"
    )


class SteerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=100_000)
