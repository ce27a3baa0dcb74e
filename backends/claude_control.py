"""claude's stream-json control protocol, as a :class:`~coding_genesis.control.ControlProtocol`.

claude started with ``--input-format stream-json --output-format stream-json
--verbose --permission-prompt-tool stdio`` reads user messages and control
messages on stdin and writes its usual stream-json lines plus
``control_request`` / ``control_response`` / ``control_cancel_request``
(the protocol ``claude-agent-sdk`` speaks).

Approval of every tool call: claude itself asks (``can_use_tool``) only for
calls its rules do not settle; it runs read-only tools and plain commands
(``echo``) unasked.  So with ``approvals`` the opening registers one
``PreToolUse`` hook for every tool, and the hook is where the approver is
asked: its ``allow`` (with ``updatedInput``) runs the call without any
further check of claude's, its ``deny`` refuses it (the model reads
``PreToolUse:<Tool> hook error: <message>``), and ``continue: false`` ends the
turn (claude writes its ``result`` at once).  Measured on claude 2.1.330:
after a hook's answer claude sends no ``can_use_tool`` for that call; one
that came anyway would be answered with the hook's decision, never asked twice.
Without ``approvals`` no hook is registered and each ``can_use_tool`` is a
:class:`~coding_genesis.control.PermissionAsk` with claude's own reason.

Host tools (``tools=``): claude is started with an SDK MCP server named
``genesis`` (``--mcp-config``, ``"type": "sdk"``) and each tool allowed
(``--allowedTools=mcp__genesis__<name>``); claude speaks MCP's JSON-RPC to it
through ``mcp_message`` control requests.  This protocol answers the
handshake and ``tools/list`` itself (each tool marked ``anthropic/alwaysLoad``:
the model sees it at once, not through claude's tool search) and makes each
``tools/call`` a :class:`~coding_genesis.control.ToolCall`.  The approver is
never asked about a host tool: it is the caller's own code.  Measured on
claude 2.1.330: the handshake comes before the answer to ``initialize``; the
model's ``tool_use`` line comes before the ``tools/call``, the
``tool_result`` after our answer (``is_error`` from ``isError``).

Hooks (``hooks=``): each hook point the session has hooks for gets a
callback at ``initialize`` (see :mod:`.claude_hooks`), and each
``hook_callback`` is a :class:`~coding_genesis.control.HookCall`.  The
``PreToolUse`` callback is shared: with an approver too, the call carries
the approver's question, asked after the hooks unless they block; a hook's
changed input or context goes out with the approver's answer.

``always`` (allow or reject for the rest of the session) is not this
protocol's: the session keeps those answers for every backend alike
(:class:`~coding_genesis.approval.Remembered`), so each call is asked here
and answered once: never with claude's own suggestions
(``updatedPermissions``), which would let claude settle later calls behind
the session's back, with rules wider than what was asked.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from coding_genesis.approval import ApprovalRequest, Decision, ToolKind
from coding_genesis.backend import CommandSpec, Translator
from coding_genesis.control import (
    FORWARD,
    Answered,
    ControlIntent,
    ControlProtocol,
    Forward,
    HookCall,
    Incoming,
    Outgoing,
    PermissionAsk,
    ProtocolFault,
    QuestionAsked,
    Ready,
    Reply,
    ToolCall,
    TurnEnded,
    Unknown,
    UnparsedLine,
)
from coding_genesis.hooks import HookResult
from coding_genesis.questions import UserAnswer
from coding_genesis.request import Request
from coding_genesis.tools import HostTool, ToolResult

from ._questions import Elicited, Gathering, answer_of, elicitation_question
from .claude_calls import call_request
from .claude_hooks import (
    DENIED,
    HOOK_EFFECTS,
    HOOK_ID,
    HookKey,
    event_of,
    hook_answer,
    hook_input,
    pre_tool_output,
    registrations,
)
from .claude_questions import ASK_TOOL, asked, permission_result
from .claude_switch import FIXED_LEVELS, SWITCHES, Switches
from .parts import claude_content

__all__ = [
    "ANSWER_TOOL",
    "HOOK_ID",
    "MCP_SERVER",
    "SESSION_FLAGS",
    "ClaudeControl",
    "agent_definitions",
]

#: The argv head of a live session (the rest is the one-shot run's options).
SESSION_FLAGS = (
    "--input-format",
    "stream-json",
    "--output-format",
    "stream-json",
    "--verbose",
    "--permission-prompt-tool",
    "stdio",
)

#: The SDK MCP server of the host tools: the model sees ``mcp__genesis__<name>``.
MCP_SERVER = "genesis"
_MCP_PREFIX = f"mcp__{MCP_SERVER}__"
#: The MCP version we answer when claude names none.
_MCP_VERSION = "2025-06-18"

_COMMAND_TOOLS = frozenset({"Bash"})
#: Tools that write files, and the input field naming the file: claude 2.1.330's
#: own list of file-writing tools, each writing the one file that field names
#: (MultiEdit's edits and NotebookEdit's cell are inside it).  A call of one
#: whose field is not a path is unreadable: denied, nobody asked.
_WRITE_TOOLS = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
_READ_TOOLS = frozenset({"Read", "Glob", "Grep", "LS", "NotebookRead"})

#: The answer about a host tool's call (the caller's own code).
_HOST_ALLOWED = Decision.allow(reason="a host tool (tools=)")
#: The tool claude answers an output schema with (``--json-schema``): the
#: answer itself, no action, so no approver is asked about it.
ANSWER_TOOL = "StructuredOutput"

#: What a fault or an error answer quotes of the CLI's words, at most.
_SAID = 500
#: Why a line claude wrote is refused unread.
_UNPARSED = "nested too deep or too large for genesis to read"


@dataclass(frozen=True, slots=True)
class AskKey:
    """The handle of one question (:attr:`PermissionAsk.key`): claude's
    request id, and whether the hook or ``can_use_tool`` asked."""

    request_id: str
    via: Literal["hook", "can_use_tool"]


def tool_request(
    tool: str,
    tool_input: Mapping[str, Any],
    *,
    reason: str | None,
    tool_call_id: str | None,
    session_id: str | None,
) -> ApprovalRequest:
    kind: ToolKind = "other"
    command = None
    paths: tuple[str, ...] = ()
    unreadable = None
    if tool in _COMMAND_TOOLS:
        kind = "command"
        value = tool_input.get("command")
        command = value if isinstance(value, str) else None
    elif tool in _WRITE_TOOLS:
        kind = "write"
        field = _WRITE_TOOLS[tool]
        value = tool_input.get(field)
        if isinstance(value, str) and value:
            paths = (value,)
        else:
            unreadable = f"{tool}'s {field} is not a path: {repr(value)[:200]}"
    elif tool in _READ_TOOLS:
        kind = "read"
    return ApprovalRequest(
        tool=tool,
        input=tool_input,
        kind=kind,
        command=command,
        paths=paths,
        reason=reason,
        session_id=session_id,
        tool_call_id=tool_call_id,
        unreadable=unreadable,
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _cli_reason(request: Mapping[str, Any]) -> str | None:
    """claude's own words on why it asks: its decision reason, the path it
    blocked, else the prompt's title or description."""
    reason = _text(request.get("decision_reason"))
    blocked = _text(request.get("blocked_path"))
    if blocked:
        reason = f"{reason} (blocked path: {blocked})" if reason else f"blocked path: {blocked}"
    return reason or _text(request.get("title")) or _text(request.get("description"))


