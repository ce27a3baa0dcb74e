"""The typed approval and hook records say, as dicts, exactly what the dicts
they replaced said: the same keys in the same order (results, events,
transcripts, the run log and ``genesis show`` read them), the optional ones
only when set."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from coding_genesis._live.approvals import approval_event, settle, withdrawn_record
from coding_genesis.approval import ApprovalRecord, ApprovalRequest, Decision, Remembered
from coding_genesis.hooks import HookInput, HookRecord, HookResult, run_hooks

#: The keys every settled record had, in order (``error`` and ``always`` followed when set).
BASE = [
    "tool",
    "kind",
    "tool_call_id",
    "turn",
    "allowed",
    "decision",
    "source",
    "reason",
    "message",
    "elapsed_s",
]
WITHDRAWN = [*BASE[:7], "withdrawn", *BASE[7:]]
HOOK = [
    "event",
    "hook",
    "tool",
    "tool_call_id",
    "turn",
    "outcome",
    "message",
    "error",
    "not_applied",
    "elapsed_s",
    "via",
]

CALL = ApprovalRequest(
    "Bash", {"command": "ls"}, kind="command", command="ls", tool_call_id="c1", turn=2
)


def _boom(request: ApprovalRequest) -> Decision:
    raise RuntimeError("approver bug")


async def _slow(request: ApprovalRequest) -> Decision:
    await anyio.sleep(5)
    return Decision.allow()


def _settled(approver: Any, remembered: Remembered | None = None, **changes: Any) -> ApprovalRecord:
    request = ApprovalRequest(**{**_fields(CALL), **changes})

    async def main() -> ApprovalRecord:
        return (await settle(request, approver, 0.05, None, remembered)).record

    return anyio.run(main)


def _fields(request: ApprovalRequest) -> dict[str, Any]:
    return {name: getattr(request, name) for name in ApprovalRequest.__slots__}


@pytest.mark.parametrize(
    ("approver", "source", "keys"),
    [
        (lambda r: Decision.allow(reason="ok"), "approver", BASE),
        (lambda r: Decision.deny("no", reason="why"), "approver", BASE),
        (None, "permissions", BASE),
        (_boom, "error", [*BASE, "error"]),
        (_slow, "timeout", BASE),
        (lambda r: None, "unsettled", BASE),
        (lambda r: Decision.allow(always=True), "approver", [*BASE, "always"]),
    ],
    ids=["allow", "deny", "permissions", "error", "timeout", "unsettled", "always"],
)
def test_a_settled_record_has_the_keys_it_always_had(
    approver: Any, source: str, keys: list[str]
) -> None:
    record = _settled(approver, Remembered())
    found = record.to_dict()
    assert list(found) == keys
    assert found["source"] == source
    assert (found["tool"], found["kind"], found["tool_call_id"], found["turn"]) == (
        "Bash",
        "command",
        "c1",
        2,
    )
    assert found["allowed"] is record.allowed
    assert found["reason"] is None or isinstance(found["reason"], str)
    assert isinstance(found["elapsed_s"], float)


def test_a_repeat_settled_by_the_store_and_an_unreadable_call() -> None:
    remembered = Remembered()
    first = _settled(lambda r: Decision.allow(always=True), remembered)
    assert first.always is not None and first.to_dict()["always"] == first.always
    again = _settled(None, remembered).to_dict()
    assert list(again) == BASE and again["source"] == "always" and again["allowed"] is True
    unreadable = _settled(lambda r: Decision.allow(), unreadable="a path that is not a string")
    found = unreadable.to_dict()
    assert list(found) == BASE and found["source"] == "unreadable" and found["allowed"] is False


def test_a_withdrawn_record_and_one_whose_input_was_not_applied() -> None:
    found = withdrawn_record(CALL, "interrupted").to_dict()
    assert list(found) == WITHDRAWN
    assert found["withdrawn"] is True and found["source"] == "withdrawn"
    assert found["elapsed_s"] is None and found["message"] is None
    assert found["reason"] == "the turn ended (interrupted) before the approver answered"
    record = ApprovalRecord(
        **{**_record_fields(_settled(lambda r: Decision.allow())), "not_applied": "input: x"}
    )
    assert list(record.to_dict()) == [*BASE, "not_applied"]


def _record_fields(record: ApprovalRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in ApprovalRecord.__slots__}


def test_the_approval_event_carries_the_record_beside_its_core() -> None:
    record = _settled(_boom)
    event = approval_event(record, CALL)
    assert (event.tool, event.allowed, event.decision, event.source) == (
        "Bash",
        False,
        record.decision,
        "error",
    )
    assert list(event.extra) == [
        "kind",
        "tool_call_id",
        "turn",
        "reason",
        "message",
        "elapsed_s",
        "error",
        "input",
    ]
    assert event.extra["input"] == {"command": "ls"}


def test_a_hook_record_has_every_key_always() -> None:
    def guard(data: HookInput) -> HookResult:
        return HookResult(block=True, message="no", context="more")

    async def main() -> tuple[HookRecord, ...]:
        ran = await run_hooks(
            [guard],
            HookInput("pre_tool", tool="Bash", tool_call_id="c1", turn=3),
            timeout=1.0,
            effects=frozenset({"block"}),
            backend="twoway",
        )
        return ran.records

    (record,) = anyio.run(main)
    found = record.to_dict()
    assert list(found) == HOOK
    assert found["outcome"] == "blocked" and found["message"] == "no" and found["error"] is None
    assert found["not_applied"] == "twoway cannot apply a pre_tool hook's context"
    assert (found["event"], found["tool"], found["tool_call_id"], found["turn"]) == (
        "pre_tool",
        "Bash",
        "c1",
        3,
    )
