"""Normalized run events and the publish/subscribe bus behind them.

Backends turn each CLI line into zero or more typed events (one :class:`Event`
subclass per :class:`EventKind`; :data:`RunEvent` is their union); the agent
stamps them with its name, the run id, a sequence number and a time, and
publishes them together with its own state changes ("graph-node events").
Events stay light slotted objects on the hot path; ``to_dict`` builds the
plain dict only when someone asks.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import enum
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeAlias, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

if TYPE_CHECKING:
    from coding_genesis._util.redact import Redactor

__all__ = [
    "EVENT_TYPES",
    "AttemptEvent",
    "BudgetEvent",
    "CliRetryEvent",
    "ErrorEvent",
    "Event",
    "EventBus",
    "EventKind",
    "EventStream",
    "ResultEvent",
    "RunEvent",
    "RunFinishedEvent",
    "RunStartedEvent",
    "SessionEvent",
    "StateEvent",
    "Subscription",
    "TextEvent",
    "ToolCallEvent",
    "ToolResultEvent",
    "UsageEvent",
    "by_type",
    "event_from_dict",
]

log = logging.getLogger("coding_genesis.events")


_V = TypeVar("_V")


def by_type(mapping: Mapping[type, _V], cls: type) -> _V | None:
    """``mapping``'s entry for ``cls`` or for its nearest base class: a
    subclass of an event type is handled as that type."""
    for base in cls.__mro__:
        if base in mapping:
            return mapping[base]
    return None


class EventKind(enum.StrEnum):
    """What an event says.  Unknown CLI lines produce no event at all."""

    STATE = "state"  # agent state change (graph-node event)
    RUN_STARTED = "run_started"  # the subprocess was launched
    RUN_FINISHED = "run_finished"  # the final response is ready
    SESSION = "session"  # session / thread id is known
    TEXT = "text"  # assistant text
    TOOL_CALL = "tool_call"  # the CLI invoked a tool
    TOOL_RESULT = "tool_result"  # a tool finished
    USAGE = "usage"  # token usage / cost
    RESULT = "result"  # the CLI's terminal event
    ERROR = "error"  # an error line (often not fatal: the CLI retries)
    CLI_RETRY = "cli_retry"  # the CLI retries an API call by itself
    ATTEMPT = "attempt"  # coding-genesis starts another attempt (retry policy)
    BUDGET = "budget"  # a budget passed a warning fraction, or was exceeded


class _Unset:
    """Default of a field some producers leave out: the field reads ``None``
    (or an empty list) and ``to_dict`` omits it, as the producer's dict did."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"

    def __reduce__(self) -> str:
        return "_UNSET"


#: Typed ``Any`` so it can be the default of a parameter of any type.
_UNSET: Any = _Unset()


