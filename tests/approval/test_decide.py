"""Asking an approver: every answer, and every way of not answering, is a decision."""

from __future__ import annotations

import math
import time

import anyio
import anyio.lowlevel
import pytest

from coding_genesis.approval import (
    ApprovalRequest,
    Decided,
    Decision,
    Verdict,
    chain,
    decide,
    deny_commands,
)
from coding_genesis.errors import InvalidTimeoutError

pytestmark = pytest.mark.anyio

REQUEST = ApprovalRequest("Bash", {"command": "ls"}, kind="command", command="ls", cwd="/")


async def test_a_sync_decision_is_kept_as_given() -> None:
    given = Decision.allow({"command": "ls -la"}, always=True, reason="mine")

    def approver(request: ApprovalRequest) -> Verdict:
        assert request is REQUEST  # the raw request, as the session built it
        return given

    decided = await decide(approver, REQUEST, timeout=1)
    assert decided == Decided(given, "approver", decided.elapsed_s)
    assert 0 <= decided.elapsed_s < 1 and decided.error is None


async def test_an_async_decision_is_awaited() -> None:
    async def approver(request: ApprovalRequest) -> Verdict:
        await anyio.sleep(0.01)
        return Decision.deny("not now", end_turn=True)

    decided = await decide(approver, REQUEST, timeout=5)
    assert decided.source == "approver" and decided.elapsed_s >= 0.01
    assert not decided.decision.allowed and decided.decision.end_turn
    assert decided.decision.message == "not now"


async def test_true_and_false_are_allow_and_deny() -> None:
    allowed = await decide(lambda r: True, REQUEST, timeout=1)
    assert allowed.decision.allowed and allowed.source == "approver"
    assert allowed.decision.reason == "allowed by the approver"
    denied = await decide(lambda r: False, REQUEST, timeout=1)
    assert not denied.decision.allowed and not denied.decision.end_turn
    assert denied.decision.message == "denied by the approver" and denied.source == "approver"


async def test_nothing_settled_is_a_deny_saying_so() -> None:
    decided = await decide(chain(deny_commands("rm *")), REQUEST, timeout=1)
    assert decided.source == "unsettled" and not decided.decision.allowed
    assert decided.decision.message == "denied: no approver settled this request: Bash (command)"
    assert decided.decision.reason == decided.decision.message and decided.error is None


async def test_a_raising_approver_is_a_deny_and_its_error_is_kept() -> None:
    def sync(request: ApprovalRequest) -> Verdict:
        raise KeyError("no policy for Bash")

    async def later(request: ApprovalRequest) -> Verdict:
        await anyio.lowlevel.checkpoint()
        raise RuntimeError("policy server down")

    for approver, error in (
        (sync, "KeyError: 'no policy for Bash'"),
        (later, "RuntimeError: policy server down"),
    ):
        decided = await decide(approver, REQUEST, timeout=1)
        assert decided.source == "error" and decided.error == error
        assert not decided.decision.allowed
        # the model is told it failed; the result keeps why
        assert decided.decision.message == "denied: the approver failed"
        assert decided.decision.reason == f"the approver raised {error}"


async def test_an_answer_of_another_type_is_an_error() -> None:
    decided = await decide(lambda r: "yes", REQUEST, timeout=1)  # type: ignore[arg-type,return-value]
    assert decided.source == "error" and not decided.decision.allowed
    assert decided.error == "the approver answered str, not a Decision, bool or None"


@pytest.mark.slow
async def test_an_async_approver_that_hangs_is_cancelled_at_the_deadline() -> None:
    cancelled = anyio.Event()

    async def hangs(request: ApprovalRequest) -> Verdict:
        try:
            await anyio.sleep(math.inf)
        finally:
            cancelled.set()
        return True

    started = time.monotonic()
    decided = await decide(hangs, REQUEST, timeout=0.2)
    took = time.monotonic() - started
    assert cancelled.is_set() and 0.2 <= took < 2
    assert decided.source == "timeout" and not decided.decision.allowed
    assert decided.decision.message == "denied: the approver gave no answer within 0.2s"
    assert decided.decision.reason == "approver timeout: no answer within 0.2s"
    assert decided.error is None and decided.elapsed_s >= 0.2


@pytest.mark.slow
async def test_a_sync_answer_after_the_deadline_is_refused() -> None:
    def slow(request: ApprovalRequest) -> Verdict:
        time.sleep(0.15)  # inline: nothing can interrupt it, but its late answer is not used
        return True

    decided = await decide(slow, REQUEST, timeout=0.1)
    assert decided.source == "timeout" and not decided.decision.allowed


async def test_an_approver_that_raises_when_cancelled_is_still_a_timeout() -> None:
    async def rude(request: ApprovalRequest) -> Verdict:
        try:
            await anyio.sleep(math.inf)
        except anyio.get_cancelled_exc_class():
            raise RuntimeError("cleanup failed") from None
        return True

    decided = await decide(rude, REQUEST, timeout=0.05)
    assert decided.source == "timeout" and not decided.decision.allowed


async def test_the_callers_cancellation_is_not_swallowed() -> None:
    async def hangs(request: ApprovalRequest) -> Verdict:
        await anyio.sleep(math.inf)
        return True

    with anyio.move_on_after(0.05) as scope:
        await decide(hangs, REQUEST, timeout=10)
        pytest.fail("decide returned although its caller was cancelled")
    assert scope.cancelled_caught


@pytest.mark.parametrize("timeout", [0, -1, math.nan, "1"])
async def test_the_timeout_is_checked(timeout: float) -> None:
    with pytest.raises(InvalidTimeoutError):
        await decide(lambda r: True, REQUEST, timeout=timeout)
