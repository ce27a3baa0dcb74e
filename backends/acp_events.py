"""The events of an ACP agent's turn (:mod:`.acp`): its ``session/update``
notifications and its prompt's answer, translated (text chunks, tool calls and
their results, usage in each agent's shape, the result by ``stopReason``), and
what a permission request asks (:func:`acp_request`).  The protocol's words
on its errors live here too, read by both."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coding_genesis.approval import ApprovalRequest, ToolKind
from coding_genesis.backend import Translator
from coding_genesis.events import (
    Event,
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
from coding_genesis.hooks import HookEvent, HookInput
from coding_genesis.usage import Tokens

from ._common import as_int, preview

__all__ = [
    "LATE",
    "RUNNING_CLI",
    "AcpTranslator",
    "Call",
    "acp_request",
    "error_status",
    "error_words",
    "tool_hook",
    "track",
]

#: ACP's tool kinds → ours (version 1's others, ``think``, ``fetch``,
#: ``switch_mode``, ``other``, are ``other``; a kind it does not name is a
#: shape we cannot read).
_KINDS: Mapping[str, ToolKind] = {
    "execute": "command",
    "edit": "write",
    "delete": "write",
    "move": "write",
    "read": "read",
    "search": "read",
    "think": "other",
    "fetch": "other",
    "switch_mode": "other",
    "other": "other",
}

#: The input fields that name a move's two ends, as (source, destination).
_MOVE_FIELDS = (
    ("source", "destination"),
    ("from", "to"),
    ("old_path", "new_path"),
    ("oldPath", "newPath"),
)

#: The member the protocol adds to an update the agent sent while no prompt
#: of ours was running (see :mod:`.acp`): a turn of the agent's own, over
#: with it.  Never written by an agent (the protocol sets it on a copy).
LATE = "_genesis_late"

#: The name :class:`~coding_genesis.usage.RunningTotals` keeps an ACP
#: session's running cost under (``usage_update``'s cost is the session's).
RUNNING_CLI = "acp"

#: The input fields that name a file a call touches (a move's both ends among them).
_PATH_FIELDS = (
    "file_path",
    "filePath",
    "path",
    "abs_path",
    "notebook_path",
    "source",
    "destination",
    "from",
    "to",
    "old_path",
    "new_path",
    "oldPath",
    "newPath",
)

#: An HTTP status an error's words name: ``401 Incorrect API key``, ``status 429``,
#: ``"code":401``, ``API Error: 429``.
_STATUS = re.compile(r'^\s*([45]\d\d)\b|(?:status|"code"|API Error)\D{0,3}([45]\d\d)\b', re.I)

#: What a fault or an error quotes of the agent's words, at most.
_SAID = 500


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _said(value: object) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= _SAID else text[:_SAID] + "…"


def error_words(error: object) -> str:
    """The words of a JSON-RPC error, its details included, whatever its shape."""
    if not isinstance(error, Mapping):
        return "no error message" if error is None else _said(error)
    message = _text(error.get("message")) or ""
    data = error.get("data")
    details = _text(data.get("details")) if isinstance(data, Mapping) else _text(data)
    if details and details not in message:
        message = f"{message}: {details}" if message else details
    code = as_int(error.get("code"))
    words = message or repr(dict(error))
    return _said(f"{words} ({code})" if code is not None else words)


def error_status(error: object) -> int | None:
    """The HTTP status of a JSON-RPC error: its code when that is one, else
    the status its words name."""
    if not isinstance(error, Mapping):
        return None
    code = as_int(error.get("code"))
    if code is not None and 400 <= code <= 599:
        return code
    data = error.get("data")
    for text in (
        _text(data.get("details")) if isinstance(data, Mapping) else _text(data),
        _text(error.get("message")),
    ):
        match = _STATUS.search(text) if text else None
        if match:
            return int(match.group(1) or match.group(2))
    return None


# -- tool calls ------------------------------------------------------------------


def _tool_name(call: Mapping[str, Any]) -> str:
    """The agent's own name of a tool (qwen ``_meta.toolName``, claude-agent-acp
    ``_meta.claudeCode.toolName``), else its ACP kind (``execute``, ``edit``...)."""
    meta = _mapping(call.get("_meta"))
    name = _text(meta.get("toolName")) or _text(_mapping(meta.get("claudeCode")).get("toolName"))
    return name or _text(call.get("kind")) or "tool"


def _command(call: Mapping[str, Any]) -> str | None:
    """The shell command of an ``execute`` call: its input's ``command`` (a list is
    joined as a shell would read it), else its title (gemini gives no input)."""
    raw = _mapping(call.get("rawInput"))
    command = raw.get("command", raw.get("cmd"))
    if isinstance(command, list) and command and all(isinstance(c, str) for c in command):
        return shlex.join(command)
    return _text(command) or _text(call.get("title"))


def _paths(call: Mapping[str, Any]) -> tuple[str, ...]:
    """Every path a call touches: its locations, its diffs, and the input fields
    that name a file (a move's source and destination both)."""
    return _read_paths(call)[0]


def _read_paths(call: Mapping[str, Any]) -> tuple[tuple[str, ...], str | None]:
    """:func:`_paths`, and why they cannot all be read (None: they can): a
    location, a diff or an input field naming a path with a value that is
    not one (a number, a list, an empty string), or a list of them that is
    not a list."""
    found: list[str] = []
    bad: list[str] = []

    def take(where: str, value: object) -> None:
        if isinstance(value, str) and value and "\0" not in value:
            found.append(value)
        else:
            bad.append(f"{where} is not a path: {_said(repr(value))[:200]}")

    for field in ("locations", "content"):
        items = call.get(field)
        if items is not None and not isinstance(items, list):
            bad.append(f"{field} is not a list")
            continue
        for item in items or ():
            item = _mapping(item)
            if field == "locations":
                take("a location's path", item.get("path"))
            elif item.get("type") == "diff":
                take("a diff's path", item.get("path"))
    raw = _mapping(call.get("rawInput"))
    for name in _PATH_FIELDS:
        if name in raw and raw[name] is not None:
            take(f"input {name}", raw[name])
    return tuple(dict.fromkeys(found)), (bad[0] if bad else None)


def _moves(call: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """A move's (source, destination), from the input fields that name them."""
    raw = _mapping(call.get("rawInput"))
    for source, destination in _MOVE_FIELDS:
        ends = _text(raw.get(source)), _text(raw.get(destination))
        if ends[0] and ends[1]:
            return ((ends[0], ends[1]),)
    return ()


def _input(call: Mapping[str, Any]) -> dict[str, Any]:
    """The call's raw input; an agent that gives none (gemini) is described by
    what it did give (title, kind, content, locations)."""
    raw = call.get("rawInput")
    if isinstance(raw, Mapping) and raw:
        return dict(raw)
    return {k: call[k] for k in ("title", "kind", "content", "locations") if call.get(k)}


def acp_request(call: Mapping[str, Any], session_id: str | None) -> ApprovalRequest:
    """The typed question of a ``session/request_permission`` (its ``toolCall``).

    A call we cannot read whole is ``unreadable`` (denied before any approver
    is asked, as on every backend): a kind ACP version 1 does not name, a
    path that is not a string, a write (``edit``, ``delete``, ``move``) that
    names no path, a move whose two ends cannot be told, a command with no
    command."""
    given = call.get("kind", "other")
    kind = _KINDS.get(given) if isinstance(given, str) else None
    paths, bad_path = _read_paths(call)
    unreadable = None
    moves: tuple[tuple[str, str], ...] = ()
    command = None
    if kind is None:
        unreadable = f"a tool call of a kind ACP does not name: {_said(repr(given))[:200]}"
    elif kind == "command":
        command = _command(call)
        if command is None:
            unreadable = unreadable or "a command call that names no command"
    elif kind == "write":
        unreadable = bad_path  # what a write touches must be read whole
        if not paths:
            unreadable = unreadable or f"a {given} call that names no path"
        if given == "move":
            moves = _moves(call)
            if not moves:
                unreadable = unreadable or "a move whose source and destination cannot be told"
    return ApprovalRequest(
        tool=_tool_name(call),
        input=_input(call),
        kind=kind or "other",
        command=command,
        paths=paths if kind == "write" else (),
        session_id=session_id,
        tool_call_id=_text(call.get("toolCallId")),
        moves=moves,
        unreadable=unreadable,
    )


def _output(call: Mapping[str, Any]) -> Any:
    """What a finished call gave: its text content, else its raw output."""
    texts: list[str] = []
    for item in call.get("content") or ():
        if isinstance(item, Mapping) and item.get("type") == "content":
            text = _mapping(item.get("content")).get("text")
            if isinstance(text, str):
                texts.append(text)
    if texts:
        return "\n".join(texts)
    return call.get("rawOutput")


@dataclass(slots=True)
class Call:
    """One tool call as its updates told it so far (each update may add fields):
    ``called`` once it runs or names its input, ``finished`` once it completed
    or failed; ``hooked``: its ``pre_tool`` hooks have run (at its permission
    request, or observed as it started running)."""

    id: str
    fields: dict[str, Any]
    called: bool = False
    finished: bool = False
    hooked: bool = False


def track(
    calls: dict[str, Call], update: Mapping[str, Any], *, asked: bool = False
) -> tuple[Call, bool, bool] | None:
    """Merge one ``tool_call`` / ``tool_call_update`` into ``calls``: the call,
    whether it starts running now, and whether it finishes now (None: no call
    id).  ``asked``: a permission request's ``toolCall``, which says what the
    call is but neither starts nor ends it."""
    call_id = _text(update.get("toolCallId"))
    if call_id is None:
        return None
    call = calls.get(call_id)
    if call is None:
        call = calls[call_id] = Call(call_id, {})
    fields = call.fields
    for name, value in update.items():
        if name == "rawInput" and not value and fields.get("rawInput"):
            continue  # an update without input does not take the input back
        if value is not None and name != "sessionUpdate":
            fields[name] = value
    if asked:
        return call, False, False
    status = fields.get("status")
    starts = not call.called and (
        status in ("in_progress", "completed", "failed") or bool(fields.get("rawInput"))
    )
    finishes = status in ("completed", "failed") and not call.finished
    call.called = call.called or starts
    call.finished = call.finished or finishes
    return call, starts, finishes


def tool_hook(
    event: HookEvent, call: Call, session_id: str | None, name: str | None = None
) -> HookInput:
    """The observed hook input of a call that starts (``pre_tool``) or ends
    (``post_tool``); ``name``: the caller's function it runs, if it does."""
    fields = call.fields
    ended = event == "post_tool"
    return HookInput(
        event,
        tool=name or _tool_name(fields),
        input=_input(fields),
        kind=_KINDS.get(str(fields.get("kind")), "other"),
        tool_call_id=call.id,
        output=_output(fields) if ended else None,
        error="the call failed" if ended and fields.get("status") == "failed" else None,
        session_id=session_id,
        raw=dict(fields),
    )


# -- the translator --------------------------------------------------------------

#: What a plan entry keeps: its words, and the protocol's words for its
#: priority and status (anything else an agent adds is left out).
_PLAN_FIELDS = ("content", "priority", "status")


def _plan(entries: object) -> list[dict[str, str]]:
    """A ``plan`` update's entries, each its content, priority and status
    (strings; an entry without content is left out)."""
    plan: list[dict[str, str]] = []
    for entry in entries if isinstance(entries, list) else ():
        entry = _mapping(entry)
        if _text(entry.get("content")) is None:
            continue
        plan.append({k: entry[k] for k in _PLAN_FIELDS if isinstance(entry.get(k), str)})
    return plan


def _usage_dict(usage: Mapping[str, Any]) -> dict[str, int] | None:
    """ACP's token counts (``inputTokens``, ``cachedReadTokens``...) in the
    names :func:`~coding_genesis.usage.normalize_usage` reads."""
    counts = {
        "inputTokens": as_int(usage.get("inputTokens")),
        "outputTokens": as_int(usage.get("outputTokens")),
        "cacheReadInputTokens": as_int(usage.get("cachedReadTokens")),
        "cacheCreationInputTokens": as_int(usage.get("cachedWriteTokens")),
        "thoughtTokens": as_int(usage.get("thoughtTokens")),
        "totalTokens": as_int(usage.get("totalTokens")),
    }
    if counts["inputTokens"] is None and counts["outputTokens"] is None:
        return None
    return {k: max(0, v) for k, v in counts.items() if v is not None}


#: The updates that are pieces of a message or thought.
_PIECES = frozenset({"agent_message_chunk", "agent_thought_chunk"})
#: Updates that say nothing of the conversation: a message's chunks go on across them.
_QUIET = frozenset({"usage_update", "available_commands_update", "current_mode_update"})


class AcpTranslator(Translator):
    """One turn's ``session/update`` notifications and its prompt's answer → events.

    Text: one :class:`TextEvent` per message, its chunks joined, given at
    the next update that is not one of its chunks (a tool call, a plan, a
    thought, a new ``messageId``) or at the turn's end: a text event means
    "a message" on every backend; with ``partial`` each chunk is also a
    :class:`TextDeltaEvent` as it comes (thoughts alike: a
    :class:`ThoughtDeltaEvent` per chunk, one :class:`ThoughtEvent` per
    thought).  The answer is the chunks of the last message (since the last
    tool call, or a new ``messageId``), joined.  Tool calls: a :class:`ToolCallEvent` once the
    call runs or names its input (updates merge, as the protocol says), a
    :class:`ToolResultEvent` when it completes or fails; a call of one of the
    caller's functions (``host_tool`` tells it) is named by that function, as
    the session's own records of a host call are on other CLIs.  A thought chunk is
    a :class:`ThoughtEvent` (no part of the answer), a plan a
    :class:`PlanEvent` (the whole plan, each time); commands and modes make
    no event (transcripts keep them).  The prompt's
    answer (the only response the protocol forwards) makes the turn's usage
    and its :class:`ResultEvent`.

    Cost: ``usage_update`` tells the session's cumulative cost; the turn's is
    its share of that running total (:attr:`totals`, kept per session across
    turns and processes, as claude's and codex's are), so a session's turns
    add up to the agent's own total.

    What the agent says while no prompt runs (the protocol marks it
    :data:`LATE`) is a turn of the agent's own: its events, then at
    :meth:`flush` (the turn's end) its usage and a :class:`ResultEvent` of
    what it said.
    """

    running_cli = RUNNING_CLI

    __slots__ = (
        "_calls",
        "_chunks",
        "_cost",
        "_host_tool",
        "_late",
        "_message",
        "_open",
        "_partial",
        "_parts",
        "_said",
        "_session",
    )

    def __init__(
        self,
        session_id: str | None = None,
        host_tool: Callable[[Mapping[str, Any]], str | None] | None = None,
        *,
        partial: bool = False,
    ) -> None:
        self._session = session_id
        #: Each chunk is also a delta event as it comes.
        self._partial = partial
        #: The message (or thought) whose chunks came and whose whole event has
        #: not been given yet: its type, its message id, its chunks.
        self._open: tuple[type[TextEvent | ThoughtEvent], str | None, list[str]] | None = None
        #: The caller's function a call runs (None: the agent's own tool), so
        #: it is recorded, metered and traced under that function's name.
        self._host_tool = host_tool
        self._calls: dict[str, Call] = {}
        self._chunks: list[str] = []
        self._message: str | None = None
        #: qwen's per-call usage, summed over the turn.
        self._parts: dict[str, int] | None = None
        #: The session's cumulative cost as last reported this turn.
        self._cost: float | None = None
        #: Anything was said or done this turn (an answer, a thought, a tool call).
        self._said = False
        #: An update came while no prompt ran: this is a turn of the agent's own.
        self._late = False

    def recorded_total(
        self, cost: float, models: Mapping[str, tuple[Tokens, float]]
    ) -> Mapping[str, float]:
        return {"cost": cost}

    def translate(self, obj: dict[str, Any]) -> Sequence[Event]:
        kind = _mapping(_mapping(obj.get("params")).get("update")).get("sessionUpdate")
        if kind in _PIECES or kind in _QUIET or self._open is None:
            return self._translate(obj)
        whole = self._whole()  # something else came: the message is whole
        return [*whole, *self._translate(obj)]

    def _whole(self) -> list[Event]:
        """The open message (or thought) as one event, closed (none open: nothing)."""
        open_, self._open = self._open, None
        return [open_[0]("".join(open_[2]))] if open_ is not None else []

    def _piece(
        self, whole: type[TextEvent | ThoughtEvent], text: str, message: str | None
    ) -> list[Event]:
        """A chunk of a message or thought: the open one closed first when this
        one is another; its delta when ``partial``."""
        events = []
        open_ = self._open
        if open_ is not None and (open_[0] is not whole or open_[1] != message):
            events = self._whole()
        if self._open is None:
            self._open = (whole, message, [])
        self._open[2].append(text)
        if self._partial:
            delta = TextDeltaEvent if whole is TextEvent else ThoughtDeltaEvent
            events.append(delta(text, message))
        return events

    def _translate(self, obj: dict[str, Any]) -> Sequence[Event]:
        if "method" not in obj:
            return self._answer(obj)
        params = _mapping(obj.get("params"))
        session = _text(params.get("sessionId"))
        if session is not None:
            self._session = session
        if obj.get("method") == "session/request_permission":
            track(self._calls, _mapping(params.get("toolCall")), asked=True)
            return ()
        if obj.get(LATE):
            self._late = True
        update = _mapping(params.get("update"))
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            return self._chunk(update)
        if kind in ("tool_call", "tool_call_update"):
            return self._tool(update)
        if kind == "agent_thought_chunk":
            self._said = True
            text = _mapping(update.get("content")).get("text")
            if not isinstance(text, str) or not text:
                return ()
            return self._piece(ThoughtEvent, text, _text(update.get("messageId")))
        if kind == "plan":
            self._said = True
            return (PlanEvent(_plan(update.get("entries"))),)
        if kind == "usage_update":
            cost = _mapping(update.get("cost")).get("amount")
            if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0:
                self._cost = float(cost)
        return ()

    def _chunk(self, update: Mapping[str, Any]) -> Sequence[Event]:
        meta = _mapping(update.get("_meta"))
        usage = _usage_dict(_mapping(meta.get("usage")))
        if usage is not None:  # qwen: one model call's usage, on an empty chunk
            parts = self._parts if self._parts is not None else {}
            for name, value in usage.items():
                parts[name] = parts.get(name, 0) + value
            self._parts = parts
        text = _mapping(update.get("content")).get("text")
        if not isinstance(text, str) or not text:
            return ()
        message = _text(update.get("messageId"))
        if message is not None and message != self._message:
            self._message = message
            self._chunks.clear()
        self._chunks.append(text)
        self._said = True
        return self._piece(TextEvent, text, message)

    def _tool(self, update: Mapping[str, Any]) -> Sequence[Event]:
        tracked = track(self._calls, update)
        if tracked is None:
            return ()
        call, starts, finishes = tracked
        self._said = True
        self._chunks.clear()  # the answer is what comes after the last tool call
        fields = call.fields
        events: list[Event] = []
        name = (self._host_tool and self._host_tool(fields)) or _tool_name(fields)
        if starts:
            kind = _KINDS.get(str(fields.get("kind")))
            files = list(_paths(fields)) if kind == "write" else []
            events.append(ToolCallEvent(call.id, name, _input(fields), files))
        if finishes:
            raw = _mapping(fields.get("rawOutput"))
            exit_code = raw.get(
                "exitCode", raw.get("exit_code", _mapping(raw.get("metadata")).get("exit"))
            )
            code = as_int(exit_code)
            failed = fields.get("status") == "failed" or code not in (None, 0)
            events.append(ToolResultEvent(call.id, name, failed, preview(_output(fields))))
        return events

    @property
    def answer(self) -> str | None:
        """The turn's answer so far: the chunks of its last message."""
        return "".join(self._chunks) or None

    def _usage(self, usage: dict[str, int] | None) -> list[Event]:
        """The turn's usage event (``usage``: its tokens, else qwen's summed
        parts), its cost the turn's share of the session's running cost."""
        usage = usage if usage is not None else self._parts
        cost = self._cost
        if cost is not None and self.totals is not None:
            cost = self.totals.share(RUNNING_CLI, self._session, {"cost": cost}).get("cost")
        if cost is not None:
            return [UsageEvent(usage, round(max(0.0, cost), 10))]
        return [UsageEvent(usage)] if usage is not None else []

    def flush(self) -> Sequence[Event]:
        """The end of a turn the agent took by itself (:data:`LATE` updates):
        its usage, and its result (what it said); nothing for a turn its
        prompt's answer ended."""
        if not self._late:
            return self._whole()
        events = [*self._whole(), *self._usage(None)]
        text = "".join(self._chunks) or None
        self._chunks, self._parts, self._said, self._calls = [], None, False, {}
        self._late, self._cost = False, None
        events.append(ResultEvent(is_error=False, subtype="late", text=text))
        return events

    def _answer(self, obj: Mapping[str, Any]) -> Sequence[Event]:
        """The prompt's answer: the session, the turn's usage, then its result."""
        events: list[Event] = [*self._whole()]
        if self._session:
            events.append(SessionEvent(self._session))
        result = obj.get("result")
        usage = None
        if isinstance(result, Mapping):
            usage = _usage_dict(_mapping(result.get("usage")))
            quota = _mapping(
                _mapping(_mapping(result.get("_meta")).get("quota")).get("token_count")
            )
            if usage is None and quota:  # gemini: this turn's tokens
                usage = {
                    "inputTokens": max(0, as_int(quota.get("input_tokens")) or 0),
                    "outputTokens": max(0, as_int(quota.get("output_tokens")) or 0),
                }
        events += self._usage(usage)
        text = "".join(self._chunks) or None
        said = self._said
        # The turn is over: what comes after it starts afresh (the session's
        # translator between turns hears one turn's leftovers after another).
        self._chunks, self._parts, self._said, self._calls = [], None, False, {}
        self._late, self._cost = False, None
        if "error" in obj or not isinstance(result, Mapping):
            error = obj.get("error")
            words = error_words(error)
            events.append(
                ResultEvent(
                    is_error=True,
                    subtype="error",
                    text=words,
                    api_error_status=error_status(error),
                    errors=[words],
                )
            )
            return events
        reason = _text(result.get("stopReason")) or "end_turn"
        hidden = (
            reason == "end_turn" and not said and "usage" in result and result.get("usage") is None
        )
        if hidden:
            words = "the agent ended the turn with no answer, no tool call and no usage (an error it did not report)"
            events.append(
                ResultEvent(
                    is_error=True,
                    subtype="end_turn",
                    text=words,
                    errors=[words],
                    stop_reason=reason,
                )
            )
            return events
        failed = reason not in ("end_turn", "cancelled")
        events.append(
            ResultEvent(
                is_error=failed,
                # the turn's limit of model requests: the error code every
                # backend gives a CLI stopped at its turn limit (max_turns)
                subtype="error_max_turns" if reason == "max_turn_requests" else reason,
                text=text
                if not failed
                else f"the agent stopped the turn: {reason}" + (f"; {text}" if text else ""),
                stop_reason=reason,
            )
        )
        return events
