"""What each message of a live CLI means to its link: one handler per kind the
control protocol reports (:data:`~coding_genesis.control.Incoming`), looked up
by type.  Each takes the item, the turn it belongs to (None: between turns) and
``held``: the between-turn holder when the CLI speaks between turns, where a
question is kept for the turn the CLI starts or refused at once.  A mixin of
:class:`~coding_genesis._live.link.LiveLink` (the link's attributes, declared)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio

from coding_genesis._live.asks import LinkQuestions
from coding_genesis._live.turn import Turn, Unattended
from coding_genesis.control import (
    HookCall,
    PermissionAsk,
    ProtocolFault,
    Ready,
    Reply,
    ToolCall,
    TurnEnded,
    Unknown,
)

__all__ = ["Handler", "LinkDispatch"]

log = logging.getLogger("coding_genesis._live.link")

#: One kind's handler: (the item, its turn or None, the between-turn holder or None).
Handler = Callable[[Any, "Turn | None", "Unattended | None"], None]


class LinkDispatch(LinkQuestions):
    """The link's handler of each kind of message (the link's attributes, declared)."""

    takes_cli_turns: bool
    unknown: int
    _drained: anyio.Event | None

    def dispatch_table(self) -> dict[type, Handler]:
        """Each kind of message and its handler (bound: built once per link)."""
        return {
            Ready: self._on_ready,
            PermissionAsk: self._on_ask,
            ToolCall: self._on_tool_call,
            HookCall: self._on_hook_call,
            TurnEnded: self._on_turn_ended,
            Reply: self._on_reply,
            ProtocolFault: self._on_fault,
            Unknown: self._on_unknown,
        }

    def _on_ready(self, item: Ready, turn: Turn | None, held: Unattended | None) -> None:
        if item.session_id:
            self.session_id = item.session_id
        self.process.ready.set()

    def _hold(self, item: PermissionAsk | ToolCall | HookCall, held: Unattended) -> None:
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
