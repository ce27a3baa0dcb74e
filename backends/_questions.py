"""The questions of one CLI request gathered until each is answered: a CLI may
ask several at once (claude's ``AskUserQuestion``, codex's
``request_user_input``), the session asks each of them on its own
(:class:`~coding_genesis.control.QuestionAsked`), and the CLI gets one answer
once all are in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from coding_genesis.control import QuestionAsked
from coding_genesis.questions import UserAnswer, UserQuestion

__all__ = ["Gathered", "Gathering"]


@dataclass
class Gathered:
    """One request's questions, answered or refused: ``call`` the request's
    handle, ``payload`` what the protocol kept of it, ``answers`` by index
    (their words), ``refusals`` by index (what the model reads instead)."""

    call: Any
    payload: Any
    questions: tuple[UserQuestion, ...]
    answers: dict[int, str] = field(default_factory=dict)
    refusals: dict[int, str] = field(default_factory=dict)

    def words(self, index: int) -> str:
        """The answer to question ``index``, or what the model reads instead."""
        if index in self.answers:
            return self.answers[index]
        return f"(no answer: {self.refusals.get(index, '')})"


class Gathering:
    """The requests whose questions are still being answered."""

    def __init__(self) -> None:
        self._open: dict[Any, Gathered] = {}

    def open(
        self, call: Any, questions: Sequence[UserQuestion], payload: Any = None
    ) -> tuple[QuestionAsked, ...]:
        self._open[call] = Gathered(call, payload, tuple(questions))
        return tuple(QuestionAsked((call, i), q) for i, q in enumerate(questions))

    def answered(
        self, key: tuple[Any, int], answer: UserAnswer | None, refusal: str | None
    ) -> Gathered | None:
        """One question answered; the request, once all of it is."""
        call, index = key
        pending = self._open.get(call)
        if pending is None or index in pending.answers or index in pending.refusals:
            return None
        if refusal is None and answer is not None:
            pending.answers[index] = answer.words()
        else:
            pending.refusals[index] = refusal or ""
        if len(pending.answers) + len(pending.refusals) < len(pending.questions):
            return None
        return self._open.pop(call)
