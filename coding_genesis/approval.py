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
import fnmatch
import itertools
import os
import re
import shlex
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from coding_genesis.errors import ConfigError

__all__ = [
    "ApprovalOption",
    "ApprovalRequest",
    "Approver",
    "Decided",
    "Decision",
    "DecisionSource",
    "ToolKind",
    "Verdict",
    "allow_tools",
    "chain",
    "decide",
    "deny_commands",
    "writes_under",
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
Verdict: TypeAlias = Decision | bool | None

#: An approver: a callable, sync or async, of one request.
Approver: TypeAlias = Callable[[ApprovalRequest], Verdict | Awaitable[Verdict]]


# -- the ready-made approvers ------------------------------------------------------


def allow_tools(*names: str) -> Approver:
    """Allow a request whose ``tool`` (the CLI's own name, case-sensitive:
    ``Bash``, ``commandExecution``) or ``kind`` (``command``, ``write``,
    ``read``) is one of ``names``; leave the others unsettled (None), for the
    next approver of a :func:`chain`."""
    wanted = frozenset(_texts("allow_tools", names))

    def approver(request: ApprovalRequest) -> Decision | None:
        for name in (request.tool, request.kind):
            if name in wanted:
                return Decision.allow(reason=f"allow_tools: {name} is allowed")
        return None

    return approver


def deny_commands(*patterns: str | re.Pattern[str]) -> Approver:
    """Deny a ``command`` request when the command, or any command in it,
    matches one of ``patterns``: a glob (:func:`fnmatch.fnmatchcase`, over the
    whole command: ``"rm -rf *"``) or a compiled regex (searched anywhere).

    The command is split on ``;``, ``&&``, ``||``, ``|``, ``&`` and newlines;
    ``$(...)``, ``<(...)``, backticks and ``bash -lc '...'`` are looked into;
    leading ``VAR=value`` assignments and wrappers (``sudo``, ``env``,
    ``nohup``, ``then``...) are tried with and without.  A convenience, not a
    security boundary: a command can be spelled in ways no pattern foresees
    (a script, an alias, ``eval``).  Other requests are left unsettled (None).
    """
    checks: list[tuple[str, re.Pattern[str] | None]] = []  # (the glob or regex text, the regex)
    for pattern in patterns:
        if isinstance(pattern, re.Pattern) and isinstance(pattern.pattern, str):
            checks.append((pattern.pattern, pattern))
        elif isinstance(pattern, str) and pattern:
            checks.append((pattern, None))
        else:
            raise ConfigError(
                f"deny_commands: a pattern is a glob or a compiled str regex, got {pattern!r}"
            )
    if not checks:
        raise ConfigError("deny_commands: give at least one pattern")

    def approver(request: ApprovalRequest) -> Decision | None:
        if request.kind != "command" or request.command is None:
            return None
        for part in _command_parts(request.command):
            for shown, regex in checks:
                if regex.search(part) if regex else fnmatch.fnmatchcase(part, shown):
                    return Decision.deny(
                        f"denied: the command matches {shown!r}, which is not allowed here",
                        reason=f"deny_commands: matches {shown!r}",
                    )
        return None

    return approver


def writes_under(*roots: str | os.PathLike[str]) -> Approver:
    """Allow a ``write`` request when every path it writes lies under one of
    ``roots``; deny it otherwise, naming the path (a write that names no path
    is denied: it cannot be checked).  Other requests are left unsettled (None).

    Paths and roots are resolved at each request with :func:`os.path.realpath`
    (symlinks and ``..`` followed; a path not yet created resolves through its
    nearest existing parent), relative ones against the request's ``cwd``: a
    symlink inside a root that points outside it is outside.

    A relative root therefore means "under each request's own working
    directory": ``writes_under(".")`` allows a request whose cwd is ``/srv/a``
    to write in ``/srv/a`` and one whose cwd is ``~`` to write in ``~``.  Where
    whoever makes the request also chooses its cwd (a batch file, a served
    request), give absolute roots: ``genesis`` makes ``--writes-under`` absolute
    against the shell's directory when it parses it.
    """
    texts = _texts("writes_under", tuple(_path_text(root) for root in roots))

    def approver(request: ApprovalRequest) -> Decision | None:
        if request.kind != "write":
            return None
        if not request.paths:
            return Decision.deny(
                "denied: this write names no path, so it cannot be checked",
                reason="writes_under: a write with no paths",
            )
        allowed = [r for r in (_resolved(root, request.cwd) for root in texts) if r is not None]
        for path in request.paths:
            where = _resolved(path, request.cwd)
            if where is None or not any(_inside(where, root) for root in allowed):
                shown = f"{path!r}" if where is None or where == path else f"{path!r} ({where})"
                return Decision.deny(
                    f"denied: writing {shown} is not allowed, only under {', '.join(allowed)}",
                    reason=f"writes_under: {path!r} is outside the allowed roots",
                )
        return Decision.allow(reason="writes_under: every path is under an allowed root")

    return approver


def chain(*approvers: Approver) -> Approver:
    """Ask each approver in turn (sync or async): the first answer that is not
    None wins; None when none settles.  Sync approvers are called inline, and a
    chain of sync approvers answers without awaiting."""
    for approver in approvers:
        if not callable(approver):
            raise ConfigError(f"chain: an approver is a callable, got {approver!r}")

    def ask(request: ApprovalRequest) -> Verdict | Awaitable[Verdict]:
        for index, approver in enumerate(approvers):
            verdict = approver(request)
            if isinstance(verdict, Awaitable):
                return _ask_rest(verdict, approvers[index + 1 :], request)
            if verdict is not None:
                return verdict
        return None

    return ask


async def _ask_rest(
    pending: Awaitable[Verdict], rest: tuple[Approver, ...], request: ApprovalRequest
) -> Verdict:
    """The rest of a chain, once one approver turned out to be async."""
    verdict = await _settled(pending)
    for approver in rest:
        if verdict is not None:
            break
        verdict = await _settled(approver(request))
    return verdict


async def _settled(value: Verdict | Awaitable[Verdict]) -> Verdict:
    if isinstance(value, Awaitable):
        answer: Verdict = await value
        return answer
    return value


# -- asking an approver ------------------------------------------------------------

#: Who settled a :class:`Decided`: the approver itself, or, when it did not
#: answer in time, raised, or settled nothing, the deny that stands in.
DecisionSource: TypeAlias = Literal["approver", "timeout", "error", "unsettled"]

_ERROR_TEXT = 1000


@dataclass(frozen=True, slots=True)
class Decided:
    """What :func:`decide` made of one approver's answer: the decision, who
    settled it, how long the approver took, and what it raised (``error``:
    type and message, for the result; the model is told only that it failed)."""

    decision: Decision
    source: DecisionSource
    elapsed_s: float
    error: str | None = None


async def decide(approver: Approver, request: ApprovalRequest, *, timeout: float) -> Decided:
    """Ask ``approver`` about ``request``; always a :class:`Decision`, never an exception.

    Sync approvers run inline (no thread: keep them quick), awaitables are
    awaited and cancelled at ``timeout`` seconds.  ``True``/``False`` become
    allow/deny; ``None`` (nothing settled it), a raise, an answer of another
    type, or no answer in time (a sync approver's late answer included: the
    CLI may have given up) become a deny saying why.
    """
    import anyio  # only a live session asks: `import coding_genesis.approval` stays light

    if not isinstance(timeout, int | float) or not timeout > 0:
        from coding_genesis.errors import InvalidTimeoutError  # the one error of a bad call

        raise InvalidTimeoutError(f"timeout must be a number > 0, got {timeout!r}")
    started = anyio.current_time()
    verdict: object = None
    try:
        with anyio.CancelScope(deadline=started + timeout) as scope:
            verdict = approver(request)
            if isinstance(verdict, Awaitable):
                verdict = await verdict
    except Exception as exc:  # noqa: BLE001  (whatever the approver raises is a deny, kept in the result)
        elapsed = anyio.current_time() - started
        if not scope.cancel_called:
            error = f"{type(exc).__name__}: {exc}"[:_ERROR_TEXT]
            decision = Decision.deny(
                "denied: the approver failed", reason=f"the approver raised {error}"
            )
            return Decided(decision, "error", elapsed, error)
        verdict = None
    elapsed = anyio.current_time() - started
    if scope.cancel_called or elapsed > timeout:
        decision = Decision.deny(
            f"denied: the approver gave no answer within {timeout:g}s",
            reason=f"approver timeout: no answer within {timeout:g}s",
        )
        return Decided(decision, "timeout", elapsed)
    if isinstance(verdict, Decision):
        return Decided(verdict, "approver", elapsed)
    if verdict is True:
        return Decided(Decision.allow(reason="allowed by the approver"), "approver", elapsed)
    if verdict is False:
        return Decided(Decision.deny(), "approver", elapsed)
    if verdict is None:
        what = f"{request.tool} ({request.kind})" if request.tool else request.kind
        decision = Decision.deny(f"denied: no approver settled this request: {what}")
        return Decided(decision, "unsettled", elapsed)
    error = f"the approver answered {type(verdict).__name__}, not a Decision, bool or None"
    return Decided(
        Decision.deny("denied: the approver failed", reason=error), "error", elapsed, error
    )


# -- helpers -----------------------------------------------------------------------


def _texts(who: str, values: tuple[object, ...]) -> tuple[str, ...]:
    if not values or not all(isinstance(v, str) and v for v in values):
        raise ConfigError(f"{who}: give one or more non-empty strings, got {values!r}")
    return values  # type: ignore[return-value]  # checked above


def _path_text(root: object) -> object:
    return os.fspath(root) if isinstance(root, str | os.PathLike) else root


def _resolved(path: str, cwd: str) -> str | None:
    """``path`` with symlinks and ``..`` resolved (against ``cwd`` when
    relative); None when it cannot be (relative with no cwd, a NUL byte)."""
    if not os.path.isabs(path):
        if not os.path.isabs(cwd):
            return None
        path = os.path.join(cwd, path)
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return None


def _inside(path: str, root: str) -> bool:
    return path == root or os.path.commonpath([path, root]) == root


#: Where one command ends and the next begins.
_SEPARATORS = re.compile(r"\|\||&&|[;|&\n]")
#: ``$(``, ``<(``, ``>(``: substitutions whose inside is a command of its own.
_OPENING = re.compile(r"[$<>]\(|`")
#: A shell's ``-c`` flag (``-c``, ``-lc``, ``-ec``): the next word is a command.
_SHELL_C = re.compile(r"-[a-zA-Z]*c[a-zA-Z]*")
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
#: Leading ``VAR=value`` assignments.
_ASSIGNMENTS = re.compile(r"""^(?:[A-Za-z_]\w*=(?:'[^']*'|"[^"]*"|\S*)\s+)+""")
#: Words that run the command after them.
_WRAPPERS = frozenset(
    {"sudo", "env", "nohup", "exec", "command", "builtin", "time", "nice", "xargs"}
    | {"if", "then", "else", "elif", "do", "while", "until", "!"}
)


def _command_parts(command: str) -> list[str]:
    """``command`` and every command in it, best effort (see :func:`deny_commands`)."""
    parts = [command]
    for piece in _simple_commands(command):
        for variant in _variants(piece):
            if variant not in parts:
                parts.append(variant)
    return parts


def _simple_commands(text: str, depth: int = 0) -> Iterator[str]:
    outer, inner = _substitutions(text)
    for raw in _SEPARATORS.split(outer):
        piece = raw.strip().lstrip("({").strip()
        for opening, closing in ("()", "{}"):
            while piece.endswith(closing) and piece.count(closing) > piece.count(opening):
                piece = piece[:-1].rstrip()
        if piece:
            yield piece
    if depth < 8:  # deeper nesting than any real command
        for found in inner:
            yield from _simple_commands(found, depth + 1)
        for script in _shell_scripts(outer):
            yield from _simple_commands(script, depth + 1)


def _shell_scripts(text: str) -> Iterator[str]:
    """The commands given to a shell with ``-c`` (codex runs ``/bin/bash -lc '...'``)."""
    try:
        words = shlex.split(text)
    except ValueError:  # unbalanced quotes: no script can be told apart
        return
    shell = False
    for word, after in itertools.pairwise(words):
        shell = shell or os.path.basename(word) in _SHELLS
        if shell and _SHELL_C.fullmatch(word):
            yield after


def _substitutions(text: str) -> tuple[str, list[str]]:
    """``text`` with each substitution replaced by ``$(...)``, and their insides."""
    outer: list[str] = []
    inner: list[str] = []
    at = 0
    while (match := _OPENING.search(text, at)) is not None:
        outer.append(text[at : match.start()])
        start = match.end()
        if match.group() == "`":
            end = text.find("`", start)
            end = len(text) if end < 0 else end
            close = end + 1
        else:
            level, end = 1, start
            while end < len(text) and level:
                level += {"(": 1, ")": -1}.get(text[end], 0)
                end += 1
            close, end = end, end - 1 if level == 0 else end
        inner.append(text[start:end])
        outer.append("$(...)")
        at = close
    outer.append(text[at:])
    return "".join(outer), inner


def _variants(piece: str) -> Iterator[str]:
    """``piece`` as written, then without its assignments and wrappers, one by one."""
    yield piece
    while True:
        bare = _ASSIGNMENTS.sub("", piece)
        if bare == piece:
            word, _, rest = piece.partition(" ")
            bare = rest.strip() if word in _WRAPPERS else piece
        if not bare or bare == piece:
            return
        yield bare
        piece = bare
