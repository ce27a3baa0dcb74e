"""codex's two-way protocol: ``codex app-server``, JSON-RPC 2.0, one object a line.

A live session (``agent.session()``, ``approver=``) holds one thread in one
``codex app-server`` process: ``initialize`` → ``initialized`` →
``thread/start`` (or ``thread/resume``), then ``turn/start`` per turn, and
``turn/steer``, ``turn/interrupt`` on demand.  A turn codex begins by itself
between ours (a compaction, a thread goal) is adopted as the CLI's turn
(:class:`~coding_genesis.control.TurnBegan`) and ends at its ``turn/completed``.  codex asks approval with the
server requests ``item/commandExecution/requestApproval`` and
``item/fileChange/requestApproval``; the caller's functions (``tools=``) are
codex's *dynamic tools* (``dynamicTools`` of ``thread/start``, an
experimental field: ``initialize`` then opts into ``experimentalApi``), each
call the server request ``item/tool/call``, answered with its
``contentItems`` and ``success``.  Every other server request is answered
with a "method not found" error.  Hooks (``hooks=``) observe its items and the
turn's end (:mod:`.codex_hooks`).  codex 0.169 writes its messages without the
``"jsonrpc"`` member, so it is not required here.  The exact schema of the
messages this codec writes and reads is in ``schemas/codex-app-server/``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from coding_genesis.approval import ApprovalRequest, Decision
from coding_genesis.backend import CommandSpec, Translator, client_version
from coding_genesis.control import (
    FORWARD,
    Answered,
    ControlIntent,
    ControlProtocol,
    HookCall,
    Incoming,
    Outgoing,
    PermissionAsk,
    ProtocolFault,
    QuestionAsked,
    Ready,
    Reply,
    ToolCall,
    TurnBegan,
    TurnEnded,
    Unknown,
    UnparsedLine,
)
from coding_genesis.hooks import HookEvent, HookInput
from coding_genesis.questions import UserAnswer
from coding_genesis.request import Request
from coding_genesis.result import ContextUsage
from coding_genesis.tools import HostTool, ToolResult

from ._codex import (
    SANDBOX_POLICY,
    codex_overrides,
    codex_sandbox,
    request_extras,
    strict_schema_warning,
    untrusted_project,
)
from ._common import as_int
from ._jsonrpc import INVALID_PARAMS, NOT_SERVED, dispatch, error_answer, valid_id
from ._questions import Elicited, Gathering, answer_of, elicitation_question
from .codex_calls import call_request, context_of
from .codex_changes import touched as touched_by
from .codex_events import AppServerTranslator, add_usage
from .codex_hooks import HOOK_EFFECTS, tool_hook
from .codex_requests import (
    ELICITATION,
    USER_INPUT,
    mcp_approval,
    thread_config,
    user_input_answer,
    user_input_questions,
)
from .parts import codex_input

__all__ = ["DELTAS", "FORWARDED", "NOT_SERVED", "OPT_OUT", "CodexControl"]


#: Notifications ignored here but asked for by nobody: codex is told not to
#: send them (``optOutNotificationMethods``), which also spares a long
#: command's streamed output.  What is left of a message is its completed item.
OPT_OUT = (
    "remoteControl/status/changed",
    "item/agentMessage/delta",
    "item/reasoning/summaryTextDelta",
    "item/reasoning/summaryPartAdded",
    "item/reasoning/textDelta",
    "item/plan/delta",
    "item/commandExecution/outputDelta",
    "item/fileChange/outputDelta",
)

#: The pieces of a message as codex writes them: asked for (left out of
#: :data:`OPT_OUT`) only by a session with ``partial=True``.
DELTAS = (
    "item/agentMessage/delta",
    "item/reasoning/summaryTextDelta",
    "item/reasoning/textDelta",
)

#: The notifications of a session we know (every one codex 0.169 sent in our
#: recordings among them): forwarded to the translator, which makes events of
#: some and nothing of the rest (transcripts keep them).  Any other is
#: :class:`Unknown`, a sign of a newer codex.
FORWARDED = frozenset(
    {
        "error",
        *DELTAS,
        "thread/started",
        "thread/status/changed",
        "thread/tokenUsage/updated",
        "turn/started",
        "turn/completed",
        "turn/diff/updated",
        "turn/plan/updated",
        "item/started",
        "item/completed",
        "item/mcpToolCall/progress",
        "item/fileChange/patchUpdated",
        "serverRequest/resolved",
        "account/rateLimits/updated",
        "mcpServer/startupStatus/updated",
        "thread/goal/cleared",
        "model/rerouted",
        "warning",
        "configWarning",
        "deprecationNotice",
    }
)

_PATCH_UPDATED = "item/fileChange/patchUpdated"
_COMMAND_ASK = "item/commandExecution/requestApproval"
_WRITE_ASK = "item/fileChange/requestApproval"
_TOOL_CALL = "item/tool/call"
_OPENING = ("initialize", "thread/start", "thread/resume", "thread/fork")
#: The most ``turn/started`` ids kept while our ``turn/start`` is unanswered
#: (codex sends one of its own at most; a flood is not held).
_EARLY_KEPT = 8
#: Why a line codex wrote is refused unread.
_UNPARSED = "nested too deep or too large for coding-genesis to read"


def _opening(start: Request) -> str:
    """The thread request a session opens with: a new thread, the one resumed,
    or a fork of it (a new thread from its history, in this new process)."""
    if start.fork:
        return "thread/fork"
    return "thread/resume" if start.resume else "thread/start"


def _request(rid: int, method: str, params: Mapping[str, Any]) -> Outgoing:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": dict(params)}


def _text_input(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text, "text_elements": []}]


def _dynamic_tool(tool: HostTool) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "inputSchema": dict(tool.parameters),
    }


class CodexControl(ControlProtocol):
    """One live session's codec for ``codex app-server``: pure, stateful
    (our request ids, the thread and turn ids, the file changes it was told
    of).

    Approvals: with ``start.approvals`` the thread's ``approvalPolicy`` is
    ``untrusted``, under which codex 0.169 asks before every shell command
    and every patch, whatever the sandbox (an approved command runs outside
    it: an approved ``touch`` wrote under ``read-only``).  Without approvals the policy is ``never`` (as ``codex
    exec``) and ``permissions=`` picks the sandbox.  A decision's ``input``
    and ``message`` cannot reach codex (its answer is one word: ``accept``,
    ``acceptForSession``, ``decline``, ``cancel``); ``end_turn`` is
    ``cancel``, which ends the turn as interrupted.
    """

    name = "codex app-server"
    can_steer = True
    hook_effects = HOOK_EFFECTS
    can_host_tools = True
    turn_options = frozenset({"model", "permissions", "output_schema"})
    prompt_parts = frozenset({"image", "file"})  # turn/start inputs (.parts)
    deltas = True  # DELTAS, asked for at initialize
    takes_mcp_servers = True
    can_compact = True  # thread/compact/start (codex_calls.py)
    context_usage = True  # from thread/tokenUsage/updated
    asks_questions = True  # request_user_input (codex_requests.py)
    can_fork = True  # thread/fork {threadId, lastTurnId} as the opening

    def __init__(self) -> None:
        self._next_id = 0
        #: Our requests awaiting their response: id → method.
        self._pending: dict[int, str] = {}
        self.thread_id: str | None = None
        #: The thread's model (``thread/start``'s answer names it): what prices a turn.
        self.model: str | None = None
        self.turn_id: str | None = None
        #: A turn was started and has not completed.
        self.turn_running = False
        #: codex said ``turn/started``: only now does it take an interrupt or a steer
        #: (before, even with the turn id answered, it is "no active turn to interrupt").
        self._turn_active = False
        self._wish_interrupt = False
        self._queued_steers: list[str] = []
        #: The running turn is one codex began by itself (``turn/started`` between ours).
        self.own_turn = False
        #: Turns codex said started while our ``turn/start`` was unanswered: the one
        #: it answers is ours, any other codex's own (compared at the answer).
        self._started_early: list[str] = []
        #: The running turn's file changes as codex announced them (``item/started``,
        #: ``item/fileChange/patchUpdated``), until the item completes: item id → changes.
        self._changes: dict[str, object] = {}
        #: The running turn's approval requests answered with ``cancel``.
        self._cancelled = False
        #: The ids of approval requests handed out and not yet answered: each is
        #: answered once, even when codex sent the id twice.
        self._open: set[Any] = set()
        #: The thread's token usage as codex last reported it (its running total).
        self._usage_total: dict[str, int] | None = None
        #: The running turn's last answer.
        self._answer: str | None = None
        #: The (server, tool) of the MCP tool call that started last: what an
        #: approval elicitation is about (codex names only the server).
        self._mcp_call: tuple[str, str] | None = None
        #: The approvals asked as MCP elicitations (answered with an action).
        self._elicited: set[Any] = set()
        #: Our requests that are calls (:meth:`call`), and the context's use
        #: as codex last reported it.
        self._calls: set[int] = set()
        self._context: ContextUsage | None = None
        #: A compaction was asked and its turn has not ended (its item is ``manual``).
        self._compact_asked = False
        #: The model's questions to the user being answered.
        self._asking = Gathering()

    # -- intents -------------------------------------------------------------------

    def _call(self, method: str, params: Mapping[str, Any]) -> Outgoing:
        self._next_id += 1
        self._pending[self._next_id] = method
        return _request(self._next_id, method, params)

    def call(self, intent: ControlIntent) -> tuple[Any, list[Outgoing]]:
        obj = self._call(*call_request(intent, self.thread_id))
        self._calls.add(obj["id"])
        self._compact_asked = self._compact_asked or intent.name == "compact"
        return obj["id"], [obj]

    def context_said(self) -> ContextUsage | None:
        """As codex last reported it; before any model request, none used."""
        return self._context or ContextUsage(0, None, "codex: no model request yet")

    def command(self, start: Request) -> CommandSpec:
        overrides, warnings = codex_overrides(start.options, start.max_turns, start.cli_max_retries)
        warnings += codex_sandbox(start.permissions, start.options)[1]
        warnings += strict_schema_warning(start.output_schema)
        warnings += request_extras(start).warnings
        if start.options.get("profile"):
            warnings.append(
                f"option profile={start.options['profile']!r} not honored: "
                "codex app-server takes no --profile (use options={'config': {...}})"
            )
        trust = untrusted_project(start.cwd, start.setting_sources)
        return CommandSpec(
            args=("app-server", *trust, *overrides, *start.extra_args), warnings=tuple(warnings)
        )

    def translator(self) -> Translator:
        baseline = self._usage_total
        if baseline is None and self.request is not None and not self.request.resume:
            baseline = {}  # a new thread: its first total is all this turn's
        return AppServerTranslator(
            baseline=baseline,
            thread=self.thread_id,
            model=self.model,
            model_of=self._model,
            asked=lambda: self._compact_asked,
        )

    def _model(self) -> str | None:
        """The thread's model now (a turn may have switched it since the
        translator was made)."""
        return self.model

    def opening(self, start: Request) -> list[Outgoing]:
        wanted = DELTAS if start.partial else ()
        capabilities: dict[str, Any] = {
            "optOutNotificationMethods": [m for m in OPT_OUT if m not in wanted]
        }
        if start.tools:
            capabilities["experimentalApi"] = True  # dynamicTools is experimental in 0.169
        return [
            self._call(
                "initialize",
                {
                    "clientInfo": {"name": "coding-genesis", "version": client_version()},
                    "capabilities": capabilities,
                },
            )
        ]

    def _thread_params(self, start: Request) -> dict[str, Any]:
        sandbox, _ = codex_sandbox(start.permissions, start.options)
        params: dict[str, Any] = {
            "cwd": start.cwd,
            "approvalPolicy": "untrusted" if start.approvals else "never",
        }
        if sandbox:
            params["sandbox"] = sandbox
        if start.model:
            params["model"] = start.model
        if start.resume:
            # The turns so far are not needed (and their full hydration is deprecated).
            # A resumed thread keeps the dynamic tools it was started with.
            params["threadId"] = start.resume
            params["excludeTurns"] = True
            if start.fork and start.resume_at:
                params["lastTurnId"] = start.resume_at  # the fork's last turn, inclusive
        elif start.tools:
            params["dynamicTools"] = [_dynamic_tool(tool) for tool in start.tools]
        params.update(request_extras(start).thread)
        config = thread_config(start)
        if config:
            params["config"] = {**params.get("config", {}), **config}
        return params

    def begin_turn(self, prompt: str) -> list[Outgoing]:
        if self.request is None:
            return self._turn_start(prompt, {})
        return self.start_turn(replace(self.request, prompt=prompt))

    def start_turn(self, turn: Request) -> list[Outgoing]:
        """``turn/start`` with the turn's own options: ``outputSchema`` for this
        turn alone; ``model`` and ``sandboxPolicy`` (``permissions=``), which
        codex keeps "for this turn and subsequent turns" (the session sends
        them again with each later turn: the same answer either way).  The
        model also names the turn's :class:`SessionEvent` (what prices it)."""
        own: dict[str, Any] = {}
        if turn.output_schema is not None:
            own["outputSchema"] = dict(turn.output_schema)
        if "model" in turn.turn_options and turn.model:
            own["model"] = self.model = turn.model
        if "permissions" in turn.turn_options and turn.permissions is not None:
            own["sandboxPolicy"] = {"type": SANDBOX_POLICY[turn.permissions]}
        own.update(request_extras(turn).turn)
        out = self._turn_start(turn.prompt, own)
        if turn.parts:  # a prompt with parts is several inputs (.parts)
            out[0]["params"]["input"] = codex_input(turn)
        return out

    def _turn_start(self, prompt: str, own: Mapping[str, Any]) -> list[Outgoing]:
        self.turn_id = None
        self.turn_running = True
        self.own_turn = False
        self._started_early.clear()
        self._turn_active = False
        self._wish_interrupt = False
        self._queued_steers.clear()
        self._changes.clear()
        self._cancelled = False
        self._answer = None
        params: dict[str, Any] = {"threadId": self.thread_id or "", "input": _text_input(prompt)}
        params.update(own)
        return [self._call("turn/start", params)]

    def interrupt(self) -> list[Outgoing]:
        if not self.turn_running:
            return []
        if not self._turn_active:
            self._wish_interrupt = True  # written through a Reply at turn/started
            return []
        return [self._interrupt_call()]

    def _interrupt_call(self) -> Outgoing:
        self._wish_interrupt = False
        return self._call(
            "turn/interrupt", {"threadId": self.thread_id or "", "turnId": self.turn_id or ""}
        )

    def steer(self, text: str) -> list[Outgoing]:
        if not self.turn_running:
            return []
        if not self._turn_active:
            self._queued_steers.append(text)
            return []
        return [self._steer_call(text)]

    def _steer_call(self, text: str) -> Outgoing:
        return self._call(
            "turn/steer",
            {
                "threadId": self.thread_id or "",
                "expectedTurnId": self.turn_id or "",
                "input": _text_input(text),
            },
        )

    def answer(self, ask: PermissionAsk, decision: Decision) -> list[Outgoing]:
        # Once per call, "always" included (never acceptForSession): the
        # session's own store settles repeats, as narrowly as was asked.
        if ask.key not in self._open:
            return []  # answered already (codex sent that id twice)
        self._open.discard(ask.key)
        if decision.allowed:
            word = "accept"
        elif decision.end_turn:
            word = "cancel"
            self._cancelled = True
        else:
            word = "decline"
        if ask.key in self._elicited:  # an MCP tool call's approval: an elicitation's action
            self._elicited.discard(ask.key)
            action = "accept" if word == "accept" else ("cancel" if word == "cancel" else "decline")
            return [{"jsonrpc": "2.0", "id": ask.key, "result": {"action": action}}]
        return [{"jsonrpc": "2.0", "id": ask.key, "result": {"decision": word}}]

    def answer_question(
        self, ask: QuestionAsked, answer: UserAnswer | None, refusal: str | None
    ) -> list[Outgoing]:
        done = self._asking.answered(ask.key, answer, refusal)  # None: more to answer first
        if done is None:
            return []
        return [{"jsonrpc": "2.0", "id": done.call, "result": answer_of(done, user_input_answer)}]

    def answer_tool(self, call: ToolCall, result: ToolResult) -> list[Outgoing]:
        content = [{"type": "inputText", "text": result.text}]
        answer = {"contentItems": content, "success": not result.is_error}
        return [{"jsonrpc": "2.0", "id": call.key, "result": answer}]

    # -- what the CLI says ---------------------------------------------------------

    def receive(self, obj: dict[str, Any]) -> Sequence[Incoming]:
        return dispatch(obj, self._response, self._server_request, self._notification)

    def unparsed(self, head: UnparsedLine) -> Sequence[Incoming]:
        """A message that could not be parsed, from its envelope: a server
        request is answered (an approval declined as unreadable, through the
        approval machinery; any other request an error), an answer to one of
        our requests fails it, and the running turn's ``turn/completed``
        still ends it."""
        method, rid = head.get("method"), head.get("id")
        if isinstance(method, str) and valid_id(rid):
            if method not in (_COMMAND_ASK, _WRITE_ASK):
                return (Reply((error_answer(rid, INVALID_PARAMS, f"{method}: {_UNPARSED}"),)),)
            item_id = head.get("params", "itemId")
            command = method == _COMMAND_ASK
            request = ApprovalRequest(
                "commandExecution" if command else "fileChange",
                {},
                kind="command" if command else "write",
                session_id=self.thread_id,
                tool_call_id=item_id if isinstance(item_id, str) else None,
                unreadable=f"its request was {_UNPARSED}",
            )
            self._open.add(rid)
            return (PermissionAsk(rid, request),)
        if method is None and type(rid) is int and rid in self._pending:
            return self._failed(self._pending.pop(rid), f"its answer was {_UNPARSED}")
        if method == "turn/completed":
            thread, tid = head.get("params", "threadId"), head.get("params", "turn", "id")
            if self.thread_id and isinstance(thread, str) and thread != self.thread_id:
                return ()
            # Its answer and usage are in what could not be read: the turn ended, unread.
            status = head.get("params", "turn", "status")
            error = f"codex's turn/completed was {_UNPARSED} (status {status or 'unread'})"
            status = "interrupted" if status == "interrupted" else "failed"
            return self._turn_completed({"turn": {"id": tid, "status": status, "error": error}})
        return ()

    def _response(self, obj: Mapping[str, Any]) -> Sequence[Incoming]:
        rid = obj.get("id")
        if "result" not in obj and "error" not in obj:
            return (ProtocolFault("not JSON-RPC: neither a method nor a result nor an error"),)
        error = obj.get("error")
        if rid is None and error is not None:  # codex could not read one of our lines
            return (ProtocolFault(f"codex app-server: {_error_text(error)}"),)
        if not valid_id(rid) or rid not in self._pending:
            return (ProtocolFault(f"a response to id {rid!r}, which we never sent"),)
        method = self._pending.pop(rid)
        if rid in self._calls:
            self._calls.discard(rid)
            if error is not None or "result" not in obj:
                return (
                    Answered(rid, error=f"codex app-server refused {method}: {_error_text(error)}"),
                )
            return (Answered(rid, obj.get("result")),)
        if error is not None or "result" not in obj:
            return self._failed(method, _error_text(error))
        result = obj.get("result")
        if method == "initialize":
            start = self.request or Request(prompt="", cwd=".")
            opening = _opening(start)
            return (
                Reply(
                    (
                        {"jsonrpc": "2.0", "method": "initialized"},
                        self._call(opening, self._thread_params(start)),
                    )
                ),
            )
        if method in _OPENING[1:]:
            thread = result.get("thread") if isinstance(result, Mapping) else None
            tid = thread.get("id") if isinstance(thread, Mapping) else None
            if not isinstance(tid, str) or not tid:
                return (ProtocolFault(f"{method} answered no thread id", fatal=True),)
            self.thread_id = tid
            model = result.get("model") if isinstance(result, Mapping) else None
            self.model = model if isinstance(model, str) and model else None
            return (Ready(tid),)
        if method == "turn/start":
            turn = result.get("turn") if isinstance(result, Mapping) else None
            tid = turn.get("id") if isinstance(turn, Mapping) else None
            if isinstance(tid, str) and tid and self.turn_running and self.turn_id is None:
                self.turn_id = tid
                early, self._started_early = self._started_early, []
                if tid in early:  # its turn/started came first: the turn is active now
                    return self._turn_started(tid)
        return ()

    def _failed(self, method: str, message: str) -> Sequence[Incoming]:
        if method == "turn/interrupt":
            # The turn ended as we asked (a race with its own end): its
            # turn/completed says how; nothing is broken.
            return ()
        if method in _OPENING:
            return (ProtocolFault(f"codex app-server refused {method}: {message}", fatal=True),)
        if method == "turn/start" and self.turn_running and self.turn_id is None:
            # No turn of ours runs.  One codex said started meanwhile is its own
            # (refused ours, say): adopted, its end ends the turn the fault gives up on.
            self.turn_running = self._turn_active = False
            early, self._started_early = self._started_early, []
            if early:
                self._turn_started(early[-1])
        if method == "turn/interrupt" and not self.turn_running:
            return ()  # the turn ended while the interrupt was on its way
        return (ProtocolFault(f"codex app-server refused {method}: {message}"),)

    def _turn_started(self, turn_id: str) -> Sequence[Incoming]:
        """A turn is active: ours (what was waiting for it goes out now), or,
        with none of ours begun, codex's own (adopted: :class:`TurnBegan`).
        While our ``turn/start`` is unanswered, the turn's id is kept until
        the answer says whether it is ours."""
        if not self.turn_running:
            self.turn_running = self._turn_active = self.own_turn = True
            self.turn_id = turn_id
            self._wish_interrupt = self._cancelled = False
            self._queued_steers.clear()
            self._changes.clear()
            self._answer = None
            return (TurnBegan(),)
        if self.turn_id is None:
            if len(self._started_early) < _EARLY_KEPT:
                self._started_early.append(turn_id)
            return ()
        if self._turn_active or self.turn_id != turn_id:
            return ()  # codex's own turn inside ours, or a repeat
        self._turn_active = True
        objects = [self._steer_call(text) for text in self._queued_steers]
        self._queued_steers.clear()
        if self._wish_interrupt:
            objects.append(self._interrupt_call())
        return (Reply(tuple(objects)),) if objects else ()

    def _server_request(self, obj: Mapping[str, Any], method: str) -> Sequence[Incoming]:
        rid = obj.get("id")
        if not valid_id(rid):
            return (ProtocolFault(f"a request of {method} with a bad id: {rid!r}"),)
        tools = self.request.tools if self.request is not None else ()
        if method == ELICITATION and isinstance(obj.get("params"), Mapping):
            return self._elicitation(rid, obj["params"])
        if method == USER_INPUT and isinstance(obj.get("params"), Mapping):
            found = user_input_questions(obj["params"])
            if found:
                return self._asking.open(rid, [q for _, q in found], [i for i, _ in found])
        if method not in (_COMMAND_ASK, _WRITE_ASK) and not (method == _TOOL_CALL and tools):
            return (
                Reply((error_answer(rid, NOT_SERVED, f"not served by coding-genesis: {method}"),)),
            )
        params = obj.get("params")
        if not isinstance(params, Mapping):
            return (
                Reply((error_answer(rid, INVALID_PARAMS, f"{method} without params"),)),
                ProtocolFault(f"{method} without params"),
            )
        if method == _TOOL_CALL:
            return self._tool_call(rid, params)
        item_id = params.get("itemId")
        item_id = item_id if isinstance(item_id, str) else None
        reason = params.get("reason")
        common: dict[str, Any] = {
            "reason": reason if isinstance(reason, str) else None,
            "session_id": self.thread_id,
            "tool_call_id": item_id,
        }
        if method == _COMMAND_ASK:
            command = params.get("command")
            request = ApprovalRequest(
                "commandExecution",
                dict(params),
                kind="command",
                command=command if isinstance(command, str) else None,
                **common,
            )
        else:
            changes = self._changes.get(item_id or "")
            touched = touched_by(changes, params.get("grantRoot"))
            request = ApprovalRequest(
                "fileChange",
                {**params, "changes": changes if changes is not None else []},
                kind="write",
                paths=touched.paths,
                moves=touched.moves,
                unreadable=touched.unreadable,
                **common,
            )
        self._open.add(rid)
        return (PermissionAsk(rid, request),)

    def _elicitation(self, rid: Any, params: Mapping[str, Any]) -> Sequence[Incoming]:
        """An MCP server's elicitation: the approval of an MCP tool call asked
        of the approver; any other a question to the user (the asker's)."""
        common = {"session_id": self.thread_id, "tool_call_id": None, "reason": None}
        request = mcp_approval(params, self._mcp_call, common)
        if request is None:  # the server's own question to the user: the asker's
            schema = params.get("requestedSchema")
            asked = elicitation_question(params.get("message"), params.get("serverName"), schema)
            return self._asking.open(rid, [asked], Elicited(schema))
        self._open.add(rid)
        self._elicited.add(rid)
        return (PermissionAsk(rid, request),)

    def _tool_call(self, rid: Any, params: Mapping[str, Any]) -> Sequence[Incoming]:
        """The model calls a dynamic tool: one of the caller's functions."""
        tool, arguments = params.get("tool"), params.get("arguments", {})
        if params.get("namespace") is not None or not isinstance(tool, str):
            name = repr(params.get("tool"))[:200]
            return (Reply((error_answer(rid, INVALID_PARAMS, f"no dynamic tool {name}"),)),)
        if not isinstance(arguments, Mapping):
            bad = f"{_TOOL_CALL} arguments must be an object"
            return (Reply((error_answer(rid, INVALID_PARAMS, bad),)),)
        call_id = params.get("callId")
        return (ToolCall(rid, tool, arguments, call_id if isinstance(call_id, str) else None),)

    def _notification(self, obj: Mapping[str, Any], method: str) -> Sequence[Incoming]:
        params = obj.get("params")
        params = params if isinstance(params, Mapping) else {}
        thread = params.get("threadId")
        if self.thread_id and isinstance(thread, str) and thread != self.thread_id:
            return (Unknown(f"{method} of another thread"),)
        if method in ("item/started", "item/completed"):
            return self._item(params, begins=method == "item/started")
        if method == _PATCH_UPDATED:
            item_id = params.get("itemId")
            if isinstance(item_id, str) and item_id in self._changes:
                self._changes[item_id] = params.get("changes")  # what is asked about now
            return (FORWARD,)
        if method == "thread/tokenUsage/updated":
            usage = params.get("tokenUsage")
            total = usage.get("total") if isinstance(usage, Mapping) else None
            if isinstance(total, Mapping):
                self._usage_total = add_usage({}, total)
            if isinstance(usage, Mapping):  # one it cannot read leaves the last one said
                self._context = context_of(usage) or self._context
            return (FORWARD,)
        if method == "turn/started":
            turn = params.get("turn")
            tid = turn.get("id") if isinstance(turn, Mapping) else None
            started = self._turn_started(tid) if isinstance(tid, str) and tid else ()
            return (FORWARD, *started)
        if method == "turn/completed":
            if not isinstance(params.get("turn"), Mapping):
                return (ProtocolFault("turn/completed without a turn"),)
            ended = self._turn_completed(params)
            if ended and "turn_end" in self.hooked:
                end = HookInput(
                    "turn_end", answer=self._answer, session_id=self.thread_id, raw=dict(params)
                )
                ended = (HookCall(None, end), *ended)
            return (FORWARD, *ended)
        if method in FORWARDED:
            return (FORWARD,)
        return (Unknown(method),)

    def _item(self, params: Mapping[str, Any], *, begins: bool) -> Sequence[Incoming]:
        """An item started or completed: a file change kept while it runs, the
        last agent message kept for the turn's end hook, the item's hook call."""
        item = params.get("item")
        if not isinstance(item, Mapping):
            return (FORWARD,)
        if begins and item.get("type") == "mcpToolCall":
            server, tool = item.get("server"), item.get("tool")
            if isinstance(server, str) and isinstance(tool, str):
                self._mcp_call = (server, tool)
        if item.get("type") == "fileChange" and isinstance(item.get("id"), str):
            if begins:  # kept as announced (a shape we cannot read is denied when asked)
                self._changes[item["id"]] = item.get("changes")
            else:
                self._changes.pop(item["id"], None)
        if not begins and item.get("type") == "agentMessage":
            text = item.get("text")
            self._answer = text if isinstance(text, str) and text else self._answer
        return (FORWARD, *self._item_hook(item, params, begins))

    def _item_hook(
        self, item: Mapping[str, Any], params: Mapping[str, Any], started: bool
    ) -> tuple[Incoming, ...]:
        """The hook call an item's start or end is (observed), if the session has hooks for it."""
        if started and item.get("type") == "contextCompaction":
            if "pre_compact" not in self.hooked:
                return ()
            compact = HookInput("pre_compact", session_id=self.thread_id, raw=dict(params))
            return (HookCall(None, compact),)
        event: HookEvent = "pre_tool" if started else "post_tool"
        if event not in self.hooked:
            return ()
        data = tool_hook(event, item, params, self.thread_id)
        return (HookCall(None, data),) if data is not None else ()

    def _turn_completed(self, params: Mapping[str, Any]) -> Sequence[Incoming]:
        turn = params["turn"]
        tid = turn.get("id")
        if not self.turn_running or self.turn_id is None or tid != self.turn_id:
            return ()  # not the running turn: an older one (its end came late), or none
        self._compact_asked = self._compact_asked and not self.own_turn
        self.turn_running = self._turn_active = self.own_turn = False
        self.turn_id = None
        self._changes.clear()
        status = turn.get("status")
        error = turn.get("error")
        message = _error_text(error) if error is not None else None
        if status == "completed":
            return (TurnEnded("completed"),)
        if status == "interrupted":
            if self._cancelled:
                message = "the approver declined and ended the turn"
            return (TurnEnded("interrupted", message),)
        return (TurnEnded("failed", message or f"turn ended with status {status!r}"),)


def _error_text(error: Any) -> str:
    """The words of a JSON-RPC error or a turn's error, whatever its shape."""
    if isinstance(error, Mapping):
        message = error.get("message")
        code = as_int(error.get("code"))
        text = str(message) if message is not None else repr(dict(error))
        return f"{text} ({code})" if code is not None else text
    return "no error message" if error is None else str(error)


def __getattr__(name: str) -> Any:
    """0.x's name of the codec: ``CodexAppServer`` is :class:`CodexControl`
    (one role name for every backend's control protocol)."""
    if name != "CodexAppServer":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"{__name__}.CodexAppServer is deprecated: use {__name__}.CodexControl",
        DeprecationWarning,
        stacklevel=2,
    )
    return CodexControl