class Event:
    """Base of the typed events: one subclass per :class:`EventKind`.

    Every event carries what the bus stamps on it when it is published:
    ``agent`` (the agent's name, ``node`` in ``to_dict``), ``run_id``, ``seq``
    (1, 2, ... per agent) and ``ts`` (``time.time()``).  The class attribute
    ``kind`` says which event it is and discriminates :data:`RunEvent`.

    ``to_dict()`` gives ``type`` (the kind), ``node``, ``run_id``, ``seq``,
    ``ts``, ``timestamp`` (ISO 8601, UTC, milliseconds; ``""`` before
    publishing) and then the kind's own fields, listed in each class's
    docstring.  Fields marked "(omitted when unset)" are only there when the
    producer gave them (claude and codex do not report the same things).
    Events are light slotted objects (the hot path builds ~100k per run) and
    pickle as they are.
    """

    __slots__ = ("agent", "run_id", "seq", "ts")

    kind: ClassVar[EventKind]
    #: ``kind`` as a plain str (reading an enum member's value is slow).
    _type: ClassVar[str]
    #: The kind's field names, in ``to_dict`` order.
    fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            cls._type = str(cls.kind.value)

    agent: str
    run_id: str | None
    seq: int
    ts: float

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``type``, ``node``, ``run_id``, ``seq``, ``ts``,
        ``timestamp`` (ISO 8601, UTC) and the kind's own fields."""
        out: dict[str, Any] = {
            "type": self._type,
            "node": self.agent,
            "run_id": self.run_id,
            "seq": self.seq,
            "ts": self.ts,
            "timestamp": _iso(self.ts),
        }
        self._fill(out)
        return out

    def payload(self) -> dict[str, Any]:
        """The kind's own fields only (``to_dict`` without the stamps)."""
        out: dict[str, Any] = {}
        self._fill(out)
        return out

    def _fill(self, out: dict[str, Any]) -> None:
        raise NotImplementedError

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        """An unstamped event of this class from its fields (the inverse of
        :meth:`payload`); a field missing from ``payload`` stays unset."""
        raise NotImplementedError

    def redacted(self, redactor: Redactor) -> Self:
        """This event with secrets masked in its fields: ``self`` when none
        holds a secret (the common case), else a redacted copy with the same
        stamps."""
        if not redactor.active:
            return self
        payload = self.payload()
        clean = redactor.deep(payload)
        if clean is payload:
            return self
        return self._copy_stamps(self.from_payload(clean))

    def _copy_stamps(self, copy: Self) -> Self:
        copy.agent, copy.run_id, copy.seq, copy.ts = self.agent, self.run_id, self.seq, self.ts
        return copy

    def _stamp(self) -> None:
        self.agent = ""
        self.run_id = None
        self.seq = 0
        self.ts = 0.0

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Event)
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.payload().items())
        return f"{type(self).__name__}({fields}, run_id={self.run_id!r}, seq={self.seq})"


def _extra(extra: Mapping[str, Any] | None, core: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in extra.items() if k not in core} if extra else {}


def _absent(**values: object) -> tuple[str, ...]:
    return tuple(name for name, value in values.items() if value is _UNSET)


class TextEvent(Event):
    """Assistant text.  ``to_dict`` fields: ``text``."""

    __slots__ = ("text",)
    kind = EventKind.TEXT
    fields = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text
        self.agent = ""
        self.run_id = None
        self.seq = 0
        self.ts = 0.0

    def _fill(self, out: dict[str, Any]) -> None:
        out["text"] = self.text

    def redacted(self, redactor: Redactor) -> Self:
        text = redactor.text(self.text)
        return self if text is self.text else self._copy_stamps(type(self)(text))

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        return cls(str(payload.get("text") or ""))


class ToolCallEvent(Event):
    """The CLI invoked a tool.  ``to_dict`` fields: ``id`` (the call's id,
    matched by the result), ``name`` (tool name; codex: ``command_execution``,
    ``file_change``, ``mcp:server/tool``...), ``input`` (the tool's arguments as
    the CLI gave them), ``files`` (paths the call modifies; omitted when
    empty)."""

    __slots__ = ("files", "id", "input", "name")
    kind = EventKind.TOOL_CALL
    fields = ("id", "name", "input", "files")

    def __init__(self, id: str, name: str, input: Any, files: Sequence[str] = ()) -> None:
        self.id = id
        self.name = name
        self.input = input
        self.files = files
        self.agent = ""
        self.run_id = None
        self.seq = 0
        self.ts = 0.0

    def _fill(self, out: dict[str, Any]) -> None:
        out["id"] = self.id
        out["name"] = self.name
        out["input"] = self.input
        if self.files:
            out["files"] = list(self.files)

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        files = payload.get("files")
        return cls(
            str(payload.get("id") or ""),
            str(payload.get("name") or "unknown"),
            payload.get("input"),
            [str(f) for f in files] if isinstance(files, list) else (),
        )


