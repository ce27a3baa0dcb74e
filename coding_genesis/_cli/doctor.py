"""``genesis doctor``: can each backend run here, and if not, why and what to do.

Checks, per backend (built in or plug-in): the plug-in loads, the CLI is
found (and where), ``<cli> --version`` (its ``version_args``) runs
(through the core's supervised runner, bounded), credentials appear to be
configured (only whether a variable or file is there: no secret is ever
printed), and inherited variables that break it.  Then, for the machine:
whether whole-tree cleanup (child subreaper) is available and where
transcripts go.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coding_genesis._cli.common import positive_seconds, print_json
from coding_genesis._cli.parsing import COMMAND_HELP
from coding_genesis._util.display import printable

if TYPE_CHECKING:
    from coding_genesis.backend import Backend

__all__ = ["Check", "register", "run_checks"]


class _Backends(Sequence[str]):
    """Every installed backend's name (built in or plug-in), looked up only when
    argparse needs it: checking ``--backend`` or showing the help."""

    def _names(self) -> list[str]:
        # lazy: `genesis --help` imports only the parsers
        from coding_genesis._cli.backends import all_names

        return all_names()

    def __getitem__(self, index: Any) -> Any:
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())


BACKENDS: Sequence[str] = _Backends()

EXAMPLES = """\
examples:
  genesis doctor                     every backend, and the machine
  genesis doctor --backend claude    exit status 1 when claude cannot run here
  genesis doctor -b codex --cli-path ~/.local/bin/codex
  genesis doctor --json | jq '.checks[] | select(.status != "ok")'

STATUS is ok, warn (it may still run, read the fix) or FAIL (it cannot run).
The exit status is 0 when every backend named by --backend (else $GENESIS_BACKEND)
can run, or, with none named, when at least one can; else 1.  --strict: 1 for
any FAIL at all.
"""


@dataclass(frozen=True, slots=True)
class Check:
    """One row of the doctor's table."""

    backend: str
    check: str
    status: str  # ok, warn, FAIL
    detail: str
    fix: str = ""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help=COMMAND_HELP["doctor"],
        description="Check each backend's CLI, version, credentials and environment, and "
        "whether whole-tree cleanup is available; print a table with a fix per problem.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--backend",
        "-b",
        action="append",
        choices=BACKENDS,
        metavar="NAME",
        help="check only this backend (repeatable; default: all)",
    )
    parser.add_argument(
        "--cli-path", default=None, help="path of the CLI binary to check (with one --backend)"
    )
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=15.0,
        help="seconds `<cli> --version` may take (default 15)",
    )
    parser.add_argument(
        "--backends-file",
        default=None,
        metavar="FILE",
        help="also check the backends of this TOML file (default: $GENESIS_BACKENDS_FILE)",
    )
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 for any FAIL, of any backend checked"
    )
    parser.set_defaults(handler=handle)


# -- checks --------------------------------------------------------------------


async def _version(
    argv: list[str], env: dict[str, str], timeout: float, version_args: tuple[str, ...] = ()
) -> tuple[str, str]:
    """(status, detail) of ``argv --version`` (or ``version_args``) run under supervision."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._supervision.process import run_process
    from coding_genesis._supervision.values import SupervisorConfig

    chunks: list[bytes] = []

    def keep(chunk: bytes) -> bool:
        chunks.append(chunk)
        return False

    config = SupervisorConfig(timeout=timeout, grace=1.0, linger=None, eof_grace=0.5, kill_wait=1.0)
    outcome = await run_process(
        [*argv, *(version_args or ("--version",))],
        cwd=os.getcwd(),
        env=env,
        stdin=None,
        config=config,
        on_stdout=keep,
        marker=f"doctor-{os.urandom(16).hex()}",
    )
    out = b"".join(chunks).decode("utf-8", "replace").strip()
    err = outcome.stderr_tail.strip()
    if outcome.spawn_error is not None:
        return "FAIL", f"cannot start: {outcome.spawn_error.strerror or outcome.spawn_error}"
    if outcome.stop_reason is not None:
        return "FAIL", f"`--version` did not answer within {timeout:g}s (stopped)"
    if outcome.returncode != 0:
        last = (err or out).splitlines()[-1:] or ["no output"]
        return "FAIL", f"`--version` exited with {outcome.returncode}: {last[0][:200]}"
    first = (out or err).splitlines()[:1] or ["(no output)"]
    return "ok", first[0][:200]


def _env_set(*names: str) -> list[str]:
    return [n for n in names if os.environ.get(n, "").strip()]


def _claude_credentials() -> Check:
    found = _env_set("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
    config_dir = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")
    files = [p for p in (config_dir / ".credentials.json",) if p.is_file()]
    helper = False
    settings = config_dir / "settings.json"
    if settings.is_file():
        import json

        # lazy: `genesis --help` imports only the parsers
        from coding_genesis._cli.credentials import MAX_CONFIG
        from coding_genesis._util.files import read_regular

        try:
            data = read_regular(settings, MAX_CONFIG, follow=True)
            helper = bool(json.loads(data.decode("utf-8")).get("apiKeyHelper"))
        except (OSError, ValueError, AttributeError, RecursionError):
            helper = False
    kept = [
        n
        for n in _env_set(
            "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"
        )
        if n not in _claude_stripped()
    ]
    where = [f"${n} is set" for n in (*found, *kept)] + [f"{p} exists" for p in files]
    if helper:
        where.append(f"apiKeyHelper in {settings}")
    if where:
        return Check("claude", "credentials", "ok", "; ".join(where))
    return Check(
        "claude",
        "credentials",
        "warn",
        f"no ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN, no {config_dir / '.credentials.json'}",
        "export ANTHROPIC_API_KEY=..., or run `claude` once and /login",
    )


def _claude_stripped() -> list[str]:
    """Inherited variables the claude backend removes from the CLI's environment."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._supervision.childenv import build_env
    from coding_genesis.backends.claude import ClaudeBackend
    from coding_genesis.request import Request

    spec = ClaudeBackend().build_command(Request(prompt="doctor", cwd=os.getcwd()))
    kept = build_env(os.environ, unset=spec.unset_env)
    return sorted(n for n in os.environ if n not in kept)


