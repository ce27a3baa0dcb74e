"""claude's hook callbacks, as :mod:`coding_genesis.hooks` sees them.

With ``hooks=``, the opening of a claude session registers one callback per
hook point it has hooks for; claude then sends a ``hook_callback`` control
request at each and waits for the answer (the matcher's ``timeout``).  What
each answer can do, measured on claude 2.1.330 against the fake model server:

* ``PreToolUse`` (``pre_tool``): ``permissionDecision: "deny"`` with a reason
  refuses the call (the model reads ``PreToolUse:<Tool> hook error:
  <reason>``); ``updatedInput`` alone runs the call with that input, claude's
  own permission check still applying; ``additionalContext`` reaches the model
  as ``PreToolUse:<Tool> hook additional context: <text>``.
* ``PostToolUse`` and ``PostToolUseFailure`` (``post_tool``; a failed call
  has ``error`` and no ``tool_response``): ``decision: "block"`` with a
  ``reason`` tells the model ``... hook blocking error ...: <reason>`` (the
  call has run); ``additionalContext`` as above.
* ``Stop`` (``turn_end``): ``decision: "block"`` keeps the turn going: claude
  writes a user message ``Stop hook feedback:\\n<reason>`` and asks the model
  again; the next ``Stop`` has ``stop_hook_active: true``.
* ``PreCompact`` (``pre_compact``, e.g. a ``/compact`` turn): ``decision:
  "block"`` skips the compaction (``compact_result: "failed"``, "Compaction
  blocked by PreCompact hook").
* ``UserPromptSubmit`` (``prompt_submit``; ``prompt``): ``decision: "block"``
  keeps the prompt from the model, the turn's result says
  ``UserPromptSubmit operation blocked by hook:\n<reason>``;
  ``additionalContext`` reaches the model as ``UserPromptSubmit hook
  additional context: <text>``.
* ``SubagentStart`` (``subagent_start``; ``agent_type``): ``additionalContext``
  reaches the subagent's own request.  ``SubagentStop`` (``subagent_stop``;
  ``last_assistant_message``): ``decision: "block"`` keeps the subagent going
  (the next one has ``stop_hook_active: true``), as ``Stop`` does the turn.
* ``Notification`` (``notification``): observed (``{}`` answers it).
* ``SessionStart`` and ``SessionEnd`` are never called back over the SDK's
  control protocol (measured: not after ``initialize``, not before the first
  turn, not when stdin closes): the session reports ``session_start`` and
  ``session_end`` itself, observed (:data:`~coding_genesis.hooks.LINK_POINTS`).

Matchers (:func:`~coding_genesis.hooks.matching`): a tool event whose hooks
all name their tools is registered with the union of their matchers (claude
then never calls back for another tool); the ``PreToolUse`` callback the
approver shares stays registered for every tool.  Measured on 2.1.330: a
``Write`` call is not called back for ``Writ`` (names alone match exactly) and
is for ``ri.e`` and ``(?:Wri.e)|(?:Nothing)`` (anything else is searched), as
:func:`~coding_genesis.hooks.matches` reads them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coding_genesis.approval import ApprovalRequest, Decision
from coding_genesis.hooks import (
    Hook,
    HookEffect,
    HookEvent,
    HookInput,
    HookResult,
    matcher_names,
    matcher_of,
)
from coding_genesis.request import Request

__all__ = [
    "CALLBACKS",
    "HOOK_EFFECTS",
    "HOOK_ID",
    "HookKey",
    "event_of",
    "hook_answer",
    "hook_input",
    "pre_tool_output",
    "registrations",
]

#: The ``PreToolUse`` callback: approvals and ``pre_tool`` hooks share it.
HOOK_ID = "genesis_pre_tool_use"

#: Our callback id of each hook point, and claude's hook events it is registered for.
CALLBACKS: dict[HookEvent, tuple[str, tuple[str, ...]]] = {
    "pre_tool": (HOOK_ID, ("PreToolUse",)),
    "post_tool": ("genesis_post_tool_use", ("PostToolUse", "PostToolUseFailure")),
    "turn_end": ("genesis_stop", ("Stop",)),
    "pre_compact": ("genesis_pre_compact", ("PreCompact",)),
    "prompt_submit": ("genesis_prompt_submit", ("UserPromptSubmit",)),
    "subagent_start": ("genesis_subagent_start", ("SubagentStart",)),
    "subagent_stop": ("genesis_subagent_stop", ("SubagentStop",)),
    "notification": ("genesis_notification", ("Notification",)),
}

#: What a hook of each event can do on claude (see the module's docstring).
HOOK_EFFECTS: Mapping[HookEvent, frozenset[HookEffect]] = {
    "pre_tool": frozenset({"block", "input", "context"}),
    "post_tool": frozenset({"block", "context"}),
    "turn_end": frozenset({"block"}),
    "pre_compact": frozenset({"block"}),
    "prompt_submit": frozenset({"block", "context"}),
    "subagent_start": frozenset({"context"}),
    "subagent_stop": frozenset({"block"}),
    "notification": frozenset(),
}

DENIED = "denied by the approver"


@dataclass(frozen=True, slots=True)
class HookKey:
    """The handle of one hook point (:attr:`HookCall.key`): claude's request
    id and its hook event name."""

    request_id: str
    claude_event: str


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def hook_input(
    event: HookEvent,
    data: Mapping[str, Any],
    session_id: str | None,
    tool: ApprovalRequest | None = None,
) -> HookInput:
    """The typed input of one ``hook_callback``'s payload; ``tool``: the call
    it is about, as the approver would see it (``pre_tool``, ``post_tool``)."""
    raw = dict(data)
    session = _text(data.get("session_id")) or session_id
    if tool is not None:
        return HookInput(
            event,
            tool=tool.tool,
            input=tool.input,
            kind=tool.kind,
            tool_call_id=tool.tool_call_id,
            output=data.get("tool_response"),
            error=_text(data.get("error")),
            session_id=session,
            raw=raw,
        )
    answer = _text(data.get("last_assistant_message"))
    if event == "turn_end":
        return HookInput(event, answer=answer, session_id=session, raw=raw)
    if event in ("subagent_start", "subagent_stop"):
        agent = _text(data.get("agent_type"))
        return HookInput(event, answer=answer, agent=agent, session_id=session, raw=raw)
    return HookInput(
        event,
        trigger=_text(data.get("trigger")),
        prompt=_text(data.get("prompt")),
        notification=_text(data.get("message")),
        session_id=session,
        raw=raw,
    )


def pre_tool_output(decision: Decision | None, hooked: HookResult | None = None) -> dict[str, Any]:
    """A ``PreToolUse`` answer: the approver's ``decision`` (None: none
    decides, claude's own check goes on) with what the hooks changed."""
    specific: dict[str, Any] = {"hookEventName": "PreToolUse"}
    out: dict[str, Any] = {"hookSpecificOutput": specific}
    changed = hooked.input if hooked is not None else None
    if decision is not None and decision.allowed:
        specific["permissionDecision"] = "allow"
        if decision.reason:
            specific["permissionDecisionReason"] = decision.reason
        changed = decision.input if decision.input is not None else changed
    elif decision is not None:
        message = decision.message or DENIED
        specific["permissionDecision"] = "deny"
        specific["permissionDecisionReason"] = message
        changed = None
        if decision.end_turn:
            out["continue"] = False
            out["stopReason"] = message
    if changed is not None:
        specific["updatedInput"] = dict(changed)
    if hooked is not None and hooked.context:
        specific["additionalContext"] = hooked.context
    return out


