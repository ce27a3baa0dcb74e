"""Approval of each tool call: the request a CLI asks, the decision we answer.

``approver=`` (on the agent, a session or one ``run()``) is a callable, sync or
async, given an :class:`ApprovalRequest` and answering a :class:`Decision`
(``True``/``False`` are shorthands for allow and deny; ``None`` says "not mine
to settle", which lets :func:`chain` ask the next approver and, at the end of
the chain, denies with a reason).  The approver gets the tool's raw input;
events, transcripts and spans get it redacted.

The decision carries the four options Agent Client Protocol agents offer
(allow once, allow always for this session, reject once, reject always)
unchanged, so every protocol maps one value.

Ready-made approvers (:func:`allow_tools`, :func:`deny_commands`,
:func:`writes_under`) compose with :func:`chain`.  ``deny_commands`` is a
convenience, not a security boundary: a command can be spelled in ways no
pattern foresees.  ``writes_under`` resolves each path (symlinks and ``..``
followed, against the request's working directory) before it compares.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

__all__ = [
    "ApprovalOption",
    "ApprovalRequest",
    "Approver",
    "Decision",
    "ToolKind",
]


class ApprovalOption(enum.StrEnum):
    """The four answers an Agent Client Protocol permission request offers
    (its options' ``kind``)."""

    ALLOW_ONCE = "allow_once"
    ALLOW_ALWAYS = "allow_always"
    REJECT_ONCE = "reject_once"
    REJECT_ALWAYS = "reject_always"


#: What a tool does, as far as approval cares: run a command, write files, or else.
ToolKind: TypeAlias = Literal["command", "write", "read", "other"]


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """One tool call a CLI asks to make.

    ``tool`` is the CLI's own name of the tool (claude ``Write``, codex
    ``commandExecution``); ``kind`` says what it does; ``command`` is the shell
    command of a ``command`` tool, ``paths`` the files a ``write`` tool writes
    (as the CLI gave them; :func:`writes_under` resolves them against ``cwd``).
    ``input`` is the tool's raw input, unredacted: the approver alone sees it.
    """

    tool: str
    input: Mapping[str, Any]
    kind: ToolKind = "other"
    command: str | None = None
    paths: tuple[str, ...] = ()
    #: The CLI's own words on why it asks (None: it gave none).
    reason: str | None = None
    cwd: str = ""
    backend: str = ""
    run_id: str = ""
    #: The session's turn (1 for the first; 1 for a one-shot run).
    turn: int = 1
    session_id: str | None = None
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """An answer to an :class:`ApprovalRequest`: use :meth:`allow` or :meth:`deny`.

    ``input`` replaces the tool's input (an allow only, where the CLI lets it);
    ``message`` is what the model is told of a refusal; ``end_turn`` ends the
    turn with it (status 1, ``permission_denied``).  ``reason`` is kept in the
    result and transcripts (who decided, and why).
    """

    option: ApprovalOption
    input: Mapping[str, Any] | None = None
    message: str = ""
    end_turn: bool = False
    reason: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def allowed(self) -> bool:
        return self.option in (ApprovalOption.ALLOW_ONCE, ApprovalOption.ALLOW_ALWAYS)

    @property
    def always(self) -> bool:
        """For the rest of the session (the CLI may stop asking)."""
        return self.option in (ApprovalOption.ALLOW_ALWAYS, ApprovalOption.REJECT_ALWAYS)

    @classmethod
    def allow(
        cls, input: Mapping[str, Any] | None = None, *, always: bool = False, reason: str = ""
    ) -> Decision:
        """Let the call run (with ``input`` instead of the CLI's, if given)."""
        option = ApprovalOption.ALLOW_ALWAYS if always else ApprovalOption.ALLOW_ONCE
        return cls(option, input=dict(input) if input is not None else None, reason=reason)

    @classmethod
    def deny(
        cls,
        message: str = "denied by the approver",
        *,
        end_turn: bool = False,
        always: bool = False,
        reason: str = "",
    ) -> Decision:
        """Refuse the call; the model is told ``message``; ``end_turn`` ends the turn."""
        option = ApprovalOption.REJECT_ALWAYS if always else ApprovalOption.REJECT_ONCE
        return cls(option, message=message, end_turn=end_turn, reason=reason or message)


#: What an approver may answer: a decision, True (allow) / False (deny), or
#: None (not settled here: the next approver of a chain, else denied).
Verdict: TypeAlias = "Decision | bool | None"

#: An approver: a callable, sync or async, of one request.
Approver: TypeAlias = Callable[[ApprovalRequest], "Verdict | Awaitable[Verdict]"]