class ToolResultEvent(Event):
    """A tool call finished.  ``to_dict`` fields: ``id`` (the call's id),
    ``name``, ``is_error``, ``exit_code`` (codex only; omitted when unset),
    ``output`` (a bounded preview of the output), ``files`` (paths the call
    modified; omitted when empty)."""

    __slots__ = ("_no_exit_code", "exit_code", "files", "id", "is_error", "name", "output")
    kind = EventKind.TOOL_RESULT
    fields = ("id", "name", "is_error", "exit_code", "output", "files")

    def __init__(
        self,
        id: str,
        name: str,
        is_error: bool,
        output: str,
        exit_code: int | None = _UNSET,
        files: Sequence[str] = (),
    ) -> None:
        self.id = id
        self.name = name
        self.is_error = is_error
        self.output = output
        self._no_exit_code = exit_code is _UNSET
        self.exit_code: int | None = None if exit_code is _UNSET else exit_code
        self.files = files
        self.agent = ""
        self.run_id = None
        self.seq = 0
        self.ts = 0.0

    def _fill(self, out: dict[str, Any]) -> None:
        out["id"] = self.id
        out["name"] = self.name
        out["is_error"] = self.is_error
        if not self._no_exit_code:
            out["exit_code"] = self.exit_code
        out["output"] = self.output
        if self.files:
            out["files"] = list(self.files)

    def redacted(self, redactor: Redactor) -> Self:
        text = redactor.text
        output, name, id = self.output, self.name, self.id
        if text(output) is output and text(name) is name and text(id) is id and not self.files:
            return self  # the common case, without building the payload
        return super().redacted(redactor)

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        files = payload.get("files")
        return cls(
            str(payload.get("id") or ""),
            str(payload.get("name") or "unknown"),
            bool(payload.get("is_error")),
            str(payload.get("output") or ""),
            payload.get("exit_code", _UNSET),
            [str(f) for f in files] if isinstance(files, list) else (),
        )


class _Optional(Event):
    """An event some of whose fields a producer may leave out."""

    __slots__ = ("_absent",)

    _absent: tuple[str, ...]

    def _fill(self, out: dict[str, Any]) -> None:
        absent = self._absent
        for name in self.fields:
            if name not in absent:
                out[name] = getattr(self, name)

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        return cls(**{name: payload.get(name, _UNSET) for name in cls.fields})


class SessionEvent(_Optional):
    """The session (codex: thread) is known.  ``to_dict`` fields:
    ``session_id``, ``model`` and ``cwd`` (claude only; omitted when unset)."""

    __slots__ = ("cwd", "model", "session_id")
    kind = EventKind.SESSION
    fields = ("session_id", "model", "cwd")

    def __init__(
        self, session_id: str | None, model: str | None = _UNSET, cwd: str | None = _UNSET
    ) -> None:
        self._absent = _absent(model=model, cwd=cwd) if model is _UNSET or cwd is _UNSET else ()
        self.session_id = session_id
        self.model: str | None = None if model is _UNSET else model
        self.cwd: str | None = None if cwd is _UNSET else cwd
        self._stamp()


