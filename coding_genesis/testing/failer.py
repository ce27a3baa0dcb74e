#!/usr/bin/env python3
"""The Process Failer: an embedded test agent that speaks claude's stream-json.

It needs no model and no credentials, and fails on request so that the whole
error-handling path can be exercised.  Commands in the prompt:

  (none)                 success
  /fail                  immediate error (AGENT_ERROR), exit 1
  /timeout N             really waits N seconds, then responds normally
  /fail-then-succeed N   fails N times (state kept per request key), then succeeds
  /partial               incomplete, malformed output, no result event
  /rate-limit            RATE_LIMIT error with retry_after_seconds 30 (HTTP 429)
  /stderr N              writes N lines on stderr, 200 ms apart (each says when), then succeeds

``details.retry_recommended`` of an error body comes from coding-genesis's one
retry table (``$GENESIS_FAILER_RETRYABLE``: the error codes a retry may fix,
set by the failer backend; ``coding_genesis.backends.failer.RETRYABLE_CODES``
when run on its own), so the body and the failure value agree.  ``/fail-then-succeed``
keeps its counters in a private (0700) directory under the temporary
directory, one file per request key, removed when that key succeeds or after
24 hours.

Tool calls, asked about as claude asks (see ``_failer_turns.py``):

  /write PATH TEXT       a Write call: PATH (under the cwd) holds TEXT once allowed
  /bash COMMAND          a Bash call: COMMAND runs (no shell) once allowed
  /json VALUE            answers VALUE (with --json-schema: as claude's structured output)

Started with ``--input-format stream-json`` it speaks claude's two-way control
protocol (a live session: ``agent.session()``, ``approver=``, ``hooks=``,
``tools=``, ``genesis chat``), where four more commands work:

  /tool NAME JSON        calls the caller's function NAME (tools=) with JSON arguments
  /agent NAME TASK       an Agent call: the subagent NAME (agents=) reads TASK
  /compact               compacts the conversation (the pre_compact hook point)
  /history               says the earlier prompts of this conversation (resume=)

Standard library only, run as a script (not ``-m``) so it starts fast.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import hashlib
import json
import os
import re
import stat
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

#: Seconds between the lines of ``/stderr N``.
STDERR_GAP = 0.2

_COMMAND = re.compile(
    r"(?<![\w/])/(fail-then-succeed|fail|timeout|partial|rate-limit|stderr)(?![\w-])"
    r"(?:[ \t]+(\S+))?"
)


class Reply(Protocol):
    """Where a command's answer goes: a one-shot run (``_Run``), or a turn of a
    live session (``_failer_turns.Turn``)."""

    def text(self, text: str) -> None: ...

    def raw(self, data: str) -> None: ...

    def sleep(self, seconds: float) -> bool: ...

    def result(
        self,
        body: dict[str, Any],
        *,
        is_error: bool,
        subtype: str = "success",
        api_error_status: int | None = None,
    ) -> None: ...


def now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


#: A counter untouched this long is dropped (its request was given up).
STATE_TTL_S = 24 * 3600

#: The error codes a retry may fix (``--retryable``; see the module docstring).
_retryable: frozenset[str] | None = None


def _retryable_codes() -> frozenset[str]:
    global _retryable
    if _retryable is None and os.environ.get("GENESIS_FAILER_RETRYABLE") is not None:
        codes = os.environ["GENESIS_FAILER_RETRYABLE"].split(",")
        _retryable = frozenset(c for c in codes if c)
    if _retryable is None:
        try:  # run on its own: the table of the package it ships in
            from coding_genesis.backends.failer import RETRYABLE_CODES  # lazy: a script, maybe

            _retryable = frozenset(RETRYABLE_CODES)
        except ImportError:  # pragma: no cover - a copy of the script alone
            _retryable = frozenset()
    return _retryable


def state_dir(explicit: str | None) -> str:
    if explicit:
        return explicit
    env = os.environ.get("GENESIS_FAILER_STATE_DIR")
    if env:
        return env
    return os.path.join(tempfile.gettempdir(), f"coding-genesis-failer-{os.getuid()}")


def error_body(code: str, message: str, mode: str, **extra: Any) -> dict[str, Any]:
    retry = code in _retryable_codes()
    body: dict[str, Any] = {
        "status": "error",
        "error_code": code,
        "error_message": message,
        "timestamp": now(),
        "details": {"failure_mode": mode, "retry_recommended": retry},
    }
    body.update(extra)
    return body


class _Run:
    def __init__(self, session_id: str, started: float) -> None:
        self.session_id = session_id
        self.started = started

    def init(self) -> None:
        _emit(
            {
                "type": "system",
                "subtype": "init",
                "session_id": self.session_id,
                "model": "process-failer",
                "cwd": os.getcwd(),
                "tools": [],
                "permissionMode": "default",
            }
        )

    def text(self, text: str) -> None:
        _emit(
            {
                "type": "assistant",
                "message": {
                    "role": "assistant",
                    "model": "process-failer",
                    "content": [{"type": "text", "text": text}],
                },
                "session_id": self.session_id,
            }
        )

    def raw(self, data: str) -> None:
        sys.stdout.write(data)
        sys.stdout.flush()

    def sleep(self, seconds: float) -> bool:
        """Wait ``seconds``; False: the turn was interrupted meanwhile (never, one-shot)."""
        time.sleep(seconds)
        return True

    def result(
        self,
        body: dict[str, Any],
        *,
        is_error: bool,
        subtype: str = "success",
        api_error_status: int | None = None,
    ) -> None:
        text = json.dumps(body, ensure_ascii=False)
        self.text(text)
        _emit(
            {
                "type": "result",
                "subtype": subtype,
                "is_error": is_error,
                "api_error_status": api_error_status,
                "result": text,
                "session_id": self.session_id,
                "num_turns": 1,
                "duration_ms": int((time.monotonic() - self.started) * 1000),
                "total_cost_usd": 0.0,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            }
        )


def _check_private(state_dir: str) -> None:
    """The counters' directory must be ours and private (the temporary directory
    is shared): a directory, not a symlink, owned by us, no access for others."""
    info = os.lstat(state_dir)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise SystemExit(f"genesis-failer: {state_dir} is not a directory of ours; refusing it")
    if info.st_mode & 0o077:
        os.chmod(state_dir, 0o700)


def _drop_stale(state_dir: str) -> None:
    """Counters of requests given up and conversations left (untouched for
    STATE_TTL_S) are removed."""
    cutoff = time.time() - STATE_TTL_S
    with contextlib.suppress(OSError), os.scandir(state_dir) as entries:
        for entry in entries:
            if not entry.name.endswith((".count", ".session")):
                continue
            if not entry.is_file(follow_symlinks=False):
                continue
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)


def private_dir(state_dir: str) -> None:
    """Make the state directory: every level it creates is 0700, and it must
    be ours and private; stale files in it are dropped."""
    missing = []
    level = Path(state_dir)
    while not os.path.lexists(level) and level.parent != level:
        missing.append(level)
        level = level.parent
    for level in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(level, 0o700)
    _check_private(state_dir)
    _drop_stale(state_dir)


def _fail_then_succeed(run: Reply, n: int, mode: str, key: str, state_dir: str) -> int:
    import fcntl

    # A standalone script (no package imports): the counter file is 0600 and
    # never a symlink.
    private_dir(state_dir)
    path = os.path.join(state_dir, hashlib.sha256(key.encode()).hexdigest()[:32] + ".count")
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(path, flags, 0o600)
    with open(fd, "r+", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        raw = fh.read().strip()
        count = int(raw) if raw.isdigit() else 0
        attempt = count + 1
        if count < n:
            fh.seek(0)
            fh.truncate()
            fh.write(str(attempt))
            fh.flush()
        else:
            fh.seek(0)
            fh.truncate()  # cycle complete: the next request starts over
    if count < n:
        body = error_body(
            "TRANSIENT_ERROR",
            f"Simulated transient failure {attempt} of {n} (connection reset)",
            mode,
        )
        body["details"]["attempt"] = attempt
        run.result(body, is_error=True, subtype="error_during_execution")
        sys.stderr.write(f"Error: simulated transient failure {attempt} of {n}: connection reset\n")
        return 1
    run.result(
        {
            "status": "success",
            "message": f"Succeeded after {n} failures",
            "retry_count": attempt,
            "timestamp": now(),
        },
        is_error=False,
    )
    with contextlib.suppress(OSError):
        os.unlink(path)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="genesis-failer",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("prompt", nargs="?", help="the request; read from stdin when absent")
    parser.add_argument(
        "-p", "--print", action="store_true", help="accepted for claude compatibility"
    )
    parser.add_argument("--output-format", default="stream-json")
    parser.add_argument("--input-format", help="stream-json: the two-way control protocol")
    parser.add_argument("--permission-prompt-tool", help="accepted for claude compatibility")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--include-partial-messages", action="store_true")
    parser.add_argument("--model")
    parser.add_argument("--resume", help="continue this session id")
    parser.add_argument(
        "--fork-session", action="store_true", help="with --resume: a new session from its history"
    )
    parser.add_argument("--session-id", help="the id of a new (or forked) session")
    parser.add_argument("--resume-session-at", help="with --fork-session: cut after this turn")
    parser.add_argument("--request-key", help="state key shared by retries of one request")
    parser.add_argument("--state-dir", help="where /fail-then-succeed keeps its counters")
    parser.add_argument("--permissions", choices=("read-only", "edit", "full"))
    parser.add_argument("--json-schema", help="answer with a value of this JSON Schema")
    parser.add_argument("--mcp-config", help="claude's SDK MCP servers (the host tools)")
    parser.add_argument("--agents", help="claude's subagent definitions (JSON), for /agent")
    parser.add_argument("--allowedTools", default="", help="tools allowed without asking")
    return parser


def _turns() -> ModuleType:
    """The turns module, from this script's own directory (or its package)."""
    if TYPE_CHECKING or __package__:
        from coding_genesis.testing import _failer_turns as turns  # lazy: a script, maybe
    else:  # run as a script: its directory is on sys.path
        import _failer_turns as turns
    return turns


