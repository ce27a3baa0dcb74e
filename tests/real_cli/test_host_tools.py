"""Host tools (``tools=``) with the REAL claude and codex against the fake model server.

The fake model calls the tool by the name the CLI gave it (claude: ``mcp__genesis__<name>``,
through an SDK MCP server over its control protocol; codex: ``<name>``, a dynamic tool of the
app-server); the caller's function runs in this process and the CLI carries on with its
answer.  A round trip, a raising tool, a tool past its timeout, a session of several turns,
and (claude) an approver that is never asked about a host tool.
"""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import pytest

from coding_genesis import CodingGenesisAgent, tool
from coding_genesis.approval import ApprovalRequest
from coding_genesis.hooks import HookInput, HookResult
from tests.real_cli.test_claude_codex import (
    Recorder,
    Rig,
    claude_rig,
    codex_rig,
    hermetic_env,
    rig,
)
from tests.real_cli.test_sessions import session_agent

__all__ = [
    "claude_rig",
    "codex_rig",
    "hermetic_env",
    "rig",
]  # the real-CLI fixtures, active here too

pytestmark = [pytest.mark.timeout(120), pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


seen: list[dict[str, Any]] = []


@tool
def lookup(key: str, times: int = 1) -> dict[str, Any]:
    """Look a key up in the caller's own table."""
    seen.append({"key": key, "times": times})
    return {"key": key, "value": key.upper() * times}


@tool
async def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"exploded: {reason}")


@tool(timeout=1.0)
async def stuck() -> str:
    """Never answers in time."""
    await anyio.sleep(60)
    return "never"


def called(rig: Rig, name: str, arguments: dict[str, Any]) -> str:
    """The prompt that makes the fake model call host tool ``name``."""
    shown = f"mcp__genesis__{name}" if rig.backend == "claude" else name
    return f"SCENARIO:tool {shown} {json.dumps(arguments)}"


def tool_name(rig: Rig, name: str) -> str:
    """The tool's name in the CLI's own stream (and so in events and spans)."""
    return f"mcp__genesis__{name}" if rig.backend == "claude" else f"dynamic:{name}"


def test_a_host_tool_round_trip(rig: Rig) -> None:
    seen.clear()
    agent = session_agent(rig, tools=[lookup])
    events = Recorder(agent)
    result = agent.run_sync(called(rig, "lookup", {"key": "ab", "times": 2}))
    assert result["status"] == 0, result
    assert seen == [{"key": "ab", "times": 2}]
    assert result["message"] == 'The tool finished. Output: {"key":"ab","value":"ABAB"}'
    assert result["tool_calls"] == 1
    (call,) = events.of("tool_call")
    (done,) = events.of("tool_result")
    assert call["name"] == done["name"] == tool_name(rig, "lookup")
    assert call["input"] == {"key": "ab", "times": 2}
    assert done["is_error"] is False and "ABAB" in done["output"]
    # The model was offered the tool with its schema.
    offered = [
        t
        for request in rig.server.model_requests()
        for t in (request.body or {}).get("tools", [])
        if t.get("name") == ("mcp__genesis__lookup" if rig.backend == "claude" else "lookup")
    ]
    assert offered, "the model was never offered the host tool"
    schema = offered[0].get("input_schema") or offered[0].get("parameters")
    assert schema["required"] == ["key"], offered[0]


def test_a_raising_host_tool_is_an_error_the_model_reads(rig: Rig) -> None:
    agent = session_agent(rig, tools=[explode, stuck])
    events = Recorder(agent)
    result = agent.run_sync(called(rig, "explode", {"reason": "on purpose"}))
    assert result["status"] == 0, result  # the run goes on: the model reads the error
    assert "RuntimeError: exploded: on purpose" in result["message"]
    (done,) = events.of("tool_result")
    assert done["is_error"] is True
    started = time.monotonic()
    late = agent.run_sync(called(rig, "stuck", {}))
    assert late["status"] == 0, late
    assert "stuck did not finish within 1s" in late["message"]
    assert time.monotonic() - started < 30


async def test_a_session_of_host_tool_turns(rig: Rig) -> None:
    asked: list[str] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request.tool)
        return True

    seen.clear()
    agent = session_agent(rig, tools=[lookup], approver=approver)
    async with agent.session() as session:
        for n in range(3):
            r = await session.send_result(called(rig, "lookup", {"key": f"k{n}"}))
            assert r.status == 0, r.message
            assert r.message.endswith(f'"value":"K{n}"}}'), r.message
        pids = {x.pid for x in session.results}
    assert len(pids) == 1
    assert [s["key"] for s in seen] == ["k0", "k1", "k2"]
    assert asked == []  # a host tool is the caller's own code: the approver is not asked


def test_a_host_tool_beside_an_approved_cli_tool(rig: Rig) -> None:
    agent = CodingGenesisAgent(
        rig.backend,
        cli_path=rig.cli,
        cwd=rig.work,
        env=rig.env(),
        timeout=60.0,
        grace=2.0,
        tools=[lookup],
        approver=lambda request: True,
    )
    result = agent.run_sync("SCENARIO:write note.txt hello")
    assert result["status"] == 0, result
    assert (rig.work / "note.txt").read_text() == "hello\n"
    assert [a["allowed"] for a in result["approvals"]] == [True]


async def test_an_interrupt_while_a_host_tool_runs_and_the_next_turn(rig: Rig) -> None:
    started, finished = anyio.Event(), anyio.Event()

    @tool(timeout=20)
    async def wait_long() -> str:
        """Takes its time."""
        started.set()
        try:
            await anyio.sleep(3)
        finally:
            finished.set()
        return "late"

    agent = session_agent(rig, tools=[wait_long, lookup])
    async with agent.session() as session:
        results: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def turn() -> None:
                results.append(await session.send_result(called(rig, "wait_long", {})))

            tg.start_soon(turn)
            with anyio.fail_after(30):
                await started.wait()
            asked = time.monotonic()
            assert await session.interrupt() is True
            with anyio.fail_after(2):  # cancelled with its turn, not left to run its 3 s
                await finished.wait()
            assert time.monotonic() - asked < 2.5
        assert results[0].status == 130 and results[0].error == "interrupted", results[0]
        after = await session.send_result(called(rig, "lookup", {"key": "z"}))
        assert after.status == 0, after.message
        assert after.message.endswith('"value":"Z"}'), after.message


async def test_host_tools_beside_hooks_on_claude(claude_rig: Rig) -> None:
    rig = claude_rig
    pre: list[str | None] = []
    post: list[tuple[str | None, Any]] = []

    def pre_tool(hook: HookInput) -> HookResult:
        pre.append(hook.tool)
        return HookResult(block=True, message="no tool today")  # never asked of a host tool

    def post_tool(hook: HookInput) -> None:
        post.append((hook.tool, hook.output))

    agent = session_agent(rig, tools=[lookup], hooks={"pre_tool": pre_tool, "post_tool": post_tool})
    result = await agent.run_result(called(rig, "lookup", {"key": "h"}))
    assert result.status == 0, result.message
    assert result.message.endswith('"value":"H"}'), result.message
    assert pre == []  # the caller's own function: not a pre_tool hook's to block
    assert [tool for tool, _ in post] == ["mcp__genesis__lookup"]
