"""Graph-node helpers: plain functions first, then a real LangGraph graph in
which a failing agent node still lets the graph reach its response node."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis._failures.taxonomy import LAST_RESORT_MESSAGES
from coding_genesis.graph import (
    CONTINUE,
    GENERATE_RESPONSE,
    GracefulState,
    agent_node,
    graceful_node,
    should_force_response,
    with_fallback_response,
)
from coding_genesis.status import FailureCategory
from tests.support import CONTEXT_KEYS


@pytest.mark.slow
def test_graph_module_does_not_import_langgraph() -> None:
    import subprocess

    code = "import coding_genesis.graph, sys; print('langgraph' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30
    )
    assert out.stdout.strip() == "False"


# -- plain functions (spec 003's unit tests) ------------------------------------


def test_graceful_node_catches_errors_async() -> None:
    @graceful_node("test_node", critical=False)
    async def failing_node(state: dict[str, Any]) -> dict[str, Any]:
        raise ConnectionError("Directus is down")

    result = asyncio.run(failing_node({"trace_id": "test"}))
    assert result["partial_failure"] is True
    assert result["error_context"]["error_type"] == "network"  # spec 003's "connection"
    assert "force_response" not in result
    assert set(result["error_context"]) >= CONTEXT_KEYS
    assert result["error_context"]["can_retry"] is True


def test_graceful_node_sync_and_critical() -> None:
    @graceful_node("fetch_data", critical=True, provides=["profile", "history"])
    def fetch(state: dict[str, Any]) -> dict[str, Any]:
        raise TimeoutError("the database took too long")

    state = {"task": "x", "conversation_history": ["hi"], "query_results": {}, "trace_id": "t"}
    update = fetch(state)
    assert update["force_response"] is True and update["partial_failure"] is True
    context = update["error_context"]
    assert context["failed_node"] == "fetch_data"
    assert context["error_type"] == "timeout"
    assert context["error_detail"] == "TimeoutError: the database took too long"
    assert context["available_data"] == ["task", "conversation_history"]
    assert context["unavailable_data"] == ["profile", "history"]
    assert context["degraded_results"] is True
    assert "fetch_data" in context["user_hint"]
    assert should_force_response({**state, **update}) == GENERATE_RESPONSE
    assert should_force_response(state) == CONTINUE


def test_graceful_node_passes_results_and_arguments_through() -> None:
    @graceful_node("ok")
    def node(state: dict[str, Any], extra: int = 0) -> dict[str, Any]:
        return {"n": state["n"] + extra}

    assert node({"n": 1}, extra=2) == {"n": 3}
    assert node.__name__ == "node"


def test_graceful_node_does_not_swallow_cancellation() -> None:
    @graceful_node("slow")
    async def node(state: dict[str, Any]) -> dict[str, Any]:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(node({}))


def test_error_detail_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVICE_API_KEY", "sk-secret-value-123456")

    @graceful_node("call")
    def node(state: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("401 for key sk-secret-value-123456")

    context = node({})["error_context"]
    assert context["error_type"] == "auth"
    assert "sk-secret" not in context["error_detail"]


def test_last_resort_fallback() -> None:
    @with_fallback_response()
    async def generate_response(state: dict[str, Any]) -> dict[str, Any]:
        raise ConnectionError("the LLM is completely down")

    result = asyncio.run(generate_response({"task": "x"}))
    assert result["response"] == LAST_RESORT_MESSAGES[FailureCategory.NETWORK]
    assert result["response_source"] == "fallback"

    @with_fallback_response(message_key="assistant_response")
    def respond(state: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("boom")

    update = respond({"error_context": {"error_type": "rate_limit"}})
    assert update["assistant_response"] == LAST_RESORT_MESSAGES[FailureCategory.RATE_LIMIT]


@pytest.mark.slow
def test_agent_node_with_a_failing_agent(tmp_path: Path) -> None:
    agent = CodingGenesisAgent("failer", timeout=10, options={"state_dir": str(tmp_path)})
    node = agent_node(agent, critical=True)
    update = anyio.run(node, {"task": "/fail"})
    assert update["agent_result"]["status"] == 1
    assert update["error_context"]["error_type"] == "agent_error"
    assert update["error_context"]["failed_node"] == "failer-agent"
    assert update["force_response"] is True and update["partial_failure"] is True


def test_agent_node_without_a_prompt() -> None:
    node = agent_node(CodingGenesisAgent("failer"), name="coder", result_key="code")
    update = anyio.run(node, {})
    assert update["error_context"]["error_type"] == "invalid_task"  # KeyError('task')
    assert update["error_context"]["unavailable_data"] == ["code"]
    assert "force_response" not in update


# -- a real LangGraph graph -------------------------------------------------------


class PipelineState(GracefulState, total=False):
    task: str
    agent_result: dict[str, Any]
    reviewed: bool
    response: str
    response_source: str


def build_graph(
    agent: CodingGenesisAgent, *, critical: bool = True, broken_review: bool = False
) -> Any:
    graph_mod = pytest.importorskip("langgraph.graph")

    @graceful_node("review", critical=False, provides=["reviewed"])
    def review(state: PipelineState) -> dict[str, Any]:
        if broken_review:
            raise RuntimeError("review service: connection refused")
        return {"reviewed": True}

    @with_fallback_response()
    def respond(state: PipelineState) -> dict[str, Any]:
        context = state.get("error_context")
        if context:
            return {"response": f"{context['user_hint']} {context['retry_suggestion']}"}
        return {"response": state["agent_result"]["message"]}

    graph = graph_mod.StateGraph(PipelineState)
    graph.add_node("code", agent_node(agent, critical=critical))
    graph.add_node("review", review)
    graph.add_node("respond", respond)
    graph.add_edge(graph_mod.START, "code")
    graph.add_conditional_edges(
        "code", should_force_response, {GENERATE_RESPONSE: "respond", CONTINUE: "review"}
    )
    graph.add_edge("review", "respond")
    graph.add_edge("respond", graph_mod.END)
    return graph.compile()


def test_langgraph_success_path(tmp_path: Path) -> None:
    agent = CodingGenesisAgent("failer", timeout=10)
    state = asyncio.run(build_graph(agent).ainvoke({"task": "hello"}))
    assert state["reviewed"] is True
    assert state.get("error_context") is None
    assert "responding normally" in state["response"]


@pytest.mark.parametrize(
    ("prompt", "cli_path", "category"),
    [
        ("/fail", None, "agent_error"),
        ("/rate-limit", None, "rate_limit"),
        ("hi", "missing", "missing"),
    ],
)
def test_langgraph_failing_agent_reaches_the_response(
    prompt: str, cli_path: str | None, category: str, tmp_path: Path
) -> None:
    agent = CodingGenesisAgent(
        "failer", timeout=10, cli_path=str(tmp_path / "no-such-failer") if cli_path else None
    )
    state = asyncio.run(build_graph(agent).ainvoke({"task": prompt}))
    context = state["error_context"]
    assert context["error_type"] == category
    assert set(context) >= CONTEXT_KEYS
    assert state["partial_failure"] is True and state["force_response"] is True
    assert "reviewed" not in state  # the critical failure skipped the review
    assert state["response"] == f"{context['user_hint']} {context['retry_suggestion']}"
    assert state["agent_result"]["failure"]["category"] == category


@pytest.mark.slow
def test_langgraph_non_critical_failure_continues_degraded(tmp_path: Path) -> None:
    agent = CodingGenesisAgent("failer", timeout=10)
    state = asyncio.run(build_graph(agent, critical=False).ainvoke({"task": "/fail"}))
    assert state["reviewed"] is True  # the pipeline went on
    assert state["error_context"]["error_type"] == "agent_error"
    assert "force_response" not in state


@pytest.mark.slow
def test_langgraph_node_exception_and_broken_response(tmp_path: Path) -> None:
    agent = CodingGenesisAgent("failer", timeout=10)
    state = asyncio.run(build_graph(agent, broken_review=True).ainvoke({"task": "hello"}))
    context = state["error_context"]
    assert context["failed_node"] == "review"
    assert context["error_type"] == "network"
    assert "agent_result" in context["available_data"]
    assert context["unavailable_data"] == ["reviewed"]
    assert state["response"].startswith("The review step could not reach")


@pytest.mark.slow
def test_langgraph_sync_invoke_with_a_sync_node(tmp_path: Path) -> None:
    graph_mod = pytest.importorskip("langgraph.graph")
    agent = CodingGenesisAgent("failer", timeout=10)

    @graceful_node("code", critical=True, provides=["agent_result"])
    def code(state: PipelineState) -> dict[str, Any]:
        result = agent.run_sync(state["task"])
        if result["status"] != 0:
            return {
                "agent_result": result,
                "error_context": result["error_context"],
                "partial_failure": True,
                "force_response": True,
            }
        return {"agent_result": result}

    @with_fallback_response()
    def respond(state: PipelineState) -> dict[str, Any]:
        raise RuntimeError("the response generator is down too")

    graph = graph_mod.StateGraph(PipelineState)
    graph.add_node("code", code)
    graph.add_node("respond", respond)
    graph.add_edge(graph_mod.START, "code")
    graph.add_edge("code", "respond")
    graph.add_edge("respond", graph_mod.END)
    state = graph.compile().invoke({"task": "/partial"})
    assert state["error_context"]["error_type"] == "partial"
    assert state["response"] == LAST_RESORT_MESSAGES[FailureCategory.PARTIAL]
    assert state["response_source"] == "fallback"
