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
import os
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from coding_genesis._util.shellwords import command_parts
from coding_genesis.errors import ConfigError

__all__ = [
    "AlwaysScope",
    "ApprovalOption",
    "ApprovalRecord",
    "ApprovalRequest",
    "Approver",
    "Decided",
    "Decision",
    "DecisionSource",
    "Remembered",
    "ToolKind",
    "Verdict",
    "allow_tools",
    "always_covers",
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
#: What an "always" answer covers (see :class:`Decision`).
AlwaysScope: TypeAlias = Literal["exact", "tool"]


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """One tool call a CLI asks to make.

    ``tool`` is the CLI's own name of the tool (claude ``Write``, codex
    ``commandExecution``); ``kind`` says what it does; ``command`` is the shell
    command of a ``command`` tool, ``paths`` every file a ``write`` tool
    touches (as the CLI gave them; :func:`writes_under` resolves them against
    ``cwd``): the files it adds, changes or deletes, and both ends of a move,
    which ``moves`` also gives as ``(source, destination)`` pairs.
    ``input`` is the tool's raw input, unredacted: the approver alone sees it.

    ``unreadable`` says why the backend could not read the call whole (a
    shape it does not know: a change of an unknown kind, a path that is not a
    string): what it touches is not known, so such a request is denied before
    any approver is asked (the result's record says why).
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
    #: The files a write moves (renames), as (source, destination); both are in ``paths``.
    moves: tuple[tuple[str, str], ...] = ()
    #: Why the call could not be read whole (None: it was): denied unasked.
    unreadable: str | None = None


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
    #: What an "always" answer covers: ``exact`` (this exact command, a
    #: write of exactly these paths: see :func:`always_covers`) or ``tool``
    #: (every call of this tool: a wider answer, given only when chosen).
    scope: AlwaysScope = "exact"

    @property
    def allowed(self) -> bool:
        return self.option in (ApprovalOption.ALLOW_ONCE, ApprovalOption.ALLOW_ALWAYS)

    @property
    def always(self) -> bool:
        """For the rest of the session (the CLI may stop asking)."""
        return self.option in (ApprovalOption.ALLOW_ALWAYS, ApprovalOption.REJECT_ALWAYS)

    @classmethod
    def allow(
        cls,
        input: Mapping[str, Any] | None = None,
        *,
        always: bool | AlwaysScope = False,
        reason: str = "",
    ) -> Decision:
        """Let the call run (with ``input`` instead of the CLI's, if given);
        ``always``: for the rest of the session too (``True`` or ``"exact"``:
        as narrowly as asked; ``"tool"``: every call of this tool)."""
        option = ApprovalOption.ALLOW_ALWAYS if always else ApprovalOption.ALLOW_ONCE
        given = dict(input) if input is not None else None
        return cls(option, input=given, reason=reason, scope=_scope(always))

    @classmethod
    def deny(
        cls,
        message: str = "denied by the approver",
        *,
        end_turn: bool = False,
        always: bool | AlwaysScope = False,
        reason: str = "",
    ) -> Decision:
        """Refuse the call; the model is told ``message``; ``end_turn`` ends the
        turn; ``always`` as for :meth:`allow`."""
        option = ApprovalOption.REJECT_ALWAYS if always else ApprovalOption.REJECT_ONCE
        return cls(
            option,
            message=message,
            end_turn=end_turn,
            reason=reason or message,
            scope=_scope(always),
        )


def _scope(always: bool | str) -> AlwaysScope:
    if always in (False, True, "exact"):
        return "exact"
    if always == "tool":
        return "tool"
    raise ConfigError(f'always must be a bool, "exact" or "tool", got {always!r}')


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
        for part in command_parts(request.command):
            for shown, regex in checks:
                if regex.search(part) if regex else fnmatch.fnmatchcase(part, shown):
                    return Decision.deny(
                        f"denied: the command matches {shown!r}, which is not allowed here",
                        reason=f"deny_commands: matches {shown!r}",
                    )
        return None

    return approver


def writes_under(*roots: str | os.PathLike[str]) -> Approver:
    """Allow a ``write`` request when every path it touches (both ends of a
    move included) lies under one of ``roots``; deny it otherwise, naming the
    path (a write that names no path is denied: it cannot be checked).  Other
    requests are left unsettled (None): a shell command's own writes (``>``,
    ``tee``, ``sed -i``) are a ``command`` request, which this never sees.

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


def always_covers(request: ApprovalRequest, scope: AlwaysScope = "exact") -> str | None:
    """What an "always" answer to ``request`` settles for the rest of the
    session, in words; None: nothing more (this kind is not remembered, and
    "always" settles this one call only).

    "Always" is as narrow as what was asked, on every backend: a command
    covers that exact command string of that tool; a write covers exactly
    the paths it names, resolved (symlinks and ``..``, against ``cwd``) when
    it was asked, for that tool.  A later call that needs anything more is
    asked again.  A session keeps the answers (see ``coding_genesis.session``)
    and records each call they settle with ``source: "always"``.  ``scope``
    ``"tool"`` (a wider answer, given only when chosen): every call of the tool.
    """
    if scope == "tool":
        return f"every {request.tool} call"
    if request.unreadable is not None:
        return None
    if request.kind == "command" and request.command:
        return f"this exact {request.tool} command"
    if request.kind == "write" and request.paths:
        resolved = [_resolved(path, request.cwd) for path in request.paths]
        if all(resolved):
            return f"{request.tool} writing exactly {', '.join(request.paths)}"
    return None


_ERROR_TEXT = 1000


@dataclass(frozen=True, slots=True)
class ApprovalRecord:
    """What a run keeps of one settled (or withdrawn) tool call: the entries of
    ``RunResult.approvals`` and the ``approval`` event's fields.

    ``source`` says who settled it (the approver, a timeout, an error, an
    "always" answer, the permission level, an unreadable call, or
    ``withdrawn``: the turn ended first).  ``error`` (what the approver
    raised), ``always`` (what an "always" answer settles from now on),
    ``not_applied`` (a changed input the CLI cannot take) and ``withdrawn``
    appear in :meth:`to_dict` only when set.
    """

    tool: str
    kind: str
    tool_call_id: str | None
    turn: int
    allowed: bool
    decision: str
    source: str
    reason: str | None
    message: str | None
    elapsed_s: float | None
    error: str | None = None
    always: str | None = None
    not_applied: str | None = None
    withdrawn: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The record as results, events and transcripts carry it (the same keys,
        in the same order, as ever)."""
        record: dict[str, Any] = {
            "tool": self.tool,
            "kind": self.kind,
            "tool_call_id": self.tool_call_id,
            "turn": self.turn,
            "allowed": self.allowed,
            "decision": self.decision,
            "source": self.source,
        }
        if self.withdrawn:
            record["withdrawn"] = True
        record["reason"] = self.reason
        record["message"] = self.message
        record["elapsed_s"] = self.elapsed_s
        if self.error is not None:
            record["error"] = self.error
        if self.always is not None:
            record["always"] = self.always
        if self.not_applied is not None:
            record["not_applied"] = self.not_applied
        return record


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
        from coding_genesis.errors import InvalidTimeoutError  # lazy: only a bad call

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


class Remembered:
    """The "always" answers of one session, as narrow as what was asked (see
    :func:`always_covers`): one store for every backend, so a repeat is
    settled (and recorded) the same way whatever the CLI's own protocol
    offers.  A deny covering any path of a write refuses it; an allow settles
    a write only when it covers every path."""

    __slots__ = ("_commands", "_paths", "_tools")

    def __init__(self) -> None:
        #: tool -> the answer for every call of it (chosen as such).
        self._tools: dict[str, Decision] = {}
        #: (tool, exact command) -> the answer.
        self._commands: dict[tuple[str, str], Decision] = {}
        #: (tool, resolved path) -> the answer.
        self._paths: dict[tuple[str, str], Decision] = {}

    def recall(self, request: ApprovalRequest) -> Decision | None:
        """The remembered answer that settles ``request`` (None: ask)."""
        if request.unreadable is not None:
            return None  # what it would do is not known: nothing settles it
        tool_wide = self._tools.get(request.tool)
        if tool_wide is not None:
            return tool_wide
        if request.kind == "command" and request.command:
            return self._commands.get((request.tool, request.command))
        if request.kind != "write" or not request.paths or not self._paths:
            return None
        found = [self._paths.get((request.tool, path)) for path in _resolved_all(request)]
        for decision in found:
            if decision is not None and not decision.allowed:
                return decision
        if found and all(decision is not None for decision in found):
            return found[0]
        return None

    def keep(self, request: ApprovalRequest, decision: Decision) -> str | None:
        """Remember ``decision`` if it is an "always" answer of a kind that is
        remembered; what it covers, in words (None: nothing kept)."""
        if not decision.always:
            return None
        covers = always_covers(request, decision.scope)
        if covers is None:
            return None
        # What answers a later call: no input of this call's, and the turn goes on.
        kept = Decision(
            decision.option, message=decision.message, reason=decision.reason, scope=decision.scope
        )
        if decision.scope == "tool":
            self._tools[request.tool] = kept
        elif request.kind == "command" and request.command:
            self._commands[(request.tool, request.command)] = kept
        else:
            for path in _resolved_all(request):
                self._paths[(request.tool, path)] = kept
        return covers

    def __len__(self) -> int:
        return len(self._tools) + len(self._commands) + len(self._paths)


# -- helpers -----------------------------------------------------------------------


def _resolved_all(request: ApprovalRequest) -> list[str]:
    """Every path of a write request, resolved; a path that cannot be is
    kept as given (it then matches nothing remembered)."""
    return [_resolved(path, request.cwd) or f"\0{path}" for path in request.paths]


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
