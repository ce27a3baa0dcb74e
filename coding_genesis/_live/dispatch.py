"""What each object a live CLI writes means to its link, on one path called
by nothing but the link's parser: the control protocol reads it, each kind of
message it reports (:data:`~coding_genesis.control.Incoming`) goes to its
handler, looked up by type, and what it forwards is translated by the running
turn's translator and delivered to the turn's router (or held between turns).
Each handler takes the item, the turn it belongs to (None: between turns) and
``held``: the between-turn holder when the CLI speaks between turns, where a
question is kept for the turn the CLI starts or refused at once.  A mixin of
:class:`~coding_genesis._live.link.LiveLink` (the link's attributes, declared)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from coding_genesis._live.asks import LinkQuestions
from coding_genesis._live.calls import PendingCalls
from coding_genesis._live.turn import Turn, Unattended
from coding_genesis._pipeline.decode import Router, skip_failed_line
from coding_genesis._util.parser import JsonLinesParser, bound_depth, edge_fields
from coding_genesis.control import (
    Answered,
    Forward,
    HookCall,
    PermissionAsk,
    ProtocolFault,
    QuestionAsked,
    Ready,
    Reply,
    ToolCall,
    TurnBegan,
    TurnEnded,
    Unknown,
    UnparsedLine,
)
from coding_genesis.events import Event, SessionEvent, Translator

__all__ = ["Handler", "LinkDispatch"]

log = logging.getLogger("coding_genesis._live.link")

#: One kind's handler: (the item, its turn or None, the between-turn holder or None).
Handler = Callable[[Any, "Turn | None", "Unattended | None"], None]


class LinkDispatch(LinkQuestions):
    """The link's path for each object of its CLI, and the handler of each kind
    of message (the link's attributes, declared)."""

    takes_cli_turns: bool
    unknown: int
    between: Unattended
    parser: JsonLinesParser
    router: Router
    _errors: int
    _idle_translator: Translator
    _dispatch: dict[type, Handler]
    _drained: anyio.Event | None
    calls: PendingCalls

    def _unattended(self) -> bool:
        """What the CLI says now is between turns (the opening done, no turn
        given up on and still draining): held for a turn of its own."""
        return self.process.ready.is_set() and self._drained is None and self.alive

    def _object(self, obj: dict[str, Any]) -> None:
        """One object from the CLI (called by the parser); a failure to
        translate or route it skips that line, never the stream."""
        try:
            self.received(obj)
        except Exception:  # noqa: BLE001  (counted as a skipped line)
            self._errors = skip_failed_line(self.parser, self._errors)

    def _unparsed(self, head: bytes, tail: bytes, whole: bool) -> None:
        """A line the parser skipped, by its head and tail: the protocol answers what it
        can of it (a request it cannot read is refused, never left waiting)."""
        try:
            self.received({}, UnparsedLine(edge_fields(head, tail), whole))
        except Exception:  # the line is counted as skipped already
            log.exception("%s: a skipped line could not be answered", self.backend.name)

    def deliver(self, router: Router, events: Sequence[Event]) -> None:
        """Events not from a line (an approval decided, a host tool's call, what
        a turn held back) down ``router``'s routes; a failure skips them as a line."""
        if events:
            try:
                router.deliver(events)
            except Exception:  # noqa: BLE001  (counted as a skipped line)
                self._errors = skip_failed_line(self.parser, self._errors)

    def delivery(self, turn: Turn) -> Callable[[Sequence[Event]], None]:
        """Delivery of events to ``turn``'s router (for a task that makes them)."""
        router = turn.router
        return lambda events: self.deliver(router, events)

    def received(self, obj: dict[str, Any], line: UnparsedLine | None = None) -> None:
        """One object from the CLI, or a ``line`` it could not parse: each
        message the protocol reports handled, what it forwards translated and
        delivered (or held between turns)."""
        try:
            items = self.protocol.receive(obj) if line is None else self.protocol.unparsed(line)
        except Exception as exc:  # noqa: BLE001 (a plug-in's protocol must not break the stream)
            items = (ProtocolFault(f"{self.protocol.name or self.backend.name}: {exc!r}"),)
        forward: Forward | None = None
        turn = self._turn
        if turn is not None and turn.done.is_set():
            turn = None  # ended (its task has yet to see it): what follows is not its
        held = self.between if turn is None and self._unattended() else None
        dispatch = self._dispatch
        for item in items:
            if isinstance(item, Forward):
                forward = item
                continue
            handle = dispatch.get(type(item))
            if handle is None:  # a subclass of a kind (a plug-in's protocol)
                handle = next((dispatch[k] for k in type(item).__mro__ if k in dispatch), None)
            if handle is not None:
                handle(item, turn, held)
        if forward is None:
            return
        translator = turn.translator if turn is not None else self._idle_translator
        said = obj if forward.obj is None else dict(forward.obj)
        try:
            events = translator.translate(said)
        except RecursionError:
            # A translator that walked a hostile nesting: once more, bounded.
            events = translator.translate(bound_depth(said))
        if held is not None:
            held.said(events)  # the turn that takes them routes them
            return
        if not events:
            return
        if turn is not None:
            for event in events:
                if isinstance(event, SessionEvent) and event.session_id:
                    self.session_id = event.session_id
        self.router.deliver(events)

    def dispatch_table(self) -> dict[type, Handler]:
        """Each kind of message and its handler (bound: built once per link)."""
        return {
            Ready: self._on_ready,
            PermissionAsk: self._on_ask,
            ToolCall: self._on_tool_call,
            HookCall: self._on_hook_call,
            TurnBegan: self._on_turn_began,
            TurnEnded: self._on_turn_ended,
            Reply: self._on_reply,
            ProtocolFault: self._on_fault,
            Unknown: self._on_unknown,
            Answered: self._on_answered,
            QuestionAsked: self._on_question,
        }

    def _on_ready(self, item: Ready, turn: Turn | None, held: Unattended | None) -> None:
        if item.session_id:
            self.session_id = item.session_id
        self.process.ready.set()

    def _hold(
        self, item: PermissionAsk | ToolCall | HookCall | QuestionAsked, held: Unattended
    ) -> None:
        """A question between turns: kept for the turn the CLI starts (the
        session's), or refused at once (a one-shot run's link)."""
        if self.takes_cli_turns:
            held.wait(item)
        else:
            self._refuse(item)

    def _on_ask(self, item: PermissionAsk, turn: Turn | None, held: Unattended | None) -> None:
        if held is not None:
            self._hold(item, held)
        elif self.process.tg is not None:
            self.process.tg.start_soon(self._approve, item, turn)

    def _on_question(self, item: QuestionAsked, turn: Turn | None, held: Unattended | None) -> None:
        if held is not None:
            self._hold(item, held)
        elif self.process.tg is not None:
            self.process.tg.start_soon(self._question, item, turn)

    def _on_tool_call(self, item: ToolCall, turn: Turn | None, held: Unattended | None) -> None:
        if held is not None:
            self._hold(item, held)
        elif self.process.tg is not None:  # the caller's function, run off the decoder
            emit = None if item.reported or turn is None else self.delivery(turn)
            self.process.tg.start_soon(self.host_calls.answer, item, emit)

    def _on_hook_call(self, item: HookCall, turn: Turn | None, held: Unattended | None) -> None:
        if held is not None:
            self._hold(item, held)
        elif self.process.tg is not None:
            if turn is not None:
                turn.running.add()
            self.process.tg.start_soon(self._hook, item, turn)

    def _on_turn_began(self, item: TurnBegan, turn: Turn | None, held: Unattended | None) -> None:
        if held is not None:
            held.began()  # the session's turn of the CLI's starts now, a send() waits for it

    def _on_turn_ended(self, item: TurnEnded, turn: Turn | None, held: Unattended | None) -> None:
        if held is not None:
            held.ended = item
        elif turn is not None:
            self._turn_ended(turn, item)
        elif self._drained is not None:
            self._drained.set()  # the CLI ended the turn we had given up on

    def _on_reply(self, item: Reply, turn: Turn | None, held: Unattended | None) -> None:
        self.send(*item.objects)

    def _on_fault(self, item: ProtocolFault, turn: Turn | None, held: Unattended | None) -> None:
        self._fault(item, turn)

    def _on_unknown(self, item: Unknown, turn: Turn | None, held: Unattended | None) -> None:
        self.unknown += 1

    def _on_answered(self, item: Answered, turn: Turn | None, held: Unattended | None) -> None:
        if not self.calls.answered(item):
            log.info("%s answered a call nobody waits for", self.backend.name)

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
            if self.process.broken is None:
                self.process.break_off(message)
            self.process.ready.set()
        if turn is not None:
            turn.end("fault", message)
            if not fault.fatal:
                # The CLI may still be in that turn: the next one begins only
                # once the CLI has ended it (see _drain).
                self._drained = anyio.Event()
