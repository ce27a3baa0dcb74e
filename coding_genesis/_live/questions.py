"""The CLI's questions to the user (``asker=``): each asked of the caller's
asker within ``question_timeout``, the answer (or the words telling the model
nobody answered) written back through the protocol, the question recorded in
the turn (``RunResult.questions``) and published as a ``QuestionEvent``.  The
answer to a secret question reaches the CLI, but the record of what was written
to it (a transcript's stdin) shows it masked.  A mixin of
:class:`~coding_genesis._live.link.LiveLink`."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import orjson

from coding_genesis._util.redact import MASK
from coding_genesis.control import ControlProtocol, Outgoing, QuestionAsked
from coding_genesis.events import Event
from coding_genesis.questions import ask
from coding_genesis.run_events import QuestionEvent

if TYPE_CHECKING:
    from coding_genesis._live.outbox import Outbox
    from coding_genesis._live.process import LiveProcess
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
    outbox: Outbox
    process: LiveProcess

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
        objects = self.protocol.answer_question(item, asked.answer, asked.refusal)
        if question.secret and asked.answer is not None and asked.answer.words():
            self._send_hiding(objects, asked.answer.words())
        else:
            self.send(*objects)
        if turn is None or turn is not self._turn:
            return
        record = asked.record(question)
        record["turn"] = turn.number
        turn.questions.append(record)
        extra = {k: record[k] for k in ("turn", "kind", "options", "answer", "elapsed_s", "error")}
        event = QuestionEvent(question.text, record["answered"], asked.source, extra)
        self.deliver(turn.router, [event])

    def _send_hiding(self, objects: Sequence[Outgoing], secret: str) -> None:
        """``objects`` written to the CLI as they are, recorded with ``secret``
        masked (verbatim and as JSON writes it)."""
        turn = self._turn
        on_stdin = turn.context.on_stdin if turn is not None else self.process.context.on_stdin
        if on_stdin is None:
            self.outbox.send(objects, None)
            return
        forms = sorted(
            {secret.encode(), json.dumps(secret)[1:-1].encode(), orjson.dumps(secret)[1:-1]},
            key=len,
            reverse=True,
        )
        record = on_stdin

        def masked(data: bytes) -> None:
            for form in forms:
                data = data.replace(form, MASK.encode())
            record(data)

        self.outbox.send(objects, masked)
