"""A live session's transport: one CLI process held across turns, spoken to
through its backend's :class:`~coding_genesis.control.ControlProtocol`.

It sits under the same pipeline as a one-shot run.  Each turn is an attempt:
its :class:`~coding_genesis._pipeline.attempt.AttemptOutcome` goes through the
same result building, failure analysis and response.  Only the transport
differs: instead of spawning a CLI per attempt, a turn writes the prompt to
the live process and decodes its stdout (one parser for the session, one
tally per turn) until the protocol says the turn ended.

Each object the CLI writes goes one way, called by nothing but the parser:
the protocol reads it, each kind of message it reports goes to its handler
(``dispatch.py``), and what it forwards is translated by the running turn's
translator and delivered to the turn's :class:`~coding_genesis._pipeline.decode.Router`
(or held between turns).  A task that adds events of its own (an approval
decided, a host tool's call) delivers them to its turn's router: a plain call.

The process is supervised by the same :func:`run_process`, in its live mode
(stdin held open, a turn's clocks armed only while the turn runs): every
guarantee of a one-shot run holds (wall, idle and stall limits per turn; the
whole tree stopped and reaped when the session closes, is cancelled, times
out, is stopped by a budget or its runner dies).
"""

from __future__ import annotations

import dataclasses
import logging
import time

import anyio
import anyio.abc

from coding_genesis._live.approvals import approval_event
from coding_genesis._live.calls import PendingCalls
from coding_genesis._live.dispatch import LinkDispatch
from coding_genesis._live.hooks import longest
from coding_genesis._live.hosttools import HostCalls
from coding_genesis._live.mcpbridge import MCP_MISSING, McpBridge, mcp_missing
from coding_genesis._live.outbox import Outbox
from coding_genesis._live.process import LiveProcess
from coding_genesis._live.turn import STDERR_TAIL, Turn, TurnMarks, Unattended, death
from coding_genesis._pipeline.attempt import (
    AttemptContext,
    AttemptOutcome,
    Refusal,
    launch,
    resolve_program,
)
from coding_genesis._pipeline.decode import Router
from coding_genesis._pipeline.evidence import EvidenceWatch
from coding_genesis._pipeline.output import schema_prompt
from coding_genesis._pipeline.overlay import open_overlay
from coding_genesis._pipeline.tally import RunTally
from coding_genesis._supervision.stop import StopHandle
from coding_genesis._supervision.tree import in_session
from coding_genesis._supervision.values import ProcessOutcome
from coding_genesis._util.parser import JsonLinesParser
from coding_genesis.approval import Remembered
from coding_genesis.backend import Backend
from coding_genesis.control import Answered, ControlIntent, ControlProtocol, Outgoing
from coding_genesis.events import Translator
from coding_genesis.hooks import HookRecord
from coding_genesis.options import Trigger, TurnHow
from coding_genesis.request import Request
from coding_genesis.status import ErrorCode, Status

__all__ = ["LiveLink"]

log = logging.getLogger("coding_genesis._live.link")

#: How long a call before a turn (a switch of model or mode) may take to be
#: answered: the CLI answers one at once (the turn's own timeout is the bound
#: when shorter).
_SWITCH_WAIT = 10.0


