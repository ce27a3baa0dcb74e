"""The Agent Client Protocol (ACP, version 1) as a :class:`~coding_genesis.control.ControlProtocol`.

An ACP agent (``gemini --acp``, ``qwen --acp``, ``opencode acp``, any command
that speaks it) reads JSON-RPC 2.0 requests on stdin and writes its answers,
its notifications and its own requests on stdout, one object a line.  A live
session is ``initialize`` → ``session/new`` (or ``session/load`` for
``resume=``) → ``session/set_mode`` (when a permission level or an approver
picks a mode) → one ``session/prompt`` per turn; ``session/cancel`` ends a
running turn.  What the agent tells of a turn comes as ``session/update``
notifications (text chunks, thoughts, tool calls and their updates, plans,
usage), and it asks before a tool call with ``session/request_permission``.

What this codec holds to (measured on gemini 0.61, qwen 0.24.4, opencode
1.18.33; ``/work/shared/notes/more-clis.md``):

* Only the client capabilities we serve are advertised: no file system, no
  terminal.  Every request of the agent we do not serve (``fs/*``,
  ``terminal/*``, qwen's ``craft/drainMidTurnQueue``, anything unknown) is
  answered with JSON-RPC error -32601.  An agent that answers another
  protocol version than 1 is refused (a fatal fault naming both).
* Two id spaces: the agent's requests carry ids of their own, starting at 0,
  which overlap ours.  A message with a ``method`` is the agent's (a request
  or a notification); one without is an answer to one of *our* requests, and
  an answer to an id we never used is a fault.
* A permission request is answered by its options' ``kind``, never by their
  id (every agent names them differently): ``allow_once`` for an allow,
  ``reject_once`` (else ``reject_always``, else the ``cancelled`` outcome) for
  a refusal.  "Always" is the session's to keep
  (:class:`~coding_genesis.approval.Remembered` where the session has it): the
  agent is answered once per call, never ``allow_always``, which would let it
  settle later calls behind the session's back.  A request that offers no
  ``allow_once`` option cannot be allowed once: it is refused at once, and the
  turn ends with a fault saying so.
* ``session/cancel`` (our ``interrupt()``) is followed by the ``cancelled``
  outcome for every permission request still open, as the protocol requires.
  A refusal that ends the turn (``Decision.deny(end_turn=True)``) is the
  refusal, then ``session/cancel``.
* The turn ends at the answer to its ``session/prompt`` (its ``stopReason``
  or its error).  Agents may still write after it (qwen's
  ``qwen/notify/session/prompt-suggestion``, measured a few milliseconds
  later; claude-agent-acp's late updates): those are no part of the ended
  turn; the session hears them between turns, and a late ``session/update``
  of a text or a tool call never reaches the next turn's answer.  Waiting for
  a quiet period instead would add its length to every turn.
* Errors: a JSON-RPC error on ``session/prompt`` fails the turn; its HTTP
  status is the error's code when that is one (gemini: 401, 429), else the
  status its words or ``data.details`` name (qwen: ``-32603``, details
  ``"401 Incorrect API key ..."``); opencode's ``-32603`` says only
  ``"Internal error: Incorrect API key provided"``, which the failure
  analysis reads.  ``end_turn`` with nothing said, no tool call and
  ``usage: null`` is an error the agent hid (codex-acp answers a 429 so).
* Usage comes in no common shape: the prompt's answer's ``usage``
  (opencode), its ``_meta.quota.token_count`` (gemini), ``_meta.usage`` on an
  empty message chunk per model call (qwen, summed over the turn), and the
  session's cumulative cost in ``usage_update`` (claude-agent-acp: the turn's
  cost is its growth during the turn).  The turn's usage is one
  :class:`~coding_genesis.events.UsageEvent` at its end.

The per-agent facts (mode ids, whether ``session/load`` may be used) are
:class:`AcpAgent` values (:mod:`.acp_agents`); the command and its
environment come from the backend that builds this protocol.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from coding_genesis.approval import ApprovalRequest, Decision, ToolKind
from coding_genesis.backend import CommandSpec, Translator
from coding_genesis.control import (
    FORWARD,
    ControlProtocol,
    Incoming,
    Outgoing,
    PermissionAsk,
    ProtocolFault,
    Ready,
    Reply,
    SessionStart,
    TurnEnded,
    Unknown,
)
from coding_genesis.events import (
    Event,
    ResultEvent,
    SessionEvent,
    TextEvent,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
)

from ._common import as_int, preview

__all__ = [
    "KNOWN_UPDATES",
    "NOT_SERVED",
    "PROTOCOL_VERSION",
    "AcpAgent",
    "AcpProtocol",
    "AcpTranslator",
    "acp_request",
]

#: The version of the protocol we speak.
PROTOCOL_VERSION = 1
#: The JSON-RPC error code a request we do not serve is answered with.
NOT_SERVED = -32601
_INVALID_PARAMS = -32602

#: The ``sessionUpdate`` kinds of version 1 (forwarded to the translator,
#: which makes events of some); any other is :class:`Unknown`, ignored and counted.
KNOWN_UPDATES = frozenset(
    {
        "user_message_chunk",
        "agent_message_chunk",
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
        "available_commands_update",
        "current_mode_update",
        "config_option_update",
        "session_info_update",
        "usage_update",
    }
)

#: Notifications the measured agents send that say nothing we use (qwen's
#: prompt suggestion and mode news, claude-agent-acp's auth status): ignored
#: without being counted as unknown.
_QUIET = ("qwen/notify/", "_auth/")

#: ACP's tool kinds → ours.
_KINDS: Mapping[str, ToolKind] = {
    "execute": "command",
    "edit": "write",
    "delete": "write",
    "move": "write",
    "read": "read",
    "search": "read",
}

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


@dataclass(frozen=True, slots=True)
class AcpAgent:
    """What differs between ACP agents, as facts (see :mod:`.acp_agents`).

    ``modes``: the mode id (``session/set_mode``) of each permission level the
    agent enforces by a mode; ``ask_mode``: the mode in which it asks before
    every tool call it can ask about (set when an approver decides; None: the
    agent asks in its default mode, or the backend's command sees to it, as
    opencode's configuration).  ``resume``: None when ``resume=`` uses
    ``session/load`` where the agent offers it (``loadSession``); else why
    resuming is refused.  ``refusal``: what a refused tool call does to the
    turn (for the docs and the capability check); ``permissions``: how the
    agent enforces the levels and asks, when its modes do not.
    """

    name: str
    modes: Mapping[str, str] = field(default_factory=dict)
    ask_mode: str | None = None
    resume: str | None = None
    refusal: str = ""
    #: How the agent enforces permission levels and asks, when not by modes.
    permissions: str = ""


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _valid_id(value: object) -> bool:
    """A JSON-RPC id: a string or an integer (a bool is not one)."""
    return isinstance(value, str) or type(value) is int


def _error(rid: Any, code: int, message: str) -> Outgoing:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


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
    found: list[str] = []
    for location in call.get("locations") or ():
        path = _text(_mapping(location).get("path"))
        if path:
            found.append(path)
    for item in call.get("content") or ():
        item = _mapping(item)
        if item.get("type") == "diff" and _text(item.get("path")):
            found.append(item["path"])
    raw = _mapping(call.get("rawInput"))
    found += [raw[name] for name in _PATH_FIELDS if _text(raw.get(name))]
    return tuple(dict.fromkeys(found))


def _input(call: Mapping[str, Any]) -> dict[str, Any]:
    """The call's raw input; an agent that gives none (gemini) is described by
    what it did give (title, kind, content, locations)."""
    raw = call.get("rawInput")
    if isinstance(raw, Mapping) and raw:
        return dict(raw)
    return {k: call[k] for k in ("title", "kind", "content", "locations") if call.get(k)}


def acp_request(call: Mapping[str, Any], session_id: str | None) -> ApprovalRequest:
    """The typed question of a ``session/request_permission`` (its ``toolCall``)."""
    kind = _KINDS.get(str(call.get("kind")), "other")
    return ApprovalRequest(
        tool=_tool_name(call),
        input=_input(call),
        kind=kind,
        command=_command(call) if kind == "command" else None,
        paths=_paths(call) if kind == "write" else (),
        session_id=session_id,
        tool_call_id=_text(call.get("toolCallId")),
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
class _Call:
    """One tool call as its updates told it so far (each update may add fields)."""

    id: str
    fields: dict[str, Any]
    called: bool = False
    finished: bool = False


# -- the translator --------------------------------------------------------------


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


class AcpTranslator(Translator):
    """One turn's ``session/update`` notifications and its prompt's answer → events.

    Text: a :class:`TextEvent` per chunk (it streams); the answer is the
    chunks of the last message (since the last tool call, or a new
    ``messageId``), joined.  Tool calls: a :class:`ToolCallEvent` once the
    call runs or names its input (updates merge, as the protocol says), a
    :class:`ToolResultEvent` when it completes or fails.  Thoughts, plans,
    commands and modes make no event (transcripts keep them).  The prompt's
    answer (the only response the protocol forwards) makes the turn's usage
    and its :class:`ResultEvent`.

    ``cost_base``: the session's cumulative cost (``usage_update``) before
    this turn, kept by the protocol.
    """

    __slots__ = (
        "_calls",
        "_chunks",
        "_cost",
        "_cost_base",
        "_message",
        "_parts",
        "_said",
        "_session",
    )

    def __init__(self, cost_base: float | None = None, session_id: str | None = None) -> None:
        self._session = session_id
        self._calls: dict[str, _Call] = {}
        self._chunks: list[str] = []
        self._message: str | None = None
        #: qwen's per-call usage, summed over the turn.
        self._parts: dict[str, int] | None = None
        self._cost_base = cost_base
        self._cost: float | None = None
        #: Anything was said or done this turn (an answer, a thought, a tool call).
        self._said = False

    def translate(self, obj: dict[str, Any]) -> Sequence[Event]:
        if "method" not in obj:
            return self._answer(obj)
        params = _mapping(obj.get("params"))
        if obj.get("method") == "session/request_permission":
            self._merge(_mapping(params.get("toolCall")))  # what the call is, if it runs
            return ()
        update = _mapping(params.get("update"))
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            return self._chunk(update)
        if kind in ("tool_call", "tool_call_update"):
            return self._tool(update)
        if kind == "agent_thought_chunk":
            self._said = True
        elif kind == "usage_update":
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
        return (TextEvent(text),)

    def _merge(self, update: Mapping[str, Any]) -> _Call | None:
        call_id = _text(update.get("toolCallId"))
        if call_id is None:
            return None
        call = self._calls.get(call_id)
        if call is None:
            call = self._calls[call_id] = _Call(call_id, {})
        for name, value in update.items():
            if name == "rawInput" and not value and call.fields.get("rawInput"):
                continue  # an update without input does not take the input back
            if value is not None and name != "sessionUpdate":
                call.fields[name] = value
        return call

    def _tool(self, update: Mapping[str, Any]) -> Sequence[Event]:
        call = self._merge(update)
        if call is None:
            return ()
        self._said = True
        self._chunks.clear()  # the answer is what comes after the last tool call
        fields = call.fields
        status = fields.get("status")
        events: list[Event] = []
        name = _tool_name(fields)
        runs = status in ("in_progress", "completed", "failed") or bool(fields.get("rawInput"))
        if not call.called and runs:
            call.called = True
            kind = _KINDS.get(str(fields.get("kind")))
            files = list(_paths(fields)) if kind == "write" else []
            events.append(ToolCallEvent(call.id, name, _input(fields), files))
        if status in ("completed", "failed") and not call.finished:
            call.finished = True
            raw = _mapping(fields.get("rawOutput"))
            code = as_int(
                raw.get("exitCode", raw.get("exit_code", _mapping(raw.get("metadata")).get("exit")))
            )
            failed = status == "failed" or code not in (None, 0)
            events.append(ToolResultEvent(call.id, name, failed, preview(_output(fields))))
        return events

    def _answer(self, obj: Mapping[str, Any]) -> Sequence[Event]:
        """The prompt's answer: the session, the turn's usage, then its result."""
        events: list[Event] = [SessionEvent(self._session)] if self._session else []
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
        usage = usage if usage is not None else self._parts
        cost = None
        if self._cost is not None:
            cost = max(0.0, self._cost - (self._cost_base or 0.0))
        if usage is not None or cost is not None:
            events.append(UsageEvent(usage, cost) if cost is not None else UsageEvent(usage))
        text = "".join(self._chunks) or None
        said = self._said
        # The turn is over: what comes after it starts afresh (the session's
        # translator between turns hears one turn's leftovers after another).
        self._chunks, self._parts, self._said, self._calls = [], None, False, {}
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
                subtype=reason,
                text=text
                if not failed
                else f"the agent stopped the turn: {reason}" + (f"; {text}" if text else ""),
                stop_reason=reason,
            )
        )
        return events

    @property
    def cost(self) -> float | None:
        """The session's cumulative cost as last reported (None: none was)."""
        return self._cost


# -- the protocol ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AskKey:
    """The handle of one permission request: the agent's id and the option
    ids by kind."""

    id: Any
    options: Mapping[str, str]


class AcpProtocol(ControlProtocol):
    """One live session's ACP codec (see the module's docstring).

    Built by a backend with its :class:`AcpAgent` facts and the function that
    makes the agent's command (argv tail, environment, overlay) for a session.
    """

    # No name of its own: the backend's (gemini, qwen...) names it in errors.
    can_steer = False
    can_host_tools = False

    def __init__(self, agent: AcpAgent, command: Callable[[SessionStart], CommandSpec]) -> None:
        self.agent = agent
        self._command = command
        self._next_id = 0
        #: Our requests awaiting their answer: id → method.
        self._pending: dict[int, str] = {}
        self._start: SessionStart | None = None
        self.session_id: str | None = None
        #: The agent offers session/load (its initialize said so).
        self.can_load = False
        self._prompt_id: int | None = None
        #: Permission requests of the running turn still unanswered: their ids.
        self._open: set[Any] = set()
        self._cancelled = False
        self._ended_by: str | None = None
        self._translator: AcpTranslator | None = None
        #: The session's cumulative cost as last reported (``usage_update``).
        self._cost: float | None = None

    # -- intents ------------------------------------------------------------------

    def _call(self, method: str, params: Mapping[str, Any]) -> Outgoing:
        self._next_id += 1
        self._pending[self._next_id] = method
        return {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": dict(params)}

    def refusal(self, start: SessionStart) -> str | None:
        if start.resume and self.agent.resume is not None:
            return f"{self.agent.name} cannot resume a session over ACP: {self.agent.resume}"
        return None

    def command(self, start: SessionStart) -> CommandSpec:
        return self._command(start)

    def translator(self) -> Translator:
        if self._translator is not None and self._translator.cost is not None:
            self._cost = self._translator.cost
        self._translator = AcpTranslator(self._cost, self.session_id)
        return self._translator

    def opening(self, start: SessionStart) -> list[Outgoing]:
        from coding_genesis import __version__  # the package metadata, read once a session

        self._start = start
        return [
            self._call(
                "initialize",
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "clientCapabilities": {
                        "fs": {"readTextFile": False, "writeTextFile": False},
                        "terminal": False,
                    },
                    "clientInfo": {"name": "coding-genesis", "version": __version__},
                },
            )
        ]

    def mode(self, start: SessionStart) -> str | None:
        """The mode the session runs in: the asking mode when an approver
        decides (unless ``permissions="read-only"``, which stays read-only),
        else the permission level's; None: the agent's own default."""
        if start.approvals and start.permissions != "read-only" and self.agent.ask_mode:
            return self.agent.ask_mode
        if start.permissions is not None:
            return self.agent.modes.get(start.permissions)
        return None

    def begin_turn(self, prompt: str) -> list[Outgoing]:
        self._open.clear()
        self._cancelled = False
        self._ended_by = None
        call = self._call(
            "session/prompt",
            {"sessionId": self.session_id or "", "prompt": [{"type": "text", "text": prompt}]},
        )
        self._prompt_id = self._next_id
        return [call]

    def _cancel(self) -> list[Outgoing]:
        """``session/cancel``, then the ``cancelled`` outcome for every open question."""
        if self._prompt_id is None or self._cancelled:
            return []
        self._cancelled = True
        out: list[Outgoing] = [
            {
                "jsonrpc": "2.0",
                "method": "session/cancel",
                "params": {"sessionId": self.session_id or ""},
            }
        ]
        for rid in sorted(self._open, key=str):
            out.append(
                {"jsonrpc": "2.0", "id": rid, "result": {"outcome": {"outcome": "cancelled"}}}
            )
        self._open.clear()
        return out

    def interrupt(self) -> list[Outgoing]:
        return self._cancel()

    def answer(self, ask: PermissionAsk, decision: Decision) -> list[Outgoing]:
        """The option of the decision's kind, once per call; none for a question
        already answered (the turn was cancelled)."""
        key = ask.key
        if not isinstance(key, AskKey) or key.id not in self._open:
            return []
        self._open.discard(key.id)
        if decision.allowed:
            option = key.options.get("allow_once")
        else:
            option = key.options.get("reject_once") or key.options.get("reject_always")
        outcome: dict[str, Any] = (
            {"outcome": "selected", "optionId": option} if option else {"outcome": "cancelled"}
        )
        out: list[Outgoing] = [{"jsonrpc": "2.0", "id": key.id, "result": {"outcome": outcome}}]
        if not decision.allowed and decision.end_turn:
            self._ended_by = decision.message or "denied by the approver"
            out += self._cancel()
        return out

    # -- what the agent says ------------------------------------------------------

    def receive(self, obj: dict[str, Any]) -> Sequence[Incoming]:
        if not isinstance(obj, Mapping):
            return (ProtocolFault(f"not a JSON-RPC message: {type(obj).__name__}"),)
        if obj.get("jsonrpc", "2.0") != "2.0":
            return (ProtocolFault(f"not JSON-RPC 2.0: jsonrpc={_said(obj.get('jsonrpc'))}"),)
        method = obj.get("method")
        if method is None:
            return self._response(obj)
        if not isinstance(method, str):
            return (ProtocolFault(f"a method that is not a string: {_said(method)}"),)
        if "id" in obj:
            return self._request(obj, method)
        return self._notification(obj, method)

    def _response(self, obj: Mapping[str, Any]) -> Sequence[Incoming]:
        rid = obj.get("id")
        if "result" not in obj and "error" not in obj:
            return (ProtocolFault("not JSON-RPC: neither a method nor a result nor an error"),)
        if rid is None and obj.get("error") is not None:  # the agent could not read a line of ours
            return (
                ProtocolFault(f"an error answer to no request: {error_words(obj.get('error'))}"),
            )
        if type(rid) is not int or rid not in self._pending:
            return (ProtocolFault(f"an answer for id {_said(repr(rid))}, which we never used"),)
        method = self._pending.pop(rid)
        error = obj.get("error")
        result = _mapping(obj.get("result"))
        if method == "session/prompt":
            return self._prompt_answered(rid, obj)
        if error is not None or "result" not in obj:
            if method == "session/cancel":
                return ()
            fatal = method in ("initialize", "session/new", "session/load", "session/set_mode")
            return (ProtocolFault(f"refused {method}: {error_words(error)}", fatal),)
        if method == "initialize":
            return self._initialized(result)
        if method in ("session/new", "session/load"):
            return self._opened(method, result)
        if method == "session/set_mode":
            return (Ready(self.session_id),)
        return ()

    def _initialized(self, result: Mapping[str, Any]) -> Sequence[Incoming]:
        version = result.get("protocolVersion")
        if version != PROTOCOL_VERSION:
            return (
                ProtocolFault(
                    f"answered ACP protocol version {_said(repr(version))}; "
                    f"coding-genesis speaks version {PROTOCOL_VERSION} only",
                    fatal=True,
                ),
            )
        capabilities = _mapping(result.get("agentCapabilities"))
        self.can_load = capabilities.get("loadSession") is True
        start = self._start or SessionStart(cwd=".")
        params: dict[str, Any] = {"cwd": start.cwd, "mcpServers": []}
        if start.resume:
            if not self.can_load:
                return (
                    ProtocolFault(
                        f"does not offer session/load (loadSession): "
                        f"resume={start.resume!r} cannot continue that session",
                        fatal=True,
                    ),
                )
            self.session_id = start.resume
            return (Reply((self._call("session/load", {"sessionId": start.resume, **params}),)),)
        return (Reply((self._call("session/new", params),)),)

    def _opened(self, method: str, result: Mapping[str, Any]) -> Sequence[Incoming]:
        if method == "session/new":
            sid = _text(result.get("sessionId"))
            if sid is None:
                return (ProtocolFault("answered session/new with no sessionId", True),)
            self.session_id = sid
        start = self._start or SessionStart(cwd=".")
        mode = self.mode(start)
        if mode is None:
            return (Ready(self.session_id),)
        offered = [
            m.get("id")
            for m in _mapping(result.get("modes")).get("availableModes") or ()
            if isinstance(m, Mapping)
        ]
        if offered and mode not in offered:
            return (
                ProtocolFault(
                    f"offers no mode {mode!r} (its modes: "
                    f"{', '.join(map(str, offered))}): the session cannot run as asked",
                    fatal=True,
                ),
            )
        params = {"sessionId": self.session_id or "", "modeId": mode}
        return (Reply((self._call("session/set_mode", params),)),)

    def _prompt_answered(self, rid: int, obj: Mapping[str, Any]) -> Sequence[Incoming]:
        if rid != self._prompt_id:
            return ()  # an earlier turn's answer, come late (that turn was given up)
        self._prompt_id = None
        self._open.clear()
        translator = self._translator
        if translator is not None and translator.cost is not None:
            self._cost = translator.cost
        if "error" in obj:
            return (FORWARD, TurnEnded("failed", error_words(obj.get("error"))))
        reason = _mapping(obj.get("result")).get("stopReason")
        if reason == "cancelled":
            if self._ended_by is not None:
                return (FORWARD, TurnEnded("interrupted", self._ended_by))
            if self._cancelled:
                return (FORWARD, TurnEnded("interrupted"))
            # The agent cancelled by itself (codex-acp after a refusal).
            return (FORWARD, TurnEnded("failed", f"{self.agent.name} cancelled the turn by itself"))
        if reason in (None, "end_turn"):
            return (FORWARD, TurnEnded("completed"))
        return (
            FORWARD,
            TurnEnded("failed", f"{self.agent.name} stopped the turn: {_said(reason)}"),
        )

    def _request(self, obj: Mapping[str, Any], method: str) -> Sequence[Incoming]:
        rid = obj.get("id")
        if not _valid_id(rid):
            return (
                ProtocolFault(f"a request of {_said(method)} with a bad id: {_said(repr(rid))}"),
            )
        if method != "session/request_permission":
            return (
                Reply((_error(rid, NOT_SERVED, f"not served by coding-genesis: {_said(method)}"),)),
            )
        params = _mapping(obj.get("params"))
        call = params.get("toolCall")
        options = params.get("options")
        if not isinstance(call, Mapping) or not isinstance(options, list):
            bad = "session/request_permission without a toolCall and its options"
            return (Reply((_error(rid, _INVALID_PARAMS, bad),)), ProtocolFault(bad))
        sid = params.get("sessionId")
        if self.session_id and sid != self.session_id:
            bad = f"a permission request of another session ({_said(sid)})"
            return (Reply((_error(rid, _INVALID_PARAMS, bad),)), ProtocolFault(bad))
        by_kind: dict[str, Any] = {}
        for offered in options:
            entry = _mapping(offered)
            kind, oid = _text(entry.get("kind")), entry.get("optionId")
            if kind and _valid_id(oid) and kind not in by_kind:
                by_kind[kind] = oid
        request = acp_request(call, self.session_id)
        if "allow_once" not in by_kind:
            refuse = by_kind.get("reject_once") or by_kind.get("reject_always")
            outcome: dict[str, Any] = (
                {"outcome": "selected", "optionId": refuse} if refuse else {"outcome": "cancelled"}
            )
            what = request.command or request.tool
            offered = ", ".join(sorted(by_kind)) or "none"
            return (
                FORWARD,
                Reply(({"jsonrpc": "2.0", "id": rid, "result": {"outcome": outcome}},)),
                ProtocolFault(
                    f"asked to run {_said(what)} offering no option to allow it "
                    f"once (options: {offered}); it was refused"
                ),
            )
        self._open.add(rid)
        return (FORWARD, PermissionAsk(AskKey(rid, by_kind), request))

    def _notification(self, obj: Mapping[str, Any], method: str) -> Sequence[Incoming]:
        if method == "session/update":
            params = _mapping(obj.get("params"))
            sid = params.get("sessionId")
            if self.session_id and sid != self.session_id:
                return (Unknown("session/update of another session"),)
            kind = _mapping(params.get("update")).get("sessionUpdate")
            if kind in KNOWN_UPDATES:
                return (FORWARD,)
            return (Unknown(f"session/update {_said(kind)}"),)
        if method.startswith(_QUIET):
            return ()
        return (Unknown(_said(method)),)
