"""``genesis serve``: runs over HTTP and Server-Sent Events (the ``serve`` extra).

The command line reads the settings and the environment here (as it does for
every command) and hands the server (``coding_genesis._serve``, below it) what
it found: the defaults, each backend's CLI, the doctor's checks.  The server
reads a request as ``run-many`` reads a line, with the same module
(``coding_genesis._lines``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from dataclasses import asdict
from typing import Any

from coding_genesis._cli.common import (
    add_line_defaults,
    positive_seconds,
    usage_error,
    whole_number,
)
from coding_genesis._cli.parsing import COMMAND_HELP
from coding_genesis._cli.repository import absolute_path

__all__ = ["register"]

EXAMPLES = """\
examples:
  genesis serve                                   127.0.0.1:8765, runs under this directory
  genesis serve --root ~/work --concurrency 8 --queue 200
  TOKEN=$(cat ~/.local/state/coding-genesis/serve/token)
  curl -H "Authorization: Bearer $TOKEN" -d '{"prompt": "hello", "backend": "failer"}' \\
       http://127.0.0.1:8765/runs
  curl -N -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8765/events

Every route needs the token: generated at each start into the state directory
(--state-dir, default $XDG_STATE_HOME/coding-genesis/serve/token, mode 0600), or
given (GENESIS_SERVE_TOKEN, --token-file).  A request body is a run-many line
under the same rules: data only, unless --trusted-input; its cwd under --root.
$GENESIS_BACKENDS_FILE's generic backends may be named too.
Runs are recorded like every run (transcripts, the run log): `genesis runs`
and GET /runs show one history.  SIGTERM drains (--on-term, --drain-timeout).
The API: docs/serve.md, and GET /openapi.json.
"""

#: A request body is at most this big by default (bytes).
MAX_BODY = 1024 * 1024


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve",
        help=COMMAND_HELP["serve"],
        description="Serve an HTTP API: start runs, follow their events, cancel them, read "
        "their transcripts and statistics, from any language.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_request_arguments(parser, "whoever holds the token")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=whole_number(0, 65535), default=8765, help="port (default 8765; 0: any)"
    )
    parser.add_argument(
        "--token-file",
        default=None,
        help="read the token from this file (yours, mode 0600) instead of generating one",
    )
    parser.add_argument(
        "--state-dir",
        type=absolute_path,
        default=None,
        help="the server's private directory: token, journal, server.json "
        "(default $XDG_STATE_HOME/coding-genesis/serve)",
    )
    parser.add_argument(
        "--allow-host",
        metavar="NAME",
        action="append",
        default=[],
        help="another name clients may reach this server by (its Host header), e.g. the "
        "name of a proxy in front of it; repeatable",
    )
    parser.add_argument(
        "--max-body",
        type=whole_number(1024),
        default=MAX_BODY,
        help=f"largest request body in bytes ({MAX_BODY})",
    )
    parser.add_argument(
        "--event-buffer",
        type=whole_number(16, 10_000_000),
        default=10_000,
        help="events kept for clients that read late or resume with Last-Event-ID "
        "(10000; per run at most 2000); a client further behind is told what it missed",
    )
    parser.add_argument(
        "--on-term",
        choices=("drain", "cancel"),
        default="drain",
        help="on SIGTERM: let the runs finish (drain, within --drain-timeout) or cancel them",
    )
    parser.add_argument(
        "--drain-timeout",
        type=positive_seconds,
        default=60.0,
        help="seconds a drain may take before the rest is cancelled (60)",
    )
    parser.set_defaults(handler=handle)


def add_request_arguments(parser: Any, who: str) -> None:
    """What a server of runs and sessions reads its requests under: ``genesis
    serve``'s and ``genesis mcp``'s (``who``: who runs programs with
    ``--trusted-input``)."""
    parser.add_argument(
        "--root",
        type=absolute_path,
        default=None,
        help="every run's cwd must lie under this directory (default: this one)",
    )
    parser.add_argument(
        "--concurrency", "-j", type=whole_number(1, 256), default=4, help="runs at once (4)"
    )
    parser.add_argument(
        "--queue",
        type=whole_number(0, 100_000),
        default=100,
        help="runs waiting at most; past it a request gets 429 with Retry-After (100)",
    )
    parser.add_argument(
        "--trusted-input",
        action="store_true",
        help="accept every setting in a request (cli_path, env, extra_args, ...): CODE "
        f"EXECUTION, {who} runs programs as you",
    )
    parser.add_argument(
        "--approvals",
        choices=("request", "inbox"),
        default="request",
        help="request: a body chooses (a session's tool calls wait in the approval inbox "
        'unless it says "approvals": "none", a run\'s when it says "inbox"); inbox: every '
        "tool call of every run and session waits there, and a backend without a two-way "
        "protocol is refused (request)",
    )
    parser.add_argument(
        "--approval-timeout",
        type=positive_seconds,
        default=300.0,
        metavar="SECONDS",
        help='how long an approval of the inbox (a request with "approvals": "inbox") waits '
        "for an answer unless the request sets approval_timeout; then it is denied (300)",
    )
    parser.add_argument(
        "--max-sessions",
        type=whole_number(0, 10_000),
        default=16,
        help="live sessions held at once; past it opening one gets 429 (16)",
    )
    parser.add_argument(
        "--session-history",
        type=whole_number(0, 100_000),
        default=1000,
        help="the most turns a session keeps (its keep_results; default 100, at most this)",
    )
    add_line_defaults(
        parser, "settings for the requests that do not set them (as run-many takes them)"
    )


def handle(args: argparse.Namespace) -> int:
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.env import SERVE_TOKEN, serve_dir

    try:
        # lazy: FastAPI and uvicorn (the serve extra) load only when a server starts
        from coding_genesis._serve import security, server
    except ImportError as exc:
        return usage_error(
            "serve",
            f"the server needs the serve extra ({exc.name or exc}): "
            "pip install 'coding-genesis[serve]'",
        )
    token: str | None = None
    try:
        if args.token_file:
            token = security.read_token_file(os.path.expanduser(args.token_file))
        elif os.environ.get(SERVE_TOKEN, "").strip():
            token = security.check_token(os.environ[SERVE_TOKEN])
    except (OSError, ValueError) as exc:
        return usage_error("serve", f"cannot use the token: {exc}")
    mounts: tuple[Any, ...] = ()
    if importlib.util.find_spec("mcp") is not None:  # /mcp beside the routes (the mcp extra)
        # lazy: the endpoint; the mcp package itself loads once the server listens
        from coding_genesis._mcp import http as mcp_http

        mounts = (mcp_http.mount(),)
    settings = server_settings(
        args,
        "serve",
        args.state_dir or serve_dir(),
        host=args.host,
        port=args.port,
        max_body=args.max_body,
        drain_timeout=args.drain_timeout,
        on_term=args.on_term,
        token=token,
        allow_hosts=tuple(args.allow_host),
        event_buffer=args.event_buffer,
        mounts=mounts,
    )
    if isinstance(settings, int):
        return settings
    code: int = server.main(settings)
    sys.stdout.flush()
    return code


def server_settings(args: argparse.Namespace, command: str, state_dir: Any, **more: Any) -> Any:
    """The server's settings (``coding_genesis._serve.parts.Settings``) of what
    :func:`add_request_arguments` read and the environment (with ``more``,
    the command's own), or the exit code of a usage error."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.backends import all_names
    from coding_genesis._cli.env import (
        backends_file,
        default_backend,
        ledger_setting,
        run_log_path,
        transcript_dir,
    )
    from coding_genesis._cli.run import add_backends_file
    from coding_genesis._cli.run_many import batch_defaults
    from coding_genesis._serve import parts, requests
    from coding_genesis._util.version import version
    from coding_genesis.errors import ConfigError

    try:  # the operator's generic backends, which a body may then name
        add_backends_file(backends_file())
    except ConfigError as exc:
        return usage_error(command, str(exc))
    root = args.root or os.getcwd()
    if not os.path.isdir(root):
        return usage_error(command, f"--root {root} is not a directory")
    transcripts, log = transcript_dir(), run_log_path()
    args.cwd = None
    args.setting_sources = None
    more.setdefault("host", "")
    more.setdefault("port", 0)
    more.setdefault("max_body", 0)
    more.setdefault("drain_timeout", 0.0)
    more.setdefault("on_term", "cancel")
    return parts.Settings(
        root=requests.root_path(root),
        state_dir=state_dir,
        trusted=args.trusted_input,
        concurrency=args.concurrency,
        queue=args.queue,
        fallback_backend=args.backend or default_backend(),
        defaults={
            **batch_defaults(args),
            "transcripts": str(transcripts) if transcripts is not None else None,
            "run_log": str(log) if log is not None else None,
            "ledger": ledger_setting(),
        },
        transcripts=transcripts,
        run_log=log,
        ledger=ledger_setting(),
        version=version(),
        approval_timeout=args.approval_timeout,
        approvals=args.approvals,
        max_sessions=args.max_sessions,
        session_history=args.session_history,
        doctor_backends=all_names(),
        cli_paths=_cli_paths(all_names(), args),
        doctor=_doctor,
        **more,
    )


def _cli_paths(names: list[str], args: argparse.Namespace) -> dict[str, dict[str, str]]:
    """Each backend's CLI as ``run-many`` finds a line's (``$GENESIS_<NAME>_PATH``,
    its node): what a request runs unless it sets its own (trusted input only)."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.run_many import with_cli_paths

    found = with_cli_paths([{"backend": name} for name in names], args)
    return {
        name: {k: str(v) for k, v in paths.items() if k != "backend"}
        for name, paths in zip(names, found, strict=True)
    }


def _doctor(names: list[str], timeout: float) -> list[dict[str, Any]]:
    """``GET /doctor``: ``genesis doctor``'s checks, each as a dict."""
    # lazy: the checks load every backend and probe each CLI: GET /doctor only
    from coding_genesis._cli.doctor import run_checks

    return [asdict(check) for check in run_checks(names, None, timeout)]
