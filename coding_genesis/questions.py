"""Questions the CLI puts to the user, and the caller's answers (``asker=``).

A CLI in a live session may stop to ask the person at the keyboard: claude's
``AskUserQuestion`` tool and an MCP server's elicitation, codex's
``request_user_input`` tool and an MCP server's elicitation, an ACP agent's
``elicitation/create``.  Each reaches the caller's ``asker`` as one
:class:`UserQuestion` (a CLI asking several at once asks them one by one);
the asker answers a :class:`UserAnswer`, a plain string (the answer's text)
or None (declined), sync or async, within ``question_timeout`` seconds.

Without an asker, or when it raises or takes too long, the model is told so
(:data:`NO_ONE_ANSWERS`) and goes on by itself.  Every question, answered or
not, is recorded in the result's ``questions`` and published as a
``QuestionEvent``.  Only code can name an asker: a batch line never can.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

__all__ = ["DECLINED", "NO_ONE_ANSWERS", "Asked", "Asker", "UserAnswer", "UserQuestion", "ask"]

#: What the model reads when nobody answers its question (no asker, a
#: timeout, an asker that failed): it decides by itself and says so.
NO_ONE_ANSWERS = "no one can answer questions in this run; decide yourself and say what you assumed"
#: What the model reads when the user declined to answer.
DECLINED = "the user declined to answer; decide yourself and say what you assumed"
#: The longest error text kept of an asker that raised.
_ERROR_TEXT = 300

log = logging.getLogger("coding_genesis.questions")


@dataclass(frozen=True, slots=True)
class UserQuestion:
    """One question of the CLI to the user.

    ``text``: the question; ``header``: its short title, when the CLI gives
    one; ``options``: the answers offered (empty: free text); ``multiple``:
    several options may be chosen; ``secret``: the answer is a secret (not
    echoed; never recorded); ``kind``: where it comes from (``ask_user``: the
    model's own question tool; ``elicitation``: an MCP server's form);
    ``server``: the MCP server that asks (an elicitation); ``raw``: the CLI's
    own message."""

    text: str
    header: str | None = None
    options: tuple[str, ...] = ()
    multiple: bool = False
    secret: bool = False
    kind: str = "ask_user"
    server: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class UserAnswer:
    """The user's answer to a :class:`UserQuestion`: ``text`` (a free answer,
    or the chosen option), ``choices`` (the options chosen, when the question
    offered some), or ``declined`` (the user would not answer: the model is
    told so)."""

    text: str = ""
    choices: tuple[str, ...] = ()
    declined: bool = False

    @classmethod
    def of(cls, value: object) -> UserAnswer:
        """What an asker returned, as an answer: a :class:`UserAnswer` as is,
        a string its text, None a refusal; anything else is a ``TypeError``."""
        if isinstance(value, UserAnswer):
            return value
        if isinstance(value, str):
            return cls(text=value)
        if value is None:
            return cls(declined=True)
        raise TypeError(f"an asker answers a UserAnswer, a string or None, not {value!r}")

    def words(self) -> str:
        """The answer as one line of text (the chosen options joined)."""
        return ", ".join(self.choices) if self.choices else self.text


#: ``asker=``: called with each question, answers it (sync or async).
Asker: TypeAlias = Callable[
    [UserQuestion], "UserAnswer | str | Awaitable[UserAnswer | str | None] | None"
]


@dataclass(frozen=True, slots=True)
class Asked:
    """How one question went: the ``answer`` (None: nobody gave one),
    ``source`` (``asker``; ``timeout``, ``error``: it did not answer in time or
    raised; ``none``: there was no asker), ``elapsed_s``, ``error``."""

    answer: UserAnswer | None
    source: str
    elapsed_s: float = 0.0
    error: str | None = None

    @property
    def refusal(self) -> str | None:
        """What the model reads in place of an answer (None: it has one)."""
        if self.answer is None:
            return NO_ONE_ANSWERS
        return DECLINED if self.answer.declined else None

    def record(self, question: UserQuestion) -> dict[str, Any]:
        """The result's record of it (``RunResult.questions``): a secret
        question's answer is never kept."""
        answered = self.refusal is None
        words = self.answer.words() if answered and self.answer is not None else None
        return {
            "question": question.text,
            "kind": question.kind,
            "server": question.server,
            "options": list(question.options),
            "answered": answered,
            "answer": None if question.secret else words,
            "source": self.source,
            "elapsed_s": round(self.elapsed_s, 6),
            "error": self.error,
        }


async def ask(asker: Asker | None, question: UserQuestion, *, timeout: float) -> Asked:
    """Ask ``asker`` ``question`` within ``timeout`` seconds; never raises for
    the asker's doing (a raise, a wrong type or no answer in time is no answer,
    said in the result).  A sync asker runs inline: keep it quick, or make it
    async (a terminal's prompt is)."""
    import anyio  # lazy: only a live session asks; importing this module stays light

    if asker is None:
        return Asked(None, "none")
    started = anyio.current_time()
    value: object = None
    try:
        with anyio.CancelScope(deadline=started + timeout) as scope:
            value = asker(question)
            if isinstance(value, Awaitable):
                value = await value
        if scope.cancel_called:
            return Asked(None, "timeout", anyio.current_time() - started)
        return Asked(UserAnswer.of(value), "asker", anyio.current_time() - started)
    except Exception as exc:  # noqa: BLE001  (an asker's failure is no answer, kept in the result)
        error = f"{type(exc).__name__}: {exc}"[:_ERROR_TEXT]
        log.warning("the asker failed on a question: %s", error)
        return Asked(None, "error", anyio.current_time() - started, error)
