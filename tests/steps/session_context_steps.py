"""Steps of tests/features/session_context.feature: a live session's context
use, compaction on demand and forks, on the embedded failer (claude's control
protocol) or the fake ACP agent.  Built on the two-way steps' ``live`` world."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
from pytest_bdd import parsers, then, when

from coding_genesis import (
    AgentUsageError,
    CompactionEvent,
    ContextUsage,
    Event,
    RunResult,
    Session,
)
from tests.steps.session_steps import Live, said


class Context:
    """What a context scenario asked and saw."""

    def __init__(self) -> None:
        self.usage: ContextUsage | None = None
        self.compacted: RunResult | None = None
        self.refused: str | None = None
        self.compactions: list[tuple[str | None, str]] = []
        self.fork: Session | None = None
        self._fork_open: AbstractContextManager[Session] | None = None
        self.fork_answers: list[RunResult] = []

    def close(self) -> None:
        if self._fork_open is not None:
            self._fork_open.__exit__(None, None, None)
            self._fork_open = self.fork = None


@pytest.fixture
def context() -> Iterator[Context]:
    world = Context()
    yield world
    world.close()


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


def _fork(live: Live, context: Context, at: str | None) -> None:
    session = live.session
    assert session is not None, "no session is open"
    forked = _attempt(context, lambda: session.fork(at))
    if forked is not None:
        context._fork_open = live.portal.wrap_async_context_manager(forked)
        context.fork = context._fork_open.__enter__()


@when("the session is forked")
def fork(live: Live, context: Context) -> None:
    _fork(live, context, None)


@when(parsers.parse("the session is forked at its turn {turn:d}"))
def fork_at(live: Live, context: Context, turn: int) -> None:
    session = live.session
    assert session is not None, "no session is open"
    turn_id = session.results[turn - 1].turn_id
    assert turn_id, session.results[turn - 1]
    _fork(live, context, turn_id)


@when(parsers.parse('the fork is sent "{prompt}"'))
def send_fork(live: Live, context: Context, prompt: str) -> None:
    assert context.fork is not None, context.refused
    context.fork_answers.append(live.portal.call(context.fork.send_result, prompt))


@then(parsers.parse('the fork answered "{text}"'))
def fork_answered(context: Context, text: str) -> None:
    (answer,) = context.fork_answers
    assert answer.status == 0 and said(answer.to_dict()) == text, answer.message


@then("the fork has a session id of its own")
def fork_id(live: Live, context: Context) -> None:
    assert live.session is not None and context.fork is not None
    (answer,) = context.fork_answers
    assert answer.session_id == context.fork.session_id
    assert answer.session_id and answer.session_id != live.session.session_id


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