class UsageEvent(_Optional):
    """Token usage and cost.  ``to_dict`` fields: ``usage`` (the CLI's usage
    dict, or None), then, omitted when unset: ``cost_usd`` (claude only),
    ``model`` and ``message_id`` (claude's per-message usage: the same
    message may report its usage on several lines), ``by_model`` (claude's
    ``modelUsage``: per-model tokens and cost of the run), ``messages`` (how
    many of the CLI's messages ``usage`` sums: claude's per-message usage,
    folded by the translator when nothing heard it live; then ``model`` is
    theirs and ``usage`` has claude's four token counts)."""

    __slots__ = ("by_model", "cost_usd", "message_id", "messages", "model", "usage")
    kind = EventKind.USAGE
    fields = ("usage", "cost_usd", "model", "message_id", "by_model", "messages")

    def __init__(
        self,
        usage: dict[str, Any] | None,
        cost_usd: float | None = _UNSET,
        model: str | None = _UNSET,
        message_id: str | None = _UNSET,
        by_model: dict[str, Any] | None = _UNSET,
        messages: int | None = _UNSET,
    ) -> None:
        self._absent = _absent(
            cost_usd=cost_usd,
            model=model,
            message_id=message_id,
            by_model=by_model,
            messages=messages,
        )
        self.usage = usage
        self.cost_usd: float | None = None if cost_usd is _UNSET else cost_usd
        self.model: str | None = None if model is _UNSET else model
        self.message_id: str | None = None if message_id is _UNSET else message_id
        self.by_model: dict[str, Any] | None = None if by_model is _UNSET else by_model
        self.messages: int | None = None if messages is _UNSET else messages
        self._stamp()

    @classmethod
    def of_message(cls, usage: dict[str, Any], model: str | None, message_id: str | None) -> Self:
        """``UsageEvent(usage, model=model, message_id=message_id)``, built
        without the keyword checks: claude's translator makes one per message
        on the hot path."""
        event = cls.__new__(cls)
        event._absent = _MESSAGE_ABSENT
        event.usage = usage
        event.cost_usd = None
        event.model = model
        event.message_id = message_id
        event.by_model = None
        event.messages = None
        event.agent = ""
        event.run_id = None
        event.seq = 0
        event.ts = 0.0
        return event


#: What a per-message usage event leaves unset (see UsageEvent.of_message).
_MESSAGE_ABSENT = ("cost_usd", "by_model", "messages")


class ResultEvent(_Optional):
    """The CLI's terminal event: the run's answer.  ``to_dict`` fields:
    ``is_error``, ``subtype`` (claude ``success``/``error_max_turns``..., codex
    ``turn.completed``/``turn.failed``/``task_complete``), ``text`` (the final
    answer or error text), then, omitted when unset (codex gives few of them):
    ``session_id``, ``num_turns``, ``duration_ms``, ``api_error_status`` (HTTP
    status of an API error), ``stop_reason``, ``terminal_reason``,
    ``permission_denials`` (claude's list of denied tool calls; ``[]`` when
    unset), ``errors`` (the CLI's error messages; ``[]`` when unset)."""

    __slots__ = (
        "api_error_status",
        "duration_ms",
        "errors",
        "is_error",
        "num_turns",
        "permission_denials",
        "session_id",
        "stop_reason",
        "subtype",
        "terminal_reason",
        "text",
    )
    kind = EventKind.RESULT
    fields = (
        "is_error",
        "subtype",
        "text",
        "session_id",
        "num_turns",
        "duration_ms",
        "api_error_status",
        "stop_reason",
        "terminal_reason",
        "permission_denials",
        "errors",
    )

    def __init__(
        self,
        is_error: bool,
        subtype: str | None,
        text: str | None,
        session_id: str | None = _UNSET,
        num_turns: int | None = _UNSET,
        duration_ms: float | None = _UNSET,
        api_error_status: int | None = _UNSET,
        stop_reason: str | None = _UNSET,
        terminal_reason: str | None = _UNSET,
        permission_denials: list[Any] = _UNSET,
        errors: list[Any] = _UNSET,
    ) -> None:
        self._absent = _absent(
            session_id=session_id,
            num_turns=num_turns,
            duration_ms=duration_ms,
            api_error_status=api_error_status,
            stop_reason=stop_reason,
            terminal_reason=terminal_reason,
            permission_denials=permission_denials,
            errors=errors,
        )
        self.is_error = is_error
        self.subtype = subtype
        self.text = text
        self.session_id: str | None = None if session_id is _UNSET else session_id
        self.num_turns: int | None = None if num_turns is _UNSET else num_turns
        self.duration_ms: float | None = None if duration_ms is _UNSET else duration_ms
        self.api_error_status: int | None = None if api_error_status is _UNSET else api_error_status
        self.stop_reason: str | None = None if stop_reason is _UNSET else stop_reason
        self.terminal_reason: str | None = None if terminal_reason is _UNSET else terminal_reason
        self.permission_denials: list[Any] = (
            [] if permission_denials is _UNSET else permission_denials
        )
        self.errors: list[Any] = [] if errors is _UNSET else errors
        self._stamp()

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        kw = {name: payload.get(name, _UNSET) for name in cls.fields}
        kw["is_error"] = bool(payload.get("is_error"))
        kw["subtype"] = payload.get("subtype")
        kw["text"] = payload.get("text")
        return cls(**kw)


