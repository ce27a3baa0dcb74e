"""The questions and calls a live CLI asks (``link.py``): the approver asked
about a tool call, the hooks of a hook point run, and what the CLI said and
asked between turns taken by the turn that follows (or refused at once when
nobody will take it).  A mixin of :class:`~coding_genesis._live.link.LiveLink`,
which holds the process, the protocol and the turns these act on."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from coding_genesis._live.approvals import settle, withdrawn_record
from coding_genesis._live.hooks import then_ask
from coding_genesis._live.hosttools import HostCalls
from coding_genesis._live.questions import LinkAsking
from coding_genesis._live.turn import Turn, Unattended
from coding_genesis.approval import Decision, Remembered
from coding_genesis.control import (
    ControlProtocol,
    HookCall,
    PermissionAsk,
    QuestionAsked,
    ToolCall,
    TurnEnded,
)
from coding_genesis.events import Event
from coding_genesis.hooks import HookEvent, HookInput, HookRecord, HookResult, run_hooks
from coding_genesis.questions import NO_ONE_ANSWERS
from coding_genesis.tools import ToolResult

if TYPE_CHECKING:
    from coding_genesis._live.process import LiveProcess
    from coding_genesis._pipeline.decode import Router
    from coding_genesis.backend import Backend
    from coding_genesis.request import Request

__all__ = ["LinkQuestions"]

log = logging.getLogger("coding_genesis._live.link")


class LinkQuestions(LinkAsking):
    """What a :class:`~coding_genesis._live.link.LiveLink` does with the
    questions and calls of its CLI (the link's own attributes, declared)."""

    backend: Backend
    protocol: ControlProtocol
    request: Request
    session_id: str | None
    remembered: Remembered
    host_calls: HostCalls
    _turn: Turn | None
    process: LiveProcess
    send: Callable[..., None]

    @property
    def alive(self) -> bool:
        raise NotImplementedError

    def _turn_ended(self, turn: Turn, item: TurnEnded) -> None:
        raise NotImplementedError

    def deliver(self, router: Router, events: Sequence[Event]) -> None:
        raise NotImplementedError

    def delivery(self, turn: Turn) -> Callable[[Sequence[Event]], None]:
        raise NotImplementedError

    def _refuse(self, item: PermissionAsk | ToolCall | HookCall | QuestionAsked) -> None:
        """What the CLI asks between turns with nobody to take a turn of its
        own (a one-shot run's process, its one turn over): refused at once,
        never decided behind the caller's back."""
        why = "no turn is running: coding-genesis refused this call"
        log.warning("%s asked %s between turns: refused", self.backend.name, type(item).__name__)
        if isinstance(item, PermissionAsk):
            self.send(*self.protocol.answer(item, Decision.deny(why)))
        elif isinstance(item, QuestionAsked):
            self.send(*self.protocol.answer_question(item, None, NO_ONE_ANSWERS))
        elif isinstance(item, ToolCall):
            self.send(*self.protocol.answer_tool(item, ToolResult(why, is_error=True)))
        else:
            self.send(*self.protocol.answer_hook(item, HookResult(block=True, message=why)))
            if item.ask is not None:
                self.send(*self.protocol.answer(item.ask, Decision.deny(why)))

    def _where(self, turn: Turn | None) -> dict[str, Any]:
        """What the session adds to an approval request or a hook input."""
        return {
            "cwd": self.request.cwd,
            "backend": self.backend.name,
            "run_id": turn.run_id if turn is not None else "",
            "turn": turn.number if turn is not None else 0,
        }

    async def _approve(self, ask: PermissionAsk, turn: Turn | None) -> None:
        request = dataclasses.replace(ask.request, session_id=self.session_id, **self._where(turn))
        with anyio.CancelScope() as scope:
            if turn is not None:
                if turn.done.is_set():
                    turn.approvals.append(withdrawn_record(request, "done"))
                    return
                turn.asking[scope] = request
            settled = await settle(
                request,
                self.request.approver,
                self.request.approval_timeout,
                self.request.permissions,
                self.remembered,
            )
        if turn is not None:
            turn.asking.pop(scope, None)
        if scope.cancel_called or not self.alive:
            return
        decision = settled.decision
        self.send(*self.protocol.answer(ask, decision))
        if turn is None or turn is not self._turn:
            return
        if decision.allowed and decision.input is not None and not self.protocol.changes_input:
            name = self.protocol.name or self.backend.name
            settled = dataclasses.replace(
                settled,
                record=dataclasses.replace(
                    settled.record,
                    not_applied=f"input: {name} cannot change a call's input; the call ran as asked",
                ),
            )
        turn.approvals.append(settled.record)
        self.deliver(turn.router, [settled.event(request)])
        if settled.ends_turn and turn.denied is None:
            turn.denied = settled.ends_turn

    async def _hook(self, call: HookCall, turn: Turn | None) -> None:
        """One hook point: its hooks run, the CLI answered, then any approver asked."""
        try:
            session_id = call.input.session_id or self.session_id
            data = dataclasses.replace(call.input, session_id=session_id, **self._where(turn))
            # a point the CLI waits at for nobody (no key) can only be observed
            effects = self.protocol.hook_effects.get(data.event, frozenset())
            ran = await run_hooks(
                self.request.hooks.get(data.event, ()),
                data,
                timeout=self.request.hook_timeout,
                effects=effects if call.key is not None else frozenset(),
                backend=self.backend.name,
            )
            if turn is not None:
                turn.hooks.extend(ran.records)
            if self.alive:
                self.send(*self.protocol.answer_hook(call, ran.result))
                ask = then_ask(call, ran.result)
                if ask is not None:
                    await self._approve(ask, turn)
        finally:
            if turn is not None:
                turn.running.done()

    async def observe(
        self, event: HookEvent, turn: Turn | None, number: int, **fields: Any
    ) -> tuple[HookRecord, ...]:
        """A point of :data:`~coding_genesis.hooks.LINK_POINTS` its CLI has none
        of its own: its hooks run as the session goes by it (observed: nothing
        they ask is applied), recorded ``via="observed"``.  ``number``: the
        turn it belongs to."""
        hooks = self.request.hooks.get(event, ())
        if not hooks or event in self.protocol.hook_effects:
            return ()  # none, or the CLI calls them itself
        where = {**self._where(turn), "turn": number}
        data = HookInput(event, session_id=self.session_id, **where, **fields)
        ran = await run_hooks(
            hooks,
            data,
            timeout=self.request.hook_timeout,
            effects=frozenset(),
            backend=self.backend.name,
            via="observed",
        )
        return ran.records

    def _adopt(self, turn: Turn, held: Unattended, *, ended: bool) -> None:
        """Make what the CLI did between turns ``turn``'s: its bytes to the
        transcript, its events down the turn's routes, its questions and calls
        asked and answered now; ``ended``: its own end of a turn ends this one
        (a turn the CLI started), else the prompt still goes (a user's turn
        that came first)."""
        context = turn.context
        if held.raw and context.on_stdout is not None:
            context.on_stdout(bytes(held.raw))
        if held.dropped:
            log.warning(
                "%s said more between turns than is held: %d byte(s) or event(s) not kept",
                self.backend.name,
                held.dropped,
            )
        self.deliver(turn.router, held.events)
        for item in held.waiting:
            if isinstance(item, PermissionAsk):
                self._tg_start(self._approve, item, turn)
            elif isinstance(item, QuestionAsked):
                self._tg_start(self._question, item, turn)
            elif isinstance(item, ToolCall):
                emit = None if item.reported else self.delivery(turn)
                self._tg_start(self.host_calls.answer, item, emit)
            else:
                turn.running.add()
                self._tg_start(self._hook, item, turn)
        if ended and held.ended is not None:
            self._turn_ended(turn, held.ended)

    def _tg_start(self, fn: Any, *args: Any) -> None:
        if self.process.tg is not None:
            self.process.tg.start_soon(fn, *args)
