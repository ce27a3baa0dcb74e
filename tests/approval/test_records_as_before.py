"""The approval and hook records of whole sessions, as results carry them, equal
what they were when they were plain dicts.

``records_before.json`` was written by this module's scenario (``python -m
tests.approval.test_records_as_before > tests/approval/records_before.json``) on
``471c6f4``, the last commit that kept the records as ``list[dict]``: every kind
of record a session makes (allowed, denied, the approver raising, slow, unsure;
"always" and the remembered answer after it; a question withdrawn by an
interrupt; hooks continuing, changing, blocking, raising, observed and not
applied) through the real two-way fake CLI. The typed ``ApprovalRecord`` and
``HookRecord`` must render them key for key, in the same order, as a result's
``approvals`` and ``hooks`` and in its JSON. Elapsed times are masked.  Since
issue 41 each hook record ends with ``via`` (``"cli"`` for all of these: the
CLI reported each point), appended to the golden file's hook records.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_genesis.approval import ApprovalRequest, Decision
from coding_genesis.hooks import HookInput, HookResult
from tests.session import twoway

pytestmark = pytest.mark.slow

GOLDEN = Path(__file__).with_name("records_before.json")


def _approver(request: ApprovalRequest) -> Decision | None:
    command = str(request.input.get("command", request.input.get("file_path", "")))
    if "boom" in command:
        raise RuntimeError("approver bug")
    if "unsure" in command:
        return None
    if "always" in command:
        return Decision.allow(always=True, reason="trusted")
    if "rm" in command:
        return Decision.deny("not that", reason="destructive")
    return Decision.allow(reason="fine")


async def _slow(request: ApprovalRequest) -> Decision:
    await anyio.sleep(5)
    return Decision.allow()


def _pre(hook: HookInput) -> HookResult | None:
    command = str(hook.input.get("command", ""))
    if "secret" in command:
        return HookResult(block=True, message="no secrets")
    if "change" in command:
        return HookResult(input={"command": "echo changed"}, context="changed by a hook")
    if "hookbug" in command:
        raise ValueError("hook bug")
    return None


def _end(hook: HookInput) -> HookResult:
    return HookResult(block=True, message="keep going", context="more")


def _masked(records: list[dict[str, Any]]) -> list[list[Any]]:
    """Each record as its (key, value) pairs in order, times masked."""
    return [
        [[key, "<elapsed>" if key == "elapsed_s" else value] for key, value in record.items()]
        for record in records
    ]


async def scenario(tmp: Path) -> dict[str, Any]:
    """Every kind of record, turn by turn: ``{label: {approvals, hooks, json}}``."""
    out: dict[str, Any] = {}

    def keep(label: str, result: Any) -> None:
        as_json = json.loads(result.model_dump_json())
        out[label] = {
            "approvals": _masked(result.approvals),
            "hooks": _masked(result.hooks),
            "json": [_masked(as_json["approvals"]), _masked(as_json["hooks"])],
        }

    agent = twoway.agent(tmp, ledger=False, approver=_approver, approval_timeout=0.3)
    async with agent.session(hooks={"pre_tool": _pre, "turn_end": _end}) as s:
        for label, prompt in [
            ("allowed", 'HOOKASK Bash {"command": "echo hi"}'),
            ("denied", 'HOOKASK Bash {"command": "rm -rf /"}'),
            ("approver_raised", 'HOOKASK Bash {"command": "echo boom"}'),
            ("approver_unsure", 'HOOKASK Bash {"command": "echo unsure"}'),
            ("always_command", 'HOOKASK Bash {"command": "echo always"}'),
            ("always", 'ASK Write {"file_path": "always.txt", "content": "x"}'),
            ("remembered", 'ASK Write {"file_path": "always.txt", "content": "y"}'),
            ("hook_blocked", 'HOOKASK Bash {"command": "cat secret"}'),
            ("hook_changed", 'HOOKASK Bash {"command": "change me"}'),
            ("hook_raised", 'HOOKASK Bash {"command": "echo hookbug"}'),
            ("ask_plain", 'ASK Write {"file_path": "a.txt", "content": "x"}'),
            ("hook_point", 'HOOK Bash {"command": "echo observed"}'),
        ]:
            keep(label, await s.send_result(prompt))

    slow = twoway.agent(tmp, ledger=False, approver=_slow, approval_timeout=0.3)
    keep("approver_slow", await slow.run_result('ASK Bash {"command": "echo slow"}'))

    asked = anyio.Event()

    async def hold(request: ApprovalRequest) -> Decision:
        asked.set()
        await anyio.sleep(30)
        return Decision.allow()

    held = twoway.agent(tmp, ledger=False, approver=hold, approval_timeout=20)
    async with held.session() as s, anyio.create_task_group() as tg:
        results: list[Any] = []

        async def send() -> None:
            results.append(await s.send_result('ASK Bash {"command": "echo held"}'))

        tg.start_soon(send)
        await asked.wait()
        await s.interrupt()
    keep("withdrawn", results[0])
    return out


def _run_scenario() -> dict[str, Any]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        return anyio.run(scenario, Path(tmp))


def test_every_record_renders_as_it_did_when_records_were_dicts() -> None:
    before = json.loads(GOLDEN.read_text())
    now = json.loads(json.dumps(_run_scenario()))
    assert list(now) == list(before)
    for label, records in before.items():
        assert now[label] == records, label
    sources = {dict(r)["source"] for turn in before.values() for r in turn["approvals"]}
    outcomes = {dict(r)["outcome"] for turn in before.values() for r in turn["hooks"]}
    assert {"approver", "error", "timeout", "unsettled", "always", "withdrawn"} <= sources
    assert {"continued", "changed", "blocked", "error"} <= outcomes


if __name__ == "__main__":
    json.dump(_run_scenario(), sys.stdout, indent=1)
    sys.stdout.write("\n")