def _claude_environment() -> list[Check]:
    inherited = _claude_stripped()
    checks = []
    if inherited:
        checks.append(
            Check(
                "claude",
                "environment",
                "warn",
                f"inherited {', '.join(inherited[:6])}{' ...' if len(inherited) > 6 else ''}: "
                "claude refuses to start inside another Claude Code session",
                "nothing to do for genesis (it removes these for every run, keeping your own "
                "CLAUDE_CODE_* configuration and credentials); "
                "unset them to run `claude` yourself",
            )
        )
    else:
        # Only a parent session's variables are removed; the user's own
        # CLAUDE_CODE_* configuration is passed on (and said so).
        kept = sorted(n for n in os.environ if n.startswith("CLAUDE_CODE_"))
        said = "not inside another Claude Code session (no CLAUDECODE or session variables)"
        if kept:
            shown = ", ".join(kept[:6]) + (" ..." if len(kept) > 6 else "")
            said += f"; passed on as your configuration: {shown}"
        checks.append(Check("claude", "environment", "ok", said))
    if os.environ.get("ANTHROPIC_BASE_URL"):
        checks.append(
            Check(
                "claude",
                "endpoint",
                "ok",
                f"ANTHROPIC_BASE_URL={os.environ['ANTHROPIC_BASE_URL']}",
            )
        )
    return checks


def _codex_credentials() -> Check:
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.credentials import codex_credentials

    return Check("codex", "credentials", *codex_credentials())


def _other_credentials(name: str) -> Check:
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.credentials import cli_credentials

    return Check(name, "credentials", *cli_credentials(name))


def _codex_environment() -> list[Check]:
    checks = []
    home = os.environ.get("CODEX_HOME")
    if home and not os.path.isdir(home):
        checks.append(
            Check(
                "codex",
                "environment",
                "FAIL",
                f"CODEX_HOME={home} is not an existing directory: codex refuses to start",
                f"mkdir -p {home}, or unset CODEX_HOME",
            )
        )
    else:
        checks.append(
            Check(
                "codex",
                "environment",
                "ok",
                f"CODEX_HOME={home}" if home else "CODEX_HOME unset (~/.codex)",
            )
        )
    if os.environ.get("OPENAI_BASE_URL"):
        checks.append(
            Check(
                "codex",
                "endpoint",
                "warn",
                "OPENAI_BASE_URL is set, but current codex versions ignore it",
                "configure a provider instead: -c model_providers.NAME.base_url=... "
                "(see `codex exec --help`)",
            )
        )
    return checks


