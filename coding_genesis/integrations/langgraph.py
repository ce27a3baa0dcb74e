"""A LangGraph node that runs a coding agent: ``genesis_node(...)``.

Install with ``pip install "coding-genesis[langgraph]"``.

The node reads the prompt from the graph state, runs the agent, writes every
run event to LangGraph's custom stream (``stream_mode="custom"``), calls
``runtime.heartbeat()`` on every event so a ``TimeoutPolicy(idle_timeout=...)``
measures the CLI's silence rather than the node's total time, and returns a
partial state update ``{result_key: result_dict}``.  It never raises for a
runtime failure: the failure is in the result dict.  Cancellation (a LangGraph
``TimeoutPolicy``, or cancelling the graph run) stops the CLI's whole process
tree; note that LangGraph raises ``NodeTimeoutError`` without waiting for the
cancelled node, so the tree is stopped in the background within the agent's
``grace`` (+ a short kill wait): keep the event loop running that long.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Protocol

from coding_genesis.agent import CodingGenesisAgent
from coding_genesis.batch import failure_result
from coding_genesis.events import Event
from coding_genesis.result import RunResponse
from coding_genesis.status import Status

try:
    from langgraph.runtime import Runtime
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        'coding_genesis.integrations.langgraph needs LangGraph: pip install "coding-genesis[langgraph]"'
    ) from exc

__all__ = ["AgentFactory", "genesis_node"]

log = logging.getLogger("coding_genesis.integrations.langgraph")

AgentFactory = Callable[[], CodingGenesisAgent]


class Node(Protocol):
    """A LangGraph node that is handed the run's ``runtime`` (by keyword)."""

    def __call__(self, state: Any, *, runtime: Runtime[Any]) -> Awaitable[dict[str, Any]]: ...


_MISSING = object()


def _read(state: Any, key: str) -> Any:
    if isinstance(state, Mapping):
        return state.get(key, _MISSING)
    return getattr(state, key, _MISSING)


async def _run_to_the_end(
    agent: CodingGenesisAgent, run: Coroutine[Any, Any, RunResponse]
) -> RunResponse:
    """Await the run in its own task, so a cancellation reaches it exactly once.

    Awaiting the run directly would let every ``cancel()`` of the node's task
    fall through into it, and hosts do cancel repeatedly (anyio's
    level-triggered cancel scopes re-deliver on every loop cycle), which would
    cut the agent's shielded cleanup short.  So: cancel the run once, wait
    (bounded by the stop sequence) for its tree to be gone, then re-raise.
    """
    inner = asyncio.ensure_future(run)
    try:
        return await asyncio.shield(inner)
    except asyncio.CancelledError:
        inner.cancel()
        config = agent.config.supervisor()
        limit = config.grace * (len(config.stop_signals) + 1) + 2 * config.kill_wait + 1.0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        while not inner.done() and loop.time() < deadline:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({inner}, timeout=deadline - loop.time())
        if not inner.done():
            log.warning("a cancelled genesis node run did not finish within %gs", limit)
        raise


def _failure(message: str) -> dict[str, Any]:
    result = failure_result(0, message, status=Status.USAGE)
    result.pop("index", None)
    return result


def genesis_node(
    agent: CodingGenesisAgent | AgentFactory,
    *,
    prompt_key: str = "prompt",
    result_key: str = "genesis_result",
    stream_events: bool = True,
    heartbeat: bool = True,
    run_kwargs: Mapping[str, Any] | None = None,
) -> Node:
    """Build an async LangGraph node around an agent (or a factory of agents).

    Pass a factory (``lambda: CodingGenesisAgent("claude", ...)``) when the
    node may run concurrently (parallel branches, several threads of one
    graph): an agent runs one request at a time and answers a second one with
    status 75 (busy).  ``run_kwargs`` go to :meth:`CodingGenesisAgent.run`
    (``timeout``, ``cwd``, ``options``...).
    """
    if not isinstance(agent, CodingGenesisAgent) and not callable(agent):
        raise TypeError(f"genesis_node() needs an agent or an agent factory, got {agent!r}")
    extra = dict(run_kwargs or {})

    async def node(state: Any, *, runtime: Runtime[Any]) -> dict[str, Any]:
        prompt = _read(state, prompt_key)
        if prompt is _MISSING:
            return {result_key: _failure(f"the graph state has no {prompt_key!r}")}
        try:
            the_agent = agent if isinstance(agent, CodingGenesisAgent) else agent()
        except Exception as exc:
            log.exception("the agent factory of a genesis node failed")
            return {result_key: _failure(f"could not build the agent: {exc}")}
        writer = runtime.stream_writer
        # runtime.heartbeat() refreshes a TimeoutPolicy idle_timeout (newer LangGraph).
        beat = getattr(runtime, "heartbeat", None) if heartbeat else None

        def on_event(event: Event) -> None:
            if beat is not None:
                beat()
            if stream_events:
                writer(event.to_dict())

        with the_agent.subscribe(on_event):
            result = await _run_to_the_end(the_agent, the_agent.run(prompt, **extra))
        return {result_key: result}

    node.__name__ = "genesis_node"
    return node
