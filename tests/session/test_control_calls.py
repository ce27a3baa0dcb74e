"""Calls a live session makes to its CLI that wait for an answer
(``ControlProtocol.call`` → ``Answered``, kept in ``_live/calls.py``'s table
with a deadline): answered, failed, unanswered in time, answered twice or too
late, and the CLI gone before it answered; never a hang.  Driven through the
two-way fake's ``control`` op (a protocol of the session tests' that makes
calls) and, for the table alone, directly."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis.control import (
    Answered,
    ControlIntent,
    ControlProtocol,
    Incoming,
    Outgoing,
    ProtocolFault,
)
from coding_genesis.session import Session
from tests.session.twoway import TwoWayBackend, TwoWayProtocol, agent

pytestmark = pytest.mark.anyio

#: Far above what each call takes, far below a hang.
BOUND = 8


class CallingProtocol(TwoWayProtocol):
    """The two-way fake's protocol, with calls (``intent.name`` is the fake's ``what``)."""

    def __init__(self) -> None:
        super().__init__()
        self._ids = itertools.count(1)

    def call(self, intent: ControlIntent) -> tuple[Any, list[Outgoing]]:
        key = next(self._ids)
        return key, [{"op": "control", "id": key, "what": intent.name, "params": intent.params}]

    def receive(self, obj: dict[str, Any]) -> Sequence[Incoming]:
        if obj.get("type") != "control_answer":
            return super().receive(obj)
        error = obj.get("error")
        if error is not None and not isinstance(error, str):
            return [ProtocolFault(f"a control answer with a bad error: {error!r}")]
        return [Answered(obj.get("id"), obj.get("result"), error)]


class CallingBackend(TwoWayBackend):
    def control(self) -> ControlProtocol | None:
        return CallingProtocol()


def link_of(s: Session) -> Any:
    assert s._link is not None
    return s._link


@pytest.mark.slow
async def test_a_call_gets_its_answer_or_an_error_answer_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    a = CodingGenesisAgent(CallingBackend(), cwd=str(tmp_path), timeout=20, grace=1.0, ledger=False)
    async with a.session() as s:
        link = link_of(s)
        with anyio.fail_after(BOUND):
            echo = await link.call(ControlIntent("echo", {"model": "m2"}), 5)
            assert echo == Answered(1, {"model": "m2"}, None)
            failed = await link.call(ControlIntent("fail", {"x": 1}), 5)
            assert failed == Answered(2, None, "no such thing: {'x': 1}")
            silent = await link.call(ControlIntent("never"), 0.3)
            assert silent == Answered(3, error="the CLI did not answer within 0.3s")
            twice = await link.call(ControlIntent("twice", {"n": 1}), 5)
            assert twice.result == {"n": 1}
            turn = await s.send_result("TEXT still here")
            assert turn.status == 0 and turn.message == "still here"
        assert len(link.calls) == 0  # every call left the table
        assert link.calls.late == 1  # the second answer of "twice": let go
        with anyio.fail_after(BOUND):
            gone = await link.call(ControlIntent("die"), 30)
        assert gone.error == "the CLI ended before it answered"
        after = await link.call(ControlIntent("echo"), 5)
        assert after.error == "echo: the session is over"


async def test_a_protocol_without_calls_answers_an_error_and_writes_nothing(
    tmp_path: Path,
) -> None:
    async with agent(tmp_path).session() as s:
        link = link_of(s)
        refused = await link.call(ControlIntent("context_usage"), 5)
        assert refused == Answered(None, error="twoway cannot context_usage")
        assert len(link.calls) == 0
        assert (await s.send_result("TEXT on")).status == 0


async def test_the_table_alone() -> None:
    from coding_genesis._live.calls import PendingCalls

    calls, ended = PendingCalls(), anyio.Event()
    calls.add("k", 5)
    with pytest.raises(ValueError, match="already pending"):
        calls.add("k", 5)
    assert calls.answered(Answered("k", 1)) is True
    assert calls.answered(Answered("k", 2)) is False  # answered once
    assert calls.answered(Answered(["unhashable"], 3)) is False
    assert calls.answered(Answered("nobody", 4)) is False
    assert await calls.wait("k", ended) == Answered("k", 1)
    assert (len(calls), calls.late) == (0, 3)
    calls.add("j", 0)  # its deadline is now: an error answer at once
    with anyio.fail_after(BOUND):
        assert (await calls.wait("j", ended)).error == "the CLI did not answer within 0s"
