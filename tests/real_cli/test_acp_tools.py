"""The caller's functions as tools on a REAL ACP agent (gemini ``--acp``, qwen ``cli.js
--acp``, opencode ``acp``) against the fake model server: the agent launches our stdio MCP
server from ``session/new``'s ``mcpServers``, the model calls the tool under the name the
agent gives it (gemini ``mcp_genesis-<hex>_add``, qwen ``mcp__genesis-<hex>__add``, found
first with qwen's ``tool_search``, which hides MCP tools), and the call comes back to the
session over its socket; the approver is not asked about it (gemini asks before every MCP
call, qwen in its auto mode without a classifier, opencode with an approver's
``"permission": "ask"``); a raising tool and one past its timeout are told to the model as
errors.  Passes on gemini 0.61, qwen 0.24.4 and opencode 1.18.33.  Skips, with the reason,
when the CLI or the ``mcp`` package is not installed."""

from __future__ import annotations

import re
from importlib.util import find_spec
from typing import Any

import anyio
import pytest

from coding_genesis import tool
from coding_genesis.events import Event, ToolCallEvent, ToolResultEvent
from tests.fakes.model_server import FakeModelServer
from tests.real_cli.test_acp import acp_agent, anyio_backend, rig
from tests.real_cli.test_claude_codex import hermetic_env
from tests.real_cli.test_gemini_opencode_qwen import MoreRig
from tests.session.test_acp_session import remember
from tests.session.test_acp_tools import boom

# the autouse fixture of the real-CLI tests, and the ACP tests' rig (each agent), here too
__all__ = ["anyio_backend", "hermetic_env", "rig"]

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.anyio,
    pytest.mark.skipif(find_spec("mcp") is None, reason="needs the mcp package"),
]


calls: list[dict[str, Any]] = []


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    calls.append({"a": a, "b": b})
    return a + b


@tool(timeout=1.0)
async def slow(seconds: float) -> str:
    """Sleeps."""
    await anyio.sleep(seconds)
    return "woke"


def declared(server: FakeModelServer) -> list[str]:
    """The tool names the agent's model requests declared (any API's shape)."""
    names: set[str] = set()
    for r in server.model_requests():
        body = r.body if isinstance(r.body, dict) else {}
        for entry in body.get("tools") or []:
            for decl in entry.get("functionDeclarations") or []:  # gemini
                names.add(str(decl.get("name")))
            fn = entry.get("function") or {}  # openai chat
            if fn.get("name"):
                names.add(str(fn["name"]))
    return sorted(names)


async def our_tools(rig: MoreRig, session: Any) -> list[str]:
    """The names the model calls our tools by.  gemini and opencode declare
    them; qwen hides MCP tools behind its ``tool_search``, so the fake model
    searches for them as a real one would (a turn calling ``tool_search``; qwen
    discovers MCP servers after ``session/new`` answers, so until they show)
    and reads their names in the search's answer."""
    if rig.backend != "qwen":
        return [n for n in declared(rig.server) if "genesis-" in n]
    for _ in range(20):
        searched = await session.send_result('SCENARIO:tool tool_search {"query": "genesis"}')
        found = set(re.findall(r"mcp__genesis-[0-9a-f]{12}__\w+", searched.message))
        if found:
            return sorted(found)
        await anyio.sleep(0.5)
    raise AssertionError("qwen's tool_search never found our tools")


async def test_host_tools_called_over_mcp_and_a_raising_and_a_late_one_told(rig: MoreRig) -> None:
    """One session of each agent (its start, its MCP server and qwen's search paid once):
    a function called over MCP answers, the approver not asked; a raising one and one past
    its timeout are told to the model as errors (the model's next request carries them),
    each call bounded by its tool's timeout, the turn going on; and recorded under the
    function's name, failed."""
    calls.clear()
    asked: list[Any] = []
    # the approver decides the agent's own tools, never the caller's functions
    agent = acp_agent(rig, tools=[add, boom, slow], approver=remember(asked, True))
    events: list[Event] = []
    agent.subscribe(events.append)
    async with agent.session() as s:
        first = await s.send_result("SCENARIO:text ready")
        assert first.status == 0, first.message
        names = await our_tools(rig, s)
        ours = [name for name in names if name.endswith("add")]
        assert ours, f"the agent offers no tool of ours: {declared(rig.server)}"
        called = await s.send_result(f'SCENARIO:tool {ours[0]} {{"a": 2, "b": 3}}')
        start = len(events)  # the failing calls of ours (add's and qwen's searches before)
        (raising,) = [n for n in names if n.endswith("boom")]
        (late,) = [n for n in names if n.endswith("slow")]
        failed = await s.send_result(f'SCENARIO:tool {raising} {{"why": "on purpose"}}')
        with anyio.fail_after(60):  # bounded: 1 s, not the 30 s it asks for
            timed_out = await s.send_result(f'SCENARIO:tool {late} {{"seconds": 30}}')
    assert calls == [{"a": 2, "b": 3}], (calls, called.message)
    assert called.status == 0 and "5" in called.message, called.message
    assert called.tool_calls >= 1
    assert asked == [] and called.approvals == [], asked
    assert failed.status == 0 and "RuntimeError: it broke: on purpose" in failed.message, (
        failed.message
    )
    assert timed_out.status == 0, timed_out.message
    assert "slow did not finish within 1s" in timed_out.message, timed_out.message
    assert timed_out.duration_s is not None and timed_out.duration_s < 25, timed_out.duration_s
    made = [e.name for e in events[start:] if isinstance(e, ToolCallEvent)]
    results = [(e.name, e.is_error) for e in events[start:] if isinstance(e, ToolResultEvent)]
    assert made == ["boom", "slow"], made
    assert results == [("boom", True), ("slow", True)], results
