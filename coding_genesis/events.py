"""The normalized events of a run: what the CLI said, typed.

Backends turn each CLI line into zero or more typed events (one :class:`Event`
subclass per :class:`EventKind`); the agent stamps them with its name, the run
id, a sequence number and a time when it publishes them on its event bus
(``agent.subscribe()``, ``agent.events()``), together with its own events (state
changes, a run's start and finish, attempts, budgets: see
:mod:`coding_genesis.run_events`, which also holds the union of every event
and reading one back from its dict).  Events stay light slotted objects on the
hot path; ``to_dict`` builds the plain dict only when someone asks.  A
backend's :class:`Translator` makes them.  Only the standard library is
imported (no anyio, no pydantic).
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Self

from coding_genesis._util.timestamps import iso_ms
from coding_genesis._util.unset import UNSET as _UNSET

# At run time too: the conformance kit reads the Translator's annotations.
from coding_genesis.options import MessageUsage
from coding_genesis.usage import RunningTotals, Tokens

if TYPE_CHECKING:
    from coding_genesis._util.redact import Redactor

__all__ = [
    "CliRetryEvent",
    "CompactionEvent",
    "ErrorEvent",
    "Event",
    "EventKind",
    "McpServerEvent",
    "PlanEvent",
    "ResultEvent",
    "SessionEvent",
    "TextDeltaEvent",
    "TextEvent",
    "ThoughtDeltaEvent",
    "ThoughtEvent",
    "ToolCallEvent",
    "ToolResultEvent",
    "Translator",
    "UsageEvent",
]


class EventKind(enum.StrEnum):
    """What an event says.  Unknown CLI lines produce no event at all."""

    STATE = "state"  # agent state change (graph-node event)
    RUN_STARTED = "run_started"  # the subprocess was launched
    RUN_FINISHED = "run_finished"  # the final response is ready
    SESSION = "session"  # session / thread id is known
    TEXT = "text"  # assistant text
    THOUGHT = "thought"  # the model's reasoning, as the CLI shows it
    PLAN = "plan"  # the agent's plan, as it stands
    TOOL_CALL = "tool_call"  # the CLI invoked a tool
    TOOL_RESULT = "tool_result"  # a tool finished
    USAGE = "usage"  # token usage / cost
    RESULT = "result"  # the CLI's terminal event
    ERROR = "error"  # an error line (often not fatal: the CLI retries)
    CLI_RETRY = "cli_retry"  # the CLI retries an API call by itself
    ATTEMPT = "attempt"  # coding-genesis starts another attempt (retry policy)
    BUDGET = "budget"  # a budget passed a warning fraction, or was exceeded
    APPROVAL = "approval"  # a tool call the CLI asked about was allowed or refused
    TEXT_DELTA = "text_delta"  # a piece of assistant text as it is written (stream(partial=True))
    THOUGHT_DELTA = "thought_delta"  # a piece of the model's reasoning as it is written
    MCP_SERVER = "mcp_server"  # an MCP server of the session started, failed or changed
    COMPACTION = "compaction"  # the CLI compacted its context
    QUESTION = "question"  # a question of the CLI to the user was answered or refused


class Event:
    """Base of the typed events: one subclass per :class:`EventKind`.

    Every event carries what the bus stamps on it when it is published:
    ``agent`` (the agent's name, ``node`` in ``to_dict``), ``run_id``, ``seq``
    (1, 2, ... per agent) and ``ts`` (``time.time()``).  The class attribute
    ``kind`` says which event it is and discriminates
    :data:`~coding_genesis.run_events.RunEvent`.

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
            "timestamp": iso_ms(self.ts),
        }
        self._fill(out)
        return out

    def payload(self) -> dict[str, Any]:
        """The kind's own fields only (``to_dict`` without the stamps)."""
        out: dict[str, Any] = {}
        self._fill(out)
        return out

    def _fill(self, out: dict[str, Any]) -> None:
        for name in self.fields:
            out[name] = getattr(self, name)

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


def _absent(**values: object) -> tuple[str, ...]:
    return tuple(name for name, value in values.items() if value is _UNSET)


class _Words(Event):
    """Words the model wrote: its answer's, its reasoning's."""

    __slots__ = ("text",)
    fields: ClassVar[tuple[str, ...]] = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text
        self.agent = ""
        self.run_id = None
        self.seq = 0
        self.ts = 0.0

    def _fill(self, out: dict[str, Any]) -> None:
        # The commonest event: a third faster than the generic loop over ``fields``.
        out["text"] = self.text

    def redacted(self, redactor: Redactor) -> Self:
        text = redactor.text(self.text)
        return self if text is self.text else self._copy_stamps(type(self)(text))

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        return cls(str(payload.get("text") or ""))


class TextEvent(_Words):
    """Assistant text.  ``to_dict`` fields: ``text``."""

    __slots__ = ()
    kind = EventKind.TEXT


class ThoughtEvent(_Words):
    """The model's reasoning (ACP ``agent_thought_chunk``), no part of the answer.
    ``to_dict`` fields: ``text``."""

    __slots__ = ()
    kind = EventKind.THOUGHT