async def _backend_checks(name: str, cli_path: str | None, timeout: float) -> list[Check]:
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.env import cli_path_for
    from coding_genesis._pipeline.attempt import Refusal, resolve_program
    from coding_genesis._supervision.childenv import build_env
    from coding_genesis.agent import CodingGenesisAgent
    from coding_genesis.backend import plugin_entry_points
    from coding_genesis.errors import ConfigError
    from coding_genesis.request import Request

    try:
        agent = CodingGenesisAgent(name, cli_path=cli_path_for(name, cli_path))
    except ConfigError as exc:  # a plug-in that does not load
        return [Check(name, "plug-in", "FAIL", str(exc), "reinstall or fix that package")]
    backend = agent.backend
    checks: list[Check] = []
    ep = plugin_entry_points().get(name)
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis.backends import registered_backends

    if ep is not None and name not in registered_backends():
        dist = ep.dist
        origin = f" ({dist.name} {dist.version})" if dist is not None else ""
        checks.append(Check(name, "plug-in", "ok", f"{ep.value}{origin}"))
    # The same resolution a run uses, so the answer is the one a run would get.
    program = resolve_program(backend, agent.config.cli_path)
    if isinstance(program, Refusal):
        checks.append(
            Check(
                name,
                "cli",
                "FAIL",
                program.message.split("; ")[0],
                backend.install_hint()
                if program.error == "not_found"
                else "fix the path or its permissions (chmod +x)",
            )
        )
    else:
        source = "embedded"
        if cli_path:
            source = "--cli-path"
        elif os.environ.get(backend.path_env_var):
            source = f"${backend.path_env_var}"
        elif backend.default_program() is None:
            source = "PATH"
        checks.append(Check(name, "cli", "ok", f"{' '.join(program)} (from {source})"))
        if name == "failer":
            # lazy: `genesis --help` imports only the parsers
            from coding_genesis._util.version import version

            checks.append(Check(name, "version", "ok", f"embedded in coding-genesis {version()}"))
        else:
            # lazy: `genesis --help` imports only the parsers
            from coding_genesis._pipeline.overlay import materialised

            spec = backend.build_command(Request(prompt="doctor", cwd=os.getcwd()))
            version_args = backend.version_args
            with materialised(spec) as ready:  # the CLI sees its settings overlay, as in a run
                env = build_env(os.environ, unset=ready.unset_env, add=ready.env)
                status, detail = await _version(list(program), env, timeout, version_args)
            checks.append(
                Check(
                    name,
                    "version",
                    status,
                    detail,
                    ""
                    if status == "ok"
                    else f"run `{program[-1]} {' '.join(version_args)}` yourself to see why",
                )
            )
    notes = backend.notes
    if notes:
        checks.append(Check(name, "notes", "ok", "; ".join(map(str, notes))))
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.sessions_row import sessions

    checks.append(Check(name, "sessions", "ok", sessions(backend)))
    if name == "claude":
        checks.append(_claude_credentials())
        checks += _claude_environment()
    elif name == "codex":
        checks.append(_codex_credentials())
        checks += _codex_environment()
    else:
        checks.append(_other_credentials(name))
    return checks


def _exposure(names: Sequence[str]) -> Check:
    """Which credential variables a run hands its CLI without needing them
    (names only, never values): said once for every backend checked."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._supervision.childenv import exposed_credentials

    unneeded: dict[str, list[str]] = {}
    for name in names:
        try:
            backend = _backend_named(name)
        except Exception:  # noqa: BLE001 (a plug-in that does not load: its own row says so)
            continue
        _, extra = exposed_credentials(os.environ, inherit=True, needs=backend.env_needs)
        for variable in extra:
            unneeded.setdefault(variable, []).append(name)
    if not unneeded:
        return Check("*", "exposed env", "ok", "a run passes no credential it does not need")
    shown = sorted(unneeded)
    listed = ", ".join(shown[:12]) + (f" (+{len(shown) - 12} more)" if len(shown) > 12 else "")
    return Check(
        "*",
        "exposed env",
        "warn",
        f"a run passes every credential of this environment, also those its backend "
        f"does not need: {listed}",
        "genesis run --clean-env (or inherit_env=False) passes only what the backend needs",
    )


def _backend_named(name: str) -> Backend:
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis.backends import get_backend

    return get_backend(name)


def _machine_checks() -> list[Check]:
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.env import SUBREAPER, transcript_dir
    from coding_genesis._supervision.table import subreaper_enabled

    checks = []
    if subreaper_enabled():
        checks.append(
            Check(
                "*",
                "cleanup",
                "ok",
                "child subreaper: escaped tool processes are reparented to genesis, "
                "stopped and reaped",
            )
        )
    else:
        why = (
            "GENESIS_SUBREAPER=0"
            if os.environ.get(SUBREAPER) == "0"
            else f"not available on {sys.platform}"
        )
        checks.append(
            Check(
                "*",
                "cleanup",
                "warn",
                f"no child subreaper ({why}): leftovers are found by scanning processes for "
                "the run's marker (slower; a process that drops it and escapes is missed)",
                "unset GENESIS_SUBREAPER" if "=0" in why else "run on Linux for subreaper cleanup",
            )
        )
    base = transcript_dir()
    if base is None:
        checks.append(Check("*", "transcripts", "ok", "off ($GENESIS_TRANSCRIPTS=off)"))
    else:
        probe = base
        while not probe.exists() and probe.parent != probe:
            probe = probe.parent
        if os.access(probe, os.W_OK):
            checks.append(Check("*", "transcripts", "ok", str(base)))
        else:
            checks.append(
                Check(
                    "*",
                    "transcripts",
                    "warn",
                    f"{base} is not writable: runs will work, without transcripts",
                    "set GENESIS_TRANSCRIPTS to a writable directory, or to 'off'",
                )
            )
    return checks


def run_checks(
    backends: list[str], cli_path: str | None = None, timeout: float = 15.0
) -> list[Check]:
    """All the checks for ``backends`` (run concurrently), then the machine's."""
    import anyio

    results: dict[str, list[Check]] = {}

    async def main() -> None:
        async def one(name: str) -> None:
            results[name] = await _backend_checks(name, cli_path, timeout)

        async with anyio.create_task_group() as tg:
            for name in backends:
                tg.start_soon(one, name)

    anyio.run(main)
    checks = [c for name in backends for c in results[name]]
    return [*checks, _exposure(backends), *_machine_checks()]


