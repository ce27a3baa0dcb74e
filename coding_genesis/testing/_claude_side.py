"""claude's side of its stream-json control protocol (standard library only).

What claude 2.1.330 does when started with ``--input-format stream-json
--output-format stream-json --verbose --permission-prompt-tool stdio``, for the
two CLIs that play claude: the embedded failer in two-way mode (``failer.py``)
and the tests' fake claude (``tests/fakes/fakecontrol.py``).  The other side is
``coding_genesis.backends.claude_control``; the shapes are those of the
recordings in ``tests/fakes/recordings/twoway``.

* stdin is read on a thread, one JSON object per line; between turns control
  requests are served: ``initialize`` keeps the hook callbacks it registers
  (and, for an SDK MCP server named with ``--mcp-config``, does the MCP
  handshake first: ``initialize``, ``notifications/initialized``,
  ``tools/list``), ``interrupt`` is acknowledged, anything else refused;
* a tool call is asked about through the ``PreToolUse`` hook callback when one
  is registered, or ``can_use_tool``; the other hook points (``UserPromptSubmit``
  before the turn, ``PostToolUse``/``PostToolUseFailure``, ``Stop``,
  ``PreCompact``) through theirs; a host tool is called with ``mcp_message`` ``tools/call``;
* an ``interrupt`` during a question cancels it (``control_cancel_request``)
  and ends the turn as claude does (the tool's refusal,
  ``[Request interrupted by user for tool use]``, ``error_during_execution``).

Never imported by the package: each CLI runs it from a script's directory.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

REFUSED = "The user doesn't want to proceed with this tool use. The tool use was rejected."
INTERRUPTED = "[Request interrupted by user for tool use]"
#: How claude says a turn without a tool was interrupted.
INTERRUPTED_TURN = "[Request interrupted by user]"
#: The MCP version claude asks for.
MCP_VERSION = "2025-06-18"

#: A turn's wait ended by: the answer wanted, an interrupt, stdin's end, the
#: child's exit or the deadline.
Got = str


@dataclass
class Answer:
    """What the other side said about one tool call (a ``PreToolUse`` hook's or
    ``can_use_tool``'s answer), read the way claude reads it."""

    #: ``answer``, or what ended the wait instead: ``interrupt``, ``eof``.
    got: Got
    #: ``allow``, ``deny`` or None (a hook that decides nothing: claude's own
    #: check goes on).
    decision: str | None = None
    message: str = ""
    #: The changed input (``updatedInput``), if any.
    input: dict[str, Any] | None = None
    #: The turn ends now: a hook's ``continue: false``, a refusal's ``interrupt``.
    stop: bool = False
    #: ``additionalContext`` of a hook.
    context: str | None = None
    #: ``updatedPermissions`` of an allow (what "always" hands back).
    permissions: list[Any] = field(default_factory=list)
    #: The raw answer (a control response, or None).
    raw: dict[str, Any] | None = None


def read_answer(response: dict[str, Any], via_hook: bool) -> Answer:
    """A control response to a ``PreToolUse`` hook (``via_hook``) or to ``can_use_tool``."""
    if response.get("subtype") != "success":
        return Answer("answer", "deny", f"error: {response.get('error')}", raw=response)
    out = response.get("response") or {}
    if not isinstance(out, dict):
        out = {}
    if via_hook:
        specific = out.get("hookSpecificOutput") or {}
        if not isinstance(specific, dict):
            specific = {}
        decision = specific.get("permissionDecision")
        updated = specific.get("updatedInput")
        return Answer(
            "answer",
            decision if decision in ("allow", "deny") else None,
            str(specific.get("permissionDecisionReason") or out.get("stopReason") or ""),
            updated if isinstance(updated, dict) else None,
            out.get("continue") is False,
            specific.get("additionalContext") or None,
            raw=response,
        )
    updated = out.get("updatedInput")
    permissions = out.get("updatedPermissions")
    return Answer(
        "answer",
        "allow" if out.get("behavior") == "allow" else "deny",
        str(out.get("message") or ""),
        updated if isinstance(updated, dict) else None,
        bool(out.get("interrupt")),
        permissions=permissions if isinstance(permissions, list) else [],
        raw=response,
    )


def example(schema: Mapping[str, Any], root: Mapping[str, Any] | None = None) -> Any:
    """A small value ``schema`` accepts (the subset of JSON Schema the CLIs use):
    what a model answering claude's ``StructuredOutput`` tool could write."""
    root = schema if root is None else root
    value = _composed(schema, root)
    if value is not _NOT_COMPOSED:
        return value
    kind = schema.get("type", "object" if "properties" in schema else None)
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: example(sub, root) for name, sub in props.items()}
    if kind == "array":
        count = max(int(schema.get("minItems", 1)), 0)
        if "maxItems" in schema:
            count = min(count, int(schema["maxItems"]))
        return [example(schema.get("items") or {}, root) for _ in range(count)]
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        value = low + (1 if "exclusiveMinimum" in schema else 0)
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    text = "failer"
    minimum, maximum = int(schema.get("minLength", 0)), schema.get("maxLength")
    text = text.ljust(minimum, "x")
    return text[: int(maximum)] if maximum is not None else text


