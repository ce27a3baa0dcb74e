"""The caller's functions as tools on an ACP agent (``tools=``): the agent launches our
stdio MCP server (``session/new``'s ``mcpServers``), which bridges each call back to the
session over its private Unix socket (``coding_genesis._live.mcpbridge``).  Against the
fake ACP agent (``tests/fakes/fake_acp.py``: a real MCP client of the server it is given)."""

from __future__ import annotations

import os
import re
import socket
import stat
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_genesis import Budget
from coding_genesis.events import Event, ToolCallEvent, ToolResultEvent
from coding_genesis.hooks import HookInput
from coding_genesis.tools import tool
from tests.otel_support import Spans, spans
from tests.session.interrupting import interrupted_turn
from tests.session.test_acp_session import FLAVOURS, agent, recorded, remember, wait_gone

__all__ = ["spans"]

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(find_spec("mcp") is None, reason="needs the mcp package"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def boom(why: str) -> str:
    """Always fails."""
    raise RuntimeError(f"it broke: {why}")


@tool(timeout=0.5)
async def slow(seconds: float) -> str:
    """Sleeps."""
    await anyio.sleep(seconds)
    return "woke"


def _read_tree(path: Path) -> str:
    """Every file under ``path`` (a run's transcript), joined."""
    return "".join(p.read_text() for p in sorted(path.rglob("*")) if p.is_file())


def _socket_of(tmp_path: Path) -> str:
    opened = next(e for e in recorded(tmp_path) if e.get("received") == "session/new")
    (server,) = opened["params"]["mcpServers"]
    return str(server["args"][-1])


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_a_host_tool_answers_over_mcp_on_each_flavour(flavour: str, tmp_path: Path) -> None:
    a = agent(flavour, tmp_path, tools=[add, boom, slow])
    async with a.session() as s:
        listed = await s.send_result("MCPLIST")
        called = await s.send_result('MCP add {"a": 2, "b": 3}')
        failed = await s.send_result('MCP boom {"why": "on purpose"}')
        bad = await s.send_result('MCP add {"a": "x"}')
        late = await s.send_result('MCP slow {"seconds": 5}')
        path = _socket_of(tmp_path)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(Path(path).parent).st_mode) == 0o700
    assert listed.status == 0 and listed.message == "tools: add,boom,slow", listed.message
    assert called.status == 0 and called.message == "tool said: 5", called.message
    assert failed.message.startswith("tool failed: "), failed.message
    assert "it broke: on purpose" in failed.message
    assert bad.message.startswith("tool failed: "), bad.message
    assert late.message.startswith("tool failed: ") and "0.5" in late.message, late.message
    # the call is the agent's, reported in its stream: counted as a tool call
    assert called.tool_calls >= 1, called
    # the socket and its directory went with the session, and so did the server
    assert not await anyio.Path(path).exists() and not await anyio.Path(path).parent.exists()
    assert await wait_gone(s.key) == []


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_a_host_call_is_recorded_metered_and_traced_under_its_function_s_name(
    flavour: str, tmp_path: Path, spans: Spans
) -> None:
    """As on claude and codex (``tests/session/test_host_tools.py``): the agent's own
    report of the call (one event each, never a second from the session) names the
    caller's function, not the agent's kind of tool (``other``), whatever name the
    agent gives it (gemini's title, opencode's, qwen's ``_meta.toolName``); so do the
    tallies, the metering, the ``execute_tool`` span and the transcript."""
    runs = tmp_path / "runs"
    a = agent(flavour, tmp_path, tools=[add, boom], transcripts=str(runs))
    events: list[Event] = []
    a.subscribe(events.append)
    async with a.session() as s:
        called = await s.send_result('MCP add {"a": 2, "b": 3}')
        failed = await s.send_result('MCP boom {"why": "x"}')
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert [c.name for c in calls] == ["add", "boom"], calls
    assert [(r.name, r.is_error) for r in results] == [("add", False), ("boom", True)]
    assert results[0].output == "5" and [c.id for c in calls] == [r.id for r in results]
    if flavour != "gemini":  # gemini tells no input of an MCP call
        assert calls[0].input == {"a": 2, "b": 3}
    assert called.tool_calls == 1 and called.tool_usage == {"add": 1}, called
    assert (called.metering or {})["latency"]["tool_calls"][0]["name"] == "add"
    assert failed.failed_tools == ["boom"] and failed.tool_usage == {"boom": 1}, failed
    span = spans.one("execute_tool add")
    assert (span.attributes or {})["gen_ai.tool.name"] == "add"
    assert len(spans.named("execute_tool boom")) == 1 and not spans.named("execute_tool other")
    said = _read_tree(Path(called.transcript or ""))
    assert '"name": "add"' in said or '"name":"add"' in said, said[:2000]