class LiveLink(LinkDispatch):
    """One live CLI process and its protocol, held for a session's turns."""

    def __init__(
        self,
        backend: Backend,
        protocol: ControlProtocol,
        request: Request,
        *,
        marker: str,
        stop: StopHandle,
        context: AttemptContext | None = None,
    ) -> None:
        self.backend = backend
        self.protocol = protocol
        #: The session's request (a one-shot run's, for one turn): what the
        #: CLI is started and opened with, its approver, hooks and limits.
        self.request = request
        self.marker = marker
        #: The session's "always" answers (every backend's, kept here).
        self.remembered = Remembered()
        self.host_calls = HostCalls(request.tools, protocol, self.send, lambda: self.alive)
        #: Our calls to the CLI awaiting their answer (:meth:`call`).
        self.calls = PendingCalls()
        #: The last turn's switch the CLI refused (``turn_calls``), its words:
        #: the session keeps no switch of that turn.
        self.refused_switch: str | None = None
        self.stop = stop
        #: Our key of the session (the marker of its processes).
        self.key = marker
        #: The CLI (who hears the process itself: its spawn, overlay, what is
        #: said outside the turns, apart from any turn, is ``context``).
        self.process = LiveProcess(
            backend,
            request,
            marker=marker,
            stop=stop,
            context=context if context is not None else AttemptContext(),
        )
        #: The CLI's session (thread) id, once known.
        self.session_id: str | None = request.resume
        #: Messages the protocol did not know (ignored, counted).
        self.unknown = 0
        self.turns = 0
        #: What the CLI says between turns, held for the turn it starts by itself.
        self.between = Unattended()
        #: A session takes the CLI's own turns; else what the CLI asks between
        #: turns is refused at once (a one-shot run's link, its turn over).
        self.takes_cli_turns = False
        #: Set when a turn starts (a fresh event for the next one).
        self.began = anyio.Event()
        self._turn: Turn | None = None
        #: The session's stdout, one object at a time (a skipped line is still answered).
        self.parser = JsonLinesParser(request.max_line_bytes, on_unparsed=self._unparsed)
        #: Lines whose translation or routing failed (counted as skipped).
        self._errors = 0
        #: Where what the CLI says goes: the running turn's router (from the
        #: turn's start to its end), else the idle one.
        self._idle = Router(RunTally(request.cwd))
        self.router = self._idle
        self._idle_translator = self._translator()
        #: Set when the CLI ended a turn we ended first (a protocol fault).
        self._drained: anyio.Event | None = None
        #: What goes to the CLI's stdin.
        self.outbox = Outbox(self.process.stdin, backend.name)
        #: The socket of the caller's functions over MCP (``tools_over_mcp``).
        self._bridge: McpBridge | None = None
        #: What each kind of message the protocol reports means (by its type).
        self._dispatch = self.dispatch_table()
        #: The records of the observed session_start hooks (the first turn's
        #: result carries them) and of the session_end hooks (None: yet to run).
        self._started_hooks: tuple[HookRecord, ...] = ()
        self.ended_hooks: tuple[HookRecord, ...] | None = None

    def _translator(self) -> Translator:
        """A translator of the protocol's, making its shares of the CLI's running totals."""
        translator = self.protocol.translator()
        translator.totals = self.process.context.totals
        return translator

    # -- state -------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self.process.alive

    @property
    def ended(self) -> anyio.Event:
        """Set once the link is no longer :attr:`alive` (its CLI gone or broken)."""
        return self.process.ended

    @property
    def running(self) -> bool:
        """A turn is under way."""
        return self._turn is not None and not self._turn.done.is_set()

    # -- the process -------------------------------------------------------------

    async def _run(self, argv: list[str], env: dict[str, str], cwd: str) -> None:
        try:
            await self.process.run(argv, env, cwd, on_stdout=self._sink, on_stderr=self._stderr)
        finally:
            self.outbox.gone()
            turn = self._turn
            if turn is not None:
                how: TurnHow = "interrupted" if turn.interrupt_asked else "died"
                turn.end(how, death(self.backend.name, self.process.exit))

    def _sink(self, chunk: bytes) -> bool:
        turn = self._turn
        context = turn.context if turn is not None else None
        if chunk:
            self.process.stdout_bytes += len(chunk)
            if context is not None and context.on_stdout is not None:
                context.on_stdout(chunk)
            elif turn is None:
                session = self.process.context.on_stdout  # the session's own record
                if session is not None:
                    session(chunk)
                if self._unattended():
                    self.between.bytes(chunk)
        self.router.decode(self.parser, chunk, self._object, time.time)
        if context is not None and context.on_decoded is not None:
            context.on_decoded()
        return False  # a live process has no terminal event: turns end by protocol

    def _stderr(self, chunk: bytes) -> None:
        turn = self._turn
        context = turn.context if turn is not None else self.process.context
        if context is not None and context.on_stderr is not None:
            context.on_stderr(chunk)  # the turn's observers, else the session's own
        if turn is not None:
            turn.stderr_bytes += len(chunk)
            turn.stderr += chunk
            if len(turn.stderr) > 2 * STDERR_TAIL:
                del turn.stderr[:-STDERR_TAIL]

    def send(self, *objects: Outgoing) -> None:
        """Write ``objects`` on the CLI's stdin, in order (one line each): at
        once while nothing waits before them (an answer is not held up by a
        trip through the event loop), else queued for the writer."""
        turn = self._turn
        self.outbox.send(
            objects, turn.context.on_stdin if turn is not None else self.process.context.on_stdin
        )

    # -- turns -------------------------------------------------------------------

    async def turn(
        self,
        request: Request,
        context: AttemptContext,
        *,
        run_id: str,
        trigger: Trigger = "user",
    ) -> AttemptOutcome:
        """One turn: the prompt written, the output decoded until the turn ends
        (``trigger="cli"``: no prompt; it takes what the CLI said between turns).
        A turn the CLI said at its opening it cannot take is refused unwritten."""
        refused = self.protocol.turn_refusal(request) if trigger == "user" else None
        if refused is not None:
            refusal = Refusal(Status.USAGE, ErrorCode.INVALID_REQUEST, refused)
            tally = RunTally(request.cwd, context.redactor)
            return AttemptOutcome(
                request, request.timeout, tally, ProcessOutcome(), refusal=refusal
            )
        turn = self._begin(request, context, run_id)
        warnings = self.process.warnings if self.turns == 1 else ()
        await self._drain()
        if self.process.refusal is not None:
            return AttemptOutcome(
                request, request.timeout, turn.tally, ProcessOutcome(), refusal=self.process.refusal
            )
        if not self.alive:
            await self._dead_turn(turn)
        else:
            await self._run_turn(turn, trigger)
        await self._settle(turn)
        return self._outcome(turn, warnings)

    async def _dead_turn(self, turn: Turn) -> None:
        """A turn asked of a session that is over: it ends ``died``.  A session
        its CLI broke (a fatal fault of its opening, say) takes nothing more: a
        CLI on its way out (it broke the session by ending) gets the pipes'
        grace to exit; one that runs on is stopped now rather than waited out."""
        process = self.process
        if process.broken is not None and not process.dead.is_set():
            with anyio.move_on_after(self.request.eof_grace):
                await process.dead.wait()
            if not process.dead.is_set():
                self.stop.stop(ErrorCode.CLI_ERROR, process.broken)
        turn.end("died", process.broken or death(self.backend.name, process.exit))

    def _begin(self, request: Request, context: AttemptContext, run_id: str) -> Turn:
        """The next turn's state, its router the one what the CLI says goes to from now on."""
        tally = RunTally(request.cwd, context.redactor)
        if context.on_tally is not None:
            context.on_tally(tally)
        self.turns += 1
        translator = self._translator()
        started, self._started_hooks = self._started_hooks, ()
        translator.message_usage = context.message_usage
        router = Router(
            tally,
            routes=context.routes,
            watch=EvidenceWatch(self.backend, self.stop, time.time() + request.timeout),
        )
        self.router = router
        return Turn(
            number=self.turns,
            request=request,
            context=context,
            tally=tally,
            translator=translator,
            router=router,
            run_id=run_id,
            hooks=list(started),
            marks=TurnMarks(
                started=time.monotonic(),
                stdout=self.process.stdout_bytes,
                lines=self.parser.lines,
                skipped=self.parser.skipped,
                unknown=self.unknown,
            ),
        )

    async def _run_turn(self, turn: Turn, trigger: Trigger) -> None:
        """The turn under way, its clocks armed, until it ends (then what it
        held back delivered, and the idle router takes what follows)."""
        request, context, process = turn.request, turn.context, self.process
        held = self.between.take()
        if held.wanted.is_set():
            # What the CLI did since the last turn is this turn's (decoded
            # with the translator that read it, which the turn keeps).
            turn.translator, self._idle_translator = self._idle_translator, self._translator()
            turn.translator.message_usage = context.message_usage
        self._turn = turn
        self.began.set()  # whoever waits for a turn to start (Session.wait_for_turn)
        self.began = anyio.Event()
        if (
            context.on_spawn is not None
            and process.pid is not None
            and context is not process.context
        ):
            context.on_spawn(process.pid, process.argv)  # the turn starts on this process
        process.clocks.arm(
            timeout=request.timeout,
            idle_timeout=request.idle_timeout,
            stall_timeout=request.stall_timeout,
        )
        try:
            if held.wanted.is_set():
                self._adopt(turn, held, ended=trigger == "cli")
            if trigger == "cli":
                if not held.wanted.is_set():
                    turn.end("completed")  # nothing was left to do
            else:
                turn.hooks.extend(
                    await self.observe("prompt_submit", turn, turn.number, prompt=request.prompt)
                )
                asked = request
                if self.protocol.schema_in_prompt or (
                    self.protocol.turn_schema_in_prompt and "output_schema" in request.turn_options
                ):  # the schema worded in the prompt
                    worded = schema_prompt(request.prompt, request.output_schema)
                    asked = dataclasses.replace(request, prompt=worded)
                refused = await self._turn_calls(asked)
                if refused is not None:
                    turn.end("failed", refused)
                else:
                    self.send(*self.protocol.start_turn(asked))
            await turn.done.wait()
        except BaseException:
            # A cancelled turn: the session's process tree is stopped.
            self.stop.stop(ErrorCode.CANCELLED, "the turn was cancelled")
            raise
        finally:
            process.clocks.disarm()
            self.host_calls.cancel()  # what the ended turn's tools still run
            self.deliver(turn.router, [approval_event(*pair) for pair in turn.withdrawn])
            self.deliver(turn.router, turn.translator.flush())
            self._turn = None
            self.router = self._idle

    async def _settle(self, turn: Turn) -> None:
        """After the turn: the hooks it left running, the tools an interrupt
        left behind, the supervisor's account of a death."""
        process = self.process
        if turn.running.count and self.alive and not turn.interrupt_asked:
            with anyio.CancelScope(shield=True):  # observed hooks the CLI did not wait for
                await turn.running.wait(longest(self.request.hooks, self.request.hook_timeout))
        if turn.ended is not None and turn.ended.how == "interrupted" and self.alive:
            # What the interrupted turn's tools left running; the CLI lives on.
            with anyio.CancelScope(shield=True):
                keep = self._bridge.launched if self._bridge is not None else None
                turn.strays = await process.clocks.stop_strays(keep)
        if (turn.ended is not None and turn.ended.how == "died") or self.stop.requested:
            # The supervisor's account of the end (a stop asked for during the
            # turn, a budget's say, is this turn's answer even if it ended first).
            supervisor = process.supervisor
            with anyio.move_on_after(2 * supervisor.grace + supervisor.kill_wait + 1):
                await process.dead.wait()

    def _outcome(self, turn: Turn, warnings: tuple[str, ...]) -> AttemptOutcome:
        unknown = self.unknown - turn.marks.unknown
        if unknown:
            name = self.protocol.name or self.backend.name
            warnings = (*warnings, f"{unknown} message(s) of a type {name} does not know, ignored")
        process, request = self.process, turn.request
        return AttemptOutcome(
            request,
            request.timeout,
            turn.tally,
            turn.process(process.pid, process.stdout_bytes, process.exit),
            lines=self.parser.lines - turn.marks.lines,
            skipped_lines=self.parser.skipped - turn.marks.skipped,
            warnings=(*warnings, *turn.tally.number_warnings()),
            stop=self.stop,
            ended=turn.ended,
            approvals=tuple(turn.approvals),
            hooks=tuple(turn.hooks),
            questions=tuple(turn.questions),
        )

    async def _drain(self) -> None:
        """Before a turn: the CLI has ended the turn a fault made us give up
        on, or it gets the grace period to; else its tree is stopped (its
        late answer must not end the next turn)."""
        drained = self._drained
        if drained is None:
            return
        if not drained.is_set() and self.alive:
            self.send(*self.protocol.interrupt())  # the CLI is still in it: end it
            with anyio.move_on_after(self.process.supervisor.grace):
                await drained.wait()
        self._drained = None
        if not drained.is_set() and self.alive:
            why = f"{self.backend.name} did not end a turn it broke off; session closed"
            self.process.break_off(why)
            self.stop.stop(ErrorCode.CLI_ERROR, why)
            with anyio.move_on_after(
                self.process.supervisor.grace + self.process.supervisor.kill_wait + 1
            ):
                await self.process.dead.wait()

    async def interrupt(self) -> bool:
        """End the running turn; the session lives on.  A CLI that does not end
        it within the grace period has its tree stopped (the session ends)."""
        turn = self._turn
        if turn is None or turn.done.is_set():
            return False
        turn.interrupt_asked = True
        self.send(*self.protocol.interrupt())
        with anyio.move_on_after(self.request.grace):
            await turn.done.wait()
        if not turn.done.is_set():
            self.stop.stop(
                ErrorCode.INTERRUPTED,
                f"{self.backend.name} did not end the turn within {self.request.grace:g}s "
                "of the interrupt",
            )
            await turn.done.wait()
        return True

    def steer(self, text: str) -> None:
        self.send(*self.protocol.steer(text))

    async def _turn_calls(self, turn: Request) -> str | None:
        """The protocol's calls before the turn (``turn_calls``), each awaited:
        the first error's words (the turn fails; nothing was prompted), or None."""
        self.refused_switch = None
        for intent in self.protocol.turn_calls(turn):
            answer = await self.call(intent, min(turn.timeout, _SWITCH_WAIT))
            if answer.error is not None:
                self.refused_switch = f"{self.backend.name} refused {intent.name}: {answer.error}"
                return self.refused_switch
        return None

    async def call(self, intent: ControlIntent, timeout: float) -> Answered:
        """Ask the CLI ``intent`` and wait for its answer, at most ``timeout``
        seconds: the answer, or an error answer (no such call here, no answer
        in time, the CLI gone); never raises for the CLI's doing."""
        if not self.alive:
            return Answered(None, error=f"{intent.name}: the session is over")
        try:
            key, objects = self.protocol.call(intent)
            self.calls.add(key, timeout)
        except (NotImplementedError, ValueError) as exc:
            return Answered(None, error=str(exc))
        self.send(*objects)
        return await self.calls.wait(key, self.ended)

    # -- opening and closing -----------------------------------------------------

    async def open(self, tg: anyio.abc.TaskGroup, timeout: float) -> None:
        """Start the CLI in ``tg`` and do the opening handshake (bounded by
        ``timeout``); a CLI that cannot be started is kept in ``refusal``."""
        refusal = await self._start(tg, timeout)
        if refusal is not None:
            self.process.refused(refusal)
            self.outbox.unused()
        elif self.alive:
            self._started_hooks = await self.observe("session_start", None, 1)

    async def end_hooks(self) -> tuple[HookRecord, ...]:
        """The session_end hooks, run once (observed) while the CLI is still
        there: at :meth:`close`, or when a one-shot run's one turn is over
        (its result carries them)."""
        if self.ended_hooks is None:
            self.ended_hooks = ()  # once, even if they are cancelled
            if self.process.refusal is None and self.process.pid is not None:  # it started
                self.ended_hooks = await self.observe("session_end", None, self.turns)
        return self.ended_hooks

    async def _start(self, tg: anyio.abc.TaskGroup, timeout: float) -> Refusal | None:
        self.process.tg = tg
        request = self.request
        program = resolve_program(self.backend, request.cli_path, request.node_path)
        if isinstance(program, Refusal):
            return program
        if request.tools and self.protocol.tools_over_mcp:
            refusal = await self._serve_tools(tg)
            if refusal is not None:
                return refusal
        begun = self.protocol.begin(request)
        spec = begun.command
        if spec.stdin is not None:
            return Refusal(
                Status.INTERNAL,
                ErrorCode.INTERNAL,
                f"{self.backend.name}: a live session's command must leave stdin to the session",
            )
        spec = open_overlay(spec, tag=self.marker, on_open=self.process.context.on_overlay)
        self.process.warnings = spec.warnings
        argv, env = launch(request, self.backend, program, spec, self.process.context, self.marker)
        self.process.argv = argv
        tg.start_soon(self._run, argv, env, request.cwd)
        tg.start_soon(self.outbox.writer)
        if begun.greeting:
            self.send(*begun.greeting)
            self.process.clocks.arm(timeout=timeout, idle_timeout=None, stall_timeout=None)
            try:
                await self.process.ready.wait()
            finally:
                self.process.clocks.disarm()
        return None

    async def _serve_tools(self, tg: anyio.abc.TaskGroup) -> Refusal | None:
        """The caller's functions for a CLI that takes tools only over MCP: the
        session's socket served, our MCP server declared to the protocol."""
        if mcp_missing():
            return Refusal(Status.USAGE, ErrorCode.INVALID_REQUEST, MCP_MISSING)
        process = self.process
        bridge = McpBridge(
            self.host_calls.tools,
            self.host_calls.run,
            lambda pid: in_session(pid, process.pid, process.marker),
            max_bytes=self.request.max_line_bytes,
        )
        self._bridge = bridge
        await bridge.serve(tg)
        self.protocol.mcp_servers = (bridge.server,)
        return None

    async def close(self) -> None:
        """Close stdin (after the protocol's goodbye), give the CLI the grace
        period to exit by itself, then stop its tree; the tools' socket goes
        with it."""
        try:
            await self._close()
        finally:
            if self._bridge is not None:
                await self._bridge.close()

    async def _close(self) -> None:
        await self.end_hooks()
        if not self.process.dead.is_set():
            if self.alive:
                self.send(*self.protocol.closing())
            self.outbox.seal()
            with anyio.move_on_after(self.request.grace):
                await self.outbox.emptied()
            self.process.stdin.close()
            with anyio.move_on_after(self.request.grace):
                await self.process.dead.wait()
            if not self.process.dead.is_set():
                self.stop.stop(ErrorCode.CANCELLED, "the session was closed")
                await self.process.dead.wait()