def _success(request_id: str, payload: Mapping[str, Any]) -> Outgoing:
    return {
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request_id, "response": dict(payload)},
    }


def _error(request_id: str, message: str) -> Outgoing:
    return {
        "type": "control_response",
        "response": {"subtype": "error", "request_id": request_id, "error": message},
    }


def _permission_result(decision: Decision, tool_input: Mapping[str, Any]) -> dict[str, Any]:
    if decision.allowed:
        return {
            "behavior": "allow",
            "updatedInput": dict(decision.input if decision.input is not None else tool_input),
        }
    out: dict[str, Any] = {"behavior": "deny", "message": decision.message or DENIED}
    if decision.end_turn:
        out["interrupt"] = True
    return out


@dataclass(frozen=True, slots=True)
class McpKey:
    """The handle of one ``tools/call`` (:attr:`ToolCall.key`): claude's
    control request id and the JSON-RPC id inside it."""

    request_id: str
    rpc_id: Any


def _mcp_answer(request_id: str, message: Mapping[str, Any]) -> Outgoing:
    return _success(request_id, {"mcp_response": dict(message)})


def _rpc_error(rpc_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message}}


def _tool_listing(tool: HostTool) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "inputSchema": dict(tool.parameters),
        "_meta": {"anthropic/alwaysLoad": True},
    }