async def test_a_post_tool_hook_sees_a_host_call_under_its_function_s_name(
    tmp_path: Path,
) -> None:
    """As on claude, a ``post_tool`` hook sees the caller's function's call,
    named by the function (the agent's kind of tool was ``other``)."""
    seen: list[HookInput] = []
    a = agent("opencode", tmp_path, tools=[add], hooks={"post_tool": seen.append})
    async with a.session() as s:
        called = await s.send_result('MCP add {"a": 2, "b": 3}')
    assert called.message == "tool said: 5", called.message
    assert [(h.tool, h.input, h.output) for h in seen] == [("add", {"a": 2, "b": 3}, "5")], seen


async def test_the_budget_counts_host_calls_on_acp(tmp_path: Path) -> None:
    """A tool-call budget sees a host call as on other CLIs: the second call of a
    session capped at one fails the turn ``budget_exceeded``."""
    a = agent("opencode", tmp_path, tools=[add], budget=Budget(max_tool_calls=1))
    async with a.session() as s:
        first = await s.send_result('MCP add {"a": 1, "b": 1}')
        over = await s.send_result('MCP add {"a": 1, "b": 2}')
    assert first.status == 0, first.message
    assert over.error == "budget_exceeded", over


@pytest.mark.parametrize("flavour", ["gemini", "qwen"])
async def test_the_approver_is_not_asked_about_the_callers_own_functions(
    flavour: str, tmp_path: Path
) -> None:
    """gemini asks before every MCP tool call (titled for the server), qwen in its
    auto mode without a classifier (titled with the arguments, named in ``_meta``);
    a call of one of ours is allowed without the approver (it is the caller's own
    code), with or without one."""
    asked: list[Any] = []
    a = agent(flavour, tmp_path, tools=[add], approver=remember(asked, False))
    async with a.session() as s:
        called = await s.send_result('MCP add {"a": 1, "b": 1}')
    assert called.message == "tool said: 2", called.message
    assert asked == [] and called.approvals == []
    b = agent(flavour, tmp_path, tools=[add])
    r = await b.run('MCP add {"a": 2, "b": 2}')
    assert r["status"] == 0 and r["message"] == "tool said: 4", r
    allowed = [e for e in recorded(tmp_path) if e.get("chosen")]
    assert [e["chosen"] for e in allowed] == ["proceed_once", "proceed_once"]


@pytest.mark.parametrize("server", ["genesis", "genesis-0123456789ab"])
async def test_a_tool_of_another_server_so_named_goes_to_the_approver(
    server: str, tmp_path: Path
) -> None:
    """Only this session's server is ours: a request titled for a tool of the
    same name on a server named ``genesis`` (the repository's or the user's
    own) or named as another session's goes to the approver, who refuses it;
    ours is still allowed without it."""
    asked: list[Any] = []
    a = agent("gemini", tmp_path, tools=[add], approver=remember(asked, False))
    async with a.session() as s:
        foreign = await s.send_result(f'MCPAS {server} add {{"a": 1, "b": 1}}')
        ours = await s.send_result('MCP add {"a": 1, "b": 1}')
    assert foreign.message == "tool refused: add", foreign.message
    assert [r.tool for r in asked] == ["other"], asked
    assert ours.message == "tool said: 2", ours.message
    assert len(asked) == 1 and [e["chosen"] for e in recorded(tmp_path) if e.get("chosen")] == [
        "cancel",
        "proceed_once",
    ]


