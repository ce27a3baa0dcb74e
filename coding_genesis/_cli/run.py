"""``genesis run``: one request, with live progress on a terminal, printed as
text, JSON, or a stream of JSON-lines events."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from coding_genesis._cli.approver_options import add_approver_arguments
from coding_genesis._cli.budget_options import add_budget_arguments, budget_from, prices_from
from coding_genesis._cli.common import (
    positive_seconds,
    print_json,
    status_exit_code,
    usage_error,
    whole_number,
)
from coding_genesis._cli.parsing import COMMAND_HELP
from coding_genesis._cli.render import (
    cli_words,
    isolation_lines,
    stopped_lines,
    summary_lines,
    terminal_line,
    transcript_lines,
    warning_lines,
)
from coding_genesis._cli.repository import absolute_path, add_setting_sources_argument
from coding_genesis._cli.retry_options import add_retry_arguments, attempt_printer, retry_policy
from coding_genesis._util.display import printable

if TYPE_CHECKING:
    from coding_genesis._cli.live import EventWriter, LiveOutcome
    from coding_genesis.agent import CodingGenesisAgent

__all__ = ["register"]

EXAMPLES = """\
examples:
  genesis run --backend failer "hello"
  genesis run --backend failer --json "/fail-then-succeed 2"
  genesis run --backend failer --retries 3 "/fail-then-succeed 2"
  genesis run --backend claude --model sonnet --timeout 900 "Fix the failing test in tests/test_io.py"
  echo "a long prompt" | genesis run --backend codex -
  genesis run --backend claude -- "-prompt starting with a dash"
  genesis run --events --backend failer "hello" | jq -c 'select(.type=="text") | .text'
  genesis run --quiet --transcript-dir off --backend failer "no progress, no transcript"

on a terminal a live panel on stderr shows elapsed time against the timeout, the
state, the session id, tool calls, the tool running now, the last line of text and
retries (--quiet or a non-terminal stderr turns it off). Ctrl-C stops the whole
process tree, prints what the run did so far and exits 130.

