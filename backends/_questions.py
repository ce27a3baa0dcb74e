"""The questions of one CLI request gathered until each is answered: a CLI may
ask several at once (claude's ``AskUserQuestion``, codex's
``request_user_input``), the session asks each of them on its own
(:class:`~coding_genesis.control.QuestionAsked`), and the CLI gets one answer
once all are in.  An MCP server's elicitation (a message and a form to fill)
is one question too: its answer fills a form of one field; a larger form is
declined (words cannot fill it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from coding_genesis.control import QuestionAsked
from coding_genesis.questions import UserAnswer, UserQuestion

__all__ = [
    "Elicited",
    "Gathered",
    "Gathering",
    "answer_of",
    "elicitation_question",
    "elicitation_result",
    "labelled_question",
]


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


def labelled_question(raw: object) -> UserQuestion | None:
    """A question as claude's ``AskUserQuestion`` and codex's
    ``request_user_input`` both write one (``question``, ``header``,
    ``options: [{label, description}]``; claude's ``multiSelect``, codex's
    ``isSecret``); None when it has no question text."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("question"), str):
        return None
    options = raw.get("options")
    labels = tuple(
        str(o["label"])
        for o in (options if isinstance(options, list) else ())
        if isinstance(o, Mapping) and isinstance(o.get("label"), str)
    )
    header = raw.get("header")
    return UserQuestion(
        raw["question"],
        header=header if isinstance(header, str) else None,
        options=labels,
        multiple=raw.get("multiSelect") is True,
        secret=raw.get("isSecret") is True,
        raw=dict(raw),
    )


@dataclass(frozen=True, slots=True)
class Elicited:
    """What is kept of an MCP server's elicitation while its question is
    asked: the form it asks to be filled (``requestedSchema``)."""

    schema: Any


def elicitation_question(message: object, server: object, schema: object) -> UserQuestion:
    """An MCP server's elicitation (a message and a form) as one question: a
    form of one field of choices offers them."""
    options: tuple[str, ...] = ()
    field = _one_field(schema)
    if field is not None:
        enum = field[1].get("enum")
        if isinstance(enum, list) and all(isinstance(v, str) for v in enum):
            options = tuple(enum)
        elif field[1].get("type") == "boolean":
            options = ("yes", "no")
    return UserQuestion(
        message if isinstance(message, str) else "(the MCP server asks for input)",
        options=options,
        kind="elicitation",
        server=server if isinstance(server, str) else None,
        raw={"requestedSchema": schema},
    )


def elicitation_result(gathered: Gathered) -> dict[str, Any]:
    """The answer to an elicitation: ``accept`` with the answer as its form's
    one field (a form of one field alone is filled from words), else
    ``decline`` (nobody answered, or a form words cannot fill)."""
    if not gathered.answers:
        return {"action": "decline"}
    words = gathered.answers[0]
    field = _one_field(gathered.payload.schema)
    if field is None:
        return {"action": "decline"}
    name, spec = field
    kind = spec.get("type")
    value: Any = words
    if kind == "boolean":
        value = words.strip().lower() in ("yes", "y", "true", "1")
    elif kind in ("number", "integer"):
        try:
            value = int(words) if kind == "integer" else float(words)
        except ValueError:
            return {"action": "decline"}
    return {"action": "accept", "content": {name: value}}


def answer_of(gathered: Gathered, others: Callable[[Gathered], dict[str, Any]]) -> dict[str, Any]:
    """What the CLI is answered for ``gathered``: an elicitation's action, or
    ``others`` (the protocol's answer to its own questions)."""
    if isinstance(gathered.payload, Elicited):
        return elicitation_result(gathered)
    return others(gathered)


def _one_field(schema: object) -> tuple[str, dict[str, Any]] | None:
    """The one field of a form (None: none, or more than one)."""
    if not isinstance(schema, dict):
        return None
    properties = schema.get("properties")
    if not isinstance(properties, dict) or len(properties) != 1:
        return None
    ((name, spec),) = properties.items()
    return (name, spec) if isinstance(name, str) and isinstance(spec, dict) else None
