"""Step definitions of the warm session pool over the Agent Client Protocol
(tests/features/acp_pool.feature), against the fake ACP agent
(tests/fakes/fake_acp.py: ``HISTORY`` answers the prompts its process was sent
before).  Steps are synchronous: the pool's coroutines go through the anyio
blocking portal fixture.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal
from pytest_bdd import given, parsers, then, when

from coding_genesis import RunSpec, SessionPool, run_many
from coding_genesis.errors import AgentUsageError
from tests.support import Ended, marked_processes

FAKES = Path(__file__).resolve().parents[1] / "fakes" / "bin"


class Pooled:
    """What a pool scenario set up and saw."""

    def __init__(self, tmp_path: Path, portal: BlockingPortal) -> None:
        self.tmp_path = tmp_path
        self.portal = portal
        self.ended = Ended()
        self.pool: SessionPool | None = None
        self._open: AbstractContextManager[SessionPool] | None = None
        self.answers: list[dict[str, Any]] = []
        self.conversations: list[list[str]] = []
        self.refusal: Exception | None = None

    def settings(self, flavour: str) -> dict[str, Any]:
        return {
            "cli_path": str(FAKES / flavour),
            "cwd": str(self.tmp_path),
            "timeout": 20,
            "grace": 1.0,
            "ledger": False,
            "observers": [self.ended],
        }

    def open(self, flavour: str, size: int) -> None:
        self.pool = SessionPool(flavour, size=size, max_idle=60, **self.settings(flavour))
        self._open = self.portal.wrap_async_context_manager(self.pool)
        self._open.__enter__()
        assert self.portal.call(functools.partial(self.pool.wait_warm, timeout=20))

    def close(self) -> None:
        if self._open is not None:
            self._open.__exit__(None, None, None)
            self._open = None

    def converse(self, *prompts: str) -> None:
        pool = self.pool
        assert pool is not None, "no pool is open"

        async def conversation() -> list[str]:
            async with pool.session() as session:
                return [(await session.send(prompt))["message"] for prompt in prompts]

        self.conversations.append(self.portal.call(conversation))


@pytest.fixture
def pooled(tmp_path: Path, portal: BlockingPortal) -> Iterator[Pooled]:
    world = Pooled(tmp_path, portal)
    yield world
    world.close()


@given(parsers.parse('a warm pool of {size:d} sessions of the fake ACP agent "{flavour}"'))
def warm_pool(pooled: Pooled, size: int, flavour: str) -> None:
    pooled.open(flavour, size)


@when(parsers.parse('{count:d} prompts "{prompt}" are run through the pool, {width:d} at a time'))
def run_through(pooled: Pooled, count: int, prompt: str, width: int) -> None:
    pool = pooled.pool
    assert pool is not None
    name = pool.backend.name
    requests = [RunSpec(prompt=prompt, backend=name) for _ in range(count)]
    call = functools.partial(run_many, requests, concurrency=width, pool=pool)
    pooled.answers = pooled.portal.call(call)


@when(parsers.parse('a pooled conversation is sent "{first}" then "{second}"'))
def two_turns(pooled: Pooled, first: str, second: str) -> None:
    pooled.converse(first, second)


@when(parsers.parse('another pooled conversation is sent "{prompt}"'))
def one_turn(pooled: Pooled, prompt: str) -> None:
    pooled.converse(prompt)


@when("the pool is closed")
def pool_closed(pooled: Pooled) -> None:
    pooled.close()


@when(parsers.parse('a pool of the fake ACP agent "{flavour}" is asked for with isolation "{how}"'))
def pool_with_isolation(pooled: Pooled, flavour: str, how: str) -> None:
    settings = {**pooled.settings(flavour), "isolation": how}
    try:
        SessionPool(flavour, size=2, max_idle=60, **settings)
    except AgentUsageError as exc:
        pooled.refusal = exc


@then(parsers.parse("every prompt answered with status {status:d}"))
def every_status(pooled: Pooled, status: int) -> None:
    assert pooled.answers, "no prompt was run"
    assert [a["status"] for a in pooled.answers] == [status] * len(pooled.answers), [
        a["message"] for a in pooled.answers
    ]


@then(parsers.parse('every answer says "{text}"'))
def every_answer(pooled: Pooled, text: str) -> None:
    assert [a["message"] for a in pooled.answers] == [text] * len(pooled.answers)


@then("each prompt was answered by a process of its own")
def own_processes(pooled: Pooled) -> None:
    pids = [a["pid"] for a in pooled.answers]
    assert len(set(pids)) == len(pids), pids


@then("no session was opened for its caller")
def none_fresh(pooled: Pooled) -> None:
    assert pooled.pool is not None
    assert pooled.pool.stats().fresh == 0, pooled.pool.stats()


@then("nothing the pool started is left")
def nothing_left(pooled: Pooled) -> None:
    pool = pooled.pool
    assert pool is not None and not pool.serving
    assert len(pooled.ended.keys) == pool.stats().opened > 0
    assert marked_processes(pooled.ended.keys) == []


@then(parsers.parse('conversation {n:d}\'s last answer says "{text}"'))
def conversation_said(pooled: Pooled, n: int, text: str) -> None:
    assert pooled.conversations[n - 1][-1] == text, pooled.conversations


@then(parsers.parse('it is refused with "{words}"'))
def refused_with(pooled: Pooled, words: str) -> None:
    assert pooled.refusal is not None, "nothing was refused"
    assert words in str(pooled.refusal), pooled.refusal
