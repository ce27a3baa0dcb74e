#!/usr/bin/env python3
"""A scriptable fake coding-agent CLI (standard library only).

``bin/claude`` and ``bin/codex`` run this with their flavour.  Without a script
it behaves like a well-mannered CLI: it reads the prompt from stdin and answers
in its flavour's JSON-lines format.  With ``FAKE_CLI_SCRIPT`` (a JSON list of
steps) or ``FAKE_CLI_SCRIPT_FILE`` it does exactly what the steps say:

  {"emit": {...}}                 one JSON line
  {"raw": "text", "nl": true}     raw text (``raw_hex`` for arbitrary bytes)
  {"recording": "path"}           copy a recorded .jsonl stream to stdout
  {"answer": "text"}              the flavour's session/text/result lines
  {"init": true}                  the flavour's session line only
  {"result": "text"}              the flavour's terminal line only
  {"echo_prompt": true}           answer with the prompt it read
  {"answer_prompt": true}         answer with the prompt it read, as it is (a JSON answer)
  {"answer_env": true}            answer with the sorted names of its environment
  {"record_env": ["NAME", ...]}   record those variables' values (None when unset)
  {"sleep": 1.5} / {"hang": true}
  {"busy": 3}                     compute silently (one core, no output) for 3 s
  {"ignore_sigterm": true}        SIGTERM is ignored from now on
  {"trap_sigterm": 143}           on SIGTERM: record it, exit with that code
  {"trap": "SIGINT", "exit": 130} on that signal: record it, then exit with the
                                  code, or keep running when ``exit`` is absent
  {"grandchild": {"setsid": true, "ignore_sigterm": true, "hold_stdout": true,
                  "sleep": 600, "double_fork": false, "count": 1}}
                                  ``count`` grandchildren; ``double_fork`` escapes
                                  (fork, setsid, fork) and is reparented away;
                                  ``bare_env``: started with an empty environment
                                  (no run marker)
  {"fork_bomb": {"count": 20, "interval": 0.01, "ignore_sigterm": true,
                 "setsid": false, "sleep": 600}}
                                  a grandchild that keeps forking (bounded by
                                  ``count``), each child optionally in its own session
  {"await_records": {"key": "grandchild", "count": 2}}
                                  wait (up to 30 s) until the record file holds that
                                  many entries with ``key`` (so the tree is in place)
  {"stderr": "text"}              a line on stderr
  {"stderr_flood": N}             N bytes on stderr
  {"stdout_flood": N, "line": L}  N bytes of valid JSON lines of about L bytes
  {"long_line": N}                one JSON line N bytes long
  {"fat_line": N}                 one tool_use line whose input holds N empty
                                  lists (``[],[],...``: 3 bytes each, ~64 held)
  {"close_stdout": true}          close stdout but keep running
  {"kill_self": "SIGKILL"}        die by a signal
  {"exit": 3}                     exit with a code (default 0 at the end)
  {"write": "path", "content": "text"}
                                  write a file (relative to the cwd; parents made);
                                  without ``content``: the prompt it read
  {"delete": "path"}              delete a file
  {"git_commit": "message"}       ``git add -A`` and ``git commit`` in the cwd

Started with ``--input-format stream-json``, ``bin/claude`` runs ``fakecontrol.py``
instead: claude's control protocol of a live session (its scenarios are in its docstring).

``FAKE_CLI_RECORD=path`` appends one JSON object per event of interest
(argv, stdin length and sha256, signals received, pids of every process it
starts: ``child``, ``grandchild``, ``intermediate``, ``bomb``) so tests can check them;
with ``FAKE_CLI_RECORD_ENV=NAME,...`` the argv's record holds those variables too.
Every process it starts inherits the environment, so a test can find them
all by the ``FAKE_CLI_MARK`` variable.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

FLAVOUR = os.environ.get("FAKE_CLI_FLAVOUR", "claude")


def record(**entry: Any) -> None:
    path = os.environ.get("FAKE_CLI_RECORD")
    if not path:
        return
    entry["pid"] = os.getpid()
    entry["t"] = time.time()
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry) + "\n")


def out(data: bytes) -> None:
    try:
        os.write(1, data) if len(data) < 65536 else _write_all(data)
    except BrokenPipeError:
        sys.exit(141)


def _write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(1, view)
        view = view[n:]


def emit(obj: dict[str, Any]) -> None:
    out((json.dumps(obj) + "\n").encode())


SESSION = os.environ.get("FAKE_CLI_SESSION") or str(uuid.uuid4())


def init_line() -> dict[str, Any]:
    if FLAVOUR == "codex":
        return {"type": "thread.started", "thread_id": SESSION}
    return {
        "type": "system",
        "subtype": "init",
        "session_id": SESSION,
        "model": "fake-model",
        "cwd": os.getcwd(),
        "tools": ["Bash"],
    }


def text_line(text: str) -> dict[str, Any]:
    if FLAVOUR == "codex":
        return {
            "type": "item.completed",
            "item": {"id": "item_0", "type": "agent_message", "text": text},
        }
    return {
        "type": "assistant",
        "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
        "session_id": SESSION,
    }


def result_line(text: str, is_error: bool = False) -> dict[str, Any]:
    if FLAVOUR == "codex":
        if is_error:
            return {"type": "turn.failed", "error": {"message": text}}
        return {"type": "turn.completed", "usage": {"input_tokens": 3, "output_tokens": 5}}
    return {
        "type": "result",
        "subtype": "success",
        "is_error": is_error,
        "result": text,
        "session_id": SESSION,
        "num_turns": 1,
        "total_cost_usd": 0.0001,
        "usage": {"input_tokens": 3, "output_tokens": 5},
    }


def answer(text: str) -> None:
    emit(init_line())
    if FLAVOUR == "codex":
        emit({"type": "turn.started"})
    emit(text_line(text))
    emit(result_line(text))


GRANDCHILD = """
import os, signal, sys, time
if {ignore}:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if {double_fork}:
    if os.fork():
        os._exit(0)
    os.setsid()
    path = os.environ.get("FAKE_CLI_RECORD")
    if path:
        with open(path, "a") as fh:
            fh.write('{{"intermediate": %d}}\\n' % os.getpid())
    if os.fork():
        os._exit(0)
