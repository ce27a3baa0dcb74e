#!/usr/bin/env python3
"""A fast fake ``claude`` for the benchmarks (standard library only).

It writes prepared JSON-lines files to stdout as fast as the pipe takes them
(``os.sendfile``), so the reader is what gets measured.  It is driven by the
environment, because the programs under test choose its arguments:

``BENCH_FAKE_FILES``   newline-separated paths to send in order; ``path*N``
                       sends a file N times (see ``benchmarks.data.Stream``).
``BENCH_FAKE_MODE``    ``stream`` (default: send, then exit 0), ``hang`` (send,
                       then wait for a signal; SIGTERM ends it) or
                       ``hang-ignore-term`` (send, then ignore SIGTERM: only
                       SIGKILL ends it).
``BENCH_FAKE_CHILD``   ``1``: fork a child that behaves the same (a process tree).
``BENCH_FAKE_PIDFILE`` once set up (signals, child): write the time, then the
                       pids of the tree, one per line.

Like the real CLI it reads its prompt from stdin.  Started with
``--input-format stream-json`` (as claude-agent-sdk does) it speaks the SDK's
control protocol first: it answers the ``initialize`` control request with a
``control_response``, then reads the user message, then streams.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def handshake() -> None:
    """claude-agent-sdk's start: control_request(initialize) -> control_response,
    then one ``user`` message on stdin (stdin stays open until the SDK is done)."""
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            return
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("type") == "control_request":
            response = {
                "type": "control_response",
                "response": {
                    "subtype": "success",
                    "request_id": msg.get("request_id"),
                    "response": {"commands": [], "models": [], "account": {}},
                },
            }
            os.write(1, (json.dumps(response) + "\n").encode())
        elif msg.get("type") == "user":
            return


def send(path: str, times: int) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        for _ in range(times):
            offset = 0
            while offset < size:
                try:
                    sent = os.sendfile(1, fd, offset, size - offset)
                except OSError:
                    sent = _copy(fd, offset, size)
                if sent == 0:
                    break
                offset += sent
    finally:
        os.close(fd)


def _copy(fd: int, offset: int, size: int) -> int:
    """Fallback where sendfile to a pipe is unsupported."""
    data = os.pread(fd, min(size - offset, 1 << 20), offset)
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]
    return len(data)


def main() -> int:
    mode = os.environ.get("BENCH_FAKE_MODE", "stream")
    if mode == "hang-ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pids = [os.getpid()]
    if os.environ.get("BENCH_FAKE_CHILD") == "1":
        child = os.fork()
        if child == 0:
            while True:  # the child: part of the tree, same signal disposition
                time.sleep(3600)
        pids.append(child)
    pidfile = os.environ.get("BENCH_FAKE_PIDFILE")
    if pidfile:
        with open(pidfile, "w") as fh:
            fh.write(f"{time.time()!r}\n" + "".join(f"{pid}\n" for pid in pids))
    argv = sys.argv[1:]
    if "--input-format" in argv and "stream-json" in argv:
        handshake()
    else:
        sys.stdin.buffer.read()  # the prompt
    try:
        for entry in filter(None, os.environ.get("BENCH_FAKE_FILES", "").split("\n")):
            path, _, times = entry.partition("*")
            send(path, int(times or 1))
    except BrokenPipeError:
        return 141
    if mode.startswith("hang"):
        while True:
            signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main())
