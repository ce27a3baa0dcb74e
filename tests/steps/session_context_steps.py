"""Steps of tests/features/session_context.feature: a live session's context
use, compaction on demand and forks, on the embedded failer (claude's control
protocol) or the fake ACP agent.  Built on the two-way steps' ``live`` world."""

from __future__ import annotations

from typing import Any

import pytest
from pytest_bdd import parsers, then, when

from coding_genesis import AgentUsageError, CompactionEvent, ContextUsage, Event, RunResult
from tests.steps.session_steps import Live


class Context:
    """What a context scenario asked and saw."""

    def __init__(self) -> None:
        self.usage: ContextUsage | None = None
        self.compacted: RunResult | None = None
        self.refused: str | None = None
        self.compactions: list[tuple[str | None, str]] = []


@pytest.fixture
def context() -> Context:
    return Context()


def _attempt(context: Context, fn: Any) -> Any:
    try:
        return fn()
    except AgentUsageError as exc:
        context.refused = str(exc)
        return None


@when("the session's context usage is asked")
def ask_usage(live: Live, context: Context) -> None:
    session = live.session
    assert session is not None, "no session is open"
    context.usage = _attempt(context, lambda: live.portal.call(session.context_usage))


@when("the session is compacted")
def compact(live: Live, context: Context) -> None:
    session = live.session
    assert session is not None, "no session is open"

    def heard(event: Event) -> None:
        if isinstance(event, CompactionEvent):
            context.compactions.append((event.run_id, event.trigger))

    unsubscribe = live.build().subscribe(heard)
    try:
        context.compacted = _attempt(context, lambda: live.portal.call(session.compact))
    finally:
        unsubscribe()


@then(parsers.parse("the context usage is {used:d} tokens of {size:d}"))
def usage_is(context: Context, used: int, size: int) -> None:
    assert context.usage is not None, context.refused
    assert (context.usage.used, context.usage.size) == (used, size), context.usage


@then(
    parsers.parse(
        'the compaction turn answered with status {status:d} and a "{trigger}" compaction event'
    )
)
def compacted(context: Context, status: int, trigger: str) -> None:
    result = context.compacted
    assert result is not None, context.refused
    assert result.status == status, result.message
    assert context.compactions == [(result.run_id, trigger)], context.compactions


@then(parsers.parse('the session refused saying "{words}"'))
def refused(context: Context, words: str) -> None:
    assert context.refused is not None and context.refused.startswith(words), context.refused