def respond(run: Reply, prompt: str, args: argparse.Namespace) -> int:
    """Answer the failure commands of ``prompt`` on ``run`` (a one-shot run, or a
    turn of a live session); the exit code of a one-shot run."""
    match = _COMMAND.search(prompt)
    command = match.group(1) if match else None
    argument = match.group(2) if match else None
    mode = f"/{command}" + (f" {argument}" if argument else "") if command else "none"

    if command is None:
        run.result(
            {
                "status": "success",
                "message": "No failure mode specified, responding normally",
                "timestamp": now(),
            },
            is_error=False,
        )
        return 0

    if command == "stderr":
        for i in range(min(int(argument), 100) if argument and argument.isdigit() else 3):
            if i and not run.sleep(STDERR_GAP):
                return 130
            sys.stderr.write(f"stderr line {i + 1} written at {time.time():.6f}\n")
            sys.stderr.flush()
        run.result({"status": "success", "message": "Wrote stderr lines"}, is_error=False)
        return 0

    if command == "fail":
        body = error_body("AGENT_ERROR", "Simulated agent failure for testing", mode)
        run.result(body, is_error=True, subtype="error_during_execution")
        sys.stderr.write("Error: AGENT_ERROR: Simulated agent failure for testing\n")
        return 1

    if command == "rate-limit":
        body = error_body(
            "RATE_LIMIT",
            "Rate limit exceeded (429). Please retry.",
            mode,
            retry_after_seconds=30,
        )
        run.result(body, is_error=True, api_error_status=429)
        sys.stderr.write("API Error: 429 Rate limit exceeded. Retry after 30 seconds.\n")
        return 1

    if command == "partial":
        run.text(
            json.dumps({"status": "partial", "warning": "Output may be incomplete", "data": None})
        )
        run.raw(
            '{"type":"result","subtype":"success","is_error":false,"result":"{\\"status\\": \\"par\n'
        )
        return 0

    try:
        number = float(argument) if argument is not None else None
    except ValueError:
        number = None
    if number is None or number < 0 or number != number or number == float("inf"):
        body = error_body("INVALID_COMMAND", f"{mode}: expects a non-negative number", mode)
        run.result(body, is_error=True, subtype="error_during_execution")
        sys.stderr.write(f"Error: INVALID_COMMAND: {mode} expects a non-negative number\n")
        return 2

    if command == "timeout":
        if not run.sleep(number):
            return 130
        run.result(
            {
                "status": "success",
                "message": f"Waited {number:g} seconds, responding normally",
                "timestamp": now(),
            },
            is_error=False,
        )
        return 0

    key = args.request_key or hashlib.sha256((os.getcwd() + "\0" + prompt).encode()).hexdigest()
    return _fail_then_succeed(run, int(number), mode, key, state_dir(args.state_dir))


def main(argv: list[str] | None = None) -> int:
    args, _unknown = _parser().parse_known_args(argv)
    itself: ModuleType = sys.modules[__name__]
    if args.input_format == "stream-json":
        return int(_turns().serve(args, itself))

    prompt = args.prompt
    if prompt is None:
        prompt = (
            sys.stdin.buffer.read().decode("utf-8", "replace") if not sys.stdin.isatty() else ""
        )
    if args.json_schema is not None or args.include_partial_messages or _tool_command_first(prompt):
        return int(_turns().one_shot(args, prompt, itself))

    run = _Run(args.resume or str(uuid.uuid4()), time.monotonic())
    run.init()
    return respond(run, prompt, args)


#: The tool commands a one-shot run answers too (see the module's docstring).
_TOOL_COMMAND = re.compile(r"(?<![\w/])/(write|bash|json)(?![\w-])")


def _tool_command_first(prompt: str) -> bool:
    """A tool command comes first in ``prompt`` (before any failure command)."""
    tool = _TOOL_COMMAND.search(prompt)
    failure = _COMMAND.search(prompt)
    return tool is not None and (failure is None or tool.start() < failure.start())


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(141)
