"""One attempt: resolve the CLI, spawn it, supervise it, decode its stdout.

Input: the backend and one request (with the attempt's prompt, session and
timeout): everything an attempt reads is the request's.  Output: an :class:`AttemptOutcome`,
what happened to the process and what its stdout said, with nothing decided
yet; :mod:`coding_genesis._pipeline.outcome` turns it into a result.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from coding_genesis._pipeline.decode import Decoder, Routes
from coding_genesis._pipeline.evidence import EvidenceWatch
from coding_genesis._pipeline.overlay import open_overlay, overlay_scope
from coding_genesis._pipeline.tally import RunTally
from coding_genesis._supervision.childenv import build_env, child_base_env
from coding_genesis._supervision.process import run_process
from coding_genesis._supervision.stop import StopHandle
from coding_genesis._supervision.values import ProcessOutcome, SupervisorConfig
from coding_genesis._util.redact import Redactor
from coding_genesis.backend import Backend, MessageUsage, node_launch
from coding_genesis.options import TurnHow
from coding_genesis.request import CommandSpec, Request
from coding_genesis.status import ErrorCode, Status
from coding_genesis.usage import RunningTotals

if TYPE_CHECKING:
    from coding_genesis.approval import ApprovalRecord
    from coding_genesis.hooks import HookRecord

__all__ = [
    "AttemptContext",
    "AttemptOutcome",
    "Refusal",
    "TurnEnd",
    "launch",
    "resolve_program",
    "run_attempt",
]


@dataclass(frozen=True, slots=True)
class Refusal:
    """The attempt could not start the CLI (not found, not executable)."""

    status: Status
    error: ErrorCode
    message: str


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """How a turn of a live session ended, when not by the CLI's own result.

    ``how``: ``interrupted`` (asked for), ``denied`` (a refusal ended it),
    ``fault`` (the CLI broke its protocol), ``died`` (the CLI exited mid-turn),
    ``completed``/``failed`` (the CLI's result says the rest)."""

    how: TurnHow
    message: str = ""


@dataclass(slots=True)
class AttemptOutcome:
    """What one attempt produced, before anything is decided about it."""

    request: Request
    #: The attempt's timeout, in seconds.
    timeout: float
    tally: RunTally
    process: ProcessOutcome
    lines: int = 0
    skipped_lines: int = 0
    #: Set when the CLI was never started.
    refusal: Refusal | None = None
    #: Options the CLI could not honor (the backend's ``CommandSpec.warnings``).
    warnings: tuple[str, ...] = ()
    #: The run's stop handle (its request says why a ``requested`` stop happened).
    stop: StopHandle | None = None
    #: A turn of a live session: how it ended (None: a one-shot run).
    ended: TurnEnd | None = None
    #: A turn of a live session: the approval decisions taken during it.
    approvals: tuple[ApprovalRecord, ...] = ()
    #: A turn of a live session: the hooks called during it.
    hooks: tuple[HookRecord, ...] = ()
    #: A turn of a live session: the questions its CLI put to the user.
    questions: tuple[Mapping[str, Any], ...] = ()


def resolve_program(
    backend: Backend, cli_path: tuple[str, ...] | None, node: str | None = None
) -> list[str] | Refusal:
    """The CLI's argv prefix: ``cli_path`` (checked), else the backend's
    embedded program, else its executable on ``PATH``.  A backend declaring a
    ``node_script`` (:class:`~coding_genesis.backend.NodeScript`) has its npm
    wrapper replaced by ``node <package>/<script>`` under a recent enough
    node (``node``, if given)."""
    found = _resolve(backend, cli_path)
    script = backend.node_script
    if script is None or isinstance(found, Refusal) or len(found) != 1:
        return found
    launch = node_launch(found[0], script, node)
    if launch is None:
        return found
    if isinstance(launch, str):
        return Refusal(Status.NOT_FOUND, ErrorCode.NOT_FOUND, f"{backend.name} CLI: {launch}")
    return launch


def _resolve(backend: Backend, cli_path: tuple[str, ...] | None) -> list[str] | Refusal:
    if cli_path is None:
        default = backend.default_program()
        if default:
            return list(default)
        found = shutil.which(backend.executable)
        if found is None:
            return Refusal(
                Status.NOT_FOUND,
                ErrorCode.NOT_FOUND,
                f"{backend.name} CLI not found: no {backend.executable!r} on PATH; "
                f"{backend.install_hint()}",
            )
        return [os.path.abspath(found)]  # a relative PATH entry names this process's directory
    program, *rest = cli_path
    program = os.path.expanduser(program)
    if os.sep in program:
        # Checked here and run from the run's cwd: one path, this process's.
        program = os.path.abspath(program)
    else:
        found = shutil.which(program)
        if found is None:
            return Refusal(
                Status.NOT_FOUND,
                ErrorCode.NOT_FOUND,
                f"{backend.name} CLI not found: no {program!r} on PATH",
            )
        program = os.path.abspath(found)
    if not os.path.exists(program):
        return Refusal(
            Status.NOT_FOUND, ErrorCode.NOT_FOUND, f"{backend.name} CLI not found at {program!r}"
        )
    if os.path.isdir(program):
        return Refusal(
            Status.NOT_EXECUTABLE,
            ErrorCode.NOT_EXECUTABLE,
            f"{backend.name} CLI path {program!r} is a directory",
        )
    if not rest and not os.access(program, os.X_OK):
        return Refusal(
            Status.NOT_EXECUTABLE,
            ErrorCode.NOT_EXECUTABLE,
            f"{backend.name} CLI at {program!r} is not executable (chmod +x it)",
        )
    return [program, *rest]


def launch(
    request: Request,
    backend: Backend,
    program: list[str],
    spec: CommandSpec,
    context: AttemptContext,
    marker: str,
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment a CLI is started with (one-shot or live).
    ``PWD`` names the request's ``cwd`` (not the runner's directory) unless
    ``env=`` sets it: tools that read it, rather than asking the kernel, see
    where they run."""
    base = child_base_env(
        os.environ,
        inherit=request.inherit_env,
        needs=backend.env_needs,
        allow=request.env_allow,
    )
    env = build_env(
        base,
        unset=spec.unset_env,
        add={"PWD": request.cwd, **spec.env, **(context.extra_env or {}), **request.env},
        marker=marker,
    )
    return [*program, *spec.args], env


@dataclass(frozen=True, slots=True)
class AttemptContext:
    """What an attempt is handed by its run: who hears it, and what it shares.

    ``routes`` give the handlers of the decoded events; ``on_stdout`` gets every raw
    stdout chunk before it is decoded (transcripts keep the raw bytes: nothing
    read is lost if the runner dies mid-chunk); ``on_decoded`` is called once
    the events of a chunk have all been published; ``on_spawn`` gets the CLI's
    pid and argv; ``on_tally`` the attempt's tally as soon as it exists (the
    answer to a cancellation reports what it holds).  ``redactor`` masks
    secrets in the text the tally cuts short, before it is cut; ``extra_env``
    (from the run's observers, e.g. ``TRACEPARENT``) is added to the CLI's
    environment before the request's ``env``; ``stop`` is the run's stop handle (a
    stop asked for before the spawn refuses the attempt: nothing is started);
    ``message_usage``: what the translator makes of the usage a CLI reports
    mid-stream (see :class:`~coding_genesis.events.Translator`); ``on_overlay``
    gets the settings overlay's directory as soon as it exists (the run
    records it for the sweep: a SIGKILLed runner removes nothing).
    """

    routes: Routes | None = None
    on_stdout: Callable[[bytes], object] | None = None
    on_decoded: Callable[[], object] | None = None
    on_spawn: Callable[[int, list[str]], object] | None = None
    on_tally: Callable[[RunTally], object] | None = None
    redactor: Redactor | None = None
    extra_env: Mapping[str, str] | None = None
    stop: StopHandle | None = None
    message_usage: MessageUsage = "live"
    on_overlay: Callable[[str], object] | None = None
    #: Each line written on a live CLI's stdin (transcripts keep both directions).
    on_stdin: Callable[[bytes], object] | None = None
    #: Each raw stderr chunk as read (``on_stderr=``, observers' ``stderr``).
    on_stderr: Callable[[bytes], object] | None = None
    #: The agent's memory of the running totals its CLI sessions reported: the
    #: translator makes the run's share with it (None: a replay, what was said).
    totals: RunningTotals | None = None


@overlay_scope  # the run's settings overlay, if any, lives exactly as long as this call
async def run_attempt(
    backend: Backend,
    request: Request,
    *,
    marker: str,
    context: AttemptContext = AttemptContext(),
) -> AttemptOutcome:
    """Spawn, supervise and decode one attempt (``marker`` tags its processes)."""
    redactor = context.redactor
    on_tally = context.on_tally
    stop = context.stop
    tally = RunTally(request.cwd, redactor)
    if on_tally is not None:
        on_tally(tally)
    if stop is not None and stop.request is not None:
        return AttemptOutcome(
            request,
            request.timeout,
            tally,
            ProcessOutcome(),
            refusal=Refusal(Status.FAILED, stop.request.error, stop.request.message),
            stop=stop,
        )
    program = resolve_program(backend, request.cli_path, request.node_path)
    if isinstance(program, Refusal):
        return AttemptOutcome(request, request.timeout, tally, ProcessOutcome(), refusal=program)
    spec = open_overlay(backend.build_command(request), tag=marker, on_open=context.on_overlay)
    argv, env = launch(request, backend, program, spec, context, marker)
    translator = backend.translator()
    translator.message_usage = context.message_usage
    translator.totals = context.totals
    if stop is None:  # the fail-fast watch stops the tree through a handle
        stop = StopHandle()
    decoder = Decoder(
        translator,
        tally,
        max_line_bytes=request.max_line_bytes,
        routes=context.routes,
        watch=EvidenceWatch(backend, stop, time.time() + request.timeout),
    )
    sink = decoder.feed
    if context.on_stdout is not None or context.on_decoded is not None:
        raw = context.on_stdout
        decoded = context.on_decoded
        feed = decoder.feed

        def sink(chunk: bytes) -> bool:
            if chunk and raw is not None:
                raw(chunk)
            terminal = feed(chunk)
            if decoded is not None:
                decoded()
            return terminal

    spawned = None
    if context.on_spawn is not None:
        notify = context.on_spawn

        def spawned(pid: int) -> None:
            notify(pid, argv)

    outcome = await run_process(
        argv,
        cwd=request.cwd,
        env=env,
        stdin=spec.stdin,
        config=SupervisorConfig.from_request(request, pdeath_signal=backend.pdeath_signal),
        on_stdout=sink,
        marker=marker,
        on_spawn=spawned,
        stop_handle=stop,
        on_stderr=context.on_stderr,
    )
    return AttemptOutcome(
        request,
        request.timeout,
        tally,
        outcome,
        lines=decoder.lines,
        skipped_lines=decoder.skipped,
        warnings=(*spec.warnings, *tally.number_warnings()),
        stop=stop,
    )
