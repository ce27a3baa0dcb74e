"""``genesis mcp``: the MCP server on stdio (the ``mcp`` extra).

Another agent (a claude or codex session, any MCP client) hands work to a
coding CLI through it: run a prompt, hold a session, answer the approvals of
their tool calls, with our supervision.  Its requests are read as ``genesis
serve`` reads a body (the same arguments, the same untrusted-input rules);
``genesis serve`` also serves the same tools at ``/mcp``.
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from coding_genesis._cli.common import usage_error
from coding_genesis._cli.parsing import COMMAND_HELP
from coding_genesis._cli.repository import absolute_path
from coding_genesis._cli.serve import add_request_arguments, server_settings

__all__ = ["register"]

EXAMPLES = """\
examples:
  genesis mcp --root ~/work                        tools over stdin/stdout, runs under ~/work
  claude --mcp-config '{"mcpServers": {"genesis": {"command": "genesis", "args": ["mcp"]}}}'

Tools: run, get_run, list_runs, cancel_run, open_session, send_turn,
close_session, list_approvals, answer_approval (docs/mcp.md).  A tool's
arguments are untrusted data unless --trusted-input; cwd lies under --root.
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "mcp",
        help=COMMAND_HELP["mcp"],
        description="Serve the Model Context Protocol on stdin and stdout: tools that run a "
        "prompt on a backend, hold live sessions and answer their approvals, supervised.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_request_arguments(parser, "whoever speaks to this server")
    parser.add_argument(
        "--state-dir",
        type=absolute_path,
        default=None,
        help="the server's private directory: its journals (default: a fresh one of its "
        "own, removed when it exits)",
    )
    parser.set_defaults(handler=handle)


def _fresh_state_dir() -> Path:
    """A private state directory of this process's own, in our runtime
    directory, named by its owner (``<pid>-<start time>-``); those of
    processes that died (killed before they could remove theirs: a client's
    SIGKILL) are removed first."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._supervision import owners
    from coding_genesis._util.files import own_runtime_dir

    base = own_runtime_dir(tempfile.gettempdir(), "coding-genesis-mcp-state")
    for old in base.iterdir():
        owner = owners.owner_of(old.name)
        if owner is not None and not owners.alive(owner):
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=owners.own_prefix(), dir=base))


def handle(args: argparse.Namespace) -> int:
    try:
        # lazy: the mcp package (the mcp extra) loads only when the server starts
        import anyio

        from coding_genesis._mcp import stdio
        from coding_genesis._serve import parts
    except ImportError as exc:
        return usage_error(
            "mcp",
            f"the MCP server needs the mcp extra ({exc.name or exc}): "
            "pip install 'coding-genesis[mcp]'",
        )
    fresh = args.state_dir is None
    state_dir = _fresh_state_dir() if fresh else args.state_dir
    try:
        settings = server_settings(args, "mcp", state_dir)
        if isinstance(settings, int):
            return settings
        try:
            with parts.locked(state_dir):
                code: int = anyio.run(
                    stdio.serve, settings, secrets.token_urlsafe(32), backend="asyncio"
                )
        except (RuntimeError, OSError) as exc:
            return usage_error("mcp", str(exc))
        return code
    finally:
        if fresh:
            shutil.rmtree(state_dir, ignore_errors=True)
        sys.stderr.flush()
