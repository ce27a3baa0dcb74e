"""``genesis run``: one request, printed as text or JSON."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..errors import ConfigError
from ..states import Status
from ._common import positive_seconds, print_json, status_exit_code
from ._retry import add_retry_arguments, attempt_printer, retry_policy

__all__ = ["register"]

EXAMPLES = """\
examples:
  genesis run --backend failer "hello"
  genesis run --backend failer --json "/fail-then-succeed 2"
  genesis run --backend failer --retries 3 "/fail-then-succeed 2"
  genesis run --backend claude --model sonnet --timeout 900 "Fix the failing test in tests/test_io.py"
  echo "a long prompt" | genesis run --backend codex -
  genesis run --backend claude -- "-prompt starting with a dash"
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run one request and print the answer",
        description="Run one request through a coding-agent CLI and print its answer. "
        "The exit code is the response's status.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "prompt",
        help='the request; "-" reads it from stdin (use -- before a prompt starting with -)',
    )
    parser.add_argument(
        "--backend",
        "-b",
        default=os.environ.get("GENESIS_BACKEND", "failer"),
        help="claude, codex or failer (default: $GENESIS_BACKEND or failer, which needs no credentials)",
    )
    parser.add_argument(
        "--timeout",
        "-t",
        type=positive_seconds,
        default=300.0,
        help="wall-clock limit in seconds (default 300)",
    )
    parser.add_argument(
        "--idle-timeout",
        type=positive_seconds,
        default=None,
        help="stop after this many seconds without output",
    )
    parser.add_argument(
        "--grace",
        type=positive_seconds,
        default=5.0,
        help="seconds between SIGTERM and SIGKILL (default 5)",
    )
    parser.add_argument(
        "--cwd", "-C", default=None, help="working directory of the agent (default: here)"
    )
    parser.add_argument("--model", "-m", default=None, help="model name passed to the CLI")
    parser.add_argument(
        "--cli-path", default=None, help="path of the CLI binary (default: found on PATH)"
    )
    parser.add_argument("--resume", default=None, help="continue this CLI session id")
    parser.add_argument("--json", action="store_true", help="print the whole result dict as JSON")
    add_retry_arguments(parser)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from ..agent import CodingGenesisAgent

    prompt = args.prompt
    if prompt == "-":
        prompt = sys.stdin.buffer.read().decode("utf-8", "replace")
    try:
        agent = CodingGenesisAgent(
            args.backend,
            timeout=args.timeout,
            idle_timeout=args.idle_timeout,
            grace=args.grace,
            cwd=args.cwd,
            model=args.model,
            cli_path=args.cli_path,
            retry=retry_policy(args),
        )
    except ConfigError as exc:
        print(f"genesis run: error: {exc}", file=sys.stderr)
        return int(Status.USAGE)
    if agent.retry_policy is not None:
        agent.subscribe(attempt_printer("genesis run"))
    try:
        result = agent.run_sync(prompt, resume=args.resume)
    except KeyboardInterrupt:
        print("genesis run: cancelled; the process tree was stopped", file=sys.stderr)
        return int(Status.CANCELLED)
    if args.json:
        print_json(result)
    else:
        stream = sys.stdout if result["status"] == 0 else sys.stderr
        if result["message"]:
            print(result["message"], file=stream)
        if result["status"] != 0:
            print(f"[status {result['status']}: {result['error']}]", file=sys.stderr)
    return status_exit_code(result["status"])
