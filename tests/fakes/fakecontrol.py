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

An interrupt during ASK also cancels the question.  At the end of stdin it exits 1 if the last
result was an error (as claude does), else 0.  ``FAKE_CLI_RECORD=path`` appends the argv, each
stdin object (``stdin``) and each child's pid (``child``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
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


class Fake(ClaudeSide):
    def __init__(self) -> None:
        super().__init__(SESSION, record=record)

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
        elif word == "SLEEP":
            self.sleep(float(rest or 600))
        elif word == "GARBAGE":
            self.raw(b"this is not json\n")
            self.emit({"type": "control_request", "request": {"subtype": "can_use_tool"}})
            self.emit({"type": "control_request", "request_id": "garbage", "request": "nope"})
            self.result("garbage sent")
        elif word == "UNKNOWN_ID":
            answer = {"subtype": "success", "request_id": "never-sent", "response": {}}
            self.emit({"type": "control_response", "response": answer})
            self.result("answered an id never sent")
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

    def ask_turn(self, rest: str) -> None:
        tool, _, raw = rest.partition(" ")
        try:
            tool_input = json.loads(raw) if raw.strip() else {}
        except ValueError:
            tool_input = {"raw": raw}
        call = self.tool_use(tool, tool_input)
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

    def sleep(self, seconds: float) -> None:
        code = f"import time; time.sleep({seconds})"
        call = self.tool_use("Bash", {"command": f"python3 -c '{code}'"})
        child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL)
        record(child=child.pid)
        got, _ = self.wait(child=child)
        if got == "done":
            self.tool_result(call, "(Bash completed with no output)")
            self.say(f"slept {seconds:g} s")
            self.result(f"slept {seconds:g} s")
            return
        child.kill()
        child.wait()
        if got == "interrupt":
            self.interrupted(call)


def main() -> int:
    record(argv=sys.argv[1:], cwd=os.getcwd())
    fake = Fake()
    while (prompt := fake.next_prompt()) is not None:
        fake.turn(prompt)
    return 1 if fake.last_error else 0


if __name__ == "__main__":
    sys.exit(main())