class _Delta(_Words):
    """A piece of words as the CLI writes them, before its message is whole
    (the whole message still comes as its own event, which is what counts:
    a run's answer never comes from pieces)."""

    __slots__ = ("message_id",)
    fields = ("text", "message_id")

    def __init__(self, text: str, message_id: str | None = None) -> None:
        super().__init__(text)
        #: The message the piece belongs to, when the CLI names it.
        self.message_id = message_id

    def _fill(self, out: dict[str, Any]) -> None:
        out["text"] = self.text
        out["message_id"] = self.message_id

    def redacted(self, redactor: Redactor) -> Self:
        text = redactor.text(self.text)
        if text is self.text:
            return self
        return self._copy_stamps(type(self)(text, self.message_id))

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        message = payload.get("message_id")
        return cls(str(payload.get("text") or ""), message if isinstance(message, str) else None)


class TextDeltaEvent(_Delta):
    """A piece of assistant text as it is written (``stream(partial=True)``).
    ``to_dict`` fields: ``text``, ``message_id``."""

    __slots__ = ()
    kind = EventKind.TEXT_DELTA


class ThoughtDeltaEvent(_Delta):
    """A piece of the model's reasoning as it is written.  ``to_dict`` fields:
    ``text``, ``message_id``."""

    __slots__ = ()
    kind = EventKind.THOUGHT_DELTA


class PlanEvent(Event):
    """The agent's plan as it stands (each ACP ``plan`` update replaces it).
    ``to_dict`` fields: ``entries``, each ``content``, ``priority`` (high,
    medium, low), ``status`` (pending, in_progress, completed)."""

    __slots__ = ("entries",)
    kind = EventKind.PLAN
    fields = ("entries",)

    def __init__(self, entries: Sequence[Mapping[str, Any]]) -> None:
        self.entries = [dict(entry) for entry in entries]
        self._stamp()

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        given = payload.get("entries")
        return cls([e for e in given if isinstance(e, Mapping)] if isinstance(given, list) else [])


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
    unset), ``errors`` (the CLI's error messages; ``[]`` when unset),
    ``turn_id`` (the CLI's id of the turn: a fork resumes at it)."""

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
        "turn_id",
    )
    __slots__ = fields

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
        turn_id: str | None = _UNSET,
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
            turn_id=turn_id,
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
        self.turn_id: str | None = None if turn_id is _UNSET else turn_id
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


class _Plain(Event):
    """An event whose every field is its constructor's keyword of that name."""

    __slots__ = ()

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        return cls(**{name: payload.get(name) for name in cls.fields})


class McpServerEvent(_Plain):
    """An MCP server of the session as the CLI reports it.  ``to_dict``
    fields: ``name``, ``status`` (the CLI's word: ``connected``, ``failed``,
    ``starting``...), ``error`` (why it failed, or None)."""

    __slots__ = ("error", "name", "status")
    kind = EventKind.MCP_SERVER
    fields = ("name", "status", "error")

    def __init__(self, name: str, status: str, error: str | None = None) -> None:
        self.name = name
        self.status = status
        self.error = error
        self._stamp()


class CompactionEvent(_Plain):
    """The CLI compacted its context.  ``to_dict`` fields: ``trigger``
    (``manual``: asked for; ``auto``: the CLI's own), ``tokens_before`` (the
    context's tokens before, or None)."""

    __slots__ = ("tokens_before", "trigger")
    kind = EventKind.COMPACTION
    fields = ("trigger", "tokens_before")

    def __init__(self, trigger: str, tokens_before: int | None = None) -> None:
        self.trigger = trigger
        self.tokens_before = tokens_before
        self._stamp()


class Translator(ABC):
    """Per-run, stateful line translator (e.g. remembers tool ids).

    ``message_usage`` (the core sets it before the run): the usage a CLI reports
    mid-stream (claude: per message) as a usage event each (``"live"``, the
    default: budgets, usage subscribers), kept and summed until :meth:`flush`
    (``"folded"``: what metering needs) or dropped (``"off"``).  The CLI's final
    usage is translated whatever the mode; one with no mid-stream usage ignores it.

    ``totals`` (the core sets it for a live run; None for a replay): where a
    translator of a CLI that reports its *session's* running total makes the
    run's share of it (:class:`~coding_genesis.usage.RunningTotals`): its usage
    events then carry that share, never the running total.
    """

    message_usage: MessageUsage = "live"
    totals: RunningTotals | None = None
    #: The name its running totals are kept under (None: the CLI reports none).
    running_cli: str | None = None

    def recorded_total(
        self, cost: float, models: Mapping[str, tuple[Tokens, float]]
    ) -> Mapping[str, float] | None:
        """A session's running total as our records know it (the cost, and
        per model the tokens and cost its runs' shares add up to), in the
        counters :attr:`totals` keeps for this CLI: what a resumed session's
        first run is the share of.  None: the CLI reports no running totals."""
        return None

    @abstractmethod
    def translate(self, obj: dict[str, Any]) -> Sequence[Event]:
        """Normalized events for one parsed stdout object.  Unknown types give ()."""

    def flush(self) -> Sequence[Event]:
        """The events held back until the end of the stream (called once, at EOF,
        whatever ended the stream); none by default."""
        return ()