every run is recorded in a transcript directory (raw stdout, events, stderr tail,
result): see `genesis runs` and `genesis show RUN_ID`; default
$XDG_STATE_HOME/coding-genesis/runs, or $GENESIS_TRANSCRIPTS (a path or "off").
It is also appended to the run log (`genesis stats`): $GENESIS_RUN_LOG or
$XDG_STATE_HOME/coding-genesis/runs.jsonl.  (The library records nothing unless
asked: this is the command line's default.)

the embedded failer (--backend failer: no model, no credentials) answers what its
prompt asks: nothing (success), /fail, /timeout N, /fail-then-succeed N, /partial,
/rate-limit; tool calls asked about as claude asks them: /write PATH TEXT, /bash
COMMAND (run without a shell), /json VALUE; with --ask or an approval flag (a live
session, as in `genesis chat`) also /tool NAME JSON, /compact and /history.

exit codes: the response's status (0 success, 1 the CLI failed, 64 invalid request,
124 timeout, 127 CLI not found, ...); 2 is a command-line usage error.
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help=COMMAND_HELP["run"],
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
        default=None,
        help=BackendsHelp(
            "one of: {backends} (default: $GENESIS_BACKEND, else claude; "
            "failer is the embedded test CLI and needs no credentials; "
            "`genesis doctor` checks each)"
        ),
    )
    parser.add_argument(
        "--backends-file",
        metavar="TOML",
        default=None,
        help="generic backends to add ([backends.NAME] tables: command, format, ...; "
        "default: $GENESIS_BACKENDS_FILE)",
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
        "--stall-timeout",
        type=_stall_seconds,
        default=600.0,
        help="stop a run whose whole process tree is silent and idle this long "
        '(default 600; "off": never)',
    )
    parser.add_argument(
        "--grace",
        type=positive_seconds,
        default=5.0,
        help="seconds between SIGTERM and SIGKILL (default 5)",
    )
    parser.add_argument(
        "--cwd",
        "-C",
        type=absolute_path,
        default=None,
        help="working directory of the agent (default: here)",
    )
    parser.add_argument("--model", "-m", default=None, help="model name passed to the CLI")
    parser.add_argument(
        "--cli-path",
        default=None,
        help="path of the CLI binary (default: $GENESIS_<BACKEND>_PATH, else found on PATH)",
    )
    parser.add_argument("--resume", default=None, help="continue this CLI session id")
    parser.add_argument(
        "--permissions",
        choices=("read-only", "edit", "full"),
        default=None,
        help="what the agent may do, enforced by the CLI (default: the CLI's own setting); "
        "a level the backend cannot enforce is refused (status 64)",
    )
    parser.add_argument(
        "--max-turns", type=whole_number(1), default=None, help="the CLI's own turn limit"
    )
    parser.add_argument(
        "--cli-max-retries",
        type=whole_number(0),
        default=None,
        help="cap on the CLI's own API retries where it allows one "
        "(default: the CLI's, or 2 with --retries)",
    )
    parser.add_argument("--json", action="store_true", help="print the whole result dict as JSON")
    parser.add_argument(
        "--events",
        action="store_true",
        help="stream the normalized events as JSON lines on stdout as they happen; "
        'the last line is the response ({"type": "response", ...})',
    )
    parser.add_argument(
        "--quiet", "-q", action="store_true", help="no progress panel and no summary on stderr"
    )
    parser.add_argument(
        "--transcript-dir",
        metavar="DIR",
        default=None,
        help='where run directories go, or "off" (default: $GENESIS_TRANSCRIPTS, '
        "else $XDG_STATE_HOME/coding-genesis/runs)",
    )
    parser.add_argument(
        "--clean-env",
        action="store_true",
        help="least privilege: give the CLI only PATH, HOME, locale, terminal, temp dir and "
        "the variables its backend needs (e.g. ANTHROPIC_API_KEY), not every credential "
        "of this shell (see `genesis doctor`)",
    )
    parser.add_argument(
        "--allow-env",
        metavar="NAME",
        action="append",
        default=[],
        help="with --clean-env: also pass this variable (PREFIX_* for a prefix); repeatable",
    )
    add_setting_sources_argument(parser)
    add_retry_arguments(parser)
    add_budget_arguments(parser)
    add_approver_arguments(parser, ask=True)
    isolation = parser.add_argument_group("isolation and verification")
    isolation.add_argument(
        "--isolate",
        action="store_true",
        help="run in a fresh git worktree on a new branch (coding-genesis/<run>); the "
        "result lists the changes from git; the branch stays",
    )
    isolation.add_argument(
        "--base", default=None, help="with --isolate: the branch's start (default HEAD)"
    )
    isolation.add_argument(
        "--keep",
        choices=("never", "on_failure", "always"),
        default="never",
        help="with --isolate: keep the worktree after the run (default never)",
    )
    isolation.add_argument(
        "--carry-uncommitted",
        action="store_true",
        help="with --isolate: carry the checkout's uncommitted changes into the worktree",
    )
    isolation.add_argument(
        "--diff", action="store_true", help="with --isolate: the full diff in the result"
    )
    isolation.add_argument(
        "--verify",
        metavar="COMMAND",
        default=None,
        help='a command run in the run\'s directory after the agent succeeded, e.g. "pytest -q" '
        "(split like a shell would, but run without one); failing, the run fails (verify_failed)",
    )
    isolation.add_argument(
        "--verify-timeout",
        type=positive_seconds,
        default=300.0,
        help="the verify command's own timeout (default 300)",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    # lazy: `genesis --help` loads this module too
    from coding_genesis._cli.approver_options import approval_timeout, approver_from
    from coding_genesis._cli.env import (
        backends_file,
        cli_path_for,
        default_backend,
        ledger_setting,
        node_path_for,
        run_log_path,
        transcript_dir,
    )
    from coding_genesis._cli.live import EventWriter, execute
    from coding_genesis.agent import CodingGenesisAgent
    from coding_genesis.errors import ConfigError

    if args.ask and not sys.stdin.isatty():
        return usage_error(
            "run",
            "--ask asks on the terminal, and stdin is not one; without a terminal decide "
            "with --approve-tools, --deny-commands, --writes-under",
        )
    prompt = args.prompt
    if prompt == "-":
        prompt = sys.stdin.buffer.read().decode("utf-8", "replace")
    backend = args.backend or default_backend()
    asker = None
    if args.ask:
        from coding_genesis._cli.asking import TerminalAsker, TerminalLines  # lazy: --ask only

        asker = TerminalAsker(TerminalLines(sys.stdin.fileno()), scope="run")
    try:
        approver = approver_from(args, asker)
        add_backends_file(backends_file(args.backends_file))
        agent = CodingGenesisAgent(
            backend,
            timeout=args.timeout,
            idle_timeout=args.idle_timeout,
            stall_timeout=args.stall_timeout,
            grace=args.grace,
            cwd=args.cwd,
            model=args.model,
            cli_path=cli_path_for(backend, args.cli_path),
            node_path=node_path_for(backend),
            transcripts=transcript_dir(args.transcript_dir),
            run_log=run_log_path(),
            ledger=ledger_setting(),
            retry=retry_policy(args),
            inherit_env=not args.clean_env,
            env_allow=tuple(args.allow_env),
            budget=budget_from(args),
            prices=prices_from(args),
            **_isolation_settings(args),
        )
    except ConfigError as exc:
        return usage_error("run", str(exc))
    if args.ask:
        warn_of_repository(agent, args.setting_sources, "run")
    if agent.retry_policy is not None and not args.quiet:
        agent.subscribe(attempt_printer("genesis run"))
    if asker is not None:
        agent.subscribe(asker.heard)
    events = EventWriter(sys.stdout.buffer) if args.events else None
    outcome = execute(
        agent,
        lambda: agent.run(
            prompt,
            resume=args.resume,
            permissions=args.permissions,
            max_turns=args.max_turns,
            cli_max_retries=args.cli_max_retries,
            approver=approver,
            approval_timeout=approval_timeout(args, asking=args.ask),
            setting_sources=args.setting_sources,
        ),
        progress=_wants_progress(args),
        events=events,
        asker=asker,
    )
    return report(outcome, agent, args, events, backend)


def warn_of_repository(
    agent: CodingGenesisAgent, sources: tuple[str, ...] | None, command: str
) -> None:
    """Say on stderr which files of the working directory the CLI would start
    programs from, and whether this run reads them (a person is asked about
    tool calls: the approver never sees what these start)."""
    import os

    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.repository import repository_warning

    warning = repository_warning(agent.backend, agent.config.cwd or os.getcwd(), sources)
    if warning is not None:
        print(f"genesis {command}: {warning}", file=sys.stderr, flush=True)


def _isolation_settings(args: argparse.Namespace) -> dict[str, Any]:
    import shlex

    # lazy: `genesis --help` imports only the parsers
    from coding_genesis.errors import ConfigError

    settings: dict[str, Any] = {}
    if args.isolate:
        settings.update(
            isolation="worktree",
            isolation_base=args.base,
            keep=args.keep,
            carry_uncommitted=args.carry_uncommitted,
            include_diff=args.diff,
        )
    if args.verify is not None:
        try:
            settings["verify"] = shlex.split(args.verify)
        except ValueError as exc:
            raise ConfigError(f"--verify: {exc}") from None
        settings["verify_timeout"] = args.verify_timeout
    return settings


def _wants_progress(args: argparse.Namespace) -> bool:
    if args.quiet or not sys.stderr.isatty():
        return False
    # JSON lines on the same terminal would tear the panel.
    return not (args.events and sys.stdout.isatty())


def report(
    outcome: LiveOutcome,
    agent: CodingGenesisAgent,
    args: argparse.Namespace,
    events: EventWriter | None,
    backend: str,
) -> int:
    """Print the response the way the flags ask; return the exit code."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.live import stopped_response

    result = outcome.result if outcome.result is not None else stopped_response(outcome, agent)
    if events is not None:
        events.line({"type": "response", **result})
    elif args.json:
        print_json(result)
    machine = events is not None or args.json
    if outcome.stopped:
        if not args.quiet and not machine:
            for line in stopped_lines(outcome, result):
                print(printable(line), file=sys.stderr)
        return status_exit_code(result["status"])
    if events is None and not args.json:
        failed = result["status"] != 0
        stream = sys.stderr if failed else sys.stdout
        if result["message"]:
            # Our own words about a failure name the command line's flags; an
            # answer is the agent's, printed as it is.
            message = cli_words(result["message"]) if failed else result["message"]
            print(printable(message), file=stream, flush=True)  # before the lines on stderr
        if failed:
            print(f"[status {result['status']}: {result['error']}]", file=sys.stderr)
    if not args.quiet and not machine:
        tty = sys.stderr.isatty()
        # The whole summary on a terminal or after a failure; otherwise what a
        # script must not miss: an isolated run's branch, the warnings, and
        # where the run was recorded.
        lines = (
            summary_lines(result)
            if tty or result["status"] != 0
            else [*isolation_lines(result), *warning_lines(result), *transcript_lines(result)]
        )
        if result["error"] == "not_found" and args.backend is None:
            lines.append(_default_backend_missing(backend))
        for line in lines:
            print(terminal_line(line) if tty else printable(line), file=sys.stderr)
    return status_exit_code(result["status"])


def _default_backend_missing(backend: str) -> str:
    """The fix when no --backend was given and the default's CLI is not here."""
    return (
        f"hint: no --backend was given, so the default ({backend}) ran, and its CLI is not "
        f'installed here: try `genesis run --backend failer "hello"` (no credentials '
        f"needed), pick another with --backend (or $GENESIS_BACKEND), or install {backend} "
        f"(`genesis doctor --backend {backend}` says how)"
    )


def add_backends_file(path: str | None) -> list[str]:
    """Register the generic backends of a TOML file (none: nothing); their names."""
    if path is None:
        return []
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis.backends import register_backend
    from coding_genesis.backends.generic import load_backends_file

    found = load_backends_file(path)
    for name, backend in found.items():
        register_backend(name, lambda backend=backend: backend)  # type: ignore[misc]
    return list(found)


class BackendsHelp(str):
    """A help text naming every installed backend, looked up only when the help
    is shown (argparse formats it with ``%``), not on every command."""

    __slots__ = ()

    def __mod__(self, params: object) -> str:
        # lazy: `genesis --help` imports only the parsers
        from coding_genesis._cli.backends import all_names

        return str(self).replace("{backends}", ", ".join(all_names()))


def _stall_seconds(text: str) -> float | None:
    if text.strip().lower() == "off":
        return None
    return positive_seconds(text)
