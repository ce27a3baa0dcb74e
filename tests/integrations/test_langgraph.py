"""genesis_node in real LangGraph graphs: custom stream, heartbeats, timeouts."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, TypedDict

import anyio
import psutil
import pytest

from coding_genesis import CodingGenesisAgent
from tests.support import FakeCLI, marked_processes, poll_until

langgraph = pytest.importorskip("langgraph", reason="the langgraph extra is not installed")

from langgraph.errors import NodeTimeoutError  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import TimeoutPolicy  # noqa: E402

from coding_genesis.integrations.langgraph import genesis_node  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class State(TypedDict, total=False):
    prompt: str
    genesis_result: dict[str, Any]
    after: str


def graph_of(node: Any, timeout: TimeoutPolicy | None = None) -> Any:
    def after(state: State) -> State:
        return {"after": f"saw status {state['genesis_result']['status']}"}

    builder = StateGraph(State)
    builder.add_node("code", node, timeout=timeout)
    builder.add_node("after", after)
    builder.add_edge(START, "code")
    builder.add_edge("code", "after")
    builder.add_edge("after", END)
    return builder.compile()


async def stream(graph: Any, state: State) -> tuple[list[dict[str, Any]], State]:
    custom: list[dict[str, Any]] = []
    final: State = {}
    async for mode, chunk in graph.astream(state, stream_mode=["custom", "values"]):
        if mode == "custom":
            custom.append(chunk)
        else:
            final = chunk
    return custom, final


async def wait_gone(pids: list[int], limit: float = 10.0) -> list[int]:
    """LangGraph does not await a timed-out node: its tree stops in the background."""
    await poll_until(lambda: not any(psutil.pid_exists(p) for p in pids), limit)
    return [p for p in pids if psutil.pid_exists(p)]


async def test_node_streams_events_and_returns_the_result() -> None:
    graph = graph_of(genesis_node(lambda: CodingGenesisAgent("failer", name="coder")))
    custom, final = await stream(graph, {"prompt": "hello"})
    kinds = [c["type"] for c in custom]
    assert (kinds[0], kinds[-1]) == ("state", "run_finished")
    for kind in ("run_started", "session", "text", "result", "run_finished"):
        assert kind in kinds
    assert {c["node"] for c in custom} == {"coder"}
    assert final["genesis_result"]["status"] == 0
    assert final["genesis_result"]["agent"] == "coder"
    assert final["after"] == "saw status 0"


async def test_plain_custom_stream_mode() -> None:
    graph = graph_of(genesis_node(CodingGenesisAgent("failer")))
    chunks = [c async for c in graph.astream({"prompt": "hello"}, stream_mode="custom")]
    assert [c["type"] for c in chunks if c["type"] == "run_finished"] == ["run_finished"]


async def test_runtime_failures_come_back_as_state_not_exceptions(tmp_path: Any) -> None:
    graph = graph_of(genesis_node(lambda: CodingGenesisAgent("failer")))
    _custom, final = await stream(graph, {"prompt": "/rate-limit"})
    assert final["genesis_result"]["status"] == 1
    assert final["genesis_result"]["failure"]["category"] == "rate_limit"
    assert final["after"] == "saw status 1"

    missing = graph_of(genesis_node(lambda: CodingGenesisAgent("failer")))
    _custom, final = await stream(missing, {})
    assert (final["genesis_result"]["status"], final["genesis_result"]["error"]) == (
        64,
        "invalid_request",
    )

    def broken_factory() -> CodingGenesisAgent:
        return CodingGenesisAgent("failer", cwd=tmp_path / "missing")

    _custom, final = await stream(graph_of(genesis_node(broken_factory)), {"prompt": "hi"})
    assert final["genesis_result"]["status"] == 64
    assert "does not exist" in final["genesis_result"]["message"]


async def test_run_timeout_policy_cancels_the_node_and_its_tree() -> None:
    graph = graph_of(
        genesis_node(lambda: CodingGenesisAgent("failer", grace=0.5)),
        timeout=TimeoutPolicy(run_timeout=1.0),
    )
    pids: list[int] = []
    with pytest.raises(NodeTimeoutError) as caught:  # noqa: PT012  (raised while streaming)
        async for chunk in graph.astream({"prompt": "/timeout 30"}, stream_mode="custom"):
            if chunk["type"] == "run_started":
                pids.append(chunk["pid"])
    assert caught.value.kind == "run"
    assert len(pids) == 1
    assert await wait_gone(pids) == []


def ticking_script(fake: FakeCLI, ticks: int, every: float) -> None:
    steps: list[dict[str, Any]] = [{"init": True}]
    for i in range(ticks):
        steps.append({"sleep": every})
        steps.append(
            {
                "emit": {
                    "type": "assistant",
                    "message": {"content": [{"type": "text", "text": f"tick {i}"}]},
                }
            }
        )
    steps.append({"result": "done"})
    fake.script(steps)


async def test_heartbeats_keep_an_idle_timeout_from_firing(fake_claude: FakeCLI) -> None:
    """8 lines 0.4 s apart: far longer than the idle timeout in total, never idle."""
    ticking_script(fake_claude, ticks=8, every=0.4)
    graph = graph_of(
        genesis_node(lambda: fake_claude.agent()),
        timeout=TimeoutPolicy(idle_timeout=1.5, refresh_on="heartbeat"),
    )
    custom, final = await stream(graph, {"prompt": "work"})
    assert final["genesis_result"]["status"] == 0
    assert [c["text"] for c in custom if c["type"] == "text"][:8] == [f"tick {i}" for i in range(8)]


async def test_idle_timeout_fires_on_a_silent_cli(fake_claude: FakeCLI) -> None:
    sticky_tree(fake_claude)
    graph = graph_of(
        genesis_node(lambda: fake_claude.agent(grace=0.3)),
        timeout=TimeoutPolicy(idle_timeout=1.0, refresh_on="heartbeat"),
    )
    seen: list[str] = []
    with pytest.raises(NodeTimeoutError) as caught:  # noqa: PT012  (raised while streaming)
        async for chunk in graph.astream({"prompt": "work"}, stream_mode="custom"):
            seen.append(chunk["type"])
    assert caught.value.kind == "idle"
    assert "session" in seen
    # LangGraph does not await a timed-out node: its tree stops in the background.
    assert await poll_until(lambda: not marked_processes([fake_claude.mark]), 10)


def sticky_tree(fake: FakeCLI) -> None:
    """A CLI that ignores SIGTERM and leaves a setsid grandchild that does too."""
    fake.script(
        [
            {"init": True},
            {"grandchild": {"setsid": True, "ignore_sigterm": True, "sleep": 600}},
            {"ignore_sigterm": True},
            {"hang": True},
        ]
    )


async def started(fake: FakeCLI, count: int = 2) -> None:
    assert await poll_until(lambda: len(marked_processes([fake.mark])) >= count)


async def test_cancelling_the_graph_task_stops_the_tree_first(fake_claude: FakeCLI) -> None:
    """A plain asyncio cancel of a task consuming ``astream``: by the time the
    cancellation has gone through, the tree is gone."""
    sticky_tree(fake_claude)
    graph = graph_of(genesis_node(lambda: fake_claude.agent(grace=0.3)))
    chunks: list[str] = []

    async def consume() -> None:
        async with contextlib.aclosing(graph.astream({"prompt": "w"}, stream_mode="custom")) as s:
            async for chunk in s:
                chunks.append(chunk["type"])

    task = asyncio.create_task(consume())
    await started(fake_claude)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert "run_started" in chunks
    assert marked_processes([fake_claude.mark]) == []


async def test_a_cancel_scope_around_ainvoke_stops_the_tree_first(fake_claude: FakeCLI) -> None:
    """anyio re-delivers a cancellation on every loop cycle: the node still lets
    the agent's cleanup finish before the cancellation goes on."""
    sticky_tree(fake_claude)
    graph = graph_of(genesis_node(lambda: fake_claude.agent(grace=0.3)))
    async with anyio.create_task_group() as tg:
        scope = anyio.CancelScope()

        async def invoke() -> None:
            with scope:
                await graph.ainvoke({"prompt": "w"})
                pytest.fail("the graph run should have been cancelled")

        tg.start_soon(invoke)
        with anyio.fail_after(30):
            await started(fake_claude)
        scope.cancel()
    assert scope.cancelled_caught
    assert marked_processes([fake_claude.mark]) == []
