#!/usr/bin/env python3
"""The fake ``claude`` speaking the stream-json control protocol (standard library only).

``bin/claude`` runs this instead of ``fakecli.py`` when started with ``--input-format
stream-json`` (as ``ClaudeControl.command()`` starts it).  It reads one JSON object per stdin
line, as the real claude 2.1.330 does (see recordings/twoway): a ``control_request``
``initialize`` is answered (its ``PreToolUse`` hook callback id kept), ``interrupt`` is
acknowledged (and ends a running turn), any other request gets an error answer.  Each user
message is a turn: ``system/init``, then what its text says, then a ``result``:

  (any other text)     text ``fake claude got: <text>``, result success
  ASK <Tool> <json>    asks about a tool call: a ``hook_callback`` when initialize registered the
                       hook (as the real claude does), else a ``can_use_tool``; waits for the
                       answer; says ``allowed <Tool> <input as answered, JSON>`` or ``denied
                       <Tool>: <message>``; a deny with ``interrupt`` (or a hook's
                       ``continue: false``) ends the turn as claude does (result
                       ``error_during_execution``, or ``hook_stopped``)
  GARBAGE              a non-JSON line, a control_request without request_id, one whose
                       request is not an object, then a result
  UNKNOWN_ID           a control_response for an id never sent, then a result
  DIE                  exits 3 mid-turn (no result)
  SILENCE              prints nothing more and ignores everything (even stdin's end)
  SLEEP <n>            a Bash tool call running ``time.sleep(n)`` in a child process; done: result
                       success; on ``interrupt``: the child killed, claude's refusal and
                       ``[Request interrupted by user for tool use]``, result
                       ``error_during_execution``
  HANG_ASK             asks (like ASK) and ignores the answer; an interrupt cancels the question
                       (``control_cancel_request``) and ends the turn
  JSON <json>          answers as claude does with ``--json-schema``: a ``StructuredOutput`` tool
                       call of that input, then a result whose ``structured_output`` is it
                       (and its ``result`` the JSON text)

  ESCAPE <n>           like SLEEP, the child in a session of its own and left running when
                       stdin ends (a tool that escaped its CLI: only a sweep stops it)
  LATER <s> <text>     a result at once, then after <s> seconds the turn of <text> by itself
                       (claude's background tasks coming back between turns)
  ENDED_ASK <s> <Tool> <json>
                       a result at once; after <s> seconds, in one write, a background task's
                       text and result and then a ``can_use_tool`` about the call (another
                       task asking right after claude ended one); waits for the answer and
                       says it, then a result, as for ASK
  DEEP_ASK [n]         like ASK of a ``Workflow`` call whose ``args`` nest n levels (default
                       1100, deeper than orjson's 1,024: the line cannot be parsed), the
                       tool_use line nested as deep; the answer is said as for ASK
  DEEP_REQUEST [n]     a control_request of subtype ``mcp_message`` nested n deep; says the
                       answer's subtype (``answered <subtype>: <error>``), then a result
  DEEP_RESULT [n]      a result whose ``permission_denials`` nest n deep, written as claude
                       2.1.330 writes it: its ``type``, ``subtype`` and answer last

Hostile scenarios (a CLI abusing the protocol; each says what came back, then a result):

  FLOOD <n> [how]      n questions at once, each a Bash call ``echo <id>`` (``how``: ``hook``,
                       ``can_use_tool``, ``mixed``: every other one each way; default ``mixed``
                       when initialize registered the hook, else ``can_use_tool``), all
                       written before stdin is read again (the answers wait in the pipe and in
                       the sender's queue); then reads the answers and says ``flood <n>: once <a>, again <b>, never <c>, unknown
                       <d>, allowed <e>`` (ids answered more than once in ``again``, answers
                       to ids never sent in ``unknown``)
  DUPLICATE            two questions with one request id (``echo first``, ``echo second``)
                       and another (``echo third``), in one write (so both are pending at
                       once); says ``answers: <id>=<count> ...``
  FOREIGN              a hook callback of an id nobody registered (``PreToolUse`` of a Bash
                       call), an ``mcp_message`` to the server ``not-ours``, a request of an
                       unknown subtype; says ``hook: <answer> | mcp: <answer> | other:
                       <answer>`` (``error``, ``allow``, ``deny``, ``rpc error <code>``, ``none``)

An interrupt during ASK also cancels the question.  At the end of stdin it exits 1 if the last
result was an error (as claude does), else 0.  ``FAKE_CLI_RECORD=path`` appends the argv, each
stdin object (``stdin``) and each child's pid (``child``).
"""

from __future__ import annotations

