"""The CLI's questions to the user (``asker=``): each asked of the caller's
asker within ``question_timeout``, the answer (or the words telling the model
nobody answered) written back through the protocol, the question recorded in
the turn (``RunResult.questions``) and published as a ``QuestionEvent``.  A
mixin of :class:`~coding_genesis._live.link.LiveLink`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from coding_genesis.control import ControlProtocol, QuestionAsked
from coding_genesis.events import Event
from coding_genesis.questions import ask
from coding_genesis.run_events import QuestionEvent

if TYPE_CHECKING:
    from coding_genesis._live.turn import Turn
    from coding_genesis._pipeline.decode import Router
    from coding_genesis.request import Request

__all__ = ["LinkAsking"]


class LinkAsking:
    """What a link does with a question of its CLI to the user."""

    protocol: ControlProtocol
    request: Request
    _turn: Turn | None
    send: Callable[..., None]

    @property
    def alive(self) -> bool:
        raise NotImplementedError

    def deliver(self, router: Router, events: Sequence[Event]) -> None:
        raise NotImplementedError

    async def _question(self, item: QuestionAsked, turn: Turn | None) -> None:
        question = item.question
        asked = await ask(self.request.asker, question, timeout=self.request.question_timeout)
        if not self.alive:
            return
        self.send(*self.protocol.answer_question(item, asked.answer, asked.refusal))
        if turn is None or turn is not self._turn:
            return
        record = asked.record(question)
        record["turn"] = turn.number
        turn.questions.append(record)
        extra = {k: record[k] for k in ("turn", "kind", "options", "answer", "elapsed_s", "error")}
        event = QuestionEvent(question.text, record["answered"], asked.source, extra)
        self.deliver(turn.router, [event])
