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

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

__all__ = ["NO_ONE_ANSWERS", "Asker", "UserAnswer", "UserQuestion"]

#: What the model reads when nobody answers its question (no asker, a
#: timeout, an asker that failed): it decides by itself and says so.
NO_ONE_ANSWERS = "no one can answer questions in this run; decide yourself and say what you assumed"


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
