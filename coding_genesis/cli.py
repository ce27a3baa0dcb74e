"""The ``genesis`` command line.

Subcommands live in :mod:`coding_genesis.commands`; each module there has
``register(subparsers)``, so adding a command touches one file and this list.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from . import __version__

__all__ = ["build_parser", "main"]

#: Modules under coding_genesis.commands, in --help order.
COMMANDS = ("run", "run_many", "stats")

EPILOG = """\
examples:
  genesis run --backend failer "hello"            no credentials needed
  genesis run --backend failer "/fail"            see a failure response
  genesis run --backend claude --timeout 600 "Add a test for parse_date"
  genesis run --json --backend codex -- "--prompt that starts with dashes"

status codes (also the exit code of `genesis run`):
  0 success, 1 the CLI reported an error or did not finish, 64 invalid request,
  69 backend degraded, 70 internal error, 75 agent busy, 124 timed out / idle,
  126 CLI not executable, 127 CLI not found, 128+N killed by signal N,
  130 cancelled (Ctrl-C); other values are the CLI's own exit code.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="genesis",
        description="Run coding-agent CLIs (claude, codex, the embedded failer) under supervision.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"coding-genesis {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"coding_genesis.commands.{name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    code: int = handler(args)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