path = os.environ.get("FAKE_CLI_RECORD")
if path:
    with open(path, "a") as fh:
        fh.write('{{"grandchild": %d}}\\n' % os.getpid())
time.sleep({sleep})
"""


BOMB = """
import os, signal, time
if {ignore}:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
path = os.environ.get("FAKE_CLI_RECORD")
def rec(pid):
    if path:
        with open(path, "a") as fh:
            fh.write('{{"bomb": %d}}\\n' % pid)
rec(os.getpid())
for _ in range({count}):
    if os.fork() == 0:
        if {setsid}:
            os.setsid()
        rec(os.getpid())
        time.sleep({sleep})
        os._exit(0)
    time.sleep({interval})
time.sleep({sleep})
"""


def spawn_fork_bomb(spec: dict[str, Any]) -> None:
    code = BOMB.format(
        ignore=bool(spec.get("ignore_sigterm", True)),
        count=int(spec.get("count", 20)),
        setsid=bool(spec.get("setsid")),
        interval=float(spec.get("interval", 0.01)),
        sleep=float(spec.get("sleep", 600)),
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=bool(spec.get("setsid_bomb", True)),
    )
    record(child=proc.pid)


def spawn_grandchild(spec: dict[str, Any]) -> None:
    for _ in range(int(spec.get("count", 1))):
        _spawn_grandchild(spec)


def _spawn_grandchild(spec: dict[str, Any]) -> None:
    code = GRANDCHILD.format(
        ignore=bool(spec.get("ignore_sigterm")),
        double_fork=bool(spec.get("double_fork")),
        sleep=float(spec.get("sleep", 600)),
    )
    hold = spec.get("hold_stdout", True)
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.DEVNULL,
        stdout=None if hold else subprocess.DEVNULL,
        stderr=None if hold else subprocess.DEVNULL,
        start_new_session=bool(spec.get("setsid", True)),
        env={} if spec.get("bare_env") else None,
    )
    record(child=proc.pid)
    if spec.get("double_fork"):
        proc.wait()


def flood_line(line: int) -> bytes:
    """The line a flood repeats: a JSON object of about ``line`` bytes."""
    return json.dumps({"type": "stream_event", "data": "x" * max(line - 40, 1)}).encode() + b"\n"


def flood(fd: int, total: int, line: int) -> None:
    """At least ``total`` bytes of whole lines (the last one is never cut)."""
    payload = flood_line(line)
    total = -(-total // len(payload)) * len(payload)
    block = payload * max(1, 262144 // len(payload))
    sent = 0
    while sent < total:
        chunk = block if total - sent >= len(block) else block[: total - sent]
        view = memoryview(chunk)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        sent += len(chunk)


def await_records(spec: dict[str, Any]) -> None:
    path = os.environ.get("FAKE_CLI_RECORD")
    key, count = spec["key"], int(spec.get("count", 1))
    deadline = time.monotonic() + float(spec.get("within", 30))
    while path and time.monotonic() < deadline:
        with open(path, encoding="utf-8") as fh:
            if sum(1 for line in fh if f'"{key}"' in line) >= count:
                return
        time.sleep(0.01)


def trap(signum: int, code: int | None) -> None:
    def handler(received: int, frame: object) -> None:
        record(signal=signal.Signals(received).name)
        if code is not None:
            os._exit(int(code))

    signal.signal(signum, handler)


def main() -> int:
    names = [n for n in os.environ.get("FAKE_CLI_RECORD_ENV", "").split(",") if n]
    # an "env" key only when asked: the telemetry tests read the records that have one
    seen = {"env": {n: os.environ.get(n) for n in names}} if names else {}
    record(argv=sys.argv[1:], cwd=os.getcwd(), **seen)
    if FLAVOUR == "codex" and sys.argv[1:2] == ["app-server"]:  # the two-way fake, its own module
        return int(importlib.import_module("fake_app_server").main(sys.argv[2:]))
    raw = os.environ.get("FAKE_CLI_SCRIPT")
    path = os.environ.get("FAKE_CLI_SCRIPT_FILE")
    if path:
        with open(path, encoding="utf-8") as fh:
            raw = fh.read()
    steps: list[dict[str, Any]] = json.loads(raw) if raw else [{"echo_prompt": True}]

    prompt = ""
    data = b""
    if not any(s.get("no_stdin") for s in steps) and not sys.stdin.isatty():
        data = sys.stdin.buffer.read()
        prompt = data.decode("utf-8", "replace")
    record(
        stdin_len=len(prompt),
        stdin_bytes=len(data),
        stdin_sha256=hashlib.sha256(data).hexdigest(),
        stdin_head=prompt[:200],
    )

    for step in steps:
        if "emit" in step:
            emit(step["emit"])
        elif "record_env" in step:
            record(env={name: os.environ.get(name) for name in step["record_env"]})
        elif "raw" in step:
            out(step["raw"].encode() + (b"\n" if step.get("nl", True) else b""))
        elif "raw_hex" in step:
            out(bytes.fromhex(step["raw_hex"]))
        elif "recording" in step:
            with open(step["recording"], "rb") as recording:
                out(recording.read())
        elif "answer" in step:
            answer(step["answer"])
        elif "init" in step:
            emit(init_line())
        elif "result" in step:
            emit(result_line(step["result"], bool(step.get("is_error"))))
        elif "echo_prompt" in step:
            answer(f"fake {FLAVOUR} got: {prompt}")
        elif "answer_prompt" in step:
            answer(prompt)
        elif "answer_env" in step:
            answer(json.dumps(sorted(os.environ)))
        elif "sleep" in step:
            time.sleep(float(step["sleep"]))
        elif "busy" in step:  # compute silently (no output) for that many seconds
            end = time.monotonic() + float(step["busy"])
            while time.monotonic() < end:
                sum(range(10_000))
        elif "hang" in step:
            while True:
                time.sleep(3600)
        elif "ignore_sigterm" in step:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        elif "trap_sigterm" in step:
            code = int(step["trap_sigterm"])

            def on_term(signum: int, frame: object, code: int = code) -> None:
                record(signal="SIGTERM")
                os._exit(code)

            signal.signal(signal.SIGTERM, on_term)
        elif "trap" in step:
            trap(getattr(signal, step["trap"]), step.get("exit"))
        elif "grandchild" in step:
            spawn_grandchild(step["grandchild"])
        elif "await_records" in step:
            await_records(step["await_records"])
        elif "fork_bomb" in step:
            spawn_fork_bomb(step["fork_bomb"])
        elif "stderr" in step:
            os.write(2, (step["stderr"] + "\n").encode())
        elif "stderr_flood" in step:
            flood(2, int(step["stderr_flood"]), int(step.get("line", 200)))
        elif "stdout_flood" in step:
            flood(1, int(step["stdout_flood"]), int(step.get("line", 1000)))
        elif "long_line" in step:
            size = int(step["long_line"])
            head = b'{"type":"stream_event","data":"'
            out(head)
            block = b"y" * 1048576
            left = size - len(head) - 3
            while left > 0:
                out(block[: min(left, len(block))])
                left -= len(block)
            out(b'"}\n')
        elif "fat_line" in step:
            count = int(step["fat_line"])
            out(
                b'{"type":"assistant","message":{"content":[{"type":"tool_use",'
                b'"id":"fat","name":"Fat","input":{"items":['
            )
            block = b"[]," * 65536
            left = count - 1
            while left > 0:
                n = min(left, 65536)
                out(block[: 3 * n])
                left -= n
            out(b"[]]}}]}}\n")
        elif "close_stdout" in step:
            os.close(1)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
        elif "kill_self" in step:
            os.kill(os.getpid(), getattr(signal, step["kill_self"]))
            time.sleep(5)
        elif "write" in step:
            target = os.path.join(os.getcwd(), step["write"])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            content = step.get("content")
            with open(target + ".fake-tmp", "w", encoding="utf-8") as fh:
                fh.write(prompt if content is None else str(content))
            os.replace(target + ".fake-tmp", target)  # whole or not there
        elif "delete" in step:
            os.unlink(os.path.join(os.getcwd(), step["delete"]))
        elif "git_commit" in step:
            ident = ["-c", "user.name=Fake Agent", "-c", "user.email=agent@example.invalid"]
            subprocess.run(["git", "add", "-A"], check=True)
            subprocess.run(
                ["git", *ident, "commit", "-q", "--no-verify", "-m", step["git_commit"]],
                check=True,
            )
        elif "exit" in step:
            return int(step["exit"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
