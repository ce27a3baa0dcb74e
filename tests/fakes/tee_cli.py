"""``python tee_cli.py OUT PROGRAM [ARGS...]``: runs PROGRAM with this stdin and
stderr, and copies every byte of its stdout to both this stdout and the file OUT,
so a test can hold what a transcript recorded against what the CLI wrote."""

from __future__ import annotations

import os
import subprocess
import sys


def main() -> int:
    out, *command = sys.argv[1:]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    with open(out, "wb") as copy:
        while chunk := os.read(fd, 65536):
            copy.write(chunk)
            copy.flush()
            os.write(1, chunk)
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
