"""A fake ``codex app-server`` (standard library only): ``bin/codex app-server``.

It speaks the JSON-RPC of the real one (codex 0.169: one object a line, no ``"jsonrpc"``
member in what it writes), enough for a live session: ``initialize``, ``initialized``,
``thread/start``, ``thread/resume``, ``turn/start``, ``turn/interrupt``, ``turn/steer``.  Each
turn plays the scenario its prompt starts with:

  (anything else)   text ``fake codex got: PROMPT``, token usage, ``turn/completed``
  ASK <command>     ``item/commandExecution/requestApproval`` for the command; waits for the
                    answer and says it (``decision: accept``); ``cancel`` ends the turn as
                    interrupted, as codex does
  GARBAGE           a line that is not JSON, a JSON array, an object that is no JSON-RPC
                    message, then the normal answer
  UNKNOWN_ID        a response to an id never sent (``{"id": 9999, "result": {}}``), then
                    the normal answer
  DIE               ``turn/started``, a command item started, then exit 3
  SILENCE           ``turn/started``, then nothing at all (not even to ``turn/interrupt``)
  SLEEP <n>         a command item that takes n seconds, then text; ``turn/interrupt`` ends
                    it at once (``turn/completed`` status ``interrupted``); ``turn/steer``
                    is taken and its text said at the end (``steered: TEXT``)
  HANG_ASK          an approval request, then nothing whatever the answer; ``turn/interrupt``
                    ends the turn as interrupted (what codex 0.169 does with a pending ask)
  JSON <json>       that JSON as the answer's text (what codex answers a turn with an
                    ``outputSchema``); ``turn/start``'s ``outputSchema`` is recorded (``schema``)
  DEEP_ASK [n]      like ASK, the approval request's ``commandActions`` nested n levels deep
                    (default 1100, deeper than orjson's 1,024: the line cannot be parsed)
  DEEP_TOOL [n]     an ``item/tool/call`` whose arguments nest n deep; says the answer
                    (``tool call answered: error <code>``)
  DEEP_END [n]      the answer, then a ``turn/completed`` whose turn's items nest n deep
  QUESTION <text>   ``item/tool/requestUserInput`` asking <text> (id ``q1``, options ``yes`` and
                    ``no``) and ``q2`` ("Why?", free text); waits for the answer and says
                    ``answers: <the answers as JSON>``
  OWNTURN <s>       the answer; then a turn codex begins by itself (as a compaction, a thread
                    goal, a background terminal do): ``turn/started`` of a new turn id, an
                    agentMessage ``codex's own turn``, and after s seconds its
                    ``turn/completed``; ``turn/interrupt`` ends it at once (``interrupted``),
                    ``turn/steer`` is taken and said at its end (``steered: TEXT``)

Hostile scenarios (a server abusing the protocol; each says what came back, then completes):

  FLOOD <n>         n ``item/commandExecution/requestApproval`` at once (ids 1000..; command
                    ``echo <i>``), all sent before stdin is read again; says ``flood <n>: once <a>, again <b>, never <c>, unknown
                    <d>, accepted <e>``
  DUPLICATE         two approval requests with one id (``echo first``, ``echo second``) and
                    another, in one write (both pending at once); says ``answers: <id>=<count>
                    ...``
  FOREIGN           server requests nobody serves (``item/tool/requestUserInput``,
                    ``made/up``, ``item/tool/call`` in a session without tools); says
                    ``<method>: <answer>`` for each (``error <code>``, ``result``, ``none``)

Token usage is reported as codex does: the thread's running total (10 input and 5 output
tokens per turn) and the last call's.  ``FAKE_CLI_RECORD=path`` gets one JSON object per
event (``argv``, ``received`` method, ``decision``, ``interrupted``, ``steer``), as
``fakecli.py`` does; ``FAKE_CLI_SESSION`` is the thread id.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import sys
import threading
import time
import uuid
from typing import Any

__all__ = ["main"]

INPUT_TOKENS = 10
OUTPUT_TOKENS = 5


def _record(**entry: Any) -> None:
    path = os.environ.get("FAKE_CLI_RECORD")
    if path:
        entry["pid"] = os.getpid()
        entry["t"] = time.time()
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")


def _write(text: str) -> None:
    try:
        os.write(1, (text + "\n").encode())
    except BrokenPipeError:
        os._exit(141)


#: Stands in for a deep value in an object written by ``_send`` (json.dumps cannot nest it).
DEEP = "<<deep>>"


def _send(obj: dict[str, Any], depth: int = 0) -> None:
    """Write ``obj``; with ``depth``, each ``DEEP`` string becomes lists nested that deep."""
    text = json.dumps(obj)
    if depth:
        text = text.replace(json.dumps(DEEP), "[" * depth + "]" * depth)
    _write(text)


class Interrupted(Exception):
    """The running turn got ``turn/interrupt``."""


class FakeAppServer:
    def __init__(self) -> None:
        self.thread_id = os.environ.get("FAKE_CLI_SESSION") or str(uuid.uuid4())
        self.turn_id: str | None = None
        self.turns = 0
        self.items = 0
        #: The thread's token usage so far, as codex reports it.
        self.total = {"inputTokens": 0, "cachedInputTokens": 0, "outputTokens": 0}
        self.next_request = 0
        self.steered: list[str] = []
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        #: Cleared while a flood is written: stdin is not read meanwhile.
        self.reading = threading.Event()
        self.reading.set()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for raw in sys.stdin.buffer:
            self.reading.wait()
            try:
                obj = json.loads(raw)
            except ValueError:
                _send({"id": None, "error": {"code": -32700, "message": "parse error"}})
                continue
            if isinstance(obj, dict):
                self.inbox.put(obj)
        self.inbox.put(None)

    # -- the loop ------------------------------------------------------------------

    def run(self) -> int:
        while True:
            msg = self.inbox.get()
            if msg is None:
                return 0
            self.handle(msg)

    def notify(self, method: str, depth: int = 0, **params: Any) -> None:
        _send({"method": method, "params": params}, depth)

    def handle(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        """One message outside or inside a turn; a response to our request is returned."""
        method = msg.get("method")
        if method is None:
            return msg  # a response (an approval's answer), for whoever waits
        _record(received=method)
        rid, params = msg.get("id"), msg.get("params") or {}
        if rid is None:
            return None  # "initialized" and other notifications
        if method == "initialize":
            result: dict[str, Any] = {
                "userAgent": "fake-codex/0.169.0",
                "codexHome": os.environ.get("CODEX_HOME", "/nonexistent"),
                "platformFamily": "unix",
                "platformOs": "linux",
            }
        elif method in ("thread/start", "thread/resume"):
            self.thread_id = str(params.get("threadId") or self.thread_id)
            result = {"thread": {"id": self.thread_id, "cwd": params.get("cwd"), "turns": []}}
            _send({"id": rid, "result": result})
            self.notify("thread/started", thread={"id": self.thread_id})
            return None
        elif method == "turn/start" and self.turn_id is None:
            self.turns += 1
            self.turn_id = f"turn-{self.turns}"
            if "outputSchema" in params:
                _record(schema=params["outputSchema"])
            _send({"id": rid, "result": {"turn": self._turn("inProgress")}})
            text = "".join(
                str(part.get("text") or "")
                for part in params.get("input") or []
                if isinstance(part, dict)
            )
            self.play(text)
            return None
        elif method == "turn/interrupt":
            raise_it = self.turn_id is not None and params.get("turnId") == self.turn_id
            if not raise_it:
                self._error(rid, -32600, "no active turn to interrupt")
                return None
            _send({"id": rid, "result": {}})
            _record(interrupted=True)
            raise Interrupted
        elif method == "turn/steer":
            if self.turn_id is None or params.get("expectedTurnId") != self.turn_id:
                self._error(rid, -32600, "no active turn to steer")
                return None
            for part in params.get("input") or []:
                self.steered.append(str(part.get("text") or ""))
            _record(steer=self.steered[-1] if self.steered else "")
            result = {"turnId": self.turn_id}
        elif method == "turn/start":
            self._error(rid, -32600, "a turn is running")
            return None
        else:
            self._error(rid, -32601, f"unknown method {method}")
            return None
        _send({"id": rid, "result": result})
        return None

    def _error(self, rid: Any, code: int, message: str) -> None:
        _send({"id": rid, "error": {"code": code, "message": message}})

    def _turn(self, status: str) -> dict[str, Any]:
        return {"id": self.turn_id, "items": [], "status": status, "error": None}

    def poll(self, seconds: float | None) -> dict[str, Any] | None:
        """Serve what comes in for ``seconds`` (None: until a response comes); a response
        to our request is returned; ``turn/interrupt`` raises :class:`Interrupted`."""
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            try:
                msg = self.inbox.get(timeout=left)
            except queue.Empty:
                return None
            if msg is None:
                os._exit(0)  # stdin closed: the session is over
            response = self.handle(msg)
            if response is not None:
                return response

    # -- a turn --------------------------------------------------------------------

    def play(self, prompt: str) -> None:
        self.steered.clear()
        self.notify("turn/started", threadId=self.thread_id, turn=self._turn("inProgress"))
        word, _, rest = prompt.strip().partition(" ")
        try:
            if word == "ASK":
                self.ask(rest or "echo hi")
            elif word == "GARBAGE":
                _write("this is not JSON")
                _write("[1, 2, 3]")
                _send({"hello": "world"})
                self.answer(prompt)
            elif word == "UNKNOWN_ID":
                _send({"id": 9999, "result": {}})
                self.answer(prompt)
            elif word == "DIE":
                self.item_started("commandExecution", command="sleep 5")
                os._exit(3)
            elif word == "SILENCE":
                while self.inbox.get() is not None:
                    pass  # read, never answered
                os._exit(0)
            elif word == "SLEEP":
                self.sleep(float(rest or "1"))
            elif word == "JSON":
                self.answer(rest, said=True)
            elif word == "DEEP_ASK":
                self.ask("echo deep", depth=int(rest or 1100))
            elif word == "DEEP_TOOL":
                self.deep_tool(int(rest or 1100))
            elif word == "DEEP_END":
                self.answer("the end is deep", end_depth=int(rest or 1100))
            elif word == "QUESTION":
                self.question(rest or "Proceed?")
            elif word == "OWNTURN":
                self.answer(prompt)
                self.own_turn(float(rest or "1"))
            elif word in ("FLOOD", "DUPLICATE", "FOREIGN"):
                self.answer(getattr(self, word.lower())(rest), said=True)
            elif word == "HANG_ASK":
                self.request_approval(self.item_started("commandExecution", command="true"))
                while True:
                    self.poll(None)
            else:
                self.answer(prompt)
        except Interrupted:
            self.completed("interrupted")

    def own_turn(self, seconds: float) -> None:
        """A turn codex begins by itself between the client's turns."""
        self.turns += 1
        self.turn_id = f"turn-{self.turns}"
        self.steered.clear()
        self.notify("turn/started", threadId=self.thread_id, turn=self._turn("inProgress"))
        item_id = self.item_started("agentMessage", text="")
        self.item_completed({"type": "agentMessage", "id": item_id, "text": "codex's own turn"})
        try:
            self.poll(seconds)
            if self.steered:
                item_id = self.item_started("agentMessage", text="")
                said = "; ".join(f"steered: {text}" for text in self.steered)
                self.item_completed({"type": "agentMessage", "id": item_id, "text": said})
            self.completed("completed")
        except Interrupted:
            self.completed("interrupted")

    def item_started(self, kind: str, **fields: Any) -> str:
        self.items += 1
        item = {"type": kind, "id": f"item-{self.items}", "status": "inProgress", **fields}
        self.notify("item/started", threadId=self.thread_id, turnId=self.turn_id, item=item)
        return str(item["id"])

    def item_completed(self, item: dict[str, Any]) -> None:
        self.notify("item/completed", threadId=self.thread_id, turnId=self.turn_id, item=item)

    def request_approval(self, item_id: str, command: str = "true", depth: int = 0) -> int:
        rid = self.next_request
        self.next_request += 1
        params = {
            "threadId": self.thread_id,
            "turnId": self.turn_id,
            "itemId": item_id,
            "startedAtMs": int(time.time() * 1000),
            "command": command,
            "cwd": os.getcwd(),
        }
        if depth:
            params["commandActions"] = DEEP
        message = {"method": "item/commandExecution/requestApproval", "id": rid, "params": params}
        _send(message, depth)
        return rid

    def deep_tool(self, depth: int) -> None:
        rid = self.next_request
        self.next_request += 1
        params: dict[str, Any] = {"threadId": self.thread_id, "turnId": self.turn_id}
        params |= {"callId": "c1", "tool": "lookup", "arguments": {"q": DEEP}}
        _send({"method": "item/tool/call", "id": rid, "params": params}, depth)
        while True:
            response = self.poll(None)
            if response is not None and response.get("id") == rid:
                break
        error = response.get("error") or {}
        self.answer(f"tool call answered: error {error.get('code')}", said=True)

    def ask(self, command: str, depth: int = 0) -> None:
        item_id = self.item_started("commandExecution", command=command, cwd=os.getcwd())
        rid = self.request_approval(item_id, command, depth)
        while True:
            response = self.poll(None)
            if response is not None and response.get("id") == rid:
                break
        result = response.get("result")
        decision = result.get("decision") if isinstance(result, dict) else None
        _record(decision=decision)
        self.notify("serverRequest/resolved", threadId=self.thread_id, requestId=rid)
        accepted = decision in ("accept", "acceptForSession")
        item = {
            "type": "commandExecution",
            "id": item_id,
            "command": command,
            "status": "completed" if accepted else "declined",
            "exitCode": 0 if accepted else None,
            "aggregatedOutput": "" if accepted else None,
        }
        self.item_completed(item)
        if decision == "cancel":
            raise Interrupted
        self.answer(f"decision: {decision}")

    def question(self, text: str) -> None:
        rid = 800
        questions = [
            {
                "id": "q1",
                "header": "Go?",
                "question": text,
                "options": [
                    {"label": "yes", "description": "go on"},
                    {"label": "no", "description": "stop"},
                ],
            },
            {"id": "q2", "header": "Why", "question": "Why?", "options": None},
        ]
        params = {
            "threadId": self.thread_id,
            "turnId": self.turn_id,
            "itemId": "item-question",
            "isBlocking": True,
            "questions": questions,
        }
        _send({"id": rid, "method": "item/tool/requestUserInput", "params": params})
        got = self.responses({rid}, limit=30, linger=0)
        (response,) = got.get(rid, [{}])
        result = response.get("result")
        answers = result.get("answers") if isinstance(result, dict) else response
        self.answer(f"answers: {json.dumps(answers, sort_keys=True)}", said=True)

    # -- hostile scenarios ---------------------------------------------------------------

    def approval_request(self, rid: int, command: str) -> dict[str, Any]:
        params = {
            "threadId": self.thread_id,
            "turnId": self.turn_id,
            "itemId": f"item-ask-{command}",
            "startedAtMs": int(time.time() * 1000),
            "command": command,
            "cwd": os.getcwd(),
        }
        return {"id": rid, "method": "item/commandExecution/requestApproval", "params": params}

    def responses(
        self, ids: set[int], *, limit: float, linger: float = 0.5
    ) -> dict[Any, list[dict[str, Any]]]:
        """The responses to our requests by id, until each of ``ids`` has one (or ``limit``
        seconds), then for ``linger`` seconds more (a second answer)."""
        got: dict[Any, list[dict[str, Any]]] = collections.defaultdict(list)
        waiting, deadline, end = set(ids), time.monotonic() + limit, None
        while True:
            now = time.monotonic()
            if end is None and (not waiting or now > deadline):
                end = now + linger
            if end is not None and now >= end:
                return got
            response = self.poll((end or deadline) - now)
            if response is not None:
                got[response.get("id")].append(response)
                waiting.discard(response.get("id"))

    def flood(self, rest: str) -> str:
        n = int(rest.split()[0]) if rest.split() else 20000
        ids = list(range(1000, 1000 + n))
        self.reading.clear()  # every request sent before any response is read
        for rid in ids:
            _send(self.approval_request(rid, f"echo {rid}"))
        self.reading.set()
        asked = set(ids)
        got = self.responses(asked, limit=20)
        counts = [len(got.get(rid, [])) for rid in ids]
        accepted = sum(
            1 for rid in ids for r in got.get(rid, [])[:1] if _decision(r) in ("accept",)
        )
        unknown = sum(len(v) for k, v in got.items() if k not in asked)
        return (
            f"flood {n}: once {counts.count(1)}, again {sum(1 for c in counts if c > 1)}, "
            f"never {counts.count(0)}, unknown {unknown}, accepted {accepted}"
        )

    def duplicate(self, rest: str) -> str:
        asks = [(500, "echo first"), (500, "echo second"), (501, "echo third")]
        _write("\n".join(json.dumps(self.approval_request(rid, cmd)) for rid, cmd in asks))
        got = self.responses({500, 501}, limit=10)
        return "answers: " + " ".join(f"{rid}={len(got[rid])}" for rid in sorted(got, key=str))

    def foreign(self, rest: str) -> str:
        sent = {
            700: ("item/tool/requestUserInput", {"threadId": self.thread_id, "questions": []}),
            701: ("made/up", {"threadId": self.thread_id}),
            702: (
                "item/tool/call",
                {
                    "threadId": self.thread_id,
                    "turnId": self.turn_id,
                    "callId": "c1",
                    "tool": "rm_everything",
                    "arguments": {},
                },
            ),
        }
        for rid, (method, params) in sent.items():
            _send({"id": rid, "method": method, "params": params})
        got = self.responses(set(sent), limit=10)
        said = []
        for rid, (method, _) in sent.items():
            shown = [
                f"error {r['error'].get('code')}" if isinstance(r.get("error"), dict) else "result"
                for r in got.get(rid, [])
            ]
            said.append(f"{method}: {', '.join(shown) or 'none'}")
        return " | ".join(said)

    def sleep(self, seconds: float) -> None:
        item_id = self.item_started("commandExecution", command=f"sleep {seconds:g}")
        self.poll(seconds)
        self.item_completed(
            {
                "type": "commandExecution",
                "id": item_id,
                "command": f"sleep {seconds:g}",
                "status": "completed",
                "exitCode": 0,
                "aggregatedOutput": "",
            }
        )
        said = f"slept {seconds:g}s" + "".join(f"; steered: {text}" for text in self.steered)
        self.answer(said)

    def answer(self, text: str, *, said: bool = False, end_depth: int = 0) -> None:
        if not said and not text.startswith(("decision:", "slept")):
            text = f"fake codex got: {text}"
        item_id = self.item_started("agentMessage", text="")
        self.item_completed({"type": "agentMessage", "id": item_id, "text": text})
        last = {"inputTokens": INPUT_TOKENS, "cachedInputTokens": 0, "outputTokens": OUTPUT_TOKENS}
        for name, value in last.items():
            self.total[name] += value
        total = dict(self.total)
        for counts in (last, total):
            counts["reasoningOutputTokens"] = 0
            counts["totalTokens"] = counts["inputTokens"] + counts["outputTokens"]
        self.notify(
            "thread/tokenUsage/updated",
            threadId=self.thread_id,
            turnId=self.turn_id,
            tokenUsage={"total": total, "last": last},
        )
        self.completed("completed", end_depth)

    def completed(self, status: str, depth: int = 0) -> None:
        turn = self._turn(status)
        if depth:  # the items before the status, as codex writes them
            turn = {**turn, "items": [DEEP]}
        self.notify("turn/completed", depth, threadId=self.thread_id, turn=turn)
        self.turn_id = None


def _decision(response: dict[str, Any]) -> Any:
    result = response.get("result")
    return result.get("decision") if isinstance(result, dict) else None


def main(argv: list[str]) -> int:
    """``codex app-server [ARGS]``: ARGS (``-c`` overrides...) are recorded, not read."""
    _record(app_server=argv)
    return FakeAppServer().run()