#: What :func:`_composed` answers for a schema that names its type itself.
_NOT_COMPOSED = object()


def _composed(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Any:
    """The example of a schema made of others or of fixed values (``$ref``,
    ``const``, ``enum``, ``anyOf``/``oneOf``, ``allOf``); else :data:`_NOT_COMPOSED`."""
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, Mapping) else {}
        return example(target, root)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return example(schema[key][0], root)
    if isinstance(schema.get("allOf"), list):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            value = example(part, root)
            merged |= value if isinstance(value, dict) else {}
        return merged
    return _NOT_COMPOSED


def stream_events(text: str, message_id: str, pieces: int = 3) -> list[dict[str, Any]]:
    """claude's ``stream_event`` lines of one text message (``--include-partial-messages``):
    its ``message_start``, the text in ``pieces`` ``text_delta``s, its ``message_stop``."""
    size = max(1, -(-len(text) // pieces))
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": message_id, "role": "assistant"}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ]
    events += [
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": text[i : i + size]},
        }
        for i in range(0, len(text), size)
    ]
    events += [{"type": "content_block_stop", "index": 0}, {"type": "message_stop"}]
    return [
        {"type": "stream_event", "event": event, "parent_tool_use_id": None} for event in events
    ]


def sdk_servers(config: str | None) -> tuple[str, ...]:
    """The SDK MCP servers ``--mcp-config`` declares (the host tools' servers)."""
    try:
        servers = json.loads(config or "{}").get("mcpServers") or {}
    except (ValueError, AttributeError):
        return ()
    return tuple(n for n, s in servers.items() if isinstance(s, dict) and s.get("type") == "sdk")


class ClaudeSide:
    """One live claude process's side of the protocol (see the module's docstring).

    ``session_id``: the conversation's id in every line; ``prefix`` names the
    ids it makes (``toolu_<prefix>_N``, ``<prefix>-req-N``); ``usage`` and
    ``cost`` are what each ``result`` reports; ``sdk_servers``: the SDK MCP
    servers ``--mcp-config`` declared; ``record`` is told of each stdin object;
    ``read_stdin``: False for a one-shot run (its stdin was the prompt).
    """

    def __init__(
        self,
        session_id: str,
        *,
        prefix: str = "fake",
        usage: dict[str, int] | None = None,
        cost: float = 0.0001,
        sdk_servers: tuple[str, ...] = (),
        record: Callable[..., None] | None = None,
        read_stdin: bool = True,
        finish_at_eof: bool = False,
    ) -> None:
        self.session_id = session_id
        self.prefix = prefix
        #: ``--include-partial-messages``: each text streamed in pieces first.
        self.partial = False
        self.usage = usage if usage is not None else {"input_tokens": 3, "output_tokens": 5}
        self.cost = cost
        self.sdk_servers = sdk_servers
        self.record = record
        #: stdin's end lets a running tool (or a wait) finish; else it stops it.
        self.finish_at_eof = finish_at_eof
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        #: User messages that came while a turn ran (each a turn of its own, later).
        self.later: collections.deque[dict[str, Any]] = collections.deque()
        #: The hook callback id registered for each of claude's hook events.
        self.callbacks: dict[str, str] = {}
        #: The host tools each SDK MCP server listed (server -> names).
        self.host_tools: dict[str, list[str]] = {}
        #: The subagent definitions ``initialize`` (or ``--agents``) gave, by name.
        self.agents: dict[str, Any] = {}
        self.last_error = False
        self.eof = False
        #: An interrupt came while a hook ran (acknowledged): the turn's next wait sees it.
        self.interrupt_pending = False
        self._ids = itertools.count(1)
        self._out = threading.Lock()
        if read_stdin:
            threading.Thread(target=self._read, daemon=True).start()

    @property
    def hook_id(self) -> str | None:
        """The ``PreToolUse`` callback (approvals and ``pre_tool`` hooks share it)."""
        return self.callbacks.get("PreToolUse")

    # -- stdout ------------------------------------------------------------------

    def emit(self, obj: dict[str, Any]) -> None:
        line = (json.dumps(obj, ensure_ascii=False) + "\n").encode()
        with self._out:
            os.write(1, line)

    def raw(self, data: bytes) -> None:
        """Bytes that are no JSON object (garbage, a cut line)."""
        with self._out:
            os.write(1, data)

    def message(self, role: str, *blocks: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": role,
            "message": {"role": role, "content": list(blocks)},
            "parent_tool_use_id": None,
            "session_id": self.session_id,
        }

    def say(self, text: str) -> None:
        if self.partial:
            for line in stream_events(text, f"msg_{self.prefix}_{self.next_id()}"):
                self.emit(dict(line, session_id=self.session_id))
        self.emit(self.message("assistant", {"type": "text", "text": text}))

    def next_id(self) -> str:
        return str(next(self._ids))

    def tool_use(self, tool: str, tool_input: dict[str, Any]) -> str:
        call = f"toolu_{self.prefix}_{self.next_id()}"
        block = {"type": "tool_use", "id": call, "name": tool, "input": tool_input}
        self.emit(self.message("assistant", block))
        return call

    def tool_result(self, call: str, text: str, is_error: bool = False) -> None:
        block = {"type": "tool_result", "tool_use_id": call, "content": text, "is_error": is_error}
        self.emit(self.message("user", block))

    def result(
        self, text: str | None, subtype: str = "success", is_error: bool | None = None, **extra: Any
    ) -> None:
        self.last_error = subtype != "success" if is_error is None else is_error
        self.emit(
            {
                "type": "result",
                "subtype": subtype,
                "is_error": self.last_error,
                "result": text,
                "session_id": self.session_id,
                "num_turns": 1,
                "total_cost_usd": self.cost,
                "usage": dict(self.usage),
                "permission_denials": [],
                **extra,
            }
        )

    def interrupted(self, call: str) -> None:
        """A tool call's turn ended by an interrupt (or a refusal that ends it)."""
        self.tool_result(call, REFUSED, True)
        self.emit(self.message("user", {"type": "text", "text": INTERRUPTED}))
        self.result(None, "error_during_execution", terminal_reason="aborted_tools")

    # -- stdin -------------------------------------------------------------------

    def _read(self) -> None:
        # os.read, not sys.stdin: a daemon thread blocked in a buffered read
        # makes the interpreter abort at exit.
        pending = b""
        while chunk := os.read(0, 65536):
            *lines, pending = (pending + chunk).split(b"\n")
            for raw in lines:
                self._take(raw)
        self._take(pending)
        self.inbox.put(None)

    def _take(self, raw: bytes) -> None:
        try:
            obj = json.loads(raw)
        except ValueError:
            return
        if isinstance(obj, dict):
            if self.record is not None:
                self.record(stdin=obj)
            self.inbox.put(obj)

    def _ack(self, obj: dict[str, Any]) -> None:
        answer: dict[str, Any] = {
            "subtype": "success",
            "request_id": obj.get("request_id"),
            "response": {},
        }
        self.emit({"type": "control_response", "response": answer})

    def next_prompt(self) -> str | None:
        """Serve control requests until a user message (its text) or stdin's end (None)."""
        while not self.eof:
            obj = self.later.popleft() if self.later else self.inbox.get()
            if obj is None:
                self.eof = True
                break
            kind, request = obj.get("type"), obj.get("request") or {}
            if kind == "control_request" and request.get("subtype") == "interrupt":
                self._ack(obj)  # no turn to end
            elif kind == "control_request":
                self.serve(obj)
            elif kind == "user":
                content = (obj.get("message") or {}).get("content")
                if isinstance(content, list):
                    content = " ".join(b.get("text", "") for b in content if isinstance(b, dict))
                return str(content)
        return None

    def serve(self, obj: dict[str, Any]) -> None:
        """Answer a control request that is no interrupt."""
        rid, request = obj.get("request_id"), obj.get("request") or {}
        answer: dict[str, Any]
        if request.get("subtype") == "initialize":
            hooks = request.get("hooks") or {}
            for event, matchers in hooks.items() if isinstance(hooks, dict) else ():
                for matcher in matchers or []:
                    self.callbacks[event] = (matcher.get("hookCallbackIds") or [None])[0]
            agents = request.get("agents")
            if isinstance(agents, dict):
                self.agents.update(agents)
            for server in self.sdk_servers:  # before the answer, as claude does
                self.host_tools[server] = self._mcp_handshake(server)
            answer = {"subtype": "success", "request_id": rid, "response": {"commands": []}}
        elif request.get("subtype") == "set_permission_mode":
            answer = {"subtype": "success", "request_id": rid, "response": {}}
        elif request.get("subtype") == "get_context_usage":
            answer = {"subtype": "success", "request_id": rid, "response": self.context_usage()}
        else:
            error = f"Unsupported control request subtype: {request.get('subtype')}"
            answer = {"subtype": "error", "request_id": rid, "error": error}
        self.emit({"type": "control_response", "response": answer})

    def context_usage(self) -> dict[str, Any]:
        """``get_context_usage``'s answer (the fields of claude 2.1.330's we read)."""
        return {"totalTokens": 0, "maxTokens": 200_000, "percentage": 0}

    def wait(
        self,
        want: str | None = None,
        child: subprocess.Popen[bytes] | None = None,
        until: float | None = None,
    ) -> tuple[Got, Any]:
        """Read stdin until the answer to ``want`` ("answer"), an interrupt,
        stdin's end ("eof"), ``child``'s exit ("done", its code) or the
        monotonic deadline ``until`` ("done")."""
        while True:
            if self.interrupt_pending:
                self.interrupt_pending = False
                return "interrupt", None
            if child is not None and child.poll() is not None:
                return "done", child.returncode
            if until is not None and time.monotonic() >= until:
                return "done", None
            polled = child is not None or until is not None
            try:
                obj = self.inbox.get(timeout=0.05 if polled else None)
            except queue.Empty:
                continue
            if obj is None:
                self.eof = True
                if want is None and polled and self.finish_at_eof:
                    continue  # the running tool or wait goes on to its end
                return "eof", None
            kind, request = obj.get("type"), obj.get("request") or {}
            if kind == "control_request" and request.get("subtype") == "interrupt":
                self._ack(obj)
                return "interrupt", None
            if kind == "control_request":
                self.serve(obj)
            elif kind == "control_response":
                response = obj.get("response") or {}
                if want is not None and response.get("request_id") == want:
                    return "answer", response
            elif kind == "user":
                self.later.append(obj)

    # -- questions -----------------------------------------------------------------

    def request(self, request: dict[str, Any]) -> str:
        rid = f"{self.prefix}-req-{self.next_id()}"
        self.emit({"type": "control_request", "request_id": rid, "request": request})
        return rid

    def cancel(self, rid: str) -> None:
        self.emit({"type": "control_cancel_request", "request_id": rid})

    def hook_request(self, event: str, data: dict[str, Any], call: str | None = None) -> str | None:
        """Call the hook callback registered for claude's ``event`` (None: none is)."""
        callback = self.callbacks.get(event)
        if callback is None:
            return None
        payload: dict[str, Any] = {"session_id": self.session_id, "hook_event_name": event}
        payload |= {"cwd": os.getcwd(), **data}
        request: dict[str, Any] = {
            "subtype": "hook_callback",
            "callback_id": callback,
            "input": payload,
        }
        if call is not None:
            payload["tool_use_id"] = call
        request["tool_use_id"] = call or f"{self.prefix}-hook-{self.next_id()}"
        return self.request(request)

    def ask(self, tool: str, tool_input: dict[str, Any], call: str) -> tuple[str, bool]:
        """Ask about a tool call: the ``PreToolUse`` hook when registered, else
        ``can_use_tool``.  The request id, and whether the hook asked."""
        rid = self.hook_request("PreToolUse", {"tool_name": tool, "tool_input": tool_input}, call)
        if rid is not None:
            return rid, True
        return self.can_use_tool(tool, tool_input, call, "the fake CLI asks"), False

    def can_use_tool(
        self,
        tool: str,
        tool_input: dict[str, Any],
        call: str,
        reason: str,
        suggestions: list[Any] | None = None,
    ) -> str:
        request: dict[str, Any] = {
            "subtype": "can_use_tool",
            "tool_name": tool,
            "input": tool_input,
        }
        if suggestions is not None:
            request["permission_suggestions"] = suggestions
        request["decision_reason"] = reason
        return self.request({**request, "tool_use_id": call})

    def answer_of(self, rid: str, via_hook: bool, call: str) -> Answer:
        """Wait for the answer to question ``rid``; an interrupt cancels the
        question and ends the turn (the lines claude writes)."""
        got, response = self.wait(rid)
        if got == "interrupt":
            self.cancel(rid)
            self.interrupted(call)
            return Answer("interrupt")
        if got == "eof":
            return Answer("eof")
        return read_answer(response, via_hook)

    def hook(self, event: str, data: dict[str, Any], call: str | None = None) -> dict[str, Any]:
        """Call ``event``'s hook and wait for its answer's payload ({} when no
        hook is registered, stdin ended, or the answer is an error); an
        interrupt cancels it and is kept for the turn's next wait."""
        rid = self.hook_request(event, data, call)
        if rid is None:
            return {}
        got, response = self.wait(rid)
        if got == "interrupt":
            self.cancel(rid)
            self.interrupt_pending = True
            return {}
        if got != "answer" or response.get("subtype") != "success":
            return {}
        payload = response.get("response")
        return payload if isinstance(payload, dict) else {}

    # -- host tools (an SDK MCP server) ----------------------------------------------

    def _mcp(self, server: str, message: dict[str, Any]) -> dict[str, Any] | None:
        """One MCP message to ``server``; its JSON-RPC answer (None: none came)."""
        rid = self.request({"subtype": "mcp_message", "server_name": server, "message": message})
        got, response = self.wait(rid)
        if got != "answer" or response.get("subtype") != "success":
            return None
        answer = (response.get("response") or {}).get("mcp_response")
        return answer if isinstance(answer, dict) else None

    def _mcp_handshake(self, server: str) -> list[str]:
        params = {
            "protocolVersion": MCP_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "claude-code", "version": "2.1.330"},
        }
        self._mcp(server, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        self._mcp(server, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        listing = self._mcp(server, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        tools = ((listing or {}).get("result") or {}).get("tools") or []
        return [t["name"] for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)]

    def call_host_tool(
        self, server: str, name: str, arguments: dict[str, Any], call: str
    ) -> tuple[Got, str, bool]:
        """``tools/call`` of a host tool: (``answer``, its text, is_error), or
        what ended the wait instead (``interrupt``: the question is cancelled)."""
        params = {"name": name, "arguments": arguments, "_meta": {"claudecode/toolUseId": call}}
        message = {"jsonrpc": "2.0", "id": int(self.next_id()), "method": "tools/call"}
        rid = self.request(
            {
                "subtype": "mcp_message",
                "server_name": server,
                "message": message | {"params": params},
            }
        )
        got, response = self.wait(rid)
        if got == "interrupt":
            self.cancel(rid)
            return got, "", True
        if got != "answer":
            return got, "", True
        rpc = (response.get("response") or {}).get("mcp_response") or {}
        if response.get("subtype") != "success" or "error" in rpc:
            error = rpc.get("error") or {}
            return "answer", str(error.get("message") or response.get("error")), True
        result = rpc.get("result") or {}
        texts = [b.get("text", "") for b in result.get("content") or [] if isinstance(b, dict)]
        return "answer", "\n".join(texts), bool(result.get("isError"))
