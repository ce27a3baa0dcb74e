"""The Agent Client Protocol (ACP, version 1) as a :class:`~coding_genesis.control.ControlProtocol`.

An ACP agent (``gemini --acp``, ``qwen --acp``, ``opencode acp``, any command
that speaks it) reads JSON-RPC 2.0 requests on stdin and writes its answers,
its notifications and its own requests on stdout, one object a line.  A live
session is ``initialize`` → ``session/new`` (or ``session/load`` for
``resume=``) → ``session/set_mode`` (the permission level's mode, else the
asking mode: never the agent's own starting mode) → one ``session/prompt``
per turn; ``session/cancel`` ends a running turn.  What the agent tells of a turn comes as ``session/update``
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
  ``qwen/notify/session/prompt-suggestion``, measured 11 ms
  later; claude-agent-acp's late updates): those are no part of the ended
  turn.  An update that comes while no prompt of ours runs is a turn of the
  agent's own, over with it (ACP has no other end for it): it is forwarded
  marked :data:`~.acp_events.LATE` with :class:`TurnEnded`, so the session
  records it as a turn the CLI took (``trigger: "cli"``), unless a
  permission request of the agent's is still open (that turn ends at the
  first update after its answer).  ACP updates carry no turn id, so one
  that comes after the next prompt went out counts in that turn.  Waiting
  for a quiet period instead would add its length to every turn.
* A line too deep or too large to parse (:meth:`AcpControl.unparsed`) is
  answered from its envelope: a permission request is denied as
  unreadable through the approval machinery (recorded; answered
  ``cancelled``, its options unread), any other request gets an error, an
  answer to our ``session/prompt`` fails the turn.
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
  cost is its share of that running total,
  :class:`~coding_genesis.usage.RunningTotals`).  The turn's usage is one
  :class:`~coding_genesis.events.UsageEvent` at its end.

The per-agent facts (mode ids, whether ``session/load`` may be used) are
:class:`AcpAgent` values (:mod:`.acp_agents`); a turn's events are made by
:mod:`.acp_events`; the command and its environment come from the backend
that builds this protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coding_genesis.approval import ApprovalRequest, Decision
from coding_genesis.backend import CommandSpec, Translator, client_version
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
    TurnEnded,
    Unknown,
    UnparsedLine,
)
from coding_genesis.hooks import HookEffect, HookEvent, HookInput, HookResult
from coding_genesis.prompts import Image
from coding_genesis.questions import UserAnswer
from coding_genesis.request import Request
from coding_genesis.result import ContextUsage

from ._common import as_int
from ._jsonrpc import INVALID_PARAMS, NOT_SERVED, dispatch, error_answer, valid_id
from ._questions import Elicited, Gathering, elicitation_question, elicitation_result
from .acp_events import (
    LATE,
    AcpTranslator,
    Call,
    _mapping,
    _said,
    _text,
    acp_request,
    error_status,
    error_words,
    tool_hook,
    track,
)
from .acp_facts import AcpAgent, session_meta
from .acp_requests import (
    MCP_CALL_NAMES,
    MCP_META_NAME,
    callers_servers,
    named_tool,
    session_server,
)
from .acp_switch import AcpSwitches, model_option
from .parts import acp_prompt

__all__ = [
    "KNOWN_UPDATES",
    "NOT_SERVED",
    "PROTOCOL_VERSION",
    "AcpAgent",
    "AcpControl",
    "AcpTranslator",
    "ReportingAcpControl",
    "acp_request",
    "error_status",
    "error_words",
]

#: Every hook point ACP tells of: a ``pre_tool`` hook can block a call the
#: agent asks about (its permission request is answered with the reject
#: option); the rest observe.
HOOK_EFFECTS: Mapping[HookEvent, frozenset[HookEffect]] = {
    "pre_tool": frozenset({"block"}),
    "post_tool": frozenset(),
    "turn_end": frozenset(),
}

#: The version of the protocol we speak.
PROTOCOL_VERSION = 1

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

#: The updates that tell of the agent's work (not of its state: commands,
#: modes, configuration, the session's title): one that comes while no prompt
#: runs is a turn of the agent's own.
_WORK = KNOWN_UPDATES - {
    "available_commands_update",
    "current_mode_update",
    "config_option_update",
    "session_info_update",
}

#: The updates that tell of a tool call (what the hooks observe).
_TOOL_UPDATES = ("tool_call", "tool_call_update")
#: How many tool calls of one turn are remembered for their permission request.
_ANNOUNCED_MAX = 1000

#: Why a line the agent wrote is refused unread.
_UNPARSED = "nested too deep or too large for coding-genesis to read"

#: Notifications the measured agents send that say nothing we use (qwen's
#: prompt suggestion and mode news, claude-agent-acp's auth status): ignored
#: without being counted as unknown.
_QUIET = ("qwen/notify/", "_auth/")


# -- the protocol ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AskKey:
    """The handle of one permission request: the agent's id and the option
    ids by kind."""

    id: Any
    options: Mapping[str, str]


class AcpControl(ControlProtocol):
    """One live session's ACP codec (see the module's docstring).

    Built by a backend with its :class:`AcpAgent` facts and the function that
    makes the agent's command (argv tail, environment, overlay) for a session.
    """

    # No name of its own: the backend's (gemini, qwen...) names it in errors.
    #: A ``pre_tool`` hook runs at the agent's permission request, which waits
    #: for us: its block is the reject option.  A call the agent runs without
    #: asking (told to pre_tool as it ends), a call's end and a turn's end are
    #: told, waited for by nobody: their hooks observe (a block there is
    #: recorded as not applied).
    hook_effects = HOOK_EFFECTS
    can_steer = False
    #: ACP has no field for an output schema: it goes in the turn's prompt.
    schema_in_prompt = True
    #: The caller's functions reach the agent through an MCP server of ours
    #: that it launches (``mcpServers``), which the session serves.
    can_host_tools = True
    tools_over_mcp = True
    #: A file is a resource_link (every agent's); an image, where the agent's
    #: initialize says so (else :meth:`turn_refusal`).
    prompt_parts = frozenset({"image", "file"})
    #: ``agent_message_chunk`` / ``agent_thought_chunk`` are pieces already.
    deltas = True
    takes_mcp_servers = True
    #: An agent's ``elicitation/create`` (a form for the user) is the asker's;
    #: the capability is offered only when there is one.
    asks_questions = True

    def __init__(self, agent: AcpAgent, command: Callable[[Request], CommandSpec]) -> None:
        self.agent = agent
        self.resume_refusal = agent.resume
        self._command = command
        self._next_id = 0
        #: Our requests awaiting their answer: id → method.
        self._pending: dict[int, str] = {}
        self.session_id: str | None = None
        #: The agent offers session/load (its initialize said so).
        self.can_load = False
        #: The agent takes an image in a prompt (promptCapabilities.image).
        self.takes_images = False
        self._prompt_id: int | None = None
        #: Permission requests of the running turn still unanswered: their ids.
        self._open: set[Any] = set()
        self._cancelled = False
        self._ended_by: str | None = None
        self._translator: AcpTranslator | None = None
        #: The opening is done (what the agent replays of a loaded session
        #: before it is belongs to no turn).
        self._open_done = False
        #: The running turn's tool calls as the hooks see them.
        self._hook_calls: dict[str, Call] = {}
        #: The running turn's tool calls as the agent announced them (their
        #: title, kind and input), for a permission request that names only
        #: the call's id (codex-acp's request for an MCP tool).
        self._announced: dict[str, Mapping[str, Any]] = {}
        #: What a turn may switch (the level where the agent has its modes),
        #: the mode and model now, and the switches pending.
        self.turn_options = (
            frozenset({"output_schema"})  # worded in the turn's prompt, as every turn's
            | frozenset({"permissions"} if agent.modes else set())
            | frozenset({"model"} if agent.switches_model else set())
        )
        self._switches = AcpSwitches()
        #: The agent's elicitations being answered by the asker.
        self._asking = Gathering()
        #: The context's use as the agent's last ``usage_update`` said it.
        self._context: ContextUsage | None = None

    # -- intents ------------------------------------------------------------------

    def _call(self, method: str, params: Mapping[str, Any]) -> Outgoing:
        self._next_id += 1
        self._pending[self._next_id] = method
        return {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": dict(params)}

    def command(self, request: Request) -> CommandSpec:
        return self._command(request)

    def translator(self) -> Translator:
        partial = self.request is not None and self.request.partial
        self._translator = AcpTranslator(self.session_id, self.host_tool_of, partial=partial)
        return self._translator

    def opening(self, request: Request) -> list[Outgoing]:
        return [
            self._call(
                "initialize",
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "clientCapabilities": {
                        "fs": {"readTextFile": False, "writeTextFile": False},
                        "terminal": False,
                        # a form the agent asks the user to fill: the asker's
                        **({"elicitation": {"form": {}}} if request.asker is not None else {}),
                    },
                    "clientInfo": {"name": "coding-genesis", "version": client_version()},
                },
            )
        ]

    def mode(self, request: Request) -> str | None:
        """The mode the session runs in: the asking mode when an approver
        decides (unless ``permissions="read-only"``, which stays read-only),
        else the permission level's, else the asking mode again (what is asked
        is then refused: no approver).  Always set after ``session/new``, so
        the agent's own starting mode, which its settings may choose
        (claude-agent-acp reads a repository's ``permissions.defaultMode``),
        never applies; None: the agent has no asking mode to set."""
        if request.approvals and request.permissions != "read-only" and self.agent.ask_mode:
            return self.agent.ask_mode
        if request.permissions is not None:
            return self.agent.modes.get(request.permissions)
        return self.agent.ask_mode

    def begin_turn(self, prompt: str) -> list[Outgoing]:
        self._open.clear()
        self._hook_calls.clear()
        self._announced.clear()
        self._cancelled = False
        self._ended_by = None
        call = self._call(
            "session/prompt",
            {"sessionId": self.session_id or "", "prompt": [{"type": "text", "text": prompt}]},
        )
        self._prompt_id = self._next_id
        return [call]

    def turn_calls(self, turn: Request) -> list[ControlIntent]:
        mode = self.mode(turn) if "permissions" in turn.turn_options else None
        model = turn.model if "model" in turn.turn_options else None
        return self._switches.calls(mode, model)

    def call(self, intent: ControlIntent) -> tuple[Any, list[Outgoing]]:
        if intent.name not in ("set_mode", "set_model"):
            return super().call(intent)
        rid = self._next_id + 1
        method, params = self._switches.request(rid, intent, self.session_id or "")
        return rid, [self._call(method, params)]

    def start_turn(self, turn: Request) -> list[Outgoing]:
        """``session/prompt``; a prompt with parts is several blocks (.parts)."""
        out = self.begin_turn(turn.prompt)
        if turn.parts:
            out[0]["params"]["prompt"] = acp_prompt(turn)
        return out

    def turn_refusal(self, turn: Request) -> str | None:
        """An image the agent's ``initialize`` did not offer to take."""
        if self.takes_images or not any(isinstance(p, Image) for p in turn.parts):
            return None
        return (
            f"{self.agent.name} takes no image in a prompt (its initialize answer's "
            "agentCapabilities.promptCapabilities.image is not true); send the text and "
            "files alone"
        )

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

    def answer_question(
        self, ask: QuestionAsked, answer: UserAnswer | None, refusal: str | None
    ) -> list[Outgoing]:
        done = self._asking.answered(ask.key, answer, refusal)  # one question a request
        if done is None:
            return []
        return [{"jsonrpc": "2.0", "id": done.call, "result": elicitation_result(done)}]

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
        return dispatch(obj, self._response, self._request, self._notification)

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
        if self._switches.pending(rid):  # a switch the session awaits
            self._switches.answered(rid, error is None and "result" in obj)
            if error is not None or "result" not in obj:
                return (Answered(rid, error=error_words(error)),)
            return (Answered(rid, result=result),)
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
            return self._ready()
        return ()

    def _ready(self) -> tuple[Incoming]:
        self._open_done = True
        return (Ready(self.session_id),)

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
        self.takes_images = _mapping(capabilities.get("promptCapabilities")).get("image") is True
        start = self.request
        callers = callers_servers(start, capabilities)
        if isinstance(callers, str):
            return (ProtocolFault(callers, fatal=True),)
        params: dict[str, Any] = {
            "cwd": start.cwd if start else ".",
            "mcpServers": [session_server(server) for server in self.mcp_servers] + callers,
        }
        if self.agent.session_meta:
            sources = start.setting_sources if start and start.setting_sources else None
            params["_meta"] = session_meta(
                self.agent.session_meta, tuple(sources or self.agent.settings_default)
            )
        if start is not None and start.add_dirs and self.agent.directories:
            offered = _mapping(capabilities.get("sessionCapabilities"))
            if not isinstance(offered.get("additionalDirectories"), Mapping):
                return (
                    ProtocolFault(
                        "does not offer additionalDirectories (sessionCapabilities): "
                        "add_dirs= cannot widen its session",
                        fatal=True,
                    ),
                )
            params["additionalDirectories"] = list(start.add_dirs)
        resume = start.resume if start is not None else None
        if resume:
            if self.resume_refusal is not None:  # the capability check said so first
                return (ProtocolFault(self.resume_refusal, fatal=True),)
            if not self.can_load:
                return (
                    ProtocolFault(
                        f"does not offer session/load (loadSession): "
                        f"resume={resume!r} cannot continue that session",
                        fatal=True,
                    ),
                )
            self.session_id = resume
            return (Reply((self._call("session/load", {"sessionId": resume, **params}),)),)
        return (Reply((self._call("session/new", params),)),)

    def _opened(self, method: str, result: Mapping[str, Any]) -> Sequence[Incoming]:
        if method == "session/new":
            sid = _text(result.get("sessionId"))
            if sid is None:
                return (ProtocolFault("answered session/new with no sessionId", True),)
            self.session_id = sid
        self._switches.model_option = model_option(result)
        mode = self.mode(self.request) if self.request is not None else None
        self._switches.mode = mode
        if mode is None:
            return self._ready()
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
            if "turn_end" in self.hooked:
                answer = translator.answer if translator is not None else None
                end = HookInput(
                    "turn_end", answer=answer, session_id=self.session_id, raw=dict(obj)
                )
                return (FORWARD, HookCall(None, end), TurnEnded("completed"))
            return (FORWARD, TurnEnded("completed"))
        return (
            FORWARD,
            TurnEnded("failed", f"{self.agent.name} stopped the turn: {_said(reason)}"),
        )

    def _request(self, obj: Mapping[str, Any], method: str) -> Sequence[Incoming]:
        rid = obj.get("id")
        if not valid_id(rid):
            return (
                ProtocolFault(f"a request of {_said(method)} with a bad id: {_said(repr(rid))}"),
            )
        if method == "elicitation/create" and self.request and self.request.asker:
            params = _mapping(obj.get("params"))
            schema = params.get("requestedSchema")
            asked = elicitation_question(params.get("message"), None, schema)
            return self._asking.open(rid, [asked], Elicited(schema))
        if method != "session/request_permission":
            return (
                Reply(
                    (
                        error_answer(
                            rid, NOT_SERVED, f"not served by coding-genesis: {_said(method)}"
                        ),
                    )
                ),
            )
        params = _mapping(obj.get("params"))
        call = params.get("toolCall")
        options = params.get("options")
        if isinstance(call, Mapping) and "title" not in call:
            call = {**self._announced.get(_text(call.get("toolCallId")) or "", {}), **call}
        if not isinstance(call, Mapping) or not isinstance(options, list):
            bad = "session/request_permission without a toolCall and its options"
            return (Reply((error_answer(rid, INVALID_PARAMS, bad),)), ProtocolFault(bad))
        sid = params.get("sessionId")
        if self.session_id and sid != self.session_id:
            bad = f"a permission request of another session ({_said(sid)})"
            return (Reply((error_answer(rid, INVALID_PARAMS, bad),)), ProtocolFault(bad))
        by_kind: dict[str, Any] = {}
        for offered in options:
            entry = _mapping(offered)
            kind, oid = _text(entry.get("kind")), entry.get("optionId")
            if kind and valid_id(oid) and kind not in by_kind:
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
        if self._host_tool(call):
            allow = {"outcome": "selected", "optionId": by_kind["allow_once"]}
            return (FORWARD, Reply(({"jsonrpc": "2.0", "id": rid, "result": {"outcome": allow}},)))
        self._open.add(rid)
        ask = PermissionAsk(AskKey(rid, by_kind), request)
        if "pre_tool" in self.hooked:
            tracked = track(self._hook_calls, call, asked=True)
            if tracked is not None:  # the hooks first; the approver after, unless they block
                hooked = tracked[0]
                hooked.hooked = True
                data = tool_hook(
                    "pre_tool", hooked, self.session_id, self.host_tool_of(hooked.fields)
                )
                return (FORWARD, HookCall(ask.key, data, ask))
        return (FORWARD, ask)

    def answer_hook(self, call: HookCall, result: HookResult) -> list[Outgoing]:
        """A ``pre_tool`` hook's block at a permission request: the reject
        option (by kind), the approver never asked; anything else waits for
        the approver's answer (:meth:`answer`), and an observed point for
        nothing."""
        if call.ask is None or not result.block:
            return []
        return self.answer(call.ask, Decision.deny(result.message or "blocked by a pre_tool hook"))

    def host_tool_of(self, call: Mapping[str, Any]) -> str | None:
        """The caller's function a tool call runs on the session's MCP server
        (None: another tool), by any of the names agents give such a call
        (:data:`MCP_CALL_NAMES`, or gemini's call id): what its events are
        named by."""
        return self._ours(call, MCP_CALL_NAMES, by_id=True)

    def _announce(self, update: Mapping[str, Any]) -> None:
        """Remember a tool call's announcement (bounded: a turn's first
        calls), for its permission request."""
        call_id = _text(update.get("toolCallId"))
        if call_id and len(self._announced) < _ANNOUNCED_MAX:
            self._announced[call_id] = {
                k: update[k] for k in ("title", "kind", "rawInput") if k in update
            }

    def _host_tool(self, call: Mapping[str, Any]) -> bool:
        """The agent asks to call one of the caller's functions on the MCP
        server the session serves: by the agent's title of such a request
        (:attr:`AcpAgent.mcp_title`) or its ``_meta`` tool name (qwen)."""
        forms = (self.agent.mcp_title, MCP_META_NAME) if self.agent.mcp_title else (MCP_META_NAME,)
        return self._ours(call, forms, by_id=False) is not None

    def _ours(self, call: Mapping[str, Any], forms: Sequence[str], *, by_id: bool) -> str | None:
        """The caller's function ``call`` names on the session's own server
        (:func:`.acp_requests.named_tool`)."""
        if not self.mcp_servers or self.request is None:
            return None
        server = self.mcp_servers[0].name
        return named_tool(call, forms, server, self.request.tools, by_id=by_id)

    def _notification(self, obj: Mapping[str, Any], method: str) -> Sequence[Incoming]:
        if method == "session/update":
            params = _mapping(obj.get("params"))
            sid = params.get("sessionId")
            if self.session_id and sid != self.session_id:
                return (Unknown("session/update of another session"),)
            update = _mapping(params.get("update"))
            kind = update.get("sessionUpdate")
            if kind not in KNOWN_UPDATES:
                return (Unknown(f"session/update {_said(kind)}"),)
            if kind == "tool_call":
                self._announce(update)
            elif kind == "usage_update":
                self._context = _context_of(update) or self._context
            hooks = self._tool_hooks(update) if kind in _TOOL_UPDATES and self.hooked else ()
            if self._prompt_id is None and self._open_done and kind in _WORK:
                return self._late(obj, hooks)
            return (FORWARD, *hooks)
        if method.startswith(_QUIET):
            return ()
        return (Unknown(_said(method)),)

    def _late(self, obj: Mapping[str, Any], hooks: tuple[Incoming, ...]) -> tuple[Incoming, ...]:
        """An update while no prompt of ours runs: a turn of the agent's own
        (marked for the translator), over with it unless a question of the
        agent's waits for its answer."""
        marked = Forward({**obj, LATE: True})
        if self._open:
            return (marked, *hooks)
        return (marked, *hooks, TurnEnded("completed"))

    def unparsed(self, head: UnparsedLine) -> Sequence[Incoming]:
        """A line too deep or too large to parse, from its envelope: the
        agent's permission request is denied as unreadable (through the
        approval machinery, so it is recorded; its options unread, the
        answer is the ``cancelled`` outcome), any other request of the
        agent's gets an error, an answer to our ``session/prompt`` fails the
        turn (its words unread), another answer of ours fails what it
        answered.  A line that is not JSON at all (``whole`` False) ends
        nothing."""
        method, rid = head.get("method"), head.get("id")
        if isinstance(method, str):
            if not valid_id(rid):
                return ()  # a notification: nothing waits for it
            if method != "session/request_permission":
                return (Reply((error_answer(rid, INVALID_PARAMS, f"{method}: {_UNPARSED}"),)),)
            call_id = head.get("params", "toolCall", "toolCallId")
            tool = head.get("params", "toolCall", "title")
            request = ApprovalRequest(
                tool if isinstance(tool, str) and tool else "(unread)",
                {},
                session_id=self.session_id,
                tool_call_id=call_id if isinstance(call_id, str) else None,
                unreadable=f"its request was {_UNPARSED}",
            )
            self._open.add(rid)
            return (PermissionAsk(AskKey(rid, {}), request),)
        if not head.whole or type(rid) is not int or rid not in self._pending:
            return ()
        what = self._pending.pop(rid)
        if what == "session/prompt":
            if rid != self._prompt_id:
                return ()
            self._prompt_id = None
            self._open.clear()
            return (TurnEnded("failed", f"{self.agent.name}'s answer was {_UNPARSED}"),)
        fatal = what in ("initialize", "session/new", "session/load", "session/set_mode")
        return (ProtocolFault(f"its answer to {what} was {_UNPARSED}", fatal),)

    def _tool_hooks(self, update: Mapping[str, Any]) -> tuple[Incoming, ...]:
        """The observed hook calls a tool call's update is: its start, its end."""
        tracked = track(self._hook_calls, update)
        if tracked is None:
            return ()
        call, _, finishes = tracked
        hooks: list[Incoming] = []
        name = self.host_tool_of(call.fields)
        # A call run unasked is told to pre_tool as it ends, observed: an agent may
        # report a call running before it asks about it (opencode), so only its end
        # says that no permission request will come.
        if finishes and not call.hooked and "pre_tool" in self.hooked:
            call.hooked = True
            hooks.append(HookCall(None, tool_hook("pre_tool", call, self.session_id, name)))
        if finishes and "post_tool" in self.hooked:
            hooks.append(HookCall(None, tool_hook("post_tool", call, self.session_id, name)))
        return tuple(hooks)


class ReportingAcpControl(AcpControl):
    """The protocol of an agent that reports its context's use
    (:attr:`AcpAgent.usage`): ``session.context_usage()`` is its last
    ``usage_update`` (none used before the first)."""

    context_usage = True

    def context_said(self) -> ContextUsage | None:
        return self._context or ContextUsage(0, None, "acp: no usage_update yet")


def _context_of(update: Mapping[str, Any]) -> ContextUsage | None:
    """The context's use a ``usage_update`` says (None: none we can read)."""
    used, size = as_int(update.get("used")), as_int(update.get("size"))
    if used is None or used < 0:
        return None
    return ContextUsage(used, size if size and size > 0 else None, "acp usage_update")