class ErrorEvent(Event):
    """An error line of the CLI (usually not fatal: the CLI retries).
    ``to_dict`` fields: ``message``, ``fatal``."""

    __slots__ = ("fatal", "message")
    kind = EventKind.ERROR
    fields = ("message", "fatal")

    def __init__(self, message: str, fatal: bool = False) -> None:
        self.message = message
        self.fatal = fatal
        self._stamp()

    def _fill(self, out: dict[str, Any]) -> None:
        out["message"] = self.message
        out["fatal"] = self.fatal

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        return cls(str(payload.get("message") or ""), bool(payload.get("fatal")))


class CliRetryEvent(_Optional):
    """The CLI retries an API call by itself.  ``to_dict`` fields:
    ``attempt``, ``max_retries``, ``retry_delay_ms`` (claude only; omitted when
    unset), ``error_status`` (HTTP status, if known), ``error`` (the CLI's
    error text or code)."""

    __slots__ = ("attempt", "error", "error_status", "max_retries", "retry_delay_ms")
    kind = EventKind.CLI_RETRY
    fields = ("attempt", "max_retries", "retry_delay_ms", "error_status", "error")

    def __init__(
        self,
        attempt: int | None,
        max_retries: int | None,
        error_status: int | None,
        error: str | None,
        retry_delay_ms: float | None = _UNSET,
    ) -> None:
        self._absent = ("retry_delay_ms",) if retry_delay_ms is _UNSET else ()
        self.attempt = attempt
        self.max_retries = max_retries
        self.retry_delay_ms: float | None = None if retry_delay_ms is _UNSET else retry_delay_ms
        self.error_status = error_status
        self.error = error
        self._stamp()

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        return cls(
            payload.get("attempt"),
            payload.get("max_retries"),
            payload.get("error_status"),
            payload.get("error"),
            payload.get("retry_delay_ms", _UNSET),
        )


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
    """A budget (coding_genesis._observers.budget) passed a warning fraction or was
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


RunEvent: TypeAlias = (
    TextEvent
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
        ToolCallEvent,
        ToolResultEvent,
        UsageEvent,
        ResultEvent,
        ErrorEvent,
        CliRetryEvent,
        AttemptEvent,
        BudgetEvent,
    )
}

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


#: (whole second, its ISO text): events come many per second, and building a
#: datetime per event was most of ``to_dict``'s cost.
_iso_second: tuple[int, str] = (-1, "")


def _iso(ts: float) -> str:
    global _iso_second
    if not math.isfinite(ts) or ts <= 0:
        return ""
    second = int(ts)
    # Round to microseconds first, as datetime does, then truncate to milliseconds.
    micros = round((ts - second) * 1_000_000)
    if micros >= 1_000_000:
        second, micros = second + 1, micros - 1_000_000
    cached = _iso_second
    if cached[0] != second:
        text = _dt.datetime.fromtimestamp(second, _dt.UTC).isoformat(timespec="seconds")
        cached = _iso_second = (second, text[:-6])  # without "+00:00"
    return f"{cached[1]}.{micros // 1000:03d}+00:00"


Callback = Callable[[Event], object]


class Subscription:
    """Handle returned by :meth:`EventBus.subscribe`; call it (or use it as a
    context manager) to unsubscribe."""

    __slots__ = ("_bus", "_callback")

    def __init__(self, bus: EventBus, callback: Callback) -> None:
        self._bus = bus
        self._callback = callback

    def __call__(self) -> None:
        self._bus._remove_callback(self._callback)

    unsubscribe = __call__

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self()


class EventStream:
    """An async iterator over published events (bounded; drops when full).

    ``async with agent.events() as stream: async for event in stream: ...``
    """

    def __init__(self, bus: EventBus, max_buffer: int) -> None:
        self._bus = bus
        send, receive = anyio.create_memory_object_stream[Event](max_buffer)
        self._send: MemoryObjectSendStream[Event] = send
        self._receive: MemoryObjectReceiveStream[Event] = receive
        #: Events dropped because the consumer did not keep up.
        self.dropped = 0

    def _offer(self, event: Event) -> None:
        try:
            self._send.send_nowait(event)
        except anyio.WouldBlock:
            self.dropped += 1
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._bus._remove_stream(self)

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> Event:
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError) as exc:
            raise StopAsyncIteration from exc

    def close(self) -> None:
        """Stop receiving; iteration ends once the buffer is drained."""
        self._bus._remove_stream(self)
        self._send.close()

    async def aclose(self) -> None:
        self.close()
        self._receive.close()

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class EventBus:
    """Stamps and fans out events.  A failing subscriber is logged and never
    breaks a run."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._callbacks: list[Callback] = []
        self._streams: list[EventStream] = []
        #: Subscribers that hear only some kinds (``subscribe(..., kinds=...)``).
        self._some: list[tuple[Callback, frozenset[EventKind]]] = []
        self._some_kinds: frozenset[EventKind] = frozenset()
        self._seq = 0
        #: Bumped whenever who listens changes (producers cache ``wants``).
        self.version = 0

    @property
    def has_listeners(self) -> bool:
        return bool(self._callbacks or self._streams or self._some)

    def wants(self, kind: EventKind) -> bool:
        """Whether a subscriber would hear an event of this kind (a producer
        skips building and redacting the events nobody hears)."""
        return bool(self._callbacks or self._streams) or kind in self._some_kinds

    def subscribe(
        self, callback: Callback, *, kinds: Iterable[EventKind] | None = None
    ) -> Subscription:
        """``callback`` hears every published event, or only those of ``kinds``."""
        self.version += 1
        if kinds is None:
            self._callbacks.append(callback)
        else:
            self._some.append((callback, frozenset(kinds)))
            self._some_kinds = self._some_kinds.union(kinds)
        return Subscription(self, callback)

    def stream(self, max_buffer: int = 10_000) -> EventStream:
        stream = EventStream(self, max_buffer)
        self._streams.append(stream)
        self.version += 1
        return stream

    def close_streams(self) -> None:
        for stream in list(self._streams):
            stream.close()

    def publish(self, event: Event, run_id: str | None) -> Event:
        self._seq += 1
        event.agent = self.name
        event.run_id = run_id
        event.seq = self._seq
        event.ts = time.time()
        for callback in tuple(self._callbacks):
            try:
                callback(event)
            except Exception:
                log.exception(
                    "event subscriber %r failed; event %s dropped for it", callback, event.kind
                )
        for stream in tuple(self._streams):
            stream._offer(event)
        if self._some:
            kind = event.kind
            for callback, kinds in tuple(self._some):
                if kind in kinds:
                    try:
                        callback(event)
                    except Exception:
                        log.exception(
                            "event subscriber %r failed; event %s dropped for it", callback, kind
                        )
        return event

    def _remove_callback(self, callback: Callback) -> None:
        self.version += 1
        with contextlib.suppress(ValueError):
            self._callbacks.remove(callback)
        self._some = [(c, k) for c, k in self._some if c != callback]
        self._some_kinds = frozenset().union(*(k for _, k in self._some))

    def _remove_stream(self, stream: EventStream) -> None:
        self.version += 1
        with contextlib.suppress(ValueError):
            self._streams.remove(stream)
