"""A fake Agent Client Protocol agent (standard library only): the conformance
kit's (:func:`coding_genesis.testing.check_acp_backend`, flavour ``kit``) and the
tests' ``bin/gemini --acp``, ``bin/qwen --acp``, ``bin/opencode acp`` (the
flavour is ``FAKE_CLI_FLAVOUR``).  Run it as a script: ``python fake_acp.py``.

It speaks ACP version 1 on stdin/stdout, one JSON-RPC object a line:
``initialize``, ``session/new``, ``session/load`` (replays the session's turns as
updates), ``session/set_mode``, ``session/prompt``, ``session/cancel``.  Its own
requests (``session/request_permission``...) are numbered from 0, as the real
agents do, so their ids overlap the client's.  Each flavour names its
permission options as the real agent does (gemini ``proceed_once``, qwen
``proceed_always_project``, opencode ``once``...) and reports usage its way
(gemini ``_meta.quota``, qwen ``_meta.usage`` on an empty chunk, opencode the
answer's ``usage``).  The ``kit`` flavour names its options with ids that say
nothing of their kind, in an order where neither the first nor the last is
``allow_once`` (a client must choose by ``kind``), offers the modes
``FAKE_ACP_MODES`` lists (comma-separated) and reports usage in the answer.  The prompt's first word picks what the turn does:

  (anything else)  text ``fake <flavour> got: PROMPT`` in two chunks, usage, ``end_turn``
  ASK <kind> <json> a tool call of that ACP kind and raw input (opencode: then
                    ``in_progress``, as it reports), then ``session/request_permission``;
                    an allow runs it (``completed``, text ``allowed``), a reject fails it
                    (text ``denied``), the
                    ``cancelled`` outcome ends the turn ``cancelled``
  NOALLOW           a permission request offering reject options only, then ``end_turn``
  DEEP <n>          a permission request whose raw input is nested <n> levels deep (too
                    deep to parse), then text ``answered <outcome>`` and ``end_turn``
  SLEEP <n>         a tool that runs ``python3 -c 'time.sleep(n)'`` in a session of its own;
                    ``session/cancel`` kills it and ends the turn ``cancelled``
  ORPHAN <n>        like SLEEP, but the cancel leaves the sleeper running (codex-acp)
  DIE               a chunk, then exit 3
  SILENCE           nothing at all, even to ``session/cancel``
  GARBAGE           a line that is not JSON and a torn one, then the normal answer
  MALFORMED         an object that is no JSON-RPC message (neither method nor result)
  UNKNOWN_ID        an answer for an id the client never used, then the normal answer
  UNKNOWN           an update kind and a notification nobody knows, then the normal answer
  OVERLAP           ``fs/read_text_file``, ``terminal/create`` and ``craft/drainMidTurnQueue``
                    requests whose ids equal the prompt's, then a permission request
                    of that id too; the answers are said (``answers: ...``)
  ERROR <code>      the prompt answered with a JSON-RPC error as the flavour writes it
                    (gemini: the HTTP code; qwen: -32603 with ``data.details``; opencode:
                    -32603 with the words only); ``ERROR 429`` says "retry after 7s"
  HIDDEN            ``end_turn`` with nothing said and ``usage: null`` (codex-acp's 429)
  LATE              the answer, then a text chunk and a tool call (after it)
  THINK <words>     a thought chunk and a plan of two entries, then the normal answer
  LATEASK <command> the answer, then (after it) a text chunk and a permission request
                    to run <command>; the call completes or fails as answered
  STUBBORN          the normal answer; from now on a closed stdin does not end the agent
  COST              ``usage_update`` with the session's cumulative cost (+0.25 USD a turn)
  REFUSE <reason>   ``stopReason`` <reason> (max_tokens, refusal, max_turn_requests)
  ELICIT <message>  ``elicitation/create`` asking <message> with a form of one string field
                    ``answer`` (only when the client offered ``elicitation.form``, else
                    text ``elicitation not offered``); says ``elicited: <the result>``
  HISTORY           text ``history: `` and the prompts this process was sent before,
                    ``|``-separated (what a process carries from one prompt to the next)
  MCPLIST           the tools of the first of ``session/new``'s ``mcpServers`` (launched
                    once, spoken to over MCP on its stdin/stdout): ``tools: a,b``
  MCP <tool> <json> a ``tool_call`` of kind ``other``, named as the flavour's agent names
                    an MCP call (:func:`mcp_call_names`; gemini with no input), then
                    (gemini, qwen) a permission request, as they ask; refused:
                    text ``tool refused: <tool>``), then ``tools/call`` of <tool> with
                    those arguments on that server; the update and the text say its
                    answer (``tool said: ...`` or ``tool failed: ...``)
  JSON <value>      text: <value> (the first line of the prompt's rest), as a structured
                    answer; the words after the first line (the schema we add) are unread
  JSONFIX <bad> <good>
                    text <bad>, or <good> when the prompt carries the validation error of
                    an answer (``does not match``): a retry that says what was wrong. A
                    retry's prompt (``Continue from previous attempt:`` ... ``Original
                    request:``) plays its original request
  MCPAS <server> <tool> <json>
                    as gemini asks to call <tool> of another MCP server named <server>
                    (one of the repository's or the user's): a permission request titled
                    ``<tool> (<server> MCP Server)``; allowed: text ``tool ran on
                    <server>: <tool>`` (that server's code ran), refused: ``tool refused:
                    <tool>``

``FAKE_ACP_VERSION`` is the protocol version it answers (default 1);
``FAKE_ACP_NO_LOAD=1``: it does not offer ``session/load``; ``FAKE_ACP_DIRS=1``: it
offers ``additionalDirectories``; ``FAKE_ACP_NO_IMAGE=1``: its
``promptCapabilities`` take no image.  The prompt's text is its first text
block; its other blocks (an image, a ``resource_link``) are recorded as
``prompt_parts`` (an image by its size and sha256).  ``FAKE_CLI_RECORD=path``
gets one JSON object per message received (``received``: the method or the
answered id, ``params``/``result``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from typing import Any

__all__ = ["main"]

#: Each flavour's permission options (id, kind), as the real agent names them.
OPTIONS = {
    "gemini": [
        ("proceed_always", "allow_always"),
        ("proceed_once", "allow_once"),
        ("cancel", "reject_once"),
    ],
    "qwen": [
        ("proceed_always_project", "allow_always"),
        ("proceed_always_user", "allow_always"),
        ("proceed_once", "allow_once"),
        ("cancel", "reject_once"),
    ],
    "opencode": [("once", "allow_once"), ("always", "allow_always"), ("reject", "reject_once")],
    "kit": [
        ("opt-1", "allow_always"),
        ("opt-2", "reject_always"),
        ("opt-3", "allow_once"),
        ("opt-4", "reject_once"),
        ("opt-5", "allow_always"),
    ],
}
MODES = {
    "gemini": ["default", "autoEdit", "yolo", "plan"],
    "qwen": ["plan", "default", "auto-edit", "auto", "yolo"],
    "opencode": [],
    "kit": [m for m in os.environ.get("FAKE_ACP_MODES", "").split(",") if m],
}

_lock = threading.Lock()


def mcp_call_names(flavour: str, server: str, tool: str) -> dict[str, Any]:
    """How each agent names a call of ``tool`` of MCP server ``server`` in its
    ``tool_call`` (measured): gemini in its title, opencode in its title, qwen
    in ``_meta.toolName``."""
    if flavour == "gemini":
        return {"title": f"{tool} ({server} MCP Server)"}
    if flavour == "opencode":
        return {"title": f"{server}_{tool}"}
    return {"title": tool, "_meta": {"toolName": f"mcp__{server}__{tool}"}}


def _write(text: str) -> None:
    with _lock:
        try:
            os.write(1, (text + "\n").encode())
        except BrokenPipeError:
            os._exit(141)


def send(obj: Any) -> None:
    _write(json.dumps(obj))


def _described(block: dict[str, Any]) -> dict[str, Any]:
    """A prompt's content block as the record keeps it: an image by its size
    and digest (its bytes would bloat the record), anything else as it came."""
    if block.get("type") != "image":
        return block
    data = base64.b64decode(str(block.get("data", "")))
    return {
        "type": "image",
        "mimeType": block.get("mimeType"),
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def record(**entry: Any) -> None:
    path = os.environ.get("FAKE_CLI_RECORD")
    if path:
        entry["pid"] = os.getpid()
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")


class Cancelled(Exception):
    """The running turn got ``session/cancel``."""


class McpClient:
    """The fake agent's MCP client of one stdio server (as real agents launch
    ``mcpServers``): newline-delimited JSON-RPC on the server's stdin/stdout."""

    def __init__(self, server: dict[str, Any]) -> None:
        env = dict(os.environ)
        env.update({e["name"]: e["value"] for e in server.get("env") or []})
        self.proc = subprocess.Popen(  # noqa: S603 - the server session/new named, a list argv
            [server["command"], *server.get("args", [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        record(mcp_server=self.proc.pid)
        self.next_id = 0
        self.lock = threading.Lock()
        self.waiting: dict[int, queue.Queue[dict[str, Any] | None]] = {}
        threading.Thread(target=self._read, daemon=True).start()
        self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "fake-acp", "version": "0.0.1"},
            },
        )
        self._write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def close(self) -> None:
        """End the server as an agent does on its way out: its stdin closed, then waited for."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def _write(self, obj: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(obj).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The result of one request (an error's message raises); requests may
        overlap (one given up on by a cancel, then the next turn's)."""
        with self.lock:
            self.next_id += 1
            rid = self.next_id
            box: queue.Queue[dict[str, Any] | None] = queue.Queue()
            self.waiting[rid] = box
            self._write({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        msg = box.get()
        if msg is None:
            raise RuntimeError(f"the MCP server ended (rc {self.proc.wait()})")
        if "error" in msg:
            raise RuntimeError(str(msg["error"]))
        return dict(msg.get("result") or {})

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            msg = json.loads(raw)
            if "method" not in msg:
                with self.lock:
                    box = self.waiting.pop(msg.get("id"), None)
                if box is not None:
                    box.put(msg)
        with self.lock:
            for box in self.waiting.values():
                box.put(None)
            self.waiting.clear()


class Agent:
    def __init__(self) -> None:
        self.flavour = os.environ.get("FAKE_CLI_FLAVOUR", "gemini")
        self.session = os.environ.get("FAKE_CLI_SESSION") or str(uuid.uuid4())
        self.history: list[tuple[str, str]] = []
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.answers: dict[Any, dict[str, Any]] = {}
        self.answered = threading.Condition()
        self.next_id = 0
        self.cancel = threading.Event()
        self.stubborn = False
        self.cost = 0.0
        self.mode = "default"
        self.turn: threading.Thread | None = None
        self.current = ""
        self.mcp_servers: list[dict[str, Any]] = []
        #: The client offered to fill forms (``elicitation.form``).
        self.elicits = False
        self._mcp: McpClient | None = None
        threading.Thread(target=self._read, daemon=True).start()

    # -- reading -----------------------------------------------------------------

    def _read(self) -> None:
        for raw in sys.stdin.buffer:
            try:
                obj = json.loads(raw)
            except ValueError:
                send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse"}})
                continue
            if not isinstance(obj, dict):
                continue
            if "method" not in obj:  # an answer to one of our requests
                record(received=obj.get("id"), result=obj.get("result"), error=obj.get("error"))
                with self.answered:
                    self.answers[obj.get("id")] = obj
                    self.answered.notify_all()
                continue
            record(received=obj["method"], params=obj.get("params"))
            if obj["method"] == "session/cancel":
                self.cancel.set()
                continue
            self.inbox.put(obj)
        self.inbox.put(None)

    def ask(self, method: str, params: dict[str, Any], rid: Any = None) -> dict[str, Any]:
        """A request of ours; its answer (or ``Cancelled``)."""
        if rid is None:
            rid = self.next_id
            self.next_id += 1
        send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        with self.answered:
            while rid not in self.answers:
                self.answered.wait(0.05)
            return self.answers.pop(rid)

    # -- the loop ----------------------------------------------------------------

    def run(self) -> int:
        while True:
            msg = self.inbox.get()
            if msg is None:
                while self.stubborn:  # a closed stdin does not end it
                    time.sleep(0.5)
                if self._mcp is not None:
                    self._mcp.close()
                return 0
            self.handle(msg)

    def notify(self, update: dict[str, Any]) -> None:
        send(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": self.session, "update": update},
            }
        )

    def chunk(self, text: str, **extra: Any) -> None:
        self.notify(
            {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": text},
                **extra,
            }
        )

    def handle(self, msg: dict[str, Any]) -> None:
        method, rid, params = msg["method"], msg.get("id"), msg.get("params") or {}
        if method == "initialize":
            offered = (params.get("clientCapabilities") or {}).get("elicitation") or {}
            self.elicits = isinstance(offered, dict) and "form" in offered
            version = int(os.environ.get("FAKE_ACP_VERSION", "1"))
            caps: dict[str, Any] = {"loadSession": os.environ.get("FAKE_ACP_NO_LOAD") != "1"}
            if os.environ.get("FAKE_ACP_DIRS") == "1":
                caps["sessionCapabilities"] = {"additionalDirectories": {}}
            caps["promptCapabilities"] = {"image": os.environ.get("FAKE_ACP_NO_IMAGE") != "1"}
            result = {
                "protocolVersion": version,
                "agentCapabilities": caps,
                "agentInfo": {"name": f"fake-{self.flavour}", "version": "0.0.1"},
                "authMethods": [],
            }
            send({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method in ("session/new", "session/load"):
            self.mcp_servers = list(params.get("mcpServers") or [])
            if method == "session/load":
                self.session = params.get("sessionId") or self.session
                self.history = _load(self.session)
                for prompt, answer in self.history:
                    self.notify(
                        {
                            "sessionUpdate": "user_message_chunk",
                            "content": {"type": "text", "text": prompt},
                        }
                    )
                    self.chunk(answer)
            opened: dict[str, Any] = {} if method == "session/load" else {"sessionId": self.session}
            modes = MODES[self.flavour]
            if modes:
                opened["modes"] = {
                    "currentModeId": "default" if "default" in modes else modes[0],
                    "availableModes": [{"id": m, "name": m} for m in modes],
                }
            send({"jsonrpc": "2.0", "id": rid, "result": opened})
        elif method == "session/set_mode":
            if params.get("modeId") not in MODES[self.flavour]:
                send(
                    {
                        "jsonrpc": "2.0",
                        "id": rid,
                        "error": {"code": -32602, "message": "no such mode"},
                    }
                )
            else:
                self.mode = params["modeId"]
                record(mode=self.mode)
                send({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif method == "session/prompt":
            if self.turn is not None:
                self.turn.join()  # what the last turn still says after its answer goes first
            self.cancel.clear()
            blocks = params.get("prompt") or [{}]
            said = [b for b in blocks if b.get("type") == "text"] or blocks
            text = str(said[0].get("text", ""))
            others = [_described(b) for b in blocks if b.get("type") != "text"]
            if others:
                record(prompt_parts=others)
            self.turn = threading.Thread(target=self.prompt, args=(rid, text), daemon=True)
            self.turn.start()
        else:
            send(
                {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no {method}"}}
            )

    # -- a turn ------------------------------------------------------------------

    def usage(self) -> dict[str, Any]:
        """What the prompt's answer carries of usage (and the chunk qwen sends)."""
        counts = {"inputTokens": 10, "outputTokens": 6, "totalTokens": 16}
        if self.flavour == "qwen":
            self.chunk("", _meta={"usage": {**counts, "thoughtTokens": 0, "cachedReadTokens": 0}})
            return {}
        if self.flavour in ("opencode", "kit"):
            return {"usage": counts}
        return {"_meta": {"quota": {"token_count": {"input_tokens": 10, "output_tokens": 6}}}}

    def end(self, rid: Any, reason: str = "end_turn", **extra: Any) -> None:
        send({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": reason, **extra}})

    def answer(self, rid: Any, text: str) -> None:
        half = max(1, len(text) // 2)
        self.chunk(text[:half])
        self.chunk(text[half:])
        self.history.append((self.current, text))
        _save(self.session, self.history)
        self.end(rid, **self.usage())

    def prompt(self, rid: Any, text: str) -> None:
        self.current = text
        said = text
        if text.startswith("Continue from previous attempt:") and "Original request:\n" in text:
            said = text.rsplit("Original request:\n", 1)[1]
        word, _, rest = said.partition(" ")
        if word in ("JSON", "JSONFIX"):
            line = rest.splitlines()[0] if rest.strip() else ""
            if word == "JSONFIX":
                bad, _, good = line.partition(" ")
                line = good if "does not match" in text else bad
            self.answer(rid, line)
            return
        try:
            self.play(rid, word, rest.strip(), text)
        except Cancelled:
            self.end(rid, "cancelled")

    def permission(self, call: dict[str, Any], options: list[tuple[str, str]]) -> str | None:
        """Ask; the kind of the option chosen (None: the cancelled outcome)."""
        params = {
            "sessionId": self.session,
            "toolCall": call,
            "options": [{"optionId": o, "name": o, "kind": k} for o, k in options],
        }
        answer = self.ask("session/request_permission", params)
        outcome = (answer.get("result") or {}).get("outcome") or {}
        if outcome.get("outcome") != "selected":
            return None
        chosen = dict(options).get(str(outcome.get("optionId")))
        record(chosen=outcome.get("optionId"), kind=chosen)
        return chosen

    def mcp(self) -> McpClient:
        if self._mcp is None:
            self._mcp = McpClient(self.mcp_servers[0])
        return self._mcp

    def mcp_waiting(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """An MCP request the turn waits for, given up on ``session/cancel``
        (as the real agents do: the turn ends ``cancelled`` at once)."""
        box: queue.Queue[dict[str, Any]] = queue.Queue()
        client = self.mcp()
        threading.Thread(
            target=lambda: box.put(client.request(method, params)), daemon=True
        ).start()
        while True:
            try:
                return box.get(timeout=0.05)
            except queue.Empty:
                if self.cancel.is_set():
                    raise Cancelled from None

    def mcp_call(self, rid: Any, rest: str) -> None:
        name, _, raw = rest.partition(" ")
        arguments = json.loads(raw) if raw else {}
        server = self.mcp_servers[0]["name"]
        call_id = f"mcp_{server}_{name}__call_1" if self.flavour == "gemini" else "mcp_1"
        call = {"toolCallId": call_id, **mcp_call_names(self.flavour, server, name)}
        call |= {"kind": "other", "status": "in_progress"}
        if self.flavour != "gemini":  # gemini tells no input of an MCP call
            call["rawInput"] = arguments
        self.notify({"sessionUpdate": "tool_call", **call})
        if self.flavour in ("gemini", "qwen"):  # gemini asks before every MCP call, qwen
            # in its auto mode without a classifier: titled with the arguments
            asked = {**call, "status": "pending"}
            if self.flavour == "qwen":
                asked |= {"title": json.dumps(arguments), "rawInput": arguments}
            chosen = self.permission(asked, OPTIONS[self.flavour])
            if not (chosen or "").startswith("allow"):
                self.answer(rid, f"tool refused: {name}")
                return
        result = self.mcp_waiting("tools/call", {"name": name, "arguments": arguments})
        said = "".join(str(c.get("text", "")) for c in result.get("content") or [])
        failed = bool(result.get("isError"))
        self.notify(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": call_id,
                "status": "failed" if failed else "completed",
                "content": [{"type": "content", "content": {"type": "text", "text": said}}],
            }
        )
        self.answer(rid, f"tool {'failed' if failed else 'said'}: {said}")

    def foreign_mcp_call(self, rid: Any, rest: str) -> None:
        """A call of a tool of a server that is not ours: gemini asks first."""
        server, _, rest = rest.partition(" ")
        name, _, raw = rest.partition(" ")
        call = {
            "toolCallId": "mcp_2",
            "title": f"{name} ({server} MCP Server)",
            "kind": "other",
            "status": "pending",
            "rawInput": json.loads(raw) if raw else {},
        }
        self.notify({"sessionUpdate": "tool_call", **call})
        chosen = self.permission(call, OPTIONS["gemini"])
        if (chosen or "").startswith("allow"):
            self.answer(rid, f"tool ran on {server}: {name}")
        else:
            self.answer(rid, f"tool refused: {name}")

    def play(self, rid: Any, word: str, rest: str, text: str) -> None:
        """The turn the prompt's first word picks (see the module's docstring)."""
        scenario = {
            "MCPAS": self._on_mcpas,
            "MCPLIST": self._on_mcplist,
            "MCP": self._on_mcp,
            "ASK": self._on_ask,
            "DEEP": self._on_deep,
            "NOALLOW": self._on_noallow,
            "SLEEP": self._on_sleep,
            "ORPHAN": self._on_sleep,
            "DIE": self._on_die,
            "SILENCE": self._on_silence,
            "GARBAGE": self._on_garbage,
            "MALFORMED": self._on_malformed,
            "UNKNOWN_ID": self._on_unknown_id,
            "UNKNOWN": self._on_unknown,
            "OVERLAP": self._on_overlap,
            "ERROR": self._on_error,
            "HIDDEN": self._on_hidden,
            "THINK": self._on_think,
            "LATE": self._on_late,
            "LATEASK": self._on_lateask,
            "STUBBORN": self._on_stubborn,
            "COST": self._on_cost,
            "REFUSE": self._on_refuse,
            "HISTORY": self._on_history,
            "ELICIT": self._on_elicit,
        }.get(word, self._on_plain)
        scenario(rid, word, rest, text)

    def _on_plain(self, rid: Any, word: str, rest: str, text: str) -> None:
        self.answer(rid, f"fake {self.flavour} got: {text}")

    def _on_mcpas(self, rid: Any, word: str, rest: str, text: str) -> None:
        self.foreign_mcp_call(rid, rest)

    def _on_mcplist(self, rid: Any, word: str, rest: str, text: str) -> None:
        tools = self.mcp().request("tools/list", {}).get("tools") or []
        self.answer(rid, "tools: " + ",".join(str(t.get("name")) for t in tools))

    def _on_mcp(self, rid: Any, word: str, rest: str, text: str) -> None:
        self.mcp_call(rid, rest)

    def _on_ask(self, rid: Any, word: str, rest: str, text: str) -> None:
        kind, _, raw = rest.partition(" ")
        raw_input = json.loads(raw) if raw else {}
        call = {
            "toolCallId": "call_1",
            "title": kind,
            "kind": kind,
            "status": "pending",
            "rawInput": raw_input,
        }
        self.notify({"sessionUpdate": "tool_call", **call})
        if self.flavour == "opencode":  # it reports the call running, then asks (measured)
            running = {"toolCallId": "call_1", "status": "in_progress"}
            self.notify({"sessionUpdate": "tool_call_update", **running})
        chosen = self.permission(call, OPTIONS[self.flavour])
        if chosen is None:
            raise Cancelled
        if chosen.startswith("allow"):
            self.notify(
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": "call_1",
                    "status": "in_progress",
                }
            )
            done = {"type": "content", "content": {"type": "text", "text": "ran"}}
            self.notify(
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": "call_1",
                    "status": "completed",
                    "content": [done],
                }
            )
            self.answer(rid, f"allowed {chosen}")
        else:
            self.notify(
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": "call_1",
                    "status": "failed",
                }
            )
            self.answer(rid, f"denied {chosen}")

    def _on_deep(self, rid: Any, word: str, rest: str, text: str) -> None:
        depth = int(rest or "1100")
        offered = [{"optionId": o, "name": o, "kind": k} for o, k in OPTIONS[self.flavour]]
        rid_deep = self.next_id
        self.next_id += 1
        head = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": rid_deep,
                "method": "session/request_permission",
                "params": {"sessionId": self.session, "options": offered, "toolCall": {}},
            }
        )
        deep_call = (
            '{"toolCallId": "call_deep", "title": "deep", "kind": "execute", "rawInput": '
            + '{"a": ' * depth
            + '"x"'
            + "}" * depth
            + "}"
        )
        _write(head[: -len("{}}}")] + deep_call + "}}")
        with self.answered:
            while rid_deep not in self.answers:
                self.answered.wait(0.05)
            answer = self.answers.pop(rid_deep)
        outcome = (answer.get("result") or {}).get("outcome") or {}
        self.answer(rid, f"answered {outcome.get('outcome')}")

    def _on_noallow(self, rid: Any, word: str, rest: str, text: str) -> None:
        call = {
            "toolCallId": "call_n",
            "title": "rm -rf /",
            "kind": "execute",
            "status": "pending",
        }
        options = [("no", "reject_once"), ("never", "reject_always")]
        chosen = self.permission(call, options)
        self.answer(rid, f"refused {chosen}")

    def _on_sleep(self, rid: Any, word: str, rest: str, text: str) -> None:
        secs = float(rest or "600")
        argv = [sys.executable, "-c", f"import time; time.sleep({secs})"]
        sleeper = subprocess.Popen(argv, start_new_session=True)  # noqa: S603 - our own python
        call = {
            "toolCallId": "call_s",
            "title": "sleep",
            "kind": "execute",
            "status": "in_progress",
            "rawInput": {"command": " ".join(argv)},
        }
        self.notify({"sessionUpdate": "tool_call", **call})
        while sleeper.poll() is None:
            if self.cancel.wait(0.05):
                if word == "SLEEP":
                    sleeper.kill()
                    sleeper.wait()
                self.notify(
                    {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": "call_s",
                        "status": "failed",
                    }
                )
                raise Cancelled
        self.notify(
            {"sessionUpdate": "tool_call_update", "toolCallId": "call_s", "status": "completed"}
        )
        self.answer(rid, "slept")

    def _on_die(self, rid: Any, word: str, rest: str, text: str) -> None:
        self.chunk("dying")
        os._exit(3)

    def _on_silence(self, rid: Any, word: str, rest: str, text: str) -> None:
        while True:
            time.sleep(1)

    def _on_garbage(self, rid: Any, word: str, rest: str, text: str) -> None:
        _write("this is not json")
        _write('{"jsonrpc": "2.0", "method": "session/upd')
        self.answer(rid, "after garbage")

    def _on_malformed(self, rid: Any, word: str, rest: str, text: str) -> None:
        send({"jsonrpc": "2.0", "what": "nothing"})
        self.answer(rid, "after malformed")

    def _on_unknown_id(self, rid: Any, word: str, rest: str, text: str) -> None:
        send({"jsonrpc": "2.0", "id": 9999, "result": {}})
        self.answer(rid, "after unknown id")

    def _on_unknown(self, rid: Any, word: str, rest: str, text: str) -> None:
        self.notify({"sessionUpdate": "holographic_display", "content": "?"})
        send({"jsonrpc": "2.0", "method": "fake/notify/news", "params": {}})
        self.answer(rid, "after unknown")

    def _on_overlap(self, rid: Any, word: str, rest: str, text: str) -> None:
        said = []
        for method in ("fs/read_text_file", "terminal/create", "craft/drainMidTurnQueue"):
            answer = self.ask(method, {"sessionId": self.session}, rid=rid)
            said.append(f"{method}={(answer.get('error') or {}).get('code')}")
        call = {
            "toolCallId": "call_o",
            "title": "touch x",
            "kind": "execute",
            "status": "pending",
        }
        params = {
            "sessionId": self.session,
            "toolCall": call,
            "options": [{"optionId": o, "name": o, "kind": k} for o, k in OPTIONS[self.flavour]],
        }
        answer = self.ask("session/request_permission", params, rid=rid)
        said.append(
            f"permission={((answer.get('result') or {}).get('outcome') or {}).get('optionId')}"
        )
        self.answer(rid, "answers: " + " ".join(said))

    def _on_error(self, rid: Any, word: str, rest: str, text: str) -> None:
        code = int(rest or "401")
        words = {
            401: "Incorrect API key provided (fake).",
            429: "Rate limit reached (fake); retry after 7s",
        }.get(code, "failed (fake)")
        if self.flavour == "gemini":
            error: dict[str, Any] = {
                "code": code,
                "message": json.dumps({"error": {"code": code, "message": words}}),
            }
        elif self.flavour == "qwen":
            error = {
                "code": -32603,
                "message": "Internal error",
                "data": {"details": f"{code} {words}"},
            }
        else:
            error = {
                "code": -32603,
                "message": f"Internal error: {words}",
                "data": {"errorName": "APIError"},
            }
        send({"jsonrpc": "2.0", "id": rid, "error": error})

    def _on_hidden(self, rid: Any, word: str, rest: str, text: str) -> None:
        self.end(rid, usage=None)

    def _on_think(self, rid: Any, word: str, rest: str, text: str) -> None:
        self.notify(
            {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": rest}}
        )
        entries = [
            {"content": "look", "priority": "high", "status": "completed"},
            {"content": "answer", "priority": "medium", "status": "in_progress", "_meta": {}},
        ]
        self.notify({"sessionUpdate": "plan", "entries": entries})
        self.answer(rid, f"fake {self.flavour} got: {text}")

    def _on_late(self, rid: Any, word: str, rest: str, text: str) -> None:
        self.chunk("on time")
        self.end(rid, **self.usage())
        time.sleep(0.05)
        self.chunk("late words")
        self.notify(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "late",
                "title": "late",
                "kind": "execute",
                "status": "completed",
            }
        )

    def _on_lateask(self, rid: Any, word: str, rest: str, text: str) -> None:
        self.chunk("on time")
        self.end(rid, **self.usage())
        time.sleep(0.05)
        self.chunk("late words")
        call = {
            "toolCallId": "late_ask",
            "title": rest,
            "kind": "execute",
            "status": "pending",
            "rawInput": {"command": rest},
        }
        self.notify({"sessionUpdate": "tool_call", **call})
        chosen = self.permission(call, OPTIONS[self.flavour])
        status = "completed" if chosen and chosen.startswith("allow") else "failed"
        self.notify(
            {"sessionUpdate": "tool_call_update", "toolCallId": "late_ask", "status": status}
        )

    def _on_stubborn(self, rid: Any, word: str, rest: str, text: str) -> None:
        self.stubborn = True
        self.answer(rid, "stubborn now")

    def _on_cost(self, rid: Any, word: str, rest: str, text: str) -> None:
        self.cost += 0.25
        self.notify(
            {
                "sessionUpdate": "usage_update",
                "used": 100,
                "size": 1000,
                "cost": {"amount": self.cost, "currency": "USD"},
            }
        )
        self.answer(rid, "costly")

    def _on_refuse(self, rid: Any, word: str, rest: str, text: str) -> None:
        self.chunk("partial")
        self.end(rid, rest or "refusal")

    def _on_history(self, rid: Any, word: str, rest: str, text: str) -> None:
        self.answer(rid, "history: " + " | ".join(p for p, _ in self.history))

    def _on_elicit(self, rid: Any, word: str, rest: str, text: str) -> None:
        if not self.elicits:
            self.answer(rid, "elicitation not offered")
            return
        form = {"type": "object", "properties": {"answer": {"type": "string"}}}
        params = {
            "sessionId": self.session,
            "mode": "form",
            "message": rest,
            "requestedSchema": form,
        }
        said = self.ask("elicitation/create", params)
        self.answer(rid, "elicited: " + json.dumps(said.get("result", said), sort_keys=True))


def _store(session: str) -> str:
    return os.path.join(
        os.environ.get("FAKE_ACP_STORE") or os.environ.get("TMPDIR") or "/tmp",
        f"fake-acp-{session}.json",
    )


def _save(session: str, history: list[tuple[str, str]]) -> None:
    if os.environ.get("FAKE_ACP_STORE"):
        with open(_store(session), "w", encoding="utf-8") as fh:
            json.dump(history, fh)


def _load(session: str) -> list[tuple[str, str]]:
    try:
        with open(_store(session), encoding="utf-8") as fh:
            return [(str(a), str(b)) for a, b in json.load(fh)]
    except (OSError, ValueError):
        return []


def main() -> int:
    record(argv=sys.argv[1:])
    return Agent().run()


if __name__ == "__main__":
    sys.exit(main())
