"""A live session's transport: one CLI process held across turns, spoken to
through its backend's :class:`~coding_genesis.control.ControlProtocol`.

It sits under the same pipeline as a one-shot run.  Each turn is an attempt:
its :class:`~coding_genesis._pipeline.attempt.AttemptOutcome` goes through the
same result building, failure analysis and response.  Only the transport
differs: instead of spawning a CLI per attempt, a turn writes the prompt to
the live process and decodes its stdout (one parser for the session, one
tally per turn) until the protocol says the turn ended.

The process is supervised by the same :func:`run_process`, in its live mode
(stdin held open, a turn's clocks armed only while the turn runs): every
guarantee of a one-shot run holds (wall, idle and stall limits per turn; the
whole tree stopped and reaped when the session closes, is cancelled, times
out, is stopped by a budget or its runner dies).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.abc
import orjson

from coding_genesis._pipeline.approvals import approval_event
from coding_genesis._pipeline.attempt import (
    AttemptContext,
    AttemptOutcome,
    Refusal,
    launch,
    resolve_program,
)
from coding_genesis._pipeline.decode import Decoder
from coding_genesis._pipeline.evidence import EvidenceWatch
from coding_genesis._pipeline.hooking import longest
from coding_genesis._pipeline.hosttools import HostCalls
from coding_genesis._pipeline.liveasks import LinkQuestions
from coding_genesis._pipeline.liveturn import STDERR_TAIL, Turn, Unattended, death
from coding_genesis._pipeline.overlay import open_overlay
from coding_genesis._pipeline.tally import RunTally
from coding_genesis._supervision.live import LiveStdin, LiveStdinClosed, TurnClocks
from coding_genesis._supervision.process import run_process
from coding_genesis._supervision.stop import StopHandle
from coding_genesis._supervision.values import ProcessOutcome, SupervisorConfig
from coding_genesis.approval import Remembered
from coding_genesis.backend import Backend
from coding_genesis.control import (
    ControlProtocol,
    Forward,
    HookCall,
    Outgoing,
    PermissionAsk,
    ProtocolFault,
    Ready,
    Reply,
    ToolCall,
    TurnEnded,
    Unknown,
    UnparsedLine,
)
from coding_genesis.events import Event, SessionEvent, Translator
from coding_genesis.options import Trigger
from coding_genesis.request import Request
from coding_genesis.status import ErrorCode, Status

__all__ = ["LiveLink"]

log = logging.getLogger("coding_genesis._pipeline.live")

#: What a line that cannot go to the CLI's stdin raises (it is dropped, logged).
_UNSENT = (anyio.ClosedResourceError, anyio.BrokenResourceError, LiveStdinClosed)


class _Switch(Translator):
    """The session decoder's translator: each object goes to the protocol
    first; what it forwards is translated by the running turn's translator."""

    def __init__(self, link: LiveLink) -> None:
        self._link = link

    def translate(self, obj: dict[str, Any]) -> Sequence[Event]:
        return self._link.received(obj)


