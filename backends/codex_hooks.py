"""codex's hook points, observed: ``codex app-server`` tells us of each item
and of a turn's end but never waits for us (its own hooks are commands in its
configuration), so a hook on codex observes and cannot block, change the input
or add context.

* ``pre_tool``: ``item/started`` of a tool item (``commandExecution``,
  ``fileChange``, ``mcpToolCall``, ``dynamicToolCall``, ``webSearch``);
* ``post_tool``: its ``item/completed`` (``output``, and ``error`` when it
  failed or was declined);
* ``turn_end``: ``turn/completed`` of the running turn (``answer``: its last
  agent message);
* ``pre_compact``: ``item/started`` of a ``contextCompaction`` item (the
  schema of 0.169; codex compacts as it starts the item).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coding_genesis.approval import ToolKind
from coding_genesis.hooks import HookEffect, HookEvent, HookInput

__all__ = ["HOOK_EFFECTS", "TOOL_ITEMS", "tool_hook"]

#: Every event is reported; none can do more than observe.
HOOK_EFFECTS: Mapping[HookEvent, frozenset[HookEffect]] = {
    "pre_tool": frozenset(),
    "post_tool": frozenset(),
    "turn_end": frozenset(),
    "pre_compact": frozenset(),
}

#: The items that are tool calls, and what each does.
TOOL_ITEMS: dict[str, ToolKind] = {
    "commandExecution": "command",
    "fileChange": "write",
    "mcpToolCall": "other",
    "dynamicToolCall": "other",
    "webSearch": "read",
}

#: The fields of each tool item that are its input (the rest: status, output).
_INPUT_FIELDS = {
    "commandExecution": ("command", "cwd"),
    "fileChange": ("changes",),
    "mcpToolCall": ("server", "tool", "arguments"),
    "dynamicToolCall": ("namespace", "tool", "arguments"),
    "webSearch": ("query",),
}
_OUTPUT_FIELDS = {
    "commandExecution": "aggregatedOutput",
    "mcpToolCall": "result",
    "dynamicToolCall": "contentItems",
    "webSearch": "results",
}


def _error(item: Mapping[str, Any]) -> str | None:
    """Why a completed tool item failed (None: it did not)."""
    status = item.get("status")
    error = item.get("error")
    if isinstance(error, Mapping) and error.get("message"):
        return str(error["message"])
    code = item.get("exitCode")
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        return f"exit code {code}"
    if item.get("success") is False or status in ("failed", "declined"):
        return f"the call {status or 'failed'}"
    return None


def tool_hook(
    event: HookEvent, item: Mapping[str, Any], params: Mapping[str, Any], session_id: str | None
) -> HookInput | None:
    """The hook input of a tool item's start (``pre_tool``) or completion
    (``post_tool``); None for an item that is no tool call."""
    itype = item.get("type")
    if not isinstance(itype, str) or itype not in TOOL_ITEMS:
        return None
    item_id = item.get("id")
    tool_input = {name: item.get(name) for name in _INPUT_FIELDS[itype] if name in item}
    completed = event == "post_tool"
    output = item.get(_OUTPUT_FIELDS.get(itype, "")) if completed else None
    return HookInput(
        event,
        tool=itype,
        input=tool_input,
        kind=TOOL_ITEMS[itype],
        tool_call_id=item_id if isinstance(item_id, str) else None,
        output=output,
        error=_error(item) if completed else None,
        session_id=session_id,
        raw=dict(params),
    )
