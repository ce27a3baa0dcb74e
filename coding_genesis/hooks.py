"""Hooks: code of yours that runs at points of a CLI's turn, through the CLI's
own mechanism where it has one.

``hooks=`` (on the agent, a session or one ``run()``) maps a
:data:`HookEvent` to a hook or a list of hooks.  A hook is a callable, sync or
async, given a :class:`HookInput` and answering a :class:`HookResult` (or
None: go on unchanged).  Each backend's protocol says what a hook of each event
can do there (:attr:`ControlProtocol.hook_effects
<coding_genesis.control.ControlProtocol.hook_effects>`): block, change the
tool's input, add context for the model.  Where the CLI cannot do what a hook
asks (codex reports its items but never waits for us), the hook observes and
the result records what was not applied, never silently.

A hook of ``pre_tool`` or ``post_tool`` may name the tools it is for
(:func:`matching`, claude's matcher semantics over the tool's name); it is
skipped for the others (on claude the CLI is not even asked to call us).

The hooks of one event run in order: each sees the input the previous one
changed; the first block ends the list.  A hook that raises, answers something
else or runs past its timeout is recorded; a ``pre_tool`` hook that fails
blocks the call where the CLI can block (fail closed: a broken guard must not
let the call through).  A failing hook of another event does not block: a
``turn_end`` block keeps the turn going, and on a bug it would never end.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias, get_args

from coding_genesis.approval import ToolKind
from coding_genesis.errors import ConfigError

__all__ = [
    "HOOK_EVENTS",
    "LINK_POINTS",
    "Hook",
    "HookEffect",
    "HookEvent",
    "HookInput",
    "HookOutcome",
    "HookRecord",
    "HookResult",
    "HookRun",
    "HookVia",
    "Hooks",
    "declared",
    "hook_points",
    "hook_table",
    "matcher_names",
    "matcher_of",
    "matches",
    "matching",
    "run_hooks",
    "wants",
]

#: Where a hook runs: before a tool call, after it, at a turn's end (the CLI
#: is about to answer), before the CLI compacts its context; a prompt handed
#: to the CLI, the session's start and end; a subagent's start and end; a
#: notification the CLI would show its user.
HookEvent: TypeAlias = Literal[
    "pre_tool",
    "post_tool",
    "turn_end",
    "pre_compact",
    "prompt_submit",
    "session_start",
    "session_end",
    "subagent_start",
    "subagent_stop",
    "notification",
]
HOOK_EVENTS: tuple[HookEvent, ...] = get_args(HookEvent)

#: The points a live session reports itself where its CLI has none of its own
#: (the prompt handed over before the turn starts, the session ready, the
#: session closing): observed there, recorded with ``via="observed"``.
LINK_POINTS: tuple[HookEvent, ...] = ("prompt_submit", "session_start", "session_end")

#: Who reported a hook point: the CLI itself, or the session (``observed``:
#: the CLI has no such point, the session called the hooks as it went by).
HookVia: TypeAlias = Literal["cli", "observed"]

#: The events whose hooks may name their tools (:func:`matching`).
_TOOL_EVENTS = frozenset({"pre_tool", "post_tool"})

#: What a backend lets a hook do: ``block`` (refuse the call, keep the turn
#: going, stop the compaction), change the tool's ``input``, add ``context``
#: the model reads.
HookEffect: TypeAlias = Literal["block", "input", "context"]

#: How one hook call went: ``continued`` (nothing asked), ``changed`` (input or
#: context), ``blocked``, ``error`` (it raised or answered something else),
#: ``timeout``.
HookOutcome: TypeAlias = Literal["continued", "changed", "blocked", "error", "timeout"]

_ERROR_TEXT = 1000


@dataclass(frozen=True, slots=True)
class HookInput:
    """What a hook is told.

    ``tool``, ``input``, ``kind`` and ``tool_call_id`` describe the tool call
    (``pre_tool``, ``post_tool``: the CLI's own tool name, claude ``Bash``, codex
    ``commandExecution``; ``input`` raw and unredacted, as for an approver);
    ``output`` is what the tool gave (``post_tool``) and ``error`` why it failed,
    when it did.  ``answer`` is the turn's last answer (``turn_end``, where the
    CLI gives it); ``trigger`` why the CLI compacts (``pre_compact``:
    ``manual``, ``auto``).  ``prompt`` is the prompt handed to the CLI
    (``prompt_submit``); ``agent`` the subagent's type (``subagent_start``,
    ``subagent_stop``, whose ``answer`` is the subagent's last message);
    ``notification`` the text the CLI would show (``notification``).  ``raw``
    is the CLI's own payload of the hook point.
    """

    event: HookEvent
    tool: str | None = None
    input: Mapping[str, Any] = field(default_factory=dict)
    kind: ToolKind = "other"
    tool_call_id: str | None = None
    output: Any = None
    error: str | None = None
    answer: str | None = None
    trigger: str | None = None
    prompt: str | None = None
    agent: str | None = None
    notification: str | None = None
    cwd: str = ""
    backend: str = ""
    run_id: str = ""
    #: The session's turn (1 for the first; 1 for a one-shot run).
    turn: int = 1
    session_id: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HookResult:
    """A hook's answer (None means ``HookResult()``: go on unchanged).

    ``block``: refuse the tool call (``pre_tool``), tell the model the call's
    result is refused (``post_tool``: the call has run), keep the turn going
    (``turn_end``; ``subagent_stop``: the subagent's), skip the compaction
    (``pre_compact``), refuse the prompt (``prompt_submit``: the model never
    reads it, the turn answers why); ``message`` is what
    the model (or the record) is told why.  ``input`` replaces the tool's input
    (``pre_tool``).  ``context`` is text the CLI adds for the model.
    """

    block: bool = False
    message: str = ""
    input: Mapping[str, Any] | None = None
    context: str = ""

    @property
    def asks(self) -> frozenset[HookEffect]:
        """What this result asks of the CLI."""
        wanted: set[HookEffect] = set()
        if self.block:
            wanted.add("block")
        if self.input is not None:
            wanted.add("input")
        if self.context:
            wanted.add("context")
        return frozenset(wanted)


#: A hook: a callable, sync or async, of one input.
Hook: TypeAlias = Callable[[HookInput], HookResult | Awaitable[HookResult | None] | None]
#: ``hooks=``: each event's hook, or hooks in the order they run.
Hooks: TypeAlias = Mapping[HookEvent, Hook | Sequence[Hook]]


_WANTS = "__genesis_hook_effects__"


def wants(*effects: HookEffect) -> Callable[[Hook], Hook]:
    """Declare what a hook may ask (``@wants("block")``): the capability check
    then refuses it up front on a backend whose hook point cannot do that,
    rather than the run recording it as not applied."""
    unknown = [e for e in effects if e not in get_args(HookEffect)]
    if unknown:
        raise ConfigError(
            f"wants: unknown effect(s) {', '.join(map(repr, unknown))}; "
            f"the effects are {', '.join(get_args(HookEffect))}"
        )

    def declare(hook: Hook) -> Hook:
        setattr(hook, _WANTS, frozenset(effects))
        return hook

    return declare


def declared(hook: Hook) -> frozenset[HookEffect]:
    """What ``hook`` declared it may ask (:func:`wants`; none: nothing declared)."""
    found: object = getattr(hook, _WANTS, None)
    return found if isinstance(found, frozenset) else frozenset()


_MATCHER = "__genesis_hook_matcher__"
#: A matcher of names alone (``Bash|Write``): each alternative matches exactly.
_NAMES = re.compile(r"[A-Za-z0-9_|]+")


def matching(matcher: str) -> Callable[[Hook], Hook]:
    """Name the tools a ``pre_tool`` or ``post_tool`` hook is for
    (``@matching("Bash|Write")``), as claude's hook matchers do: ``*`` or ""
    is every tool; names alone, joined by ``|``, match exactly; anything else
    is a regular expression searched in the tool's name (``mcp__.*``).  The
    name is the CLI's own (claude ``Bash``, codex ``commandExecution``)."""
    if not isinstance(matcher, str):
        raise ConfigError(f"matching: a matcher is a string, got {matcher!r}")
    if matcher not in ("", "*") and not _NAMES.fullmatch(matcher):
        try:
            re.compile(matcher)
        except re.error as exc:
            raise ConfigError(f"matching: {matcher!r} is no regular expression: {exc}") from None

    def declare(hook: Hook) -> Hook:
        setattr(hook, _MATCHER, matcher)
        return hook

    return declare


def matcher_of(hook: Hook) -> str | None:
    """The tools ``hook`` is for (:func:`matching`; None: every tool)."""
    found: object = getattr(hook, _MATCHER, None)
    return found if isinstance(found, str) and found not in ("", "*") else None


def matcher_names(matcher: str) -> tuple[str, ...] | None:
    """The tool names of a matcher of names alone (``Bash|Write``: each matches
    exactly); None for a regular expression (searched in the name)."""
    return tuple(matcher.split("|")) if _NAMES.fullmatch(matcher) else None


def matches(hook: Hook, data: HookInput) -> bool:
    """``hook`` runs at this point: it names no tools, or the call's tool is one
    of them (the one test of a matcher; claude's opening registers their union)."""
    matcher = matcher_of(hook)
    if matcher is None:
        return True
    tool = data.tool or ""
    names = matcher_names(matcher)
    return tool in names if names is not None else re.search(matcher, tool) is not None


def hook_points(
    native: Mapping[HookEvent, frozenset[HookEffect]],
) -> dict[HookEvent, frozenset[HookEffect]]:
    """Every hook point of a two-way protocol and what a hook can do there: its
    CLI's own (``native``, :attr:`ControlProtocol.hook_effects
    <coding_genesis.control.ControlProtocol.hook_effects>`) and, where the CLI
    has none, the session's observed :data:`LINK_POINTS`."""
    observed = {point: frozenset[HookEffect]() for point in LINK_POINTS if point not in native}
    return {**native, **observed}


def hook_table(value: object) -> dict[HookEvent, tuple[Hook, ...]]:
    """``hooks=`` checked: each event known, each hook a callable (a
    :class:`~coding_genesis.errors.ConfigError` otherwise); events without
    hooks left out."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"hooks must be a mapping of event to hook(s), got {value!r}")
    table: dict[HookEvent, tuple[Hook, ...]] = {}
    for event, given in value.items():
        if event not in HOOK_EVENTS:
            raise ConfigError(
                f"hooks: unknown event {event!r}; the events are {', '.join(HOOK_EVENTS)}"
            )
        hooks = (given,) if callable(given) else given
        if isinstance(hooks, str | bytes) or not isinstance(hooks, Sequence):
            raise ConfigError(f"hooks[{event!r}] must be a callable or a list of them")
        for hook in hooks:
            if not callable(hook):
                raise ConfigError(f"hooks[{event!r}]: a hook is a callable, got {hook!r}")
            if event not in _TOOL_EVENTS and matcher_of(hook) is not None:
                raise ConfigError(
                    f"hooks[{event!r}]: hook {_name(hook)} names tools (matching), "
                    "which only pre_tool and post_tool hooks may"
                )
        if hooks:
            table[event] = tuple(hooks)
    return table


# -- running the hooks of one hook point -------------------------------------------


@dataclass(frozen=True, slots=True)
class HookRecord:
    """What a run keeps of one hook called: an entry of ``RunResult.hooks``.
    ``not_applied``: what the hook asked that the CLI cannot apply there;
    ``via``: who reported the point (:data:`HookVia`)."""

    event: HookEvent
    hook: str
    tool: str | None
    tool_call_id: str | None
    turn: int
    outcome: HookOutcome
    message: str | None
    error: str | None
    not_applied: str | None
    elapsed_s: float
    via: HookVia = "cli"

    def to_dict(self) -> dict[str, Any]:
        """The record as results and transcripts carry it (every key, always)."""
        return {
            "event": self.event,
            "hook": self.hook,
            "tool": self.tool,
            "tool_call_id": self.tool_call_id,
            "turn": self.turn,
            "outcome": self.outcome,
            "message": self.message,
            "error": self.error,
            "not_applied": self.not_applied,
            "elapsed_s": self.elapsed_s,
            "via": self.via,
        }


@dataclass(frozen=True, slots=True)
class HookRun:
    """The hooks of one hook point, run: what to answer the CLI (only what it
    can apply) and one record per hook called."""

    result: HookResult
    records: tuple[HookRecord, ...]


def _name(hook: Hook) -> str:
    name = getattr(hook, "__qualname__", None) or getattr(hook, "__name__", None)
    return str(name) if name else type(hook).__name__


async def _call(hook: Hook, data: HookInput, timeout: float) -> tuple[object, str | None, bool]:
    """``(answer, error, timed_out)``: a raise or no answer in time is an error."""
    import anyio  # only a live session runs hooks: `import coding_genesis.hooks` stays light

    started = anyio.current_time()
    answer: object = None
    try:
        with anyio.CancelScope(deadline=started + timeout) as scope:
            answer = hook(data)
            if isinstance(answer, Awaitable):
                answer = await answer
    except Exception as exc:  # noqa: BLE001  (a hook's raise is recorded, never propagated)
        if not scope.cancel_called:
            return None, f"{type(exc).__name__}: {exc}"[:_ERROR_TEXT], False
    if scope.cancel_called or anyio.current_time() - started > timeout:
        return None, f"no answer within {timeout:g}s", True
    if answer is not None and not isinstance(answer, HookResult):
        return None, f"the hook answered {type(answer).__name__}, not a HookResult or None", False
    return answer, None, False


async def run_hooks(
    hooks: Sequence[Hook],
    data: HookInput,
    *,
    timeout: float,
    effects: frozenset[HookEffect],
    backend: str = "",
    via: HookVia = "cli",
) -> HookRun:
    """Run ``hooks`` in order on ``data`` (each within ``timeout`` seconds; a
    hook whose tools do not include the call's is skipped, :func:`matches`);
    never raises.  ``effects``: what the CLI applies of a result here; what a
    hook asks beyond them is recorded as not applied."""
    changed_input: Mapping[str, Any] | None = None
    contexts: list[str] = []
    messages: list[str] = []
    block = False
    records: list[HookRecord] = []
    who = backend or "this backend"
    for hook in hooks:
        if not matches(hook, data):
            continue
        started = time.monotonic()
        answer, error, timed_out = await _call(hook, data, timeout)
        result = answer if isinstance(answer, HookResult) else HookResult()
        outcome: HookOutcome = "continued"
        if error is not None:
            outcome = "timeout" if timed_out else "error"
            if data.event == "pre_tool":  # fail closed: a broken guard blocks the call
                result = HookResult(block=True, message=f"blocked: the {data.event} hook failed")
        asked = result.asks
        applied = asked & effects
        if error is None and asked:
            outcome = "blocked" if "block" in applied else "changed" if applied else "continued"
        not_applied = None
        if asked - effects:
            unapplied = ", ".join(sorted(asked - effects))
            not_applied = f"{who} cannot apply a {data.event} hook's {unapplied}"
        records.append(
            HookRecord(
                event=data.event,
                hook=_name(hook),
                tool=data.tool,
                tool_call_id=data.tool_call_id,
                turn=data.turn,
                outcome=outcome,
                message=result.message or None,
                error=error,
                not_applied=not_applied,
                elapsed_s=round(time.monotonic() - started, 6),
                via=via,
            )
        )
        if "input" in applied and result.input is not None:
            changed_input = dict(result.input)
            data = replace(data, input=changed_input)
        if "context" in applied:
            contexts.append(result.context)
        if "block" in applied:
            block = True
            messages.append(result.message or f"blocked by a {data.event} hook")
            break
    answer_result = HookResult(
        block=block,
        message="\n".join(messages),
        input=changed_input,
        context="\n".join(contexts),
    )
    return HookRun(answer_result, tuple(records))