async def test_the_server_is_declared_isolated_and_with_no_secret(tmp_path: Path) -> None:
    a = agent("gemini", tmp_path, tools=[add])
    async with a.session() as s:
        await s.send_result("hello")
    opened = next(e for e in recorded(tmp_path) if e.get("received") == "session/new")
    (server,) = opened["params"]["mcpServers"]
    # named per session, unguessably: no other server can pass for ours
    assert re.fullmatch(r"genesis-[0-9a-f]{12}", server["name"]) and server["env"] == []
    assert server["args"][:3] == ["-I", "-m", "coding_genesis._live.mcpstdio"]
    (tmp_path / "c").mkdir()
    c = agent("gemini", tmp_path / "c", tools=[add])
    async with c.session() as s3:
        await s3.send_result("hello")
    again = next(e for e in recorded(tmp_path / "c") if e.get("received") == "session/new")
    assert again["params"]["mcpServers"][0]["name"] != server["name"]
    # a session without tools declares no server
    (tmp_path / "b").mkdir()
    b = agent("qwen", tmp_path / "b")
    async with b.session() as s2:
        await s2.send_result("hello")
    opened = next(e for e in recorded(tmp_path / "b") if e.get("received") == "session/new")
    assert opened["params"]["mcpServers"] == []
    assert s2.key


async def test_another_process_cannot_reach_the_sessions_socket(tmp_path: Path) -> None:
    """Only the session's processes may call its tools: this test's own process
    (same user, not the agent's descendant, no marker) gets no answer."""
    if not hasattr(socket, "SO_PEERCRED"):
        pytest.skip("the peer check needs SO_PEERCRED (Linux)")
    a = agent("opencode", tmp_path, tools=[add])
    async with a.session() as s:
        await s.send_result("MCPLIST")
        path = _socket_of(tmp_path)
        stream = await anyio.connect_unix(path)
        async with stream:
            await stream.send(b'{"op": "list"}\n')
            got: Any = b""
            with anyio.move_on_after(5):
                try:
                    got = await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    got = b""  # closed (or reset) unanswered
        assert got == b"", got


async def test_without_the_mcp_package_a_turn_answers_64_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import coding_genesis._live.link as link

    monkeypatch.setattr(link, "mcp_missing", lambda: True)
    r = await agent("gemini", tmp_path, tools=[add]).run("hello")
    assert r["status"] == 64, r
    assert "pip install 'coding-genesis[mcp]'" in r["message"]
    assert recorded(tmp_path) == []  # nothing was started


def test_a_json_answer_that_is_no_object_is_also_structured_content() -> None:
    """gemini 0.61's MCP client parses a text block into ``structuredContent``
    when there is none and fails the call unless it is an object: our server
    gives it ``{"result": ...}`` for such a text (an object or plain text: none)."""
    from coding_genesis._live.mcpstdio import _result

    assert _result("5", False).structured_content == {"result": 5}
    assert _result('["a"]', True).structured_content == {"result": ["a"]}
    assert _result('{"a": 1}', False).structured_content is None
    assert _result("plain words", False).structured_content is None
    assert _result("5", False).content[0].text == "5"  # type: ignore[union-attr]


async def test_an_interrupt_cancels_the_running_host_call(tmp_path: Path) -> None:
    """The agent gives up on the call at ``session/cancel``; the call still running
    on our side is cancelled with its turn, and the session goes on."""
    started, cancelled = anyio.Event(), anyio.Event()

    @tool(timeout=60)
    async def hang() -> str:
        """Hangs."""
        started.set()
        try:
            await anyio.sleep(600)
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise
        return "never"

    a = agent("qwen", tmp_path, tools=[hang, add])

    async def running() -> None:
        with anyio.fail_after(15):
            await started.wait()

    async with a.session() as s:
        r = await interrupted_turn(s, "MCP hang {}", running)
        assert r.status == 130 and r.error == "interrupted", r.message
        with anyio.fail_after(5):
            await cancelled.wait()
        after = await s.send_result('MCP add {"a": 1, "b": 2}')
        assert after.status == 0 and after.message == "tool said: 3", after.message
    assert await wait_gone(s.key) == []
