#!/usr/bin/env python3
"""A fake live CLI (standard library only): it reads JSON lines on stdin and
answers each with one JSON line on stdout, until EOF (then ``{"eof": true}``,
exit 0).  What a line asks for is its ``do``:

  (none) / "echo"                  ``{"echo": text}`` at once
  "sleep", "s": 30                 silent for ``s`` seconds (idle, no CPU), then ``{"slept": s}``
  "busy", "s": 1                   compute silently for ``s`` seconds, then ``{"busy": s}``
  "tick", "every": 0.1, "s": 1     ``{"tick": i}`` every ``every`` seconds for ``s`` seconds
  "grandchild"                     start a ``setsid`` grandchild holding stdin, stdout and
                                   stderr (it sleeps 600 s): ``{"grandchild": pid}``
  "close_stdin", "s": 0.5          close stdin, ``{"closed_stdin": true}``, wait ``s``, exit 0
  "exit", "code": 3                exit with that code, saying nothing

The turn protocol of a real CLI, reduced to what the supervisor sees.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any


def say(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def grandchild() -> int:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        start_new_session=True,
    )
    return child.pid


def serve(line: bytes) -> None:
    ask: dict[str, Any] = json.loads(line)
    do = ask.get("do", "echo")
    seconds = float(ask.get("s", 0))
    if do == "echo":
        say({"echo": ask.get("text")})
    elif do == "sleep":
        time.sleep(seconds)
        say({"slept": seconds})
    elif do == "busy":
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            pass
        say({"busy": seconds})
    elif do == "tick":
        until = time.monotonic() + seconds
        i = 0
        while time.monotonic() < until:
            say({"tick": i})
            i += 1
            time.sleep(float(ask["every"]))
    elif do == "grandchild":
        say({"grandchild": grandchild()})
    elif do == "close_stdin":
        os.close(0)
        say({"closed_stdin": True})
        time.sleep(seconds)
        sys.exit(0)
    elif do == "exit":
        sys.exit(int(ask.get("code", 0)))


def main() -> int:
    for line in sys.stdin.buffer:
        serve(line)
    say({"eof": True})
    return 0


if __name__ == "__main__":
    sys.exit(main())
