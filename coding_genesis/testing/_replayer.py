#!/usr/bin/env python3
"""A fake CLI for the conformance kit: replays recorded stdout, then hangs.

``python _replayer.py STDOUT_FILE [backend arguments...]``: reads its stdin to
the end (the prompt, as a real CLI does), writes STDOUT_FILE's bytes, starts a
"tool" in its own session that would run for ten minutes (like a real CLI's
shell tool, it escapes the process group and holds stdout open), and waits.  Only the supervisor's
stop path ends it.  Standard library only, run as a script.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time


def main() -> int:
    path = sys.argv[1]
    try:
        if not os.isatty(0):
            sys.stdin.buffer.read()
    except OSError:
        pass
    with open(path, "rb") as file:
        data = file.read()
    out = sys.stdout.buffer
    out.write(data)
    out.flush()
    subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