def hook_answer(key: HookKey, result: HookResult) -> dict[str, Any]:
    """The answer to a hook point with no approver's question pending."""
    if key.claude_event == "PreToolUse":
        # No approver asks about this call: a blocking hook refuses it, else
        # claude's own check goes on.
        decision = Decision.deny(result.message or "blocked by a pre_tool hook")
        return pre_tool_output(decision if result.block else None, result)
    out: dict[str, Any] = {}
    if result.block:
        out["decision"] = "block"
        out["reason"] = result.message or "blocked by a hook"
    if result.context:
        out["hookSpecificOutput"] = {
            "hookEventName": key.claude_event,
            "additionalContext": result.context,
        }
    return out


def event_of(callback_id: object, claude_event: object) -> HookEvent | None:
    """Our event of a ``hook_callback``: its callback id must be ours, for a
    claude event it was registered for."""
    for event, (callback, names) in CALLBACKS.items():
        if callback_id == callback and claude_event in names:
            return event
    return None


def _union(hooks: Sequence[Hook]) -> str | None:
    """The matcher that calls back for every tool one of ``hooks`` names
    (None: one of them names none, every tool).  Names alone stay names (an
    exact match); with a regular expression among them, each alternative is
    searched (wider than a name's exact match: each hook's own matcher is
    tested again when it runs)."""
    matchers = [matcher_of(hook) for hook in hooks]
    if not matchers or None in matchers:
        return None
    named = list(dict.fromkeys(m for m in matchers if m is not None))
    names = [matcher_names(m) for m in named]
    if all(n is not None for n in names):
        return "|".join(dict.fromkeys(name for n in names if n is not None for name in n))
    return "|".join(f"(?:{m})" for m in named)


def registrations(start: Request) -> dict[str, list[dict[str, Any]]]:
    """The ``hooks`` field of ``initialize``: a callback for each hook point
    the session has hooks for (and ``PreToolUse`` for the approver), with the
    union of the hooks' matchers where all name their tools."""
    hooks: dict[str, list[dict[str, Any]]] = {}
    if start.approvals:
        hooks["PreToolUse"] = [{"matcher": None, "hookCallbackIds": [HOOK_ID]}]
    for event, (callback, names) in CALLBACKS.items():
        if event in start.hooks:
            shared = event == "pre_tool" and start.approvals  # the approver asks of every call
            matcher = None if shared else _union(start.hooks[event])
            for claude_event in names:
                hooks[claude_event] = [{"matcher": matcher, "hookCallbackIds": [callback]}]
    if start.hooks and start.hook_wait is not None:
        for matchers in hooks.values():
            matchers[0]["timeout"] = start.hook_wait  # claude must not give up first
    return hooks
