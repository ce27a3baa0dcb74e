"""Hooks through the session machinery, driven against a real fake CLI
(``tests/fakes/twoway_cli.py``): a blocking pre-tool hook, a changed input, the
hooks before the approver, hooks that raise, hang or answer nonsense, an
observed hook point whose block is recorded as not applied, and the options'
checks.  claude's and codex's own hook points: ``tests/backends`` and, with the
real CLIs, ``tests/real_cli/test_hooks.py``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis.approval import ApprovalRequest
from coding_genesis.errors import AgentUsageError, ConfigError
from coding_genesis.hooks import HookInput, HookResult
from tests.session import twoway
from tests.session.twoway import one_way_backend

pytestmark = pytest.mark.anyio


def agent(tmp_path: Path, **settings: Any) -> CodingGenesisAgent:
    settings.setdefault("ledger", False)
    return twoway.agent(tmp_path, **settings)


async def test_a_blocking_pre_tool_hook_refuses_the_call_and_the_approver_is_not_asked(
    tmp_path: Path,
) -> None:
    seen: list[HookInput] = []
    asked: list[ApprovalRequest] = []

    def guard(hook: HookInput) -> HookResult | None:
        seen.append(hook)
        if "rm" in str(hook.input.get("command")):
            return HookResult(block=True, message="no rm here")
        return None

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    a = agent(tmp_path, hooks={"pre_tool": guard}, approver=approver)
    async with a.session() as s:
        blocked = await s.send_result('HOOKASK Bash {"command": "rm -rf /"}')
        assert blocked.status == 0 and blocked.message == "blocked no rm here"
        assert asked == []
        allowed = await s.send_result('HOOKASK Bash {"command": "echo hi"}')
        assert allowed.message == 'ran {"command": "echo hi"}'
    assert [r.tool for r in asked] == ["Bash"]
    hook = seen[0]
    assert (hook.event, hook.tool, hook.kind, hook.turn) == ("pre_tool", "Bash", "command", 1)
    assert hook.cwd == str(tmp_path) and hook.backend == "twoway" and hook.run_id
    assert hook.session_id == "sess-1" and hook.raw["type"] == "hook"
    (record,) = blocked.hooks  # the turn's end has no hook: no record
    assert record["outcome"] == "blocked" and record["message"] == "no rm here"
    assert record["hook"].endswith("guard") and record["tool"] == "Bash" and record["turn"] == 1
    assert allowed.approvals[0]["allowed"] is True
    assert [h["outcome"] for h in allowed.hooks] == ["continued"]


async def test_hooks_run_in_order_the_approver_sees_the_changed_input(tmp_path: Path) -> None:
    order: list[str] = []

    def first(hook: HookInput) -> HookResult:
        order.append("first")
        return HookResult(input={"command": "echo changed"}, context="first says hi")

    async def second(hook: HookInput) -> HookResult:
        order.append("second sees " + str(hook.input["command"]))
        await anyio.sleep(0.01)
        return HookResult(context="second too")

    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    a = agent(tmp_path, approver=approver)
    async with a.session(hooks={"pre_tool": [first, second]}) as s:
        r = await s.send_result('HOOKASK Bash {"command": "echo original"}')
    assert order == ["first", "second sees echo changed"]
    assert asked[0].input == {"command": "echo changed"}
    assert r.message == 'ran {"command": "echo changed"} context: first says hi\nsecond too'
    assert [h["outcome"] for h in r.hooks] == ["changed", "changed"]


async def test_without_an_approver_the_hook_alone_answers(tmp_path: Path) -> None:
    def change(hook: HookInput) -> HookResult:
        return HookResult(input={**hook.input, "command": "echo safe"}, context="be careful")

    a = agent(tmp_path, hooks={"pre_tool": change})
    r = await a.run_result('HOOK Bash {"command": "echo risky"}')
    assert r.status == 0, r.message
    assert r.message == 'ran {"command": "echo safe"} context: be careful'
    assert r.approvals == []  # a run with hooks is one turn of a live process, no approver


@pytest.mark.slow
async def test_a_raising_a_hanging_and_a_wrong_pre_tool_hook_each_block(tmp_path: Path) -> None:
    def boom(hook: HookInput) -> HookResult:
        raise ValueError("hook bug")

    async def hang(hook: HookInput) -> None:
        await anyio.sleep(600)

    def wrong(hook: HookInput) -> str:
        return "yes"

    cases: list[tuple[Any, str, str]] = [
        (boom, "error", "ValueError: hook bug"),
        (hang, "timeout", "no answer within 0.5s"),
        (wrong, "error", "the hook answered str, not a HookResult or None"),
    ]
    for hook, outcome, error in cases:
        a = agent(tmp_path, hook_timeout=0.5, hooks={"pre_tool": hook})
        started = time.monotonic()
        r = await a.run_result('HOOK Bash {"command": "echo hi"}')
        assert time.monotonic() - started < 10
        assert r.status == 0 and r.message == "blocked blocked: the pre_tool hook failed"
        record = r.hooks[0]
        assert (record["outcome"], record["error"]) == (outcome, error)


@pytest.mark.slow
async def test_an_observed_hook_point_records_what_it_could_not_apply(tmp_path: Path) -> None:
    ends: list[HookInput] = []

    async def at_end(hook: HookInput) -> HookResult:
        await anyio.sleep(0.3)  # the CLI goes on; the turn's result waits for the hook
        ends.append(hook)
        return HookResult(block=True, message="keep going", context="more")

    def broken(hook: HookInput) -> None:
        raise RuntimeError("observer bug")

    a = agent(tmp_path, hooks={"turn_end": [at_end, broken]})
    r = await a.run_result('HOOK Bash {"command": "echo hi"}')
    assert r.status == 0 and r.message == 'ran {"command": "echo hi"}'
    assert [h.event for h in ends] == ["turn_end"]
    first, second = r.hooks
    assert first["outcome"] == "continued" and first["message"] == "keep going"
    assert first["not_applied"] == "twoway cannot apply a turn_end hook's block, context"
    assert (second["outcome"], second["error"]) == ("error", "RuntimeError: observer bug")
    assert second["not_applied"] is None  # a failing observer blocks nothing


async def test_hooks_are_checked_and_need_a_backend_that_reports_them(tmp_path: Path) -> None:
    def hook(data: HookInput) -> None:
        return None

    with pytest.raises(ConfigError, match="unknown event 'pre_prompt'"):
        agent(tmp_path, hooks={"pre_prompt": hook})
    with pytest.raises(ConfigError, match="a hook is a callable"):
        agent(tmp_path, hooks={"pre_tool": [hook, "nope"]})
    with pytest.raises(ConfigError, match="reports no pre_compact hook point"):
        agent(tmp_path, hooks={"pre_compact": hook})
    with pytest.raises(ConfigError, match="has no two-way protocol, which hooks= needs"):
        CodingGenesisAgent(one_way_backend(), cwd=str(tmp_path), hooks={"pre_tool": hook})
    plain = agent(tmp_path)
    r = await plain.run("TEXT hi", hooks={"post_tool": hook})
    assert r["status"] == 64 and "reports no post_tool hook point" in str(r["message"])
    bad = await plain.run("TEXT hi", hooks={"pre_tool": 3})  # type: ignore[dict-item]
    assert bad["status"] == 64 and "hooks['pre_tool']" in str(bad["message"])
    with pytest.raises(AgentUsageError, match="reports no pre_compact hook point"):
        plain.session(hooks={"pre_compact": hook})
    one_way = CodingGenesisAgent(one_way_backend(), cwd=str(tmp_path))
    r = await one_way.run("hello", hooks={"pre_tool": hook})
    assert r["status"] == 64 and "hooks=" in str(r["message"])


@pytest.mark.slow
async def test_an_interrupt_during_a_slow_hook_ends_the_turn_at_once(tmp_path: Path) -> None:
    async def slow(hook: HookInput) -> None:
        await anyio.sleep(600)

    a = agent(tmp_path, hooks={"pre_tool": slow}, hook_timeout=20)
    async with a.session() as s:
        results: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def turn() -> None:
                results.append(await s.send_result('HOOK Bash {"command": "echo hi"}'))

            tg.start_soon(turn)
            await anyio.sleep(0.5)
            started = time.monotonic()
            assert await s.interrupt() is True
        assert time.monotonic() - started < 5
        assert results[0].status == 130 and results[0].error == "interrupted"
        after = await s.send_result("TEXT still here")
        assert after.status == 0 and after.message == "still here"
