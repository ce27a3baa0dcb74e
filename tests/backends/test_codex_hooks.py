"""codex's hook points, observed (``CodexControl`` with ``hooks=``): the recordings of the
real codex 0.169 replayed with hooks for every event (codex's own lines unchanged: hooks
change nothing codex is told), and what each hook input holds."""

from __future__ import annotations

from typing import Any

from coding_genesis.backends.codex_control import CodexControl
from coding_genesis.control import FORWARD, HookCall, Reply, TurnEnded
from coding_genesis.hooks import HOOK_EVENTS, HookInput, HookResult
from tests.backends.test_codex_control import replay
from tests.support import cli_request

ALL = frozenset(HOOK_EVENTS)


def calls(name: str) -> list[HookInput]:
    out = replay(name, ALL)
    found = [m.input for m in out.meanings if isinstance(m, HookCall)]
    assert all(m.key is None for m in out.meanings if isinstance(m, HookCall))  # never awaited
    return found


def test_a_command_is_seen_before_and_after_and_the_turn_s_end() -> None:
    found = calls("command_approved")
    assert [(h.event, h.tool) for h in found] == [
        ("pre_tool", "commandExecution"),
        ("post_tool", "commandExecution"),
        ("turn_end", None),
    ]
    pre, post, end = found
    assert pre.kind == "command" and "echo approved" in str(pre.input["command"])
    assert pre.tool_call_id == post.tool_call_id and pre.tool_call_id
    assert pre.output is None and post.error is None
    assert pre.session_id and pre.raw["item"]["type"] == "commandExecution"
    assert end.answer and end.raw["turn"]["status"] == "completed"


def test_a_declined_command_ends_with_its_error_and_a_file_change_is_a_write() -> None:
    declined = calls("command_declined")
    post = next(h for h in declined if h.event == "post_tool")
    assert post.error is not None, post
    changed = calls("file_change_approved")
    pre = next(h for h in changed if h.event == "pre_tool")
    assert (pre.tool, pre.kind) == ("fileChange", "write")
    assert pre.input["changes"]


def test_without_hooks_nothing_is_reported() -> None:
    out = replay("command_approved")
    assert not [m for m in out.meanings if isinstance(m, HookCall)]


def _turn(protocol: CodexControl) -> None:
    (init,) = protocol.begin(cli_request(cwd="/w", hooks=ALL)).greeting
    (reply,) = protocol.receive({"id": init["id"], "result": {}})
    assert isinstance(reply, Reply)
    thread_start = reply.objects[1]
    protocol.receive({"id": thread_start["id"], "result": {"thread": {"id": "th"}}})
    (start,) = protocol.begin_turn("go")
    protocol.receive({"id": start["id"], "result": {"turn": {"id": "t1"}}})
    protocol.receive({"method": "turn/started", "params": {"threadId": "th", "turn": {"id": "t1"}}})


def _item(method: str, item: dict[str, Any]) -> dict[str, Any]:
    return {"method": method, "params": {"threadId": "th", "turnId": "t1", "item": item}}


def test_a_compaction_an_mcp_call_and_nothing_to_answer() -> None:
    protocol = CodexControl()
    _turn(protocol)
    forward, compact = protocol.receive(
        _item("item/started", {"type": "contextCompaction", "id": "c"})
    )
    assert forward is FORWARD and isinstance(compact, HookCall)
    assert compact.input.event == "pre_compact"
    mcp = {"type": "mcpToolCall", "id": "m", "server": "s", "tool": "t", "arguments": {"a": 1}}
    failed = {**mcp, "status": "failed", "error": {"message": "server gone"}}
    _, pre = protocol.receive(_item("item/started", mcp))
    _, post = protocol.receive(_item("item/completed", failed))
    assert isinstance(pre, HookCall) and isinstance(post, HookCall)
    assert pre.input.input == {"server": "s", "tool": "t", "arguments": {"a": 1}}
    assert post.input.error == "server gone"
    assert protocol.answer_hook(post, HookResult(block=True)) == []  # codex waits for nothing
    message = {"type": "agentMessage", "id": "a", "text": "all done"}
    assert protocol.receive(_item("item/completed", message)) == (FORWARD,)
    completed = {"threadId": "th", "turn": {"id": "t1", "status": "completed"}}
    forward, end, ended = protocol.receive({"method": "turn/completed", "params": completed})
    assert isinstance(end, HookCall) and end.input.answer == "all done"
    assert ended == TurnEnded("completed")
