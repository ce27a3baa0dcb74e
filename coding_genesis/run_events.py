"""The events coding-genesis publishes around a run, and every event as one type.

Backends produce the events of :mod:`coding_genesis.events` (what the CLI
said); the agent adds its own: state changes (graph-node events), a run's
start and finish, attempts under the retry policy and budget warnings.  This
module also holds :data:`RunEvent` (the union of every concrete event),
:data:`EVENT_TYPES` and :func:`event_from_dict`, which reads any event back
from its ``to_dict()`` dict (an events.jsonl line).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Self, TypeAlias

from coding_genesis.events import (
    CliRetryEvent,
    CompactionEvent,
    ErrorEvent,
    Event,
    EventKind,
    McpServerEvent,
    PlanEvent,
    ResultEvent,
    SessionEvent,
    TextDeltaEvent,
    TextEvent,
    ThoughtDeltaEvent,
    ThoughtEvent,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
)

__all__ = [
    "EVENT_TYPES",
    "LIFECYCLE_KINDS",
    "ApprovalEvent",
    "AttemptEvent",
    "BudgetEvent",
    "QuestionEvent",
    "RunEvent",
    "RunFinishedEvent",
    "RunStartedEvent",
    "StateEvent",
    "event_from_dict",
]


def _extra(extra: Mapping[str, Any] | None, core: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in extra.items() if k not in core} if extra else {}


class _WithExtra(Event):
    """An event with a typed core and open-ended ``extra`` fields, merged into
    ``to_dict`` after the core (core names given in ``extra`` are dropped)."""

    __slots__ = ("extra",)

    extra: dict[str, Any]

    def _fill(self, out: dict[str, Any]) -> None:
        for name in self.fields:
            out[name] = getattr(self, name)
        out.update(self.extra)

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        core: dict[str, Any] = {name: payload.get(name) for name in cls.fields}
        extra = {k: v for k, v in payload.items() if k not in core and k not in _STAMPS}
        make: Callable[..., Self] = cls
        return make(**core, extra=extra)


class BudgetEvent(_WithExtra):
    """A budget (:class:`~coding_genesis.Budget`) passed a warning fraction or was
    exceeded.  ``to_dict`` fields: ``level`` (``warning`` or ``exceeded``),
    ``limit`` (``max_cost_usd``, ``max_tokens``, ``max_turns``,
    ``max_tool_calls``), ``message``, then ``extra`` (``used``, ``max``,
    ``fraction``, ``shared``)."""

    __slots__ = ("level", "limit", "message")
    kind = EventKind.BUDGET
    fields = ("level", "limit", "message")

    def __init__(
        self, level: str, limit: str, message: str, extra: Mapping[str, Any] | None = None
    ) -> None:
        self.level = level
        self.limit = limit
        self.message = message
        self.extra = _extra(extra, self.fields)
        self._stamp()


class StateEvent(_WithExtra):
    """The agent changed state (a graph-node event).  ``to_dict`` fields:
    ``state``, ``previous_state``, ``reason``, then ``extra`` (when the circuit
    breaker opens: ``category``, ``consecutive_failures``, ``cooldown_s``,
    ``retry_after_s``)."""

    __slots__ = ("previous_state", "reason", "state")
    kind = EventKind.STATE
    fields = ("state", "previous_state", "reason")

    def __init__(
        self,
        state: str,
        previous_state: str,
        reason: str,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.state = state
        self.previous_state = previous_state
        self.reason = reason
        self.extra = _extra(extra, self.fields)
        self._stamp()


class RunStartedEvent(Event):
    """The CLI process was launched.  ``to_dict`` fields: ``backend``,
    ``program`` (argv[0]), ``pid``, ``cwd``, ``timeout`` (seconds)."""

    __slots__ = ("backend", "cwd", "pid", "program", "timeout")
    kind = EventKind.RUN_STARTED
    fields = ("backend", "program", "pid", "cwd", "timeout")

    def __init__(self, backend: str, program: str, pid: int, cwd: str, timeout: float) -> None:
        self.backend = backend
        self.program = program
        self.pid = pid
        self.cwd = cwd
        self.timeout = timeout
        self._stamp()

    def _fill(self, out: dict[str, Any]) -> None:
        for name in self.fields:
            out[name] = getattr(self, name)

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        fields: dict[str, Any] = {name: payload.get(name) for name in cls.fields}
        return cls(**fields)


class RunFinishedEvent(Event):
    """The response is ready (or the run was cancelled).  ``to_dict`` fields:
    ``status`` then, for a cancelled run, ``cancelled`` (True); otherwise
    ``error`` (the response's error code, None on success) and ``category``
    (the failure category, None on success)."""

    __slots__ = ("cancelled", "category", "error", "status")
    kind = EventKind.RUN_FINISHED
    fields = ("status", "error", "category", "cancelled")

    def __init__(
        self,
        status: int,
        error: str | None = None,
        category: str | None = None,
        cancelled: bool = False,
    ) -> None:
        self.status = status
        self.error = error
        self.category = category
        self.cancelled = cancelled
        self._stamp()

    def _fill(self, out: dict[str, Any]) -> None:
        out["status"] = self.status
        if self.cancelled:
            out["cancelled"] = True
        else:
            out["error"] = self.error
            out["category"] = self.category

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        return cls(
            payload.get("status"),  # type: ignore[arg-type]
            payload.get("error"),
            payload.get("category"),
            bool(payload.get("cancelled")),
        )


class AttemptEvent(_WithExtra):
    """coding-genesis starts or ends an attempt under its retry policy.
    ``to_dict`` fields: ``phase`` (``started`` or ``finished``), ``attempt``
    (1, 2, ...), then ``extra``:

    - started: ``timeout``, ``resume_session``, ``continuation``;
    - finished with success: ``status``, ``action`` (``succeed``), ``session_id``;
    - finished with a failure: the ``retry_history`` entry (``category``,
      ``error``, ``status``, ``message``, ``at``, ``duration_s``,
      ``tool_calls``, ``cli_retries``, ``session_id``, ``timeout_s``,
      ``action`` (``retry``, ``fail``, ``escalate``), ``reason``, ``delay_s``,
      ``scheduled_at``, ``next_timeout_s``, ``resume_session`` and, when it
      gives up, ``suggested_actions``).
    """

    __slots__ = ("attempt", "phase")
    kind = EventKind.ATTEMPT
    fields = ("phase", "attempt")

    def __init__(self, phase: str, attempt: int, extra: Mapping[str, Any] | None = None) -> None:
        self.phase = phase
        self.attempt = attempt
        self.extra = _extra(extra, self.fields)
        self._stamp()

    @property
    def action(self) -> str | None:
        """``succeed``, ``retry``, ``fail`` or ``escalate`` (finished only)."""
        action = self.extra.get("action")
        return action if isinstance(action, str) else None


class ApprovalEvent(_WithExtra):
    """A tool call the CLI asked to make was decided (a live session, or a run
    with ``approver=``).  ``to_dict`` fields: ``tool``, ``allowed``,
    ``decision`` (an :class:`~coding_genesis.approval.ApprovalOption` value),
    ``source`` (``approver``, ``timeout``, ``error``, ``unsettled``,
    ``permissions``, ``unreadable``), then ``extra``: ``kind``, ``tool_call_id``, ``turn``,
    ``reason``, ``message``, ``elapsed_s``, ``error``, ``input`` (redacted)."""

    __slots__ = ("allowed", "decision", "source", "tool")
    kind = EventKind.APPROVAL
    fields = ("tool", "allowed", "decision", "source")

    def __init__(
        self,
        tool: str,
        allowed: bool,
        decision: str,
        source: str,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.tool = tool
        self.allowed = allowed
        self.decision = decision
        self.source = source
        self.extra = _extra(extra, self.fields)
        self._stamp()


class QuestionEvent(_WithExtra):
    """A question the CLI put to the user was answered or refused (a live
    session; published as :class:`ApprovalEvent` is).  ``to_dict`` fields:
    ``question`` (its text, redacted), ``answered``, ``source`` (``asker``,
    ``timeout``, ``error``, ``none``: nobody to ask), then ``extra``: ``turn``,
    ``options``, ``answer`` (redacted), ``elapsed_s``, ``error``."""

    __slots__ = ("answered", "question", "source")
    kind = EventKind.QUESTION
    fields = ("question", "answered", "source")

    def __init__(
        self,
        question: str,
        answered: bool,
        source: str,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.question = question
        self.answered = answered
        self.source = source
        self.extra = _extra(extra, self.fields)
        self._stamp()


RunEvent: TypeAlias = (
    TextEvent
    | ThoughtEvent
    | PlanEvent
    | ToolCallEvent
    | ToolResultEvent
    | SessionEvent
    | UsageEvent
    | ResultEvent
    | ErrorEvent
    | CliRetryEvent
    | StateEvent
    | RunStartedEvent
    | RunFinishedEvent
    | AttemptEvent
    | BudgetEvent
    | ApprovalEvent
    | TextDeltaEvent
    | ThoughtDeltaEvent
    | McpServerEvent
    | CompactionEvent
    | QuestionEvent
)
"""Any concrete event; ``kind`` (``to_dict()["type"]``) says which."""

#: Event class by ``to_dict()["type"]``: one per :class:`EventKind`.
EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind.value: cls
    for cls in (
        StateEvent,
        RunStartedEvent,
        RunFinishedEvent,
        SessionEvent,
        TextEvent,
        ThoughtEvent,
        PlanEvent,
        ToolCallEvent,
        ToolResultEvent,
        UsageEvent,
        ResultEvent,
        ErrorEvent,
        CliRetryEvent,
        AttemptEvent,
        BudgetEvent,
        ApprovalEvent,
        TextDeltaEvent,
        ThoughtDeltaEvent,
        McpServerEvent,
        CompactionEvent,
        QuestionEvent,
    )
}

#: The events the runner itself produces (not decoded from the CLI's stdout).
LIFECYCLE_KINDS: frozenset[EventKind] = frozenset(
    {EventKind.STATE, EventKind.RUN_STARTED, EventKind.RUN_FINISHED, EventKind.ATTEMPT}
)

_STAMPS = frozenset({"type", "node", "run_id", "seq", "ts", "timestamp"})


def event_from_dict(d: Mapping[str, Any]) -> Event:
    """The event a ``to_dict()`` dict (an events.jsonl line, a ``--events``
    line) describes, stamps included: ``event_from_dict(e.to_dict()) == e``.

    Raises ValueError for a ``type`` that is no :class:`EventKind` (events.jsonl
    holds nothing else).  Keys a class does not know are dropped, except for the
    open-ended ``StateEvent``/``AttemptEvent``, which keep them in ``extra``.
    """
    cls = EVENT_TYPES.get(str(d.get("type")))
    if cls is None:
        raise ValueError(f"unknown event type: {d.get('type')!r}")
    event = cls.from_payload({k: v for k, v in d.items() if k not in _STAMPS})
    event.agent = str(d.get("node") or "")
    run_id = d.get("run_id")
    event.run_id = str(run_id) if run_id is not None else None
    seq, ts = d.get("seq"), d.get("ts")
    event.seq = seq if isinstance(seq, int) else 0
    event.ts = float(ts) if isinstance(ts, int | float) else 0.0
    return event
