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

``always`` (allow or reject for the rest of the session): claude's session
rules cannot stop a hook from firing, so this protocol keeps the decision and
answers later calls of the same tool (a command tool: the same command) by
itself, through a :class:`~coding_genesis.control.Reply`; an allow-always
answer to ``can_use_tool`` also hands claude its own suggestions
(``updatedPermissions``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

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

__all__ = ["SESSION_FLAGS", "ClaudeControl"]

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

#: Our one hook callback: every tool, before it runs.
HOOK_ID = "genesis_pre_tool_use"

_COMMAND_TOOLS = frozenset({"Bash"})
#: Tools that write files, and the input field naming the file.
_WRITE_TOOLS = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
_READ_TOOLS = frozenset({"Read", "Glob", "Grep", "LS", "NotebookRead"})

_DENIED = "denied by the approver"
#: What a fault or an error answer quotes of the CLI's words, at most.
_SAID = 500


@dataclass(frozen=True, slots=True)
class AskKey:
    """The handle of one question (:attr:`PermissionAsk.key`): claude's
    request id, and whether the hook or ``can_use_tool`` asked."""

    request_id: str
    via: Literal["hook", "can_use_tool"]
    #: ``can_use_tool``'s ``permission_suggestions`` (what "always" hands back).
    suggestions: tuple[Any, ...] = ()


def _tool_request(
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
    if tool in _COMMAND_TOOLS:
        kind = "command"
        value = tool_input.get("command")
        command = value if isinstance(value, str) else None
    elif tool in _WRITE_TOOLS:
        kind = "write"
        value = tool_input.get(_WRITE_TOOLS[tool])
        paths = (value,) if isinstance(value, str) else ()
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


def _hook_output(decision: Decision) -> dict[str, Any]:
    specific: dict[str, Any] = {"hookEventName": "PreToolUse"}
    out: dict[str, Any] = {"hookSpecificOutput": specific}
    if decision.allowed:
        specific["permissionDecision"] = "allow"
        if decision.reason:
            specific["permissionDecisionReason"] = decision.reason
        if decision.input is not None:
            specific["updatedInput"] = dict(decision.input)
        return out
    message = decision.message or _DENIED
    specific["permissionDecision"] = "deny"
    specific["permissionDecisionReason"] = message
    if decision.end_turn:
        out["continue"] = False
        out["stopReason"] = message
    return out


def _permission_result(
    decision: Decision, tool_input: Mapping[str, Any], suggestions: Sequence[Any]
) -> dict[str, Any]:
    if decision.allowed:
        out: dict[str, Any] = {
            "behavior": "allow",
            "updatedInput": dict(decision.input if decision.input is not None else tool_input),
        }
        if decision.always and suggestions:
            out["updatedPermissions"] = list(suggestions)
        return out
    out = {"behavior": "deny", "message": decision.message or _DENIED}
    if decision.end_turn:
        out["interrupt"] = True
    return out


def _remembered(decision: Decision) -> Decision:
    """An "always" decision as it answers a later call: no input of another
    call's, and the turn goes on."""
    if decision.allowed:
        return Decision(decision.option, reason=decision.reason)
    return Decision(decision.option, message=decision.message, reason=decision.reason)


class ClaudeControl(ControlProtocol):
    """One live claude session's protocol (see the module's docstring).

    Built by :meth:`ClaudeBackend.control()
    <coding_genesis.backends.claude.ClaudeBackend.control>`, which hands down
    how to build the command and the translator (this module never imports
    the backend's).
    """

    name = "claude stream-json control"
    can_steer = False

    def __init__(
        self,
        *,
        command: Callable[[SessionStart], CommandSpec],
        translator: Callable[[], Translator],
    ) -> None:
        self._command = command
        self._translator = translator
        self._ids = itertools.count(1)
        #: Our requests still unanswered: id -> subtype.
        self._pending: dict[str, str] = {}
        self._approvals = False
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
        #: "always" decisions: (tool,) or (tool, command) -> decision.
        self._always: dict[tuple[str, ...], Decision] = {}

    # -- intents -> objects ------------------------------------------------------

    def command(self, start: SessionStart) -> CommandSpec:
        return self._command(start)

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

    def opening(self, start: SessionStart) -> list[Outgoing]:
        self._approvals = start.approvals
        hooks = (
            {"PreToolUse": [{"matcher": None, "hookCallbackIds": [HOOK_ID]}]}
            if start.approvals
            else None
        )
        return [self._request("initialize", hooks=hooks)]

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

    def interrupt(self) -> list[Outgoing]:
        self._interrupted = True
        return [self._request("interrupt")]

    def answer(self, ask: PermissionAsk, decision: Decision) -> list[Outgoing]:
        """The answer to ``ask``; none when claude cancelled the question (an
        interrupt) or it was answered already."""
        key = ask.key
        if not isinstance(key, AskKey) or key.request_id not in self._open:
            return []
        self._open.discard(key.request_id)
        request = ask.request
        if decision.always:
            self._always[self._always_key(request)] = _remembered(decision)
        if decision.end_turn and not decision.allowed:
            self._ended_by = decision.message or _DENIED
        if key.via == "hook":
            if request.tool_call_id:
                self._decided[request.tool_call_id] = decision
            return [_success(key.request_id, _hook_output(decision))]
        payload = _permission_result(decision, request.input, key.suggestions)
        return [_success(key.request_id, payload)]

    @staticmethod
    def _always_key(request: ApprovalRequest) -> tuple[str, ...]:
        if request.kind == "command" and request.command is not None:
            return (request.tool, request.command)
        return (request.tool,)

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

    def _result(self, obj: dict[str, Any]) -> Sequence[Incoming]:
        if not self._ready and "initialize" in self._pending.values():
            # claude gave up before the handshake (a resume of an unknown session).
            errors = obj.get("errors")
            words = "; ".join(str(e) for e in errors)[:_SAID] if isinstance(errors, list) else ""
            words = words or "no reason given"
            return (ProtocolFault(f"claude ended before it was ready: {words}", True),)
        if self._interrupted or self._ended_by is not None:
            return (FORWARD, TurnEnded("interrupted", self._ended_by))
        return (FORWARD, TurnEnded("completed"))

    def _control_response(self, obj: dict[str, Any]) -> Sequence[Incoming]:
        response = obj.get("response")
        if not isinstance(response, dict):
            return (ProtocolFault("claude sent a control_response without a response object"),)
        request_id = response.get("request_id")
        subtype = self._pending.pop(request_id, None) if isinstance(request_id, str) else None
        if subtype is None:
            unknown = repr(request_id)[:_SAID]
            return (ProtocolFault(f"claude answered a request we never sent: {unknown}"),)
        if response.get("subtype") != "success":
            if subtype == "interrupt":
                return ()  # no turn to interrupt (it had ended): nothing is broken
            error = str(response.get("error"))[:_SAID]
            return (ProtocolFault(f"claude refused {subtype}: {error}", subtype == "initialize"),)
        if subtype == "initialize":
            self._ready = True
            return (Ready(None),)
        return ()

    def _control_request(self, obj: dict[str, Any]) -> Sequence[Incoming]:
        request_id = obj.get("request_id")
        request = obj.get("request")
        if not isinstance(request_id, str) or not request_id:
            return (ProtocolFault("claude sent a control_request without a request id"),)
        if not isinstance(request, dict):
            return (ProtocolFault(f"claude's control_request {request_id} holds no request"),)
        subtype = request.get("subtype")
        if subtype == "hook_callback":
            return self._hook(request_id, request)
        if subtype == "can_use_tool":
            return self._can_use_tool(request_id, request)
        # mcp_message: we serve no SDK MCP server; anything else we do not know.
        refusal = f"genesis does not serve {repr(subtype)[:_SAID]} requests"
        return (Reply((_error(request_id, refusal),)),)

    def _hook(self, request_id: str, request: dict[str, Any]) -> Sequence[Incoming]:
        data = request.get("input")
        if request.get("callback_id") != HOOK_ID or not isinstance(data, dict):
            return (Reply((_error(request_id, "no such hook callback"),)),)
        if data.get("hook_event_name", "PreToolUse") != "PreToolUse":
            return (Reply((_error(request_id, "no such hook callback"),)),)
        tool, tool_input = data.get("tool_name"), data.get("tool_input")
        if not isinstance(tool, str) or not isinstance(tool_input, dict):
            unreadable = Decision.deny("genesis could not read this tool call")
            return (Reply((_success(request_id, _hook_output(unreadable)),)),)
        call_id = _text(request.get("tool_use_id")) or _text(data.get("tool_use_id"))
        session_id = _text(data.get("session_id")) or self._session_id
        approval = _tool_request(
            tool, tool_input, reason=None, tool_call_id=call_id, session_id=session_id
        )
        known = self._always.get(self._always_key(approval))
        if known is not None:
            if call_id:
                self._decided[call_id] = known
            return (Reply((_success(request_id, _hook_output(known)),)),)
        self._open.add(request_id)
        return (PermissionAsk(AskKey(request_id, "hook"), approval),)

    def _can_use_tool(self, request_id: str, request: dict[str, Any]) -> Sequence[Incoming]:
        tool, tool_input = request.get("tool_name"), request.get("input")
        if not isinstance(tool, str) or not isinstance(tool_input, dict):
            refusal = {"behavior": "deny", "message": "genesis could not read this tool call"}
            return (Reply((_success(request_id, refusal),)),)
        call_id = _text(request.get("tool_use_id"))
        approval = _tool_request(
            tool,
            tool_input,
            reason=_cli_reason(request),
            tool_call_id=call_id,
            session_id=self._session_id,
        )
        known = self._decided.get(call_id) if call_id else None
        if known is None:
            known = self._always.get(self._always_key(approval))
        if known is not None:
            return (Reply((_success(request_id, _permission_result(known, tool_input, ())),)),)
        raw = request.get("permission_suggestions")
        suggestions = tuple(raw) if isinstance(raw, list) else ()
        self._open.add(request_id)
        return (PermissionAsk(AskKey(request_id, "can_use_tool", suggestions), approval),)
