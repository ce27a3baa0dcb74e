"""``genesis replay FILE``: re-parse a recorded CLI stream offline and print
what the agent would have returned."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from coding_genesis._cli.common import print_json, status_exit_code
from coding_genesis._cli.parsing import COMMAND_HELP
from coding_genesis._cli.render import summary_lines
from coding_genesis._util.display import printable

__all__ = ["detect_backend", "register"]

#: The largest stdout file replayed (read whole).
MAX_REPLAY_FILE = 4 << 30

EXAMPLES = """\
examples:
  genesis replay recordings/claude_429.jsonl            backend guessed from the stream
  genesis replay out.jsonl --backend codex --exit-code 1 --stderr err.txt
  genesis replay last --json                            a recorded run, from its transcript
  genesis replay ~/.local/state/coding-genesis/runs/4de2c9cc.../

FILE is a file of CLI stdout (JSON lines; bad lines are skipped as in a live run),
a run directory, or a recorded run's id ('last', -N, a unique prefix).  Next to a
file, FILE.rc and FILE.stderr (same name, other suffix) give the exit code and the
stderr when present; a run directory gives them, and the backend, itself.
The exit code is the status the run would have had.
"""

_CODEX_TYPES = {"thread.started", "turn.started", "turn.completed", "turn.failed"}
_CLAUDE_TYPES = {"system", "assistant", "user", "result"}
_OPENCODE_TYPES = {"step_start", "step_finish", "text", "tool_use", "error", "reasoning"}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "replay",
        help=COMMAND_HELP["replay"],
        description="Run a recorded CLI stream through the same parser, backend translator "
        "and result building as a live run, offline, and print the response.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", metavar="FILE", help="stdout file, run directory, or run id")
    parser.add_argument(
        "--backend",
        "-b",
        choices=("claude", "codex", "failer"),
        default=None,
        help="how to read the stream (default: the run's backend, else guessed from it)",
    )
    parser.add_argument(
        "--exit-code",
        type=int,
        default=None,
        help="the CLI's exit code (default: FILE.rc, the run's, else 0)",
    )
    parser.add_argument(
        "--stderr", metavar="PATH", default=None, help="the CLI's stderr (default: FILE.stderr)"
    )
    parser.add_argument(
        "--attempt",
        type=int,
        default=None,
        help="which attempt of a recorded run (default: the last)",
    )
    parser.add_argument("--json", action="store_true", help="print the whole result dict as JSON")
    parser.add_argument(
        "--transcript-dir", metavar="DIR", default=None, help="where recorded runs are"
    )
    parser.set_defaults(handler=handle)


def detect_backend(data: bytes) -> str | None:
    """claude, codex, gemini, opencode or qwen, from the first recognizable line
    types; None if unsure."""
    import orjson

    for line in data.splitlines()[:200]:
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        kind = obj.get("type")
        if kind in _CODEX_TYPES or (isinstance(kind, str) and kind.startswith("item.")):
            return "codex"
        if kind is None and isinstance(obj.get("msg"), dict):
            return "codex"
        if "sessionID" in obj and kind in _OPENCODE_TYPES:
            return "opencode"
        if kind == "init" and "session_id" in obj:
            return "gemini"
        if kind == "system" and "qwen_code_version" in obj:
            return "qwen"
        if kind in _CLAUDE_TYPES:
            return "claude"
    return None


class _Input:
    def __init__(self) -> None:
        self.stdout = b""
        self.backend: str | None = None
        self.exit_code: int | None = None
        self.stderr = ""
        self.stop_reason: str | None = None
        self.timeout: float | None = None
        self.cwd: str | None = None


def _error(message: str) -> int:
    print(printable(f"genesis replay: error: {message}"), file=sys.stderr)
    return 2


def _load(args: argparse.Namespace) -> _Input | str:
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.env import transcript_dir
    from coding_genesis._observers.records import RunLookupError, find_run, read_run
    from coding_genesis._util.files import read_regular

    found = _Input()
    path = Path(os.path.expanduser(args.file))
    if path.is_dir():
        record = read_run(path)
        if record is None:
            return f"{path} is a directory but not a run directory (no meta.json)"
    elif path.exists():
        record = None
    else:
        base = transcript_dir(args.transcript_dir)
        if base is None:
            return f"no file {str(path)!r} (and transcripts are off, so it is no run id either)"
        try:
            record = find_run(base, args.file)
        except RunLookupError as exc:
            return f"no file {str(path)!r}, and not a recorded run: {exc}"
    if record is not None:
        files = record.stdout_files()
        if not files:
            return f"run {record.run_id} recorded no stdout (it never started a CLI)"
        index = (args.attempt or len(files)) - 1
        if not 0 <= index < len(files):
            return f"run {record.run_id} has {len(files)} attempt(s); --attempt must be 1..{len(files)}"
        try:  # a regular file only: a FIFO planted there never hangs us
            found.stdout = record.read_stdout(files[index])
        except OSError as exc:
            return f"run {record.run_id} is damaged: cannot read {files[index].name}: {exc}"
        found.backend = record.meta.get("backend")
        found.cwd = record.meta.get("cwd")
        timeout = record.meta.get("timeout")
        found.timeout = float(timeout) if isinstance(timeout, int | float) else None
        result = record.result or {}
        if index == len(files) - 1:
            rc = result.get("exit_code")
            found.exit_code = rc if isinstance(rc, int) else None
            found.stop_reason = result.get("stop_reason")
            found.stderr = record.stderr()
        return found
    try:
        found.stdout = read_regular(path, MAX_REPLAY_FILE, follow=True)
        rc_file = path.with_suffix(".rc")
        rc_text = read_regular(rc_file, 4096, follow=True) if rc_file.exists() else None
        err_file = path.with_suffix(".stderr")
        err = read_regular(err_file, MAX_REPLAY_FILE, follow=True) if err_file.exists() else None
    except OSError as exc:
        return f"cannot read {str(exc.filename or path)!r}: {exc.strerror or exc}"
    if rc_text is not None:
        text = rc_text.decode("utf-8", "replace").strip()
        try:
            found.exit_code = int(text)
        except ValueError:
            return f"{rc_file} should hold an exit code, found {text[:40]!r}"
    if err is not None:
        found.stderr = err.decode("utf-8", "replace")
    return found


def handle(args: argparse.Namespace) -> int:
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._util.files import read_regular
    from coding_genesis.agent import DEFAULT_TIMEOUT, CodingGenesisAgent
    from coding_genesis.errors import ConfigError

    loaded = _load(args)
    if isinstance(loaded, str):
        return _error(loaded)
    if args.stderr is not None:
        try:
            data = read_regular(args.stderr, MAX_REPLAY_FILE, follow=True)
            loaded.stderr = data.decode("utf-8", "replace")
        except OSError as exc:
            return _error(f"cannot read --stderr {args.stderr!r}: {exc.strerror or exc}")
    backend = args.backend or loaded.backend or detect_backend(loaded.stdout)
    if backend is None:
        return _error(
            "cannot tell which CLI wrote this stream (no known CLI's line types found); "
            "say it with --backend claude|codex|gemini|opencode|qwen|failer"
        )
    exit_code = args.exit_code if args.exit_code is not None else loaded.exit_code
    try:
        agent = CodingGenesisAgent(
            backend, transcripts=None, timeout=loaded.timeout or DEFAULT_TIMEOUT
        )
    except ConfigError as exc:
        return _error(str(exc))
    cwd = loaded.cwd if loaded.cwd and os.path.isdir(loaded.cwd) else None
    result = agent.replay(
        loaded.stdout,
        returncode=exit_code if exit_code is not None else 0,
        stderr=loaded.stderr,
        stop_reason=loaded.stop_reason,
        cwd=cwd,
    )
    if args.json:
        print_json(result)
    else:
        stream = sys.stdout if result["status"] == 0 else sys.stderr
        if result["message"]:
            print(printable(result["message"]), file=stream)
        if result["status"] != 0:
            print(f"[status {result['status']}: {result['error']}]", file=sys.stderr)
        for line in summary_lines(result):  # a replay writes no transcript
            print(printable(line.replace("genesis:", "replay:", 1)), file=sys.stderr)
    return status_exit_code(result["status"])
