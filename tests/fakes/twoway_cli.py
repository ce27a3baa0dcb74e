"""A tiny CLI speaking a minimal two-way protocol on stdin/stdout (JSON lines),
for the live-session tests of the machinery itself (claude's and codex's own
protocols have their fakes in ``fakecli.py``).

We write ``{"op": "hello"}`` (answered ``{"type": "ready", "session": ...}``),
``{"op": "prompt", "text": ...}``, ``{"op": "answer", "id": N, "allow": bool,
"message": ..., "input": ..., "end": bool}``, ``{"op": "interrupt"}`` and
``{"op": "bye"}`` (the CLI exits 0), ``{"op": "result", "id": N, "text": ...,
"error": bool}`` (a host tool's result), and ``{"op": "control", "id": N, "what":
..., "params": {...}}`` (a call with an answer: ``echo`` is answered ``{"type":
"control_answer", "id": N, "result": params}``, ``fail`` with ``"error"``,
``twice`` twice, ``never`` not at all, ``die`` by exiting 3).  A prompt's first word picks what the
turn does:

* ``TEXT words``: ``text`` then ``done`` with usage (12 in, 7 out);
* ``BIG n``: a ``text`` of n bytes, then ``done`` as for ``TEXT``;
* ``ASK <tool> <json>``: ``ask`` (id N), waits for the answer, then says it
  (``allowed <json input>`` / ``denied <message>``) and ``done``; an answer
  with ``end`` ends the turn at once (``done`` with ``ended``);
* ``CALL <name> <json>``: ``call`` (id N) of a host tool with those arguments,
  waits for its ``result``, then says it (``result: <text>`` / ``tool error:
  <text>``) and ``done``; ``CALL2 ...``: two calls at once, then both results;
* ``ASK_STREAM``: asks (``Bash``), and says ``tick 0``, ``tick 1``, ... every
  10 ms until the answer comes (at most 1,000), then says it as ``ASK`` does;
* ``HANG_ASK``: asks and never reads the answer's effect (``done`` only
  after an interrupt);
* ``SLEEP n``: starts ``python3 -c 'time.sleep(n)'`` in its own session (a
  tool that escapes the CLI's group) and waits for it; an interrupt kills it
  and answers ``done`` with ``interrupted``;
* ``ORPHAN n``: like SLEEP, but the interrupt leaves the sleeper running;
* ``DIE``: exits 3 mid-turn; ``SILENCE``: says nothing more (keeps running);
* ``GARBAGE``: a non-JSON line and a malformed control line, then ``done``
  (``GARBAGE_STUCK``: and never ``done``, even when interrupted);
* ``UNKNOWN_ID``: an ``answered`` for an id we never used, then ``done``;
* ``NEWS``: a message of a type nobody knows, then ``done``;
* ``LATER <seconds> <prompt>``: ``done`` at once, then after the delay the
  turn of ``<prompt>`` by itself, between turns (claude's background tasks);
* ``HOOK <tool> <json>``: a pre-tool hook point (``hook``, id N), waits for
  ``{"op": "hook_answer", "id": N, "block", "message", "input", "context"}``
  and says it (``ran <json input>`` plus ``context: ...``, or ``blocked
  <message>``), then an observed turn's end (``hook`` with ``"wait": false``,
  event ``turn_end``: nothing is awaited) and ``done``;
* ``HOOKASK <tool> <json>``: a pre-tool hook point that is also a question
  (``"ask": true``): the ``hook_answer`` of a block, or the ``answer`` of the
  question (after the hooks), settles it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from typing import Any

_out_lock = threading.Lock()


def say(obj: Any) -> None:
    with _out_lock:
        sys.stdout.write((obj if isinstance(obj, str) else json.dumps(obj)) + "\n")
        sys.stdout.flush()


def done(usage: dict[str, int] | None = None, **flags: bool) -> None:
    """A turn's end: its usage first (a line of its own, as CLIs report it mid-turn)."""
    if usage is not None:
        say({"type": "usage", "usage": usage})
    say({"type": "done", **flags})


def control(msg: dict[str, Any]) -> None:
    """A call of ours with an answer (see the module's docstring)."""
    what, answer = msg.get("what"), {"type": "control_answer", "id": msg.get("id")}
    if what == "die":
        sys.exit(3)
    if what == "fail":
        say({**answer, "error": f"no such thing: {msg.get('params')}"})
    elif what in ("echo", "twice"):
        for _ in range(2 if what == "twice" else 1):
            say({**answer, "result": msg.get("params")})


