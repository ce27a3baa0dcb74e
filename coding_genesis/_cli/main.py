"""The ``genesis`` command line.

Subcommands live in :mod:`coding_genesis._cli`; each module there has
``register(subparsers)``, so adding a command touches one file and this list.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence

from coding_genesis._cli.parsing import COMMAND_HELP, GenesisParser

__all__ = ["build_parser", "main"]

#: Modules under coding_genesis._cli, in --help order.
COMMANDS = tuple(COMMAND_HELP)

EPILOG = """\
examples:
  genesis run --backend failer "hello"            no credentials needed
  genesis run --backend failer "/fail"            see a failure response
  genesis run --backend claude --timeout 600 "Add a test for parse_date"
  genesis run --json --backend codex -- "--prompt that starts with dashes"
  genesis run --events --backend failer "hi" | jq -c .type   events as JSON lines
  genesis run --ask --backend claude "tidy the imports"    approve each tool call
  genesis chat --backend claude                   a live session: turns, inline approvals
  genesis doctor --backend claude                 why would it not start here?
  genesis runs                                    recent runs (every run is recorded)
  genesis show last                               summary, tools, failure report
  genesis replay recording.jsonl                  what a recorded stream would return
  genesis run-many tasks.jsonl --concurrency 8    a batch: one result line per request
  genesis stats --since 7d                        failure counts and rates by category
  genesis reap --dry-run                          what runners that died left running
  genesis worktrees                               worktrees of isolated runs (--isolate)
  genesis serve --root ~/work                     runs over HTTP and SSE (the serve extra)
  genesis mcp --root ~/work                       MCP tools on stdio for other agents (the mcp extra)
  genesis approvals watch                         the tool calls that wait in serve's inbox

each command has its own examples: genesis COMMAND --help

status codes (also the exit code of `genesis run`):
  0 success, 1 the CLI failed (reported an error, exited non-zero by itself - its
  own code is in exit_code - or did not finish), 64 invalid request, 69 backend
  degraded, 70 internal error, 75 agent busy, 124 timed out / idle, 126 CLI not
  executable, 127 CLI not found, 128+N killed by signal N (not sent by us),
  130 cancelled (Ctrl-C).  2 is a command-line usage error, in every command.

environment (read by the genesis command only, never by the library):
  GENESIS_BACKEND        default --backend (else claude)
  GENESIS_TRANSCRIPTS    where runs are recorded, or "off"
                         (else $XDG_STATE_HOME/coding-genesis/runs)
  GENESIS_RUN_LOG        the run log of `genesis stats`, or "off"
                         (else $XDG_STATE_HOME/coding-genesis/runs.jsonl)
  GENESIS_CLAUDE_PATH, GENESIS_CODEX_PATH, GENESIS_<BACKEND>_PATH   CLI binaries
  GENESIS_LEDGER         the run ledger directory, or "off"
                         (else $XDG_RUNTIME_DIR/coding-genesis, else in /dev/shm
                         or the temp dir)
  GENESIS_SERVE_TOKEN    the token of `genesis serve` (else generated at start)
  GENESIS_SUBREAPER=0    never make genesis a child subreaper
  GENESIS_RETRY_TESTING=1  the same as --retry-testing
"""


def _only_command(argv: Sequence[str]) -> str | None:
    """The command module of the command ``argv`` runs, when it plainly names
    one: then only that module is imported and only its parser built (all
    ten cost about 20 ms of CPU, 5 % of ``genesis run``'s start-up).  None
    (all of them) for help, errors and anything unusual."""
    for arg in argv:
        if arg == "--retry-testing":
            continue
        module = arg.replace("-", "_")  # run-many's module is run_many; "run_many" is no command
        plain = not arg.startswith("-") and "_" not in arg
        return module if plain and module in COMMANDS else None
    return None


class _Version(argparse.Action):
    """``--version``: the package metadata is read only when asked (it costs
    ``genesis --help`` ~20 ms of imports otherwise)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object, **__: object) -> None:
        # lazy: `genesis --help` imports only the parsers
        from coding_genesis._util.version import version

        parser.exit(message=f"coding-genesis {version()}\n")


def build_parser(argv: Sequence[str] | None = None) -> GenesisParser:
    """The ``genesis`` parser; given the arguments it will parse, only the
    parser of the command they name (see :func:`_only_command`), else all."""
    parser = GenesisParser(
        prog="genesis",
        # Every built-in backend (tests/cli/test_forgiving.py holds this to the registry).
        description="Run coding-agent CLIs (claude, codex, gemini, opencode, qwen, a "
        "plug-in's, and the embedded failer: no credentials needed) under supervision.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    parser.add_argument(
        "--retry-testing",
        action="store_true",
        help="retry backoffs take no real time (virtual time), to test a pipeline that "
        "runs genesis; never use it in production",
    )
    parser.argv = () if argv is None else argv
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=GenesisParser
    )
    if argv is not None and _top_help(argv):
        # Only their lines are shown: no command's module is imported (~60 ms).
        for name, line in COMMAND_HELP.items():
            subparsers.add_parser(name.replace("_", "-"), help=line, add_help=False)
        return parser
    only = None if argv is None else _only_command(argv)
    for name in COMMANDS if only is None else (only,):
        module = importlib.import_module(f"coding_genesis._cli.{name}")
        module.register(subparsers)
    return parser


def _top_help(argv: Sequence[str]) -> bool:
    """``argv`` asks for the top-level help alone (``genesis``, ``genesis --help``):
    it shows each command's line, never its parser."""
    return all(arg in ("-h", "--help", "--retry-testing") for arg in argv)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.env import apply_process_settings

    apply_process_settings(retry_testing=args.retry_testing)
    try:
        code: int = handler(args)
    except KeyboardInterrupt:
        # Ctrl-C outside a run (reading a prompt from stdin, say): nothing to stop.
        print(f"genesis {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`genesis show last | head`): stop quietly, like SIGPIPE.
        _silence_stdout()
        return 141
    return code


def _silence_stdout() -> None:
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