import collections
import importlib.util
import json
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coding_genesis.testing._claude_side import Answer, ClaudeSide
else:  # claude's side of the protocol, shared with the failer: from its own directory
    _SPEC = importlib.util.find_spec("coding_genesis")
    assert _SPEC is not None and _SPEC.submodule_search_locations
    sys.path.insert(0, str(Path(next(iter(_SPEC.submodule_search_locations))) / "testing"))
    from _claude_side import Answer, ClaudeSide

__all__ = ["Fake", "main"]

SESSION = os.environ.get("FAKE_CLI_SESSION") or str(uuid.uuid4())


def record(**entry: Any) -> None:
    path = os.environ.get("FAKE_CLI_RECORD")
    if path:
        entry["pid"], entry["t"] = os.getpid(), time.time()
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")


#: Stands in for a deep value in an object written by ``emit`` (json.dumps cannot nest it).
DEEP = "<<deep>>"


class Fake(ClaudeSide):
    def __init__(self) -> None:
        #: Cleared while a flood is written: stdin is not read meanwhile.
        self.reading = threading.Event()
        self.reading.set()
        #: The answers of the last hostile scenario, by request id.
        self.answered: dict[str, list[dict[str, Any]]] = {}
        #: While set, each ``DEEP`` string in a line written becomes lists nested this deep.
        self.depth = 0
        #: While set, the lines written are held here (then written at once).
        self.batch: list[bytes] | None = None
        super().__init__(SESSION, record=record)

    def _read(self) -> None:
        pending = b""
        while chunk := os.read(0, 65536):
            self.reading.wait()
            *lines, pending = (pending + chunk).split(b"\n")
            for raw in lines:
                self._take(raw)
        self._take(pending)
        self.inbox.put(None)

    def emit(self, obj: dict[str, Any]) -> None:
        if self.batch is not None:
            self.batch.append((json.dumps(obj, ensure_ascii=False) + "\n").encode())
            return
        if not self.depth:
            super().emit(obj)
            return
        text = json.dumps(obj).replace(json.dumps(DEEP), "[" * self.depth + "]" * self.depth)
        self.raw((text + "\n").encode())

    def turn(self, text: str) -> None:
        self.emit({"type": "system", "subtype": "init", "session_id": SESSION, "cwd": os.getcwd()})
        word, _, rest = text.strip().partition(" ")
        if word == "ASK":
            self.ask_turn(rest)
        elif word == "HANG_ASK":
            call = self.tool_use("Bash", {"command": "echo hang"})
            rid, _ = self.ask("Bash", {"command": "echo hang"}, call)
            if self.wait()[0] == "interrupt":
                self.cancel(rid)
                self.interrupted(call)
        elif word in ("SLEEP", "ESCAPE"):
            self.sleep(float(rest or 600), escaped=word == "ESCAPE")
        elif word == "GARBAGE":
            self.raw(b"this is not json\n")
            self.emit({"type": "control_request", "request": {"subtype": "can_use_tool"}})
            self.emit({"type": "control_request", "request_id": "garbage", "request": "nope"})
            self.result("garbage sent")
        elif word == "UNKNOWN_ID":
            answer = {"subtype": "success", "request_id": "never-sent", "response": {}}
            self.emit({"type": "control_response", "response": answer})
            self.result("answered an id never sent")
        elif word == "DEEP_ASK":
            self.depth = int(rest or 1100)
            try:
                self.ask_turn('Workflow {"script": "export const meta = {}", "args": "<<deep>>"}')
            finally:
                self.depth = 0
        elif word == "DEEP_REQUEST":
            request = {"subtype": "mcp_message", "server_name": "x", "message": DEEP}
            self.depth = int(rest or 1100)
            try:
                rid = self.request(request)
            finally:
                self.depth = 0
            got, answer = self.wait(rid)
            if got == "answer":
                self.result(f"answered {answer.get('subtype')}: {answer.get('error')}")
        elif word == "DEEP_RESULT":
            # claude 2.1.330 writes a result's type, subtype and answer last, after the
            # permission_denials that hold a refused call's (deep) input.
            said = "the answer after a deep refusal"
            denial = {"tool_name": "Workflow", "tool_use_id": "toolu_x", "tool_input": DEEP}
            result: dict[str, Any] = {"session_id": SESSION}
            result["usage"] = {"input_tokens": 3, "output_tokens": 5}
            result |= {"permission_denials": [denial], "is_error": False, "num_turns": 1}
            result |= {"subtype": "success", "result": said, "type": "result"}
            self.depth = int(rest or 1100)
            try:
                self.emit(result)
            finally:
                self.depth = 0
            self.last_error = False
        elif word == "LATER":  # a background task: this turn ends, the task comes back later
            delay, _, inner = rest.partition(" ")
            self.say("started in the background")
            self.result("started in the background")
            time.sleep(float(delay))
            self.turn(inner)
        elif word == "ENDED_ASK":
            delay, _, ask = rest.partition(" ")
            self.say("started in the background")
            self.result("started in the background")
            time.sleep(float(delay))
            self.ask_turn(ask, ended=True)
        elif word in ("FLOOD", "DUPLICATE", "FOREIGN"):
            self.result(getattr(self, word.lower())(rest))
        elif word == "JSON":
            value = json.loads(rest)
            self.tool_result(self.tool_use("StructuredOutput", value), "Structured output provided")
            self.result(json.dumps(value), structured_output=value)
        elif word == "DIE":
            os._exit(3)
        elif word == "SILENCE":
            while True:
                time.sleep(3600)
        else:
            said = f"fake claude got: {text}"
            self.say(said)
            self.result(said)

    def ask_turn(self, rest: str, *, ended: bool = False) -> None:
        """ASK; ``ended``: a background task's text and result first, then the
        question as ``can_use_tool``, all in one write (read before anyone answers)."""
        tool, _, raw = rest.partition(" ")
        try:
            tool_input = json.loads(raw) if raw.strip() else {}
        except ValueError:
            tool_input = {"raw": raw}
        if ended:
            self.batch = []
            self.emit({"type": "system", "subtype": "init", "session_id": SESSION})
            self.say("the first task is done")
            self.result("the first task is done")
        call = self.tool_use(tool, tool_input)
        if ended:
            rid, via_hook = self.can_use_tool(tool, tool_input, call, "the fake CLI asks"), False
            lines, self.batch = self.batch or [], None
            self.raw(b"".join(lines))
        else:
            rid, via_hook = self.ask(tool, tool_input, call)
        answer: Answer = self.answer_of(rid, via_hook, call)
        if answer.got != "answer":
            return  # interrupted (the lines are written) or stdin ended
        if answer.decision == "allow":
            used = answer.input if answer.input is not None else tool_input
            self.tool_result(call, "ok")
            said = f"allowed {tool} {json.dumps(used, sort_keys=True)}"
        elif answer.stop and via_hook:
            self.tool_result(call, f"PreToolUse:{tool} hook error: {answer.message}", True)
            self.result("", terminal_reason="hook_stopped")
            return
        elif answer.stop:
            self.interrupted(call)
            return
        else:
            self.tool_result(call, answer.message, True)
            said = f"denied {tool}: {answer.message}"
        self.say(said)
        self.result(said)

    # -- hostile scenarios ---------------------------------------------------------------

    def question(self, rid: str, command: str, how: str) -> dict[str, Any]:
        """A question about ``command`` under request id ``rid``."""
        call = f"toolu_{rid}"
        tool_input = {"command": command}
        if how == "hook":
            data: dict[str, Any] = {"session_id": SESSION, "hook_event_name": "PreToolUse"}
            data |= {"tool_name": "Bash", "tool_input": tool_input, "tool_use_id": call}
            request = {"subtype": "hook_callback", "callback_id": self.hook_id, "input": data}
        else:
            request = {"subtype": "can_use_tool", "tool_name": "Bash", "input": tool_input}
        return {
            "type": "control_request",
            "request_id": rid,
            "request": {**request, "tool_use_id": call},
        }

    def answers(
        self, ids: set[str], *, limit: float, linger: float = 0.5
    ) -> collections.Counter[str]:
        """The answers to ``ids`` (and any other) by request id, until each of ``ids`` has
        one (or ``limit`` seconds), then for ``linger`` seconds more (a second answer)."""
        got: collections.Counter[str] = collections.Counter()
        self.answered = collections.defaultdict(list)
        waiting, deadline, end = set(ids), time.monotonic() + limit, None
        while True:
            now = time.monotonic()
            if end is None and (not waiting or now > deadline):
                end = now + linger
            if end is not None and now >= end:
                return got
            try:
                obj = self.inbox.get(timeout=max(0.001, (end or deadline) - now))
            except queue.Empty:
                continue
            if obj is None:
                self.eof = True
                return got
            if obj.get("type") == "control_response":
                response = obj.get("response") or {}
                rid = str(response.get("request_id"))
                got[rid] += 1
                self.answered[rid].append(response)
                waiting.discard(rid)
            elif obj.get("type") == "control_request":
                self.serve(obj)
            elif obj.get("type") == "user":
                self.later.append(obj)

    def flood(self, rest: str) -> str:
        words = rest.split()
        n = int(words[0]) if words else 20000
        how = words[1] if len(words) > 1 else "mixed" if self.hook_id else "can_use_tool"
        ids = [f"flood-{i}" for i in range(n)]
        ways = ("hook", "can_use_tool") if how == "mixed" else (how,)
        self.reading.clear()  # every question asked before any answer is read
        for i, rid in enumerate(ids):
            self.emit(self.question(rid, f"echo {rid}", ways[i % len(ways)]))
        self.reading.set()
        asked = set(ids)
        got = self.answers(asked, limit=20)
        allowed = sum(
            1 for rid in ids for answer in self.answered.get(rid, [])[:1] if _allowed(answer)
        )
        return (
            f"flood {n}: once {sum(1 for rid in ids if got[rid] == 1)}, "
            f"again {sum(1 for rid in ids if got[rid] > 1)}, "
            f"never {sum(1 for rid in ids if got[rid] == 0)}, "
            f"unknown {sum(c for rid, c in got.items() if rid not in asked)}, "
            f"allowed {allowed}"
        )

    def duplicate(self, rest: str) -> str:
        how = "hook" if self.hook_id is not None else "can_use_tool"
        asks = [("dup-1", "echo first"), ("dup-1", "echo second"), ("dup-2", "echo third")]
        lines = [json.dumps(self.question(rid, command, how)) + "\n" for rid, command in asks]
        self.raw("".join(lines).encode())  # one write: all three pending at once
        got = self.answers({"dup-1", "dup-2"}, limit=10)
        return "answers: " + " ".join(f"{rid}={got[rid]}" for rid in sorted(got))

    def foreign(self, rest: str) -> str:
        hook: dict[str, Any] = {"session_id": SESSION, "hook_event_name": "PreToolUse"}
        hook |= {"tool_name": "Bash", "tool_input": {"command": "touch pwned"}}
        sent = {
            "hook": {
                "subtype": "hook_callback",
                "callback_id": "hook_nobody_registered",
                "input": hook,
            },
            "mcp": {
                "subtype": "mcp_message",
                "server_name": "not-ours",
                "message": {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}},
            },
            "other": {"subtype": "rewind_files", "user_message_id": "u1"},
        }
        for name, request in sent.items():
            self.emit(
                {"type": "control_request", "request_id": f"foreign-{name}", "request": request}
            )
        self.answers({f"foreign-{name}" for name in sent}, limit=10)
        return " | ".join(f"{name}: {self.said(f'foreign-{name}')}" for name in sent)

    def said(self, rid: str) -> str:
        """What the answers to ``rid`` were, in short."""
        answers = self.answered.get(rid, [])
        if not answers:
            return "none"
        shown = []
        for answer in answers:
            out = answer.get("response") or {}
            rpc = out.get("mcp_response") if isinstance(out, dict) else None
            if answer.get("subtype") != "success":
                shown.append("error")
            elif isinstance(rpc, dict):
                code = (rpc.get("error") or {}).get("code")
                shown.append(f"rpc error {code}" if code is not None else "rpc result")
            else:
                shown.append("allow" if _allowed(answer) else "deny")
        return ", ".join(shown)

    def sleep(self, seconds: float, *, escaped: bool = False) -> None:
        code = f"import time; time.sleep({seconds})"
        call = self.tool_use("Bash", {"command": f"python3 -c '{code}'"})
        child = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.DEVNULL, start_new_session=escaped
        )
        record(child=child.pid)
        got, _ = self.wait(child=child)
        if got == "done":
            self.tool_result(call, "(Bash completed with no output)")
            self.say(f"slept {seconds:g} s")
            self.result(f"slept {seconds:g} s")
            return
        if escaped and got == "eof":
            return  # a tool that escaped: nobody here stops it (the sweep must)
        child.kill()
        child.wait()
        if got == "interrupt":
            self.interrupted(call)


def _allowed(answer: dict[str, Any]) -> bool:
    """Whether a successful answer to a question (hook or ``can_use_tool``) allows the call."""
    out = answer.get("response") or {}
    if answer.get("subtype") != "success" or not isinstance(out, dict):
        return False
    specific = out.get("hookSpecificOutput") or {}
    return out.get("behavior") == "allow" or specific.get("permissionDecision") == "allow"


def main() -> int:
    record(argv=sys.argv[1:], cwd=os.getcwd())
    fake = Fake()
    while (prompt := fake.next_prompt()) is not None:
        fake.turn(prompt)
    return 1 if fake.last_error else 0


if __name__ == "__main__":
    sys.exit(main())