def main() -> int:
    session = os.environ.get("TWOWAY_SESSION", "sess-1")
    answers: dict[int, dict[str, Any]] = {}
    cond = threading.Condition()
    interrupted = threading.Event()
    sleeper: list[subprocess.Popen[bytes]] = []
    ask_id = [0]

    def wait_answer(n: int) -> dict[str, Any] | None:
        with cond:
            while n not in answers and not interrupted.is_set():
                cond.wait(0.05)
            return answers.pop(n, None)

    def hook_turn(word: str, rest: str, usage: dict[str, int]) -> None:
        tool, _, raw = rest.partition(" ")
        ask_id[0] += 1
        n = ask_id[0]
        tool_input = json.loads(raw or "{}")
        say(
            {
                "type": "hook",
                "id": n,
                "event": "pre_tool",
                "tool": tool,
                "input": tool_input,
                "ask": word == "HOOKASK",
            }
        )
        answer = wait_answer(n)
        if answer is None:
            done(interrupted=True)
            return
        if answer.get("block"):
            say({"type": "text", "text": "blocked " + str(answer.get("message"))})
        elif answer.get("op") == "answer" and not answer.get("allow"):
            say({"type": "text", "text": "denied " + str(answer.get("message"))})
        else:
            used = answer.get("input") or tool_input
            say({"type": "tool", "name": tool, "input": used})
            said = "ran " + json.dumps(used, sort_keys=True)
            if answer.get("context"):
                said += " context: " + str(answer["context"])
            say({"type": "text", "text": said})
        say({"type": "hook", "id": None, "event": "turn_end", "wait": False})
        done(usage)

    def turn(text: str) -> None:
        word, _, rest = text.partition(" ")
        usage = {"input_tokens": 12, "output_tokens": 7}
        if word == "TEXT":
            say({"type": "text", "text": rest or "hello"})
            done(usage)
        elif word == "BIG":
            say({"type": "text", "text": "x" * int(rest)})
            done(usage)
        elif word in ("CALL", "CALL2"):
            name, _, raw = rest.partition(" ")
            ids = []
            for _ in range(2 if word == "CALL2" else 1):
                ask_id[0] += 1
                ids.append(ask_id[0])
                say({"type": "call", "id": ids[-1], "name": name, "arguments": json.loads(raw)})
            for n in ids:
                result = wait_answer(n)
                if result is None:
                    done(interrupted=True)
                    return
                said = "tool error: " if result.get("error") else "result: "
                say({"type": "text", "text": said + str(result.get("text"))})
            done(usage)
        elif word in ("ASK", "ASK_STREAM", "HANG_ASK"):
            tool, _, raw = rest.partition(" ")
            ask_id[0] += 1
            n = ask_id[0]
            say({"type": "ask", "id": n, "tool": tool or "Bash", "input": json.loads(raw or "{}")})
            if word == "HANG_ASK":
                interrupted.wait()
                done(interrupted=True)
                return
            ticks = 0
            while word == "ASK_STREAM" and ticks < 1000 and not interrupted.is_set():
                with cond:
                    if n in answers:
                        break
                say({"type": "text", "text": f"tick {ticks}"})
                ticks += 1
                interrupted.wait(0.01)
            answer = wait_answer(n)
            if answer is None:
                done(interrupted=True)
            elif answer.get("allow"):
                say({"type": "tool", "name": tool, "input": answer.get("input")})
                say({"type": "text", "text": "allowed " + json.dumps(answer.get("input"))})
                done(usage)
            elif answer.get("end"):
                done(ended=True)
            else:
                say({"type": "text", "text": "denied " + str(answer.get("message"))})
                done(usage)
        elif word in ("SLEEP", "ORPHAN"):
            code = f"import time; time.sleep({float(rest or 600)})"
            proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
            say({"type": "tool", "name": "Bash", "input": {"command": code}, "pid": proc.pid})
            sleeper[:] = [proc]
            while proc.poll() is None and not interrupted.is_set():
                interrupted.wait(0.05)
            if interrupted.is_set():
                if word == "SLEEP":
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                done(interrupted=True)
            else:
                done(usage)
        elif word == "DIE":
            say({"type": "text", "text": "about to die"})
            os._exit(3)
        elif word == "SILENCE":
            return
        elif word in ("GARBAGE", "GARBAGE_STUCK"):
            say("this is not json {")
            say({"type": "ask", "id": "not-a-number"})
            if word == "GARBAGE":
                done(usage)
        elif word == "UNKNOWN_ID":
            say({"type": "answered", "id": 999})
            done(usage)
        elif word in ("HOOK", "HOOKASK"):
            hook_turn(word, rest, usage)
        elif word == "NEWS":
            say({"type": "news", "text": "nobody knows me"})
            done(usage)
        elif word == "LATER":
            # ends this turn now, then after the delay works by itself (a
            # background task coming back): the rest is a turn of its own
            delay, _, inner = rest.partition(" ")
            say({"type": "text", "text": "started in the background"})
            done(usage)
            interrupted.wait(float(delay))
            interrupted.clear()
            turn(inner)
        else:
            say({"type": "text", "text": f"echo: {text}"})
            done(usage)

    worker: threading.Thread | None = None
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        op = msg.get("op")
        if op == "hello":
            say({"type": "ready", "session": session})
        elif op == "prompt":
            interrupted.clear()
            worker = threading.Thread(target=turn, args=(str(msg.get("text", "")),), daemon=True)
            worker.start()
        elif op in ("answer", "hook_answer", "result"):
            with cond:
                answers[int(msg["id"])] = msg
                cond.notify_all()
        elif op == "interrupt":
            interrupted.set()
        elif op == "control":
            control(msg)
        elif op == "bye":
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
