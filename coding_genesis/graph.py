"""Graph-node helpers for orchestrators ("the agent always responds").

- :func:`graceful_node` wraps a node function (sync or async) so that an
  exception becomes a state update with ``error_context`` and
  ``partial_failure`` (and ``force_response`` when the node is critical)
  instead of crashing the pipeline.
- :func:`should_force_response` is the conditional edge that skips to the
  response node after a critical failure.
- :func:`agent_node` makes a node that runs a :class:`CodingGenesisAgent` and
  puts its response, and on failure its error context, into the state.
- :func:`with_fallback_response` gives the response node a last-resort answer.

They work with any graph runner that calls ``node(state) -> update``; with
LangGraph (the optional ``langgraph`` extra) add :class:`GracefulState`'s keys
to the state schema.  LangGraph is never imported here.

A node returns only its update, never ``{**state, ...}``: LangGraph merges
updates, and re-sending keys with reducers (message lists) would duplicate them.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, cast

from coding_genesis._failures.classify import classify_exception
from coding_genesis._failures.errorcontext import (
    ErrorContext,
    error_context_for_exception,
    last_resort_message,
)
from coding_genesis.status import FailureCategory

if TYPE_CHECKING:
    from coding_genesis.agent import CodingGenesisAgent

__all__ = [
    "CONTINUE",
    "GENERATE_RESPONSE",
    "GracefulState",
    "agent_node",
    "graceful_node",
    "should_force_response",
    "with_fallback_response",
]

log = logging.getLogger("coding_genesis.graph")

#: Return values of :func:`should_force_response` (the always-responds names).
GENERATE_RESPONSE = "generate_response"
CONTINUE = "continue"

F = TypeVar("F", bound=Callable[..., Any])
State = Mapping[str, Any]


class GracefulState(TypedDict, total=False):
    """State keys the helpers write; add them to a graph's state schema."""

    error_context: ErrorContext | None  # None = no errors
    partial_failure: bool  # some things worked, some did not
    force_response: bool  # skip the remaining nodes, go to the response


def _control_flow(exc: BaseException) -> bool:
    """LangGraph's interrupts and commands are exceptions that must pass through."""
    return any(
        cls.__name__ == "GraphBubbleUp" and cls.__module__.startswith("langgraph")
        for cls in type(exc).__mro__
    )


def _failure_update(
    name: str, critical: bool, provides: Iterable[str], exc: Exception, state: Any
) -> dict[str, Any]:
    context = error_context_for_exception(
        name, exc, state if isinstance(state, Mapping) else None, provides=provides
    )
    log.error(
        "node %s failed (%s, critical=%s): %s",
        name,
        context.get("error_type"),
        critical,
        context.get("error_detail"),
        exc_info=exc,
    )
    update: dict[str, Any] = {"error_context": context, "partial_failure": True}
    if critical:
        update["force_response"] = True
    return update


def _catching(on_error: Callable[[Any, Exception], dict[str, Any]]) -> Callable[[F], F]:
    """Decorator for sync and async nodes: an exception (not LangGraph's own
    control flow) becomes ``on_error(state, exc)``, the node's update."""

    def decorator(func: F) -> F:
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(state: Any, *args: Any, **kwargs: Any) -> Any:
                try:
                    return await func(state, *args, **kwargs)
                except Exception as exc:
                    if _control_flow(exc):
                        raise
                    return on_error(state, exc)

            return cast(F, async_wrapper)

        @functools.wraps(func)
        def sync_wrapper(state: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return func(state, *args, **kwargs)
            except Exception as exc:
                if _control_flow(exc):
                    raise
                return on_error(state, exc)

        return cast(F, sync_wrapper)

    return decorator


def graceful_node(
    name: str, critical: bool = False, *, provides: Iterable[str] = ()
) -> Callable[[F], F]:
    """Wrap a graph node so it never crashes the pipeline.

    ``critical``: the pipeline cannot go on without this node; its failure
    also sets ``force_response`` (route with :func:`should_force_response`).
    ``provides``: the state keys the node fills, reported as unavailable data
    when it fails.  Works on sync and async node functions.
    """
    provided = tuple(provides)

    def on_error(state: Any, exc: Exception) -> dict[str, Any]:
        return _failure_update(name, critical, provided, exc, state)

    return _catching(on_error)


def should_force_response(state: State) -> str:
    """Conditional edge: ``"generate_response"`` after a critical failure, else ``"continue"``."""
    return GENERATE_RESPONSE if state.get("force_response") else CONTINUE


def agent_node(
    agent: CodingGenesisAgent,
    *,
    name: str | None = None,
    critical: bool = False,
    prompt_key: str = "task",
    result_key: str = "agent_result",
    **run_options: Any,
) -> Callable[[State], Awaitable[dict[str, Any]]]:
    """An async graph node that runs ``agent`` on ``state[prompt_key]``.

    The response goes to ``state[result_key]``.  A failed run (the agent
    answers, it does not raise) also sets ``error_context`` and
    ``partial_failure`` (and ``force_response`` if critical); a missing prompt
    or any other exception is caught by :func:`graceful_node`.
    """
    node_name = name or agent.name

    @graceful_node(node_name, critical=critical, provides=(result_key,))
    async def node(state: State) -> dict[str, Any]:
        prompt = state[prompt_key]
        response = await agent.run(prompt, **run_options)
        update: dict[str, Any] = {result_key: response}
        if response.get("is_error") or response.get("status") != 0:
            context = dict(response.get("error_context") or {})
            context["failed_node"] = node_name
            update["error_context"] = context
            update["partial_failure"] = True
            if critical:
                update["force_response"] = True
        return update

    node.__name__ = node.__qualname__ = f"agent_node_{node_name}".replace("-", "_")
    return node


def with_fallback_response(
    message_key: str = "response", source_key: str = "response_source"
) -> Callable[[F], F]:
    """Give the response node a last-resort answer (``LAST_RESORT_MESSAGES``).

    If the wrapped node raises, the update is ``{message_key: <fallback text>,
    source_key: "fallback"}``; the text fits the error in the state's
    ``error_context`` if there is one, else the exception's category.
    """

    def fallback(state: Any, exc: Exception) -> dict[str, Any]:
        context = state.get("error_context") if isinstance(state, Mapping) else None
        category: FailureCategory | str | None = (
            context.get("error_type") if isinstance(context, Mapping) else None
        ) or classify_exception(exc).category
        log.error("response node failed; answering with the fallback text", exc_info=exc)
        return {message_key: last_resort_message(category), source_key: "fallback"}

    return _catching(fallback)
