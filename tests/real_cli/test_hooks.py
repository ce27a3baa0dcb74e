"""Hooks with the REAL claude and codex against the fake model server.

claude runs each hook through its own hook callbacks: a blocking pre-tool hook refuses a write
before the approver is asked, a changed command runs, a post-tool hook's context reaches the
model, a turn's end is kept going once, a ``/compact`` is refused.  codex reports its items and
never waits: the hooks observe, and a hook asking to block is recorded as not applied.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from coding_genesis.approval import ApprovalRequest
from coding_genesis.hooks import HookInput, HookResult
from tests.real_cli.test_claude_codex import Rig, claude_rig, codex_rig
from tests.real_cli.test_sessions import session_agent

__all__ = ["claude_rig", "codex_rig"]  # the real-CLI fixtures, active here too

pytestmark = [pytest.mark.timeout(120), pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_blocking_pre_tool_hook_and_the_other_hook_points_on_claude(
    claude_rig: Rig,
) -> None:
    rig = claude_rig
    seen: list[HookInput] = []
    asked: list[ApprovalRequest] = []

    def pre_tool(hook: HookInput) -> HookResult | None:
        seen.append(hook)
        if str(hook.input.get("file_path", "")).endswith("refused.txt"):
            return HookResult(block=True, message="not this file")
        if hook.input.get("command") == "echo hi":
            return HookResult(input={**hook.input, "command": "echo changed"})
        return None

    async def post_tool(hook: HookInput) -> HookResult:
        seen.append(hook)
        await anyio.sleep(0.05)
        return HookResult(context="POST-TOOL-CONTEXT")

    ends: list[str | None] = []

    def turn_end(hook: HookInput) -> HookResult | None:
        ends.append(hook.answer)
        if len(ends) == 1:
            return HookResult(block=True, message="SCENARIO:text kept going")
        return None

    def pre_compact(hook: HookInput) -> HookResult:
        return HookResult(block=True, message="not now")

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    hooks: Any = {
        "pre_tool": pre_tool,
        "post_tool": post_tool,
        "turn_end": turn_end,
        "pre_compact": pre_compact,
    }
    agent = session_agent(rig, approver=approver, hooks=hooks)
    async with agent.session() as session:
        refused = await session.send_result("SCENARIO:write refused.txt nope")
        assert refused.status == 0, refused.message
        assert not (rig.work / "refused.txt").exists()
        assert asked == [] and refused.approvals == []  # blocked before the approver
        assert [h["outcome"] for h in refused.hooks] == ["blocked", "blocked", "continued"]
        assert refused.message == "kept going"  # the turn's end was kept going once
        changed = await session.send_result("SCENARIO:bash echo hi")
        assert changed.status == 0, changed.message
        assert changed.message == "The tool finished. Output: changed"
        assert [r.input["command"] for r in asked] == ["echo changed"]
        compact = await session.send_result("/compact")
        assert compact.status == 0, compact.message
        assert [h["outcome"] for h in compact.hooks] == ["blocked"]
    # the model read the hook's refusal, then (the turn kept going) answered again
    assert ends[0] is not None and "PreToolUse:Write hook error: not this file" in ends[0]
    assert ends[1] == "kept going"
    post = next(h for h in seen if h.event == "post_tool")
    assert post.tool == "Bash" and post.output["stdout"] == "changed"
    assert "POST-TOOL-CONTEXT" in str([r.body for r in rig.server.model_requests()])
    write = seen[0]
    assert (write.tool, write.kind, write.turn) == ("Write", "write", 1)
    assert write.session_id == session.session_id and write.cwd == str(rig.work)


async def test_an_observing_hook_on_codex(codex_rig: Rig) -> None:
    rig = codex_rig
    seen: list[HookInput] = []

    def pre_tool(hook: HookInput) -> HookResult:
        seen.append(hook)
        return HookResult(block=True, message="would refuse")

    async def post_tool(hook: HookInput) -> None:
        await anyio.sleep(0.2)  # codex goes on; the turn's result waits for the hook
        seen.append(hook)

    def turn_end(hook: HookInput) -> None:
        seen.append(hook)

    hooks: Any = {"pre_tool": pre_tool, "post_tool": post_tool, "turn_end": turn_end}
    agent = session_agent(rig, hooks=hooks, options={"sandbox": "workspace-write"})
    result = await agent.run_result("SCENARIO:bash echo observed > seen.txt")
    assert result.status == 0, result.message
    assert (rig.work / "seen.txt").read_text() == "observed\n"  # the block was not applied
    by_event = {h["event"]: h for h in result.hooks}
    assert set(by_event) == {"pre_tool", "post_tool", "turn_end"}
    pre = by_event["pre_tool"]
    assert pre["outcome"] == "continued" and pre["message"] == "would refuse"
    assert pre["not_applied"] == "codex cannot apply a pre_tool hook's block"
    started = next(h for h in seen if h.event == "pre_tool")
    assert (started.tool, started.kind) == ("commandExecution", "command")
    assert "echo observed" in str(started.input["command"])
    done = next(h for h in seen if h.event == "post_tool")
    assert done.tool_call_id == started.tool_call_id and done.error is None
    end = next(h for h in seen if h.event == "turn_end")
    assert end.answer and end.session_id == started.session_id