def agent_definitions(start: Request) -> dict[str, dict[str, Any]]:
    """The subagents of ``start`` (``agents=``) as claude reads them, by name."""
    return {name: agent.to_dict() for name, agent in start.agents.items()}


def _host_flags(tools: Sequence[HostTool]) -> tuple[str, ...]:
    """The argv that declares the SDK MCP server and allows its tools."""
    config = {"mcpServers": {MCP_SERVER: {"type": "sdk", "name": MCP_SERVER}}}
    allowed = ",".join(_MCP_PREFIX + tool.name for tool in tools)
    return ("--mcp-config", json.dumps(config), f"--allowedTools={allowed}")


class ClaudeControl(ControlProtocol):
    """One live claude session's protocol (see the module's docstring).

    Built by :meth:`ClaudeBackend.control()
    <coding_genesis.backends.claude.ClaudeBackend.control>`, which hands down
    how to build the command and the translator (this module never imports
    the backend's), and by the failer's backend, whose CLI plays claude's side
    (``cli``: the CLI's name in a fault's words).
    """

    name = "claude stream-json control"
    can_steer = False
    hook_effects = HOOK_EFFECTS
    can_host_tools = True
    changes_input = True  # updatedInput
    turn_options = frozenset({"model", "permissions", "output_schema"})  # see .claude_switch
    fixed_levels = FIXED_LEVELS
    turn_schema_in_prompt = True
    prompt_parts = frozenset({"image", "file"})  # content blocks (.parts)
    deltas = True  # --include-partial-messages: stream_event lines (the failer writes them too)
    context_usage = True  # get_context_usage (claude_calls.py)
    can_compact = True
    compact_prompt = "/compact"  # system/compact_boundary, a PreCompact hook point
    asks_questions = True  # AskUserQuestion (claude_questions.py)
    can_fork = True  # --resume --fork-session (--resume-session-at)

    def __init__(
        self,
        *,
        command: Callable[[Request], CommandSpec],
        translator: Callable[[], Translator],
        cli: str = "claude",
    ) -> None:
        self._command = command
        self._translator = translator
        #: The CLI's name in a fault's words (the failer speaks claude's side too).
        self._cli = cli
        self._ids = itertools.count(1)
        #: The model's questions to the user being answered.
        self._asking = Gathering()
        #: Our requests still unanswered: id -> subtype.
        self._pending: dict[str, str] = {}
        #: Those of them that are calls (:meth:`call`): id -> intent name.
        self._calls: dict[str, str] = {}
        self._ready = False
        self._session_id: str | None = None
        #: This turn: an interrupt was asked; a decision ended it (its message).
        self._interrupted = False
        self._ended_by: str | None = None
        #: Questions handed out and not yet answered (nor cancelled by claude).
        self._open: set[str] = set()
        #: This turn's hook decisions by tool call id (a later can_use_tool
        #: for the same call gets the same answer).
        self._decided: dict[str, Decision] = {}
        #: The host tools by the name the model calls them, and the request
        #: they were read from (built from ``self.request`` once, when first needed).
        self._tools_of: tuple[Request | None, dict[str, HostTool]] = (None, {})
        #: What the pre_tool hooks of a call asked, kept for the approver's answer.
        self._hooked: dict[str, HookResult] = {}
        #: The model and level claude runs with now, and the switches pending.
        self._switches = Switches()

    # -- what the session was started with (the request ``begin`` kept) ---------

    @property
    def _approvals(self) -> bool:
        return self.request is not None and self.request.approvals

    @property
    def _tools(self) -> dict[str, HostTool]:
        """The host tools, by the name the model calls them."""
        request, tools = self._tools_of
        if request is not self.request:
            given = self.request.tools if self.request is not None else ()
            tools = {_MCP_PREFIX + tool.name: tool for tool in given}
            self._tools_of = (self.request, tools)
        return tools

    # -- intents -> objects ------------------------------------------------------

    def command(self, start: Request) -> CommandSpec:
        spec = self._command(start)
        args = spec.args
        if not start.resume or start.fork:
            # A new conversation's id (a fork's too) is ours to give, so it is known
            # at open (claude names it only in its first turn's init line otherwise).
            self._session_id = str(uuid.uuid4())
            flags = len(SESSION_FLAGS)
            args = (*args[:flags], f"--session-id={self._session_id}", *args[flags:])
        if start.tools:
            args = (*_host_flags(start.tools), *args)
        return replace(spec, args=args)

    def translator(self) -> Translator:
        return self._translator()

    def _request(self, subtype: str, **fields: Any) -> Outgoing:
        request_id = f"genesis_{next(self._ids)}"
        self._pending[request_id] = subtype
        return {
            "type": "control_request",
            "request_id": request_id,
            "request": {"subtype": subtype, **fields},
        }

    def opening(self, start: Request) -> list[Outgoing]:
        fields: dict[str, Any] = {"hooks": registrations(start) or None}
        if start.agents:  # as claude-agent-sdk sends them (its --agents, one-shot)
            fields["agents"] = agent_definitions(start)
        return [self._request("initialize", **fields)]

    def begin_turn(self, prompt: str) -> list[Outgoing]:
        self._interrupted = False
        self._ended_by = None
        self._decided.clear()
        return [
            {
                "type": "user",
                "session_id": "",
                "message": {"role": "user", "content": prompt},
                "parent_tool_use_id": None,
            }
        ]

    def turn_calls(self, turn: Request) -> list[ControlIntent]:
        return self._switches.calls(self.request, turn)

    def start_turn(self, turn: Request) -> list[Outgoing]:
        """The user message; a prompt with parts is content blocks (.parts)."""
        out = self.begin_turn(turn.prompt)
        if turn.parts:
            out[0]["message"]["content"] = claude_content(turn)
        return out

    def interrupt(self) -> list[Outgoing]:
        self._interrupted = True
        return [self._request("interrupt")]

    def call(self, intent: ControlIntent) -> tuple[Any, list[Outgoing]]:
        if intent.name in SWITCHES:  # a turn's switch (.claude_switch)
            switch = self._request(intent.name)
            request_id = switch["request_id"]
            switch["request"].update(self._switches.fields(request_id, intent))
            return request_id, [switch]
        call = call_request(intent)
        obj = self._request(call.subtype, **call.fields)
        self._calls[obj["request_id"]] = intent.name
        return obj["request_id"], [obj]

    def answer(self, ask: PermissionAsk, decision: Decision) -> list[Outgoing]:
        """The answer to ``ask``; none when claude cancelled the question (an
        interrupt) or it was answered already."""
        key = ask.key
        if not isinstance(key, AskKey) or key.request_id not in self._open:
            return []
        self._open.discard(key.request_id)
        request = ask.request
        if decision.end_turn and not decision.allowed:
            self._ended_by = decision.message or DENIED
        if key.via == "hook":
            if request.tool_call_id:
                self._decided[request.tool_call_id] = decision
            hooked = self._hooked.pop(key.request_id, None)
            return [_success(key.request_id, pre_tool_output(decision, hooked))]
        return [_success(key.request_id, _permission_result(decision, request.input))]

    def answer_tool(self, call: ToolCall, result: ToolResult) -> list[Outgoing]:
        """The ``tools/call`` answer; none when claude cancelled the request."""
        key = call.key
        if not isinstance(key, McpKey) or key.request_id not in self._open:
            return []
        self._open.discard(key.request_id)
        content = [{"type": "text", "text": result.text}]
        answer = {"content": content, "isError": result.is_error}
        return [_mcp_answer(key.request_id, {"jsonrpc": "2.0", "id": key.rpc_id, "result": answer})]

    def answer_hook(self, call: HookCall, result: HookResult) -> list[Outgoing]:
        """The answer to a hook point; none when claude cancelled it, or when
        the approver's answer is still to come (``result`` kept for it)."""
        key = call.key
        if not isinstance(key, HookKey) or key.request_id not in self._open:
            return []
        if call.ask is not None and not result.block:
            self._hooked[key.request_id] = result
            return []
        self._open.discard(key.request_id)
        call_id = call.input.tool_call_id
        if key.claude_event == "PreToolUse" and result.block and call_id:
            self._decided[call_id] = Decision.deny(result.message or "blocked by a pre_tool hook")
        return [_success(key.request_id, hook_answer(key, result))]

    # -- objects -> meaning ------------------------------------------------------

    def receive(self, obj: dict[str, Any]) -> Sequence[Incoming]:
        kind = obj.get("type")
        if kind == "control_request":
            return self._control_request(obj)
        if kind == "control_response":
            return self._control_response(obj)
        if kind == "control_cancel_request":
            request_id = obj.get("request_id")
            if isinstance(request_id, str):
                self._open.discard(request_id)
                self._hooked.pop(request_id, None)
            return ()
        if kind == "result":
            return self._result(obj)
        if isinstance(kind, str) and kind.startswith("control_"):
            return (Unknown(kind),)
        if kind == "system" and obj.get("subtype") == "init":
            session_id = obj.get("session_id")
            if isinstance(session_id, str):
                self._session_id = session_id
        return (FORWARD,)

    def unparsed(self, head: UnparsedLine) -> Sequence[Incoming]:
        """A ``control_request`` that could not be parsed is answered from its
        envelope: a tool call's question (``PreToolUse``, ``can_use_tool``)
        is denied as unreadable, through the approval machinery (recorded);
        another hook point gets an empty answer; any other request an error.
        A ``result`` that could not be parsed (claude 2.1.330 writes its
        ``type`` last, after ``permission_denials``, which hold a refused
        call's input) still ends the turn, read from what could be read."""
        kind = head.get("type")
        if kind == "result":
            if not head.whole:
                return ()  # a result cut or garbled: never an answer (the CLI's exit says)
            stand_in: dict[str, Any] = {k[0]: v for k, v in head.fields.items() if len(k) == 1}
            usage = {k[1]: v for k, v in head.fields.items() if len(k) == 2 and k[0] == "usage"}
            if usage:
                stand_in["usage"] = usage
            return tuple(
                Forward(stand_in) if meaning is FORWARD else meaning
                for meaning in self._result(stand_in)
            )
        if kind != "control_request":
            return ()
        request_id = head.get("request_id")
        if not isinstance(request_id, str) or not request_id:
            return (ProtocolFault(f"claude sent a control_request {_UNPARSED}, its id unread"),)
        subtype = head.get("request", "subtype")
        if subtype == "hook_callback" and head.get("request", "callback_id") != HOOK_ID:
            return (Reply((_success(request_id, {}),)),)  # observed only: nothing to say
        if subtype not in ("hook_callback", "can_use_tool"):
            return (
                Reply((_error(request_id, f"genesis could not read this request: {_UNPARSED}"),)),
            )
        tool = head.get("request", "tool_name") or head.get("request", "input", "tool_name")
        call_id = head.get("request", "tool_use_id")
        approval = ApprovalRequest(
            tool if isinstance(tool, str) else "(unread)",
            {},
            tool_call_id=call_id if isinstance(call_id, str) else None,
            session_id=self._session_id,
            unreadable=f"its request was {_UNPARSED}",
        )
        self._open.add(request_id)
        via: Literal["hook", "can_use_tool"] = (
            "hook" if subtype == "hook_callback" else "can_use_tool"
        )
        return (PermissionAsk(AskKey(request_id, via), approval),)

    def _result(self, obj: dict[str, Any]) -> Sequence[Incoming]:
        if not self._ready and "initialize" in self._pending.values():
            # claude gave up before the handshake (a resume of an unknown session).
            errors = obj.get("errors")
            words = "; ".join(str(e) for e in errors)[:_SAID] if isinstance(errors, list) else ""
            words = words or "no reason given"
            return (ProtocolFault(f"{self._cli} ended before it was ready: {words}", True),)
        if self._interrupted or self._ended_by is not None:
            return (FORWARD, TurnEnded("interrupted", self._ended_by))
        return (FORWARD, TurnEnded("completed"))

    def _control_response(self, obj: dict[str, Any]) -> Sequence[Incoming]:
        response = obj.get("response")
        if not isinstance(response, dict):
            return (
                ProtocolFault(f"{self._cli} sent a control_response without a response object"),
            )
        request_id = response.get("request_id")
        subtype = self._pending.pop(request_id, None) if isinstance(request_id, str) else None
        if subtype is None:
            unknown = repr(request_id)[:_SAID]
            return (ProtocolFault(f"{self._cli} answered a request we never sent: {unknown}"),)
        if subtype in SWITCHES:  # a call the session awaits
            ok = response.get("subtype") == "success"
            self._switches.answered(str(request_id), ok)
            if ok:
                return (Answered(request_id, result=response.get("response")),)
            return (Answered(request_id, error=str(response.get("error"))[:_SAID]),)
        if request_id in self._calls:
            return (self._answered(request_id, response),)
        if response.get("subtype") != "success":
            if subtype == "interrupt":
                return ()  # no turn to interrupt (it had ended): nothing is broken
            error = str(response.get("error"))[:_SAID]
            return (
                ProtocolFault(f"{self._cli} refused {subtype}: {error}", subtype == "initialize"),
            )
        if subtype == "initialize":
            self._ready = True
            return (Ready(self._session_id),)
        return ()

    def _answered(self, request_id: str, response: Mapping[str, Any]) -> Answered:
        """claude's answer to a call of ours, read (its refusal in its words)."""
        read = call_request(ControlIntent(self._calls.pop(request_id))).read
        if response.get("subtype") != "success":
            return Answered(request_id, error=str(response.get("error"))[:_SAID])
        answer = response.get("response")
        try:
            return Answered(request_id, read(answer if isinstance(answer, Mapping) else {}))
        except ValueError as exc:
            return Answered(request_id, error=str(exc))

    def _control_request(self, obj: dict[str, Any]) -> Sequence[Incoming]:
        request_id = obj.get("request_id")
        request = obj.get("request")
        if not isinstance(request_id, str) or not request_id:
            return (ProtocolFault(f"{self._cli} sent a control_request without a request id"),)
        if not isinstance(request, dict):
            return (ProtocolFault(f"{self._cli}'s control_request {request_id} holds no request"),)
        subtype = request.get("subtype")
        if subtype == "hook_callback":
            return self._hook(request_id, request)
        if subtype == "can_use_tool":
            return self._can_use_tool(request_id, request)
        if subtype == "mcp_message" and self._tools:
            return self._mcp(request_id, request)
        if subtype == "elicitation":  # an MCP server's question to the user: the asker's
            schema = request.get("requested_schema")
            asked = elicitation_question(
                request.get("message"), request.get("mcp_server_name"), schema
            )
            return self._asking.open(request_id, [asked], Elicited(schema))
        # mcp_message without host tools, or anything else we do not know.
        refusal = f"genesis does not serve {repr(subtype)[:_SAID]} requests"
        return (Reply((_error(request_id, refusal),)),)

    def _hook(self, request_id: str, request: dict[str, Any]) -> Sequence[Incoming]:
        data = request.get("input")
        if not isinstance(data, dict):
            return (Reply((_error(request_id, "no such hook callback"),)),)
        claude_event = data.get("hook_event_name", "PreToolUse")
        event = event_of(request.get("callback_id"), claude_event)
        if event is None or (event != "pre_tool" and event not in self.hooked):
            return (Reply((_error(request_id, "no such hook callback"),)),)
        session_id = _text(data.get("session_id")) or self._session_id
        if event not in ("pre_tool", "post_tool"):
            self._open.add(request_id)
            key = HookKey(request_id, str(claude_event))
            return (HookCall(key, hook_input(event, data, session_id)),)
        tool, tool_input = data.get("tool_name"), data.get("tool_input")
        if not isinstance(tool, str) or not isinstance(tool_input, dict):
            if event == "post_tool":
                return (Reply((_success(request_id, {}),)),)  # nothing to tell of it
            unreadable = Decision.deny("genesis could not read this tool call")
            return (Reply((_success(request_id, pre_tool_output(unreadable)),)),)
        if tool == ANSWER_TOOL:
            return (Reply((_success(request_id, pre_tool_output(Decision.allow())),)),)
        if tool == ASK_TOOL:  # a question, not a call to approve: can_use_tool brings it
            return (Reply((_success(request_id, pre_tool_output(None)),)),)
        if tool in self._tools and event == "pre_tool":  # the caller's own function
            return (Reply((_success(request_id, pre_tool_output(_HOST_ALLOWED)),)),)
        call_id = _text(request.get("tool_use_id")) or _text(data.get("tool_use_id"))
        approval = tool_request(
            tool, tool_input, reason=None, tool_call_id=call_id, session_id=session_id
        )
        if event == "post_tool":
            self._open.add(request_id)
            key = HookKey(request_id, str(claude_event))
            return (HookCall(key, hook_input(event, data, session_id, approval)),)
        ask = PermissionAsk(AskKey(request_id, "hook"), approval) if self._approvals else None
        if "pre_tool" in self.hooked:
            self._open.add(request_id)
            key = HookKey(request_id, "PreToolUse")
            return (HookCall(key, hook_input(event, data, session_id, approval), ask),)
        if ask is None:  # neither an approver nor a hook: claude's own check goes on
            return (Reply((_success(request_id, pre_tool_output(None)),)),)
        self._open.add(request_id)
        return (ask,)

    def _can_use_tool(self, request_id: str, request: dict[str, Any]) -> Sequence[Incoming]:
        tool, tool_input = request.get("tool_name"), request.get("input")
        if not isinstance(tool, str) or not isinstance(tool_input, dict):
            refusal = {"behavior": "deny", "message": "genesis could not read this tool call"}
            return (Reply((_success(request_id, refusal),)),)
        if tool == ASK_TOOL:  # the model's question to the user: the asker's
            questions = asked(self._asking, request_id, tool_input)
            if questions:
                return questions
            unread = {"behavior": "deny", "message": "genesis could not read these questions"}
            return (Reply((_success(request_id, unread),)),)
        if tool == ANSWER_TOOL or tool in self._tools:
            allowed = _permission_result(Decision.allow(), tool_input)
            return (Reply((_success(request_id, allowed),)),)
        call_id = _text(request.get("tool_use_id"))
        approval = tool_request(
            tool,
            tool_input,
            reason=_cli_reason(request),
            tool_call_id=call_id,
            session_id=self._session_id,
        )
        known = self._decided.get(call_id) if call_id else None
        if known is not None:  # the hook's answer to this very call
            return (Reply((_success(request_id, _permission_result(known, tool_input)),)),)
        self._open.add(request_id)
        return (PermissionAsk(AskKey(request_id, "can_use_tool"), approval),)

    def answer_question(
        self, ask: QuestionAsked, answer: UserAnswer | None, refusal: str | None
    ) -> list[Outgoing]:
        done = self._asking.answered(ask.key, answer, refusal)  # None: more to answer first
        return [] if done is None else [_success(done.call, answer_of(done, permission_result))]

    def _mcp(self, request_id: str, request: dict[str, Any]) -> Sequence[Incoming]:
        """One MCP message to our SDK server: the handshake and the listing
        answered here, a ``tools/call`` handed to the session."""
        message = request.get("message")
        if not isinstance(message, dict):
            return (Reply((_error(request_id, "an mcp_message without a message"),)),)
        rpc_id, method = message.get("id"), message.get("method")
        if request.get("server_name") != MCP_SERVER:
            server = repr(request.get("server_name"))[:_SAID]
            missing = _rpc_error(rpc_id, -32601, f"no MCP server {server} here")
            return (Reply((_mcp_answer(request_id, missing),)),)
        if "id" not in message or not isinstance(method, str):
            # A notification (or a response): acknowledged, as claude expects.
            return (Reply((_mcp_answer(request_id, {"jsonrpc": "2.0", "result": {}}),)),)
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if method == "tools/call":
            name, arguments = params.get("name"), params.get("arguments", {})
            if not isinstance(name, str) or not isinstance(arguments, dict):
                bad = _rpc_error(rpc_id, -32602, "tools/call needs a name and an arguments object")
                return (Reply((_mcp_answer(request_id, bad),)),)
            meta = params.get("_meta")
            call_id = _text(meta.get("claudecode/toolUseId")) if isinstance(meta, dict) else None
            self._open.add(request_id)
            return (ToolCall(McpKey(request_id, rpc_id), name, arguments, call_id),)
        if method == "initialize":
            version = params.get("protocolVersion")
            result: dict[str, Any] = {
                "protocolVersion": version if isinstance(version, str) else _MCP_VERSION,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": MCP_SERVER, "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [_tool_listing(tool) for tool in self._tools.values()]}
        elif method == "ping":
            result = {}
        else:
            unknown = _rpc_error(rpc_id, -32601, f"method {method[:_SAID]!r} not served")
            return (Reply((_mcp_answer(request_id, unknown),)),)
        answer = {"jsonrpc": "2.0", "id": rpc_id, "result": result}
        return (Reply((_mcp_answer(request_id, answer),)),)