class LiveLink(LinkQuestions):
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
        #: Who hears the process itself (its spawn, overlay, what is said
        #: outside the turns), apart from any turn.
        self._context = context if context is not None else AttemptContext()
        #: The session's request (a one-shot run's, for one turn): what the
        #: CLI is started and opened with, its approver, hooks and limits.
        self.request = request
        self.marker = marker
        #: The session's "always" answers (every backend's, kept here).
        self.remembered = Remembered()
        self.host_calls = HostCalls(request.tools, protocol, self.send, lambda: self.alive)
        self.stop = stop
        #: Our key of the session (the marker of its processes).
        self.key = marker
        #: Set when the CLI could not be started (not found, not executable).
        self.refusal: Refusal | None = None
        self.stdin = LiveStdin()
        self.clocks = TurnClocks()
        self.supervisor = SupervisorConfig.from_request(
            request, pdeath_signal=backend.pdeath_signal
        )
        #: The CLI's session (thread) id, once known.
        self.session_id: str | None = request.resume
        self.pid: int | None = None
        self.argv: list[str] = []
        #: The supervisor's outcome once the process is gone (None: alive).
        self.exit: ProcessOutcome | None = None
        #: Why the session cannot go on (a fatal protocol fault, a failed opening).
        self.broken: str | None = None
        #: Messages the protocol did not know (ignored, counted).
        self.unknown = 0
        self.turns = 0
        self.warnings: tuple[str, ...] = ()
        #: What the CLI says between turns, held for the turn it starts by itself.
        self.between = Unattended()
        #: A session takes the CLI's own turns; else what the CLI asks between
        #: turns is refused at once (a one-shot run's link, its turn over).
        self.takes_cli_turns = False
        #: Set when a turn starts (a fresh event for the next one).
        self.began = anyio.Event()
        self._turn: Turn | None = None
        self._idle = RunTally(request.cwd)
        self._idle_translator = self._translator()
        self._decoder = Decoder(_Switch(self), self._idle, max_line_bytes=request.max_line_bytes)
        self._decoder.parser.on_unparsed = self._unparsed  # a skipped line is still answered
        self._stdout_bytes = 0
        self._ready = anyio.Event()
        self._dead = anyio.Event()
        #: Set when the CLI ended a turn we ended first (a protocol fault).
        self._drained: anyio.Event | None = None
        # Unbounded: a line queued is an answer to a line the CLI wrote (or a
        # prompt, an interrupt), so the queue grows only as the CLI's own output
        # does; a bound dropped answers in a burst of questions, and the CLI
        # waited for them until the turn's wall limit.
        self._outbox_send, self._outbox = anyio.create_memory_object_stream[bytes](
            max_buffer_size=math.inf
        )
        #: Lines handed to the writer and not yet written; sealed: no more lines.
        self._queued, self._sealed = 0, False
        self._tg: anyio.abc.TaskGroup | None = None

    def _translator(self) -> Translator:
        """A translator of the protocol's, making its shares of the CLI's running totals."""
        translator = self.protocol.translator()
        translator.totals = self._context.totals
        return translator

    # -- state -------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self.exit is None and self.broken is None and not self._dead.is_set()

    @property
    def running(self) -> bool:
        """A turn is under way."""
        return self._turn is not None and not self._turn.done.is_set()

    # -- the process -------------------------------------------------------------

    async def _run(self, argv: list[str], env: dict[str, str], cwd: str) -> None:
        context = self._context

        def spawned(pid: int) -> None:
            self.pid = pid
            if context.on_spawn is not None:
                context.on_spawn(pid, argv)

        try:
            self.exit = await run_process(
                argv,
                cwd=cwd,
                env=env,
                stdin=self.stdin,
                config=self.supervisor,
                on_stdout=self._sink,
                on_stderr=self._stderr,
                marker=self.marker,
                on_spawn=spawned,
                stop_handle=self.stop,
                clocks=self.clocks,
            )
        finally:
            self._dead.set()
            self._ready.set()
            self._seal()
            turn = self._turn
            if turn is not None:
                how = "interrupted" if turn.interrupt_asked else "died"
                turn.end(how, death(self.backend.name, self.exit))

    def _sink(self, chunk: bytes) -> bool:
        turn = self._turn
        context = turn.context if turn is not None else None
        if chunk:
            self._stdout_bytes += len(chunk)
            if context is not None and context.on_stdout is not None:
                context.on_stdout(chunk)
            elif turn is None:
                session = self._context.on_stdout  # the session's own record
                if session is not None:
                    session(chunk)
                if self._unattended():
                    self.between.bytes(chunk)
        self._decoder.feed(chunk)
        if context is not None and context.on_decoded is not None:
            context.on_decoded()
        return False  # a live process has no terminal event: turns end by protocol

    def _stderr(self, chunk: bytes) -> None:
        turn = self._turn
        if turn is not None:
            turn.stderr_bytes += len(chunk)
            turn.stderr += chunk
            if len(turn.stderr) > 2 * STDERR_TAIL:
                del turn.stderr[:-STDERR_TAIL]

    async def _writer(self) -> None:
        try:
            async for data in self._outbox:
                try:
                    await self.stdin.write(data)
                except LiveStdinClosed:
                    return
                finally:
                    self._queued -= 1
        finally:
            self._outbox.close()

    def send(self, *objects: Outgoing) -> None:
        """Write ``objects`` on the CLI's stdin, in order (one line each): at
        once while nothing waits before them (an answer is not held up by a
        trip through the event loop), else queued for the writer."""
        turn = self._turn
        on_stdin = turn.context.on_stdin if turn is not None else self._context.on_stdin
        for obj in objects:
            data = orjson.dumps(obj) + b"\n"
            if on_stdin is not None:
                on_stdin(data)
            try:
                if not self._queued and not self._sealed:
                    data = data[self.stdin.write_nowait(data) :]
                if data:
                    self._outbox_send.send_nowait(data)
                    self._queued += 1
            except _UNSENT:
                log.warning("%s: stdin closed; a control message was dropped", self.backend.name)

    def _seal(self) -> None:
        """Nothing more goes to the CLI's stdin (what is queued still does)."""
        self._sealed = True
        self._outbox_send.close()

    # -- what the CLI says -------------------------------------------------------

    def _unattended(self) -> bool:
        """What the CLI says now is between turns (the opening done, no turn
        given up on and still draining): held for a turn of its own."""
        return self._ready.is_set() and self._drained is None and self.alive

    def received(self, obj: dict[str, Any], line: UnparsedLine | None = None) -> Sequence[Event]:
        """The meaning of one object from the CLI (called by the decoder), or
        of a ``line`` it could not parse (see :meth:`_unparsed`)."""
        try:
            items = self.protocol.receive(obj) if line is None else self.protocol.unparsed(line)
        except Exception as exc:  # noqa: BLE001 (a plug-in's protocol must not break the stream)
            items = (ProtocolFault(f"{self.protocol.name or self.backend.name}: {exc!r}"),)
        forward: Forward | None = None
        turn = self._turn
        if turn is not None and turn.done.is_set():
            turn = None  # ended (its task has yet to see it): what follows is not its
        held = self.between if turn is None and self._unattended() else None
        for item in items:
            if isinstance(item, Forward):
                forward = item
            elif isinstance(item, Ready):
                if item.session_id:
                    self.session_id = item.session_id
                self._ready.set()
            elif held is not None and isinstance(item, PermissionAsk | ToolCall | HookCall):
                if self.takes_cli_turns:
                    held.wait(item)  # for the turn the CLI starts (the session's)
                else:
                    self._refuse(item)
            elif held is not None and isinstance(item, TurnEnded):
                held.ended = item
            elif isinstance(item, PermissionAsk):
                if self._tg is not None:
                    self._tg.start_soon(self._approve, item, turn)
            elif isinstance(item, ToolCall):  # the caller's function, run off the decoder
                if self._tg is not None:
                    emit = None if item.reported or turn is None else self._decoder.emit
                    self._tg.start_soon(self.host_calls.answer, item, emit)
            elif isinstance(item, HookCall) and self._tg is not None:
                if turn is not None:
                    turn.running.add()
                self._tg.start_soon(self._hook, item, turn)
            elif isinstance(item, TurnEnded):
                if turn is not None:
                    self._turn_ended(turn, item)
                elif self._drained is not None:
                    self._drained.set()  # the CLI ended the turn we had given up on
            elif isinstance(item, Reply):
                self.send(*item.objects)
            elif isinstance(item, ProtocolFault):
                self._fault(item, turn)
            elif isinstance(item, Unknown):
                self.unknown += 1
        if forward is None:
            return ()
        translator = turn.translator if turn is not None else self._idle_translator
        events = translator.translate(obj if forward.obj is None else dict(forward.obj))
        if held is not None:
            held.said(events)  # the turn that takes them routes them
            return ()
        if turn is not None and events:
            for event in events:
                if isinstance(event, SessionEvent) and event.session_id:
                    self.session_id = event.session_id
        return events

    def _turn_ended(self, turn: Turn, item: TurnEnded) -> None:
        if turn.denied is not None:
            turn.end("denied", turn.denied)
        elif item.how == "interrupted" or turn.interrupt_asked:
            turn.end("interrupted", item.message or "")
        else:
            turn.end(item.how, item.message or "")

    def _fault(self, fault: ProtocolFault, turn: Turn | None) -> None:
        """A broken control message: it ends the running turn (a fatal one, the
        session); between turns a message that is not fatal is logged only."""
        name = self.protocol.name or self.backend.name
        message = f"{name} broke its control protocol: {fault.message}"
        log.warning("%s", message)
        if fault.fatal:
            if self.broken is None:
                self.broken = message
            self._ready.set()
        if turn is not None:
            turn.end("fault", message)
            if not fault.fatal:
                # The CLI may still be in that turn: the next one begins only
                # once the CLI has ended it (see _drain).
                self._drained = anyio.Event()

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
        (``trigger="cli"``: no prompt; it takes what the CLI said between turns)."""
        tally = RunTally(request.cwd, context.redactor)
        if context.on_tally is not None:
            context.on_tally(tally)
        self.turns += 1
        translator = self._translator()
        translator.message_usage = context.message_usage
        decoder = self._decoder
        turn = Turn(
            self.turns,
            request,
            context,
            tally,
            translator,
            run_id,
            time.monotonic(),
            self._stdout_bytes,
            decoder.lines,
            decoder.skipped,
            self.unknown,
        )
        decoder.retarget(
            tally,
            routes=context.routes,
            watch=EvidenceWatch(self.backend, self.stop, time.time() + request.timeout),
        )
        warnings = self.warnings if self.turns == 1 else ()
        await self._drain()
        if self.refusal is not None:
            return AttemptOutcome(
                request, request.timeout, tally, ProcessOutcome(), refusal=self.refusal
            )
        if not self.alive:
            turn.end("died", self.broken or death(self.backend.name, self.exit))
        else:
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
                and self.pid is not None
                and context is not self._context
            ):
                context.on_spawn(self.pid, self.argv)  # the turn starts on this process
            self.clocks.arm(
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
                    self.send(*self.protocol.begin_turn(request.prompt))
                await turn.done.wait()
            except BaseException:
                # A cancelled turn: the session's process tree is stopped.
                self.stop.stop(ErrorCode.CANCELLED, "the turn was cancelled")
                raise
            finally:
                self.clocks.disarm()
                self.host_calls.cancel()  # what the ended turn's tools still run
                decoder.emit([approval_event(*pair) for pair in turn.withdrawn])
                decoder.emit(turn.translator.flush())
                self._turn = None
                decoder.retarget(self._idle, routes=None, watch=None)
        if turn.running.count and self.alive and not turn.interrupt_asked:
            with anyio.CancelScope(shield=True):  # observed hooks the CLI did not wait for
                await turn.running.wait(longest(self.request.hooks, self.request.hook_timeout))
        if turn.ended is not None and turn.ended.how == "interrupted" and self.alive:
            # What the interrupted turn's tools left running; the CLI lives on.
            with anyio.CancelScope(shield=True):
                turn.strays = await self.clocks.stop_strays()
        if (turn.ended is not None and turn.ended.how == "died") or self.stop.requested:
            # The supervisor's account of the end (a stop asked for during the
            # turn, a budget's say, is this turn's answer even if it ended first).
            with anyio.move_on_after(2 * self.supervisor.grace + self.supervisor.kill_wait + 1):
                await self._dead.wait()
        unknown = self.unknown - turn.unknown_at_start
        if unknown:
            name = self.protocol.name or self.backend.name
            warnings = (*warnings, f"{unknown} message(s) of a type {name} does not know, ignored")
        return AttemptOutcome(
            request,
            request.timeout,
            tally,
            turn.process(self.pid, self._stdout_bytes, self.exit),
            lines=decoder.lines - turn.lines_at_start,
            skipped_lines=decoder.skipped - turn.skipped_at_start,
            warnings=(*warnings, *tally.number_warnings()),
            stop=self.stop,
            ended=turn.ended,
            approvals=tuple(turn.approvals),
            hooks=tuple(turn.hooks),
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
            with anyio.move_on_after(self.supervisor.grace):
                await drained.wait()
        self._drained = None
        if not drained.is_set() and self.alive:
            self.broken = f"{self.backend.name} did not end a turn it broke off; session closed"
            self.stop.stop(ErrorCode.CLI_ERROR, self.broken)
            with anyio.move_on_after(self.supervisor.grace + self.supervisor.kill_wait + 1):
                await self._dead.wait()

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

    # -- opening and closing -----------------------------------------------------

    async def open(self, tg: anyio.abc.TaskGroup, timeout: float) -> None:
        """Start the CLI in ``tg`` and do the opening handshake (bounded by
        ``timeout``); a CLI that cannot be started is kept in ``refusal``."""
        refusal = await self._start(tg, timeout)
        if refusal is not None:
            self.refusal = refusal
            self.broken = refusal.message
            self._seal()
            self._outbox.close()
            self._dead.set()

    async def _start(self, tg: anyio.abc.TaskGroup, timeout: float) -> Refusal | None:
        self._tg = tg
        request = self.request
        program = resolve_program(self.backend, request.cli_path, request.node_path)
        if isinstance(program, Refusal):
            return program
        spec = self.protocol.command(request)
        if spec.stdin is not None:
            return Refusal(
                Status.INTERNAL,
                ErrorCode.INTERNAL,
                f"{self.backend.name}: a live session's command must leave stdin to the session",
            )
        spec = open_overlay(spec, tag=self.marker, on_open=self._context.on_overlay)
        self.warnings = spec.warnings
        argv, env = launch(request, self.backend, program, spec, self._context, self.marker)
        self.argv = argv
        tg.start_soon(self._run, argv, env, request.cwd)
        tg.start_soon(self._writer)
        opening = self.protocol.opening(request)
        if opening:
            self.send(*opening)
            self.clocks.arm(timeout=timeout, idle_timeout=None, stall_timeout=None)
            try:
                await self._ready.wait()
            finally:
                self.clocks.disarm()
        return None

    async def close(self) -> None:
        """Close stdin (after the protocol's goodbye), give the CLI the grace
        period to exit by itself, then stop its tree."""
        if not self._dead.is_set():
            if self.alive:
                self.send(*self.protocol.closing())
            self._seal()
            with anyio.move_on_after(self.request.grace):
                await self._outbox_closed()
            self.stdin.close()
            with anyio.move_on_after(self.request.grace):
                await self._dead.wait()
            if not self._dead.is_set():
                self.stop.stop(ErrorCode.CANCELLED, "the session was closed")
                await self._dead.wait()

    async def _outbox_closed(self) -> None:
        while not self._dead.is_set():
            stats = self._outbox_send.statistics()
            if stats.current_buffer_used == 0:
                return
            await anyio.sleep(0.005)