def handle(args: argparse.Namespace) -> int:
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.env import BACKEND, backends_file
    from coding_genesis._cli.run import add_backends_file
    from coding_genesis.errors import ConfigError

    try:
        added = add_backends_file(backends_file(args.backends_file))
    except ConfigError as exc:
        print(f"genesis doctor: error: {exc}", file=sys.stderr)
        return 2
    backends = list(dict.fromkeys(args.backend or [*BACKENDS, *added]))
    # The backends a person asked about: --backend, else $GENESIS_BACKEND (the one
    # `genesis run` would use), else none in particular.
    named = list(
        args.backend
        or ([os.environ[BACKEND].strip()] if os.environ.get(BACKEND, "").strip() else [])
    )
    if args.cli_path and len(backends) != 1:
        print(
            "genesis doctor: error: --cli-path needs exactly one --backend "
            f"(got {', '.join(backends)})",
            file=sys.stderr,
        )
        return 2
    checks = run_checks(backends, args.cli_path, args.timeout)
    cannot = sorted({c.backend for c in checks if c.status == "FAIL" and c.backend in backends})
    if args.strict:
        failed = bool(cannot) or any(c.status == "FAIL" for c in checks)
    elif named:
        failed = any(b in cannot or b not in backends for b in named)
    else:
        failed = len(cannot) == len(backends)
    if args.json:
        print_json(
            {
                "checks": [asdict(c) for c in checks],
                "can_run": {b: b not in cannot for b in backends},
            }
        )
    else:
        _print_checks(checks)
        if cannot:
            print(f"\ncannot run: {', '.join(cannot)} (see fix: above)", file=sys.stderr)
    return 1 if failed else 0


def _print_checks(checks: list[Check]) -> None:
    """The checks, grouped by backend, wrapped to the terminal's width (80
    columns when it is not a terminal or says nothing): a status and a check
    name, then the detail and the fix as whole words."""
    import shutil
    import textwrap

    from rich.console import Console
    from rich.text import Text

    width = shutil.get_terminal_size((80, 24)).columns if sys.stdout.isatty() else 80
    width = max(60, width)
    styles = {"ok": "green", "warn": "yellow", "FAIL": "bold red"}
    console = Console(width=width, highlight=False, soft_wrap=True)
    indent = " " * 21  # "  warn  " and a check name of 12
    backend = None
    for c in checks:
        if c.backend != backend:
            backend = c.backend
            title = "this machine, every backend" if backend == "*" else backend
            console.print(Text(printable(title), style="bold"))
        head = Text(f"  {c.status:<5} ", style=styles[c.status])
        head.append(f"{printable(c.check):<12} ")
        for i, line in enumerate(
            textwrap.wrap(printable(c.detail), width - 21, break_on_hyphens=False) or [""]
        ):
            console.print(head + line if i == 0 else Text(indent + line))
        if c.fix:
            for line in textwrap.wrap(
                "fix: " + printable(c.fix),
                width,
                initial_indent=indent,
                subsequent_indent=indent + "     ",
                break_on_hyphens=False,
            ):
                console.print(Text(line))
