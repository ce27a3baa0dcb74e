"""Host tools through the session machinery, against a real fake CLI
(``tests/fakes/twoway_cli.py``, whose stream does not report the calls, so the
session records them): a call answered, a raise and a timeout answered as
errors and the turn going on, several calls at once, an unknown name, the
events, spans, tallies and budgets that see them, and who may not use tools."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest

from coding_genesis import Budget, CodingGenesisAgent, tool
from coding_genesis.errors import AgentUsageError, ConfigError
from coding_genesis.events import Event, ToolCallEvent, ToolResultEvent
from coding_genesis.status import Status
from tests.otel_support import Spans, spans
from tests.session.twoway import TwoWayBackend, TwoWayProtocol, agent, one_way_backend

__all__ = ["spans"]

pytestmark = pytest.mark.anyio

calls: list[tuple[int, int]] = []


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    calls.append((a, b))
    return a + b


@tool
async def fails(path: str) -> str:
    raise FileNotFoundError(f"no such file: {path}")


@tool(timeout=0.3)
async def slow() -> str:
    await anyio.sleep(60)
    return "never"


def recorder(a: CodingGenesisAgent) -> list[Event]:
    events: list[Event] = []
    a.subscribe(events.append)
    return events


async def test_a_run_with_tools_calls_the_function_and_records_the_call(tmp_path: Path) -> None:
    calls.clear()
    a = agent(tmp_path, tools=[add])
    events = recorder(a)
    r = await a.run('CALL add {"a": 2, "b": 3}')
    assert r["status"] == 0 and r["message"] == "result: 5", r
    assert calls == [(2, 3)]
    assert r["tool_calls"] == 1
    (call,) = [e for e in events if isinstance(e, ToolCallEvent)]
    (result,) = [e for e in events if isinstance(e, ToolResultEvent)]
    assert (call.name, call.input, result.is_error, result.output) == (
        "add",
        {"a": 2, "b": 3},
        False,
        "5",
    )
    assert call.id == result.id


@pytest.mark.slow
async def test_a_raise_a_timeout_and_bad_arguments_answer_errors_and_the_turn_goes_on(
    tmp_path: Path,
) -> None:
    a = agent(tmp_path, tools=[add, fails, slow])
    events = recorder(a)
    async with a.session() as s:
        raised = await s.send('CALL fails {"path": "/x"}')
        assert raised["status"] == 0
        assert raised["message"] == "tool error: FileNotFoundError: no such file: /x"
        started = time.monotonic()
        late = await s.send("CALL slow {}")
        assert late["message"] == "tool error: slow did not finish within 0.3s"
        assert time.monotonic() - started < 10
        wrong = await s.send('CALL add {"a": "two"}')
        assert wrong["message"].startswith("tool error: invalid arguments for add: a:"), wrong
        assert "b: Field required" in wrong["message"]
        unknown = await s.send("CALL nope {}")
        assert (
            unknown["message"]
            == "tool error: no host tool named 'nope' (host tools: add, fails, slow)"
        )
        after = await s.send('CALL add {"a": 1, "b": 1}')
        assert after["message"] == "result: 2"
    errors = [e.is_error for e in events if isinstance(e, ToolResultEvent)]
    assert errors == [True, True, True, True, False]


@pytest.mark.slow
async def test_a_call_still_running_when_its_turn_ends_is_cancelled(tmp_path: Path) -> None:
    started, ended = anyio.Event(), anyio.Event()

    @tool(timeout=30)
    async def long_call() -> str:
        started.set()
        try:
            await anyio.sleep(30)
        finally:
            ended.set()
        return "late"

    a = agent(tmp_path, tools=[long_call, add])
    async with a.session() as s:
        results: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def turn() -> None:
                results.append(await s.send("CALL long_call {}"))

            tg.start_soon(turn)
            with anyio.fail_after(10):
                await started.wait()
            assert await s.interrupt() is True
            with anyio.fail_after(5):
                await ended.wait()
        assert results[0]["status"] == 130
        after = await s.send('CALL add {"a": 1, "b": 2}')
        assert after["message"] == "result: 3"


async def test_calls_at_once_run_concurrently(tmp_path: Path) -> None:
    both = threading.Barrier(2, timeout=5)

    @tool
    def meet(n: int) -> str:
        both.wait()  # each call waits for the other: they must run at the same time
        return f"met {n}"

    r = await agent(tmp_path, tools=[meet]).run('CALL2 meet {"n": 1}')
    assert r["status"] == 0 and r["message"] == "result: met 1"
    assert r["tool_calls"] == 2


@pytest.mark.slow
async def test_the_execute_tool_span_and_the_budget_see_host_calls(
    tmp_path: Path, spans: Spans
) -> None:
    a = agent(tmp_path, tools=[add])
    r = await a.run('CALL add {"a": 2, "b": 3}')
    assert r["status"] == 0
    span = spans.one("execute_tool add")
    assert (span.attributes or {})["gen_ai.tool.name"] == "add"
    capped = agent(tmp_path, tools=[add], budget=Budget(max_tool_calls=1))
    over = await capped.run('CALL2 add {"a": 1, "b": 1}')
    assert over["status"] == Status.FAILED and over["error"] == "budget_exceeded", over


@pytest.mark.slow
async def test_tools_on_a_per_call_basis_override_the_agent_s(tmp_path: Path) -> None:
    @tool(name="add")
    def other_add(a: int, b: int) -> int:
        return a * b

    a = agent(tmp_path, tools=[add])
    r = await a.run('CALL add {"a": 2, "b": 3}', tools=[other_add])
    assert r["message"] == "result: 6"
    none = await a.run('CALL add {"a": 2, "b": 3}', tools=[], approver=lambda request: True)
    assert none["message"] == "tool error: no host tool named 'add' (host tools: none)"


async def test_warm_pooled_sessions_host_the_tools_of_their_settings(tmp_path: Path) -> None:
    from coding_genesis import SessionPool

    async with SessionPool(
        TwoWayBackend(),
        size=1,
        max_idle=60,
        cwd=str(tmp_path),
        timeout=20,
        grace=1.0,
        ledger=str(tmp_path / "ledger"),
        tools=[add],
    ) as pool:
        r = await pool.run('CALL add {"a": 4, "b": 5}')
    assert r["status"] == 0 and r["message"] == "result: 9", r


class NoTools(TwoWayProtocol):
    can_host_tools: ClassVar[bool] = False


class NoToolsBackend(TwoWayBackend):
    name = "twoway-no-tools"

    def control(self) -> NoTools:
        return NoTools()


class Broken(TwoWayProtocol):
    def answer_tool(self, call: Any, result: Any) -> list[dict[str, Any]]:
        raise RuntimeError("a plug-in's bug")


class BrokenBackend(TwoWayBackend):
    name = "twoway-broken"

    def control(self) -> Broken:
        return Broken()


@pytest.mark.slow
async def test_a_protocol_that_cannot_answer_breaks_only_that_turn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    a = CodingGenesisAgent(BrokenBackend(), cwd=str(tmp_path), timeout=1.5, grace=0.5, tools=[add])
    r = await a.run('CALL add {"a": 1, "b": 2}')
    assert r["status"] == Status.TIMEOUT, r  # the CLI waited for an answer that never came
    assert "could not answer host tool add" in caplog.text
    assert (await a.run("TEXT fine", approver=lambda request: True))["status"] == 0


async def test_who_cannot_take_tools(tmp_path: Path) -> None:
    # every shipped backend takes them now (ACP agents over MCP): a stream-json CLI cannot
    with pytest.raises(ConfigError, match="cannot call the caller's functions"):
        CodingGenesisAgent(one_way_backend(), tools=[add])
    r = await CodingGenesisAgent(one_way_backend(), cwd=str(tmp_path)).run("hi", tools=[add])
    assert r["status"] == Status.USAGE and "tools=" in r["message"]
    with pytest.raises(AgentUsageError, match="cannot call the caller's functions"):
        CodingGenesisAgent(NoToolsBackend(), cwd=str(tmp_path)).session(tools=[add])
    with pytest.raises(ConfigError, match="two host tools"):
        agent(tmp_path, tools=[add, add])
    bad = await agent(tmp_path).run("TEXT hi", tools=[lambda: 1])
    assert bad["status"] == Status.USAGE and "pass name=" in bad["message"]


async def test_a_batch_line_never_names_host_code(tmp_path: Path) -> None:
    from coding_genesis import RunSpec, run_many

    with pytest.raises(ConfigError, match="tools cannot be set in a batch"):
        RunSpec(prompt="x", backend="failer", tools=[add])
    line = {"prompt": "x", "backend": "failer", "tools": ["os:system"]}
    (answer,) = await run_many([line])
    assert answer["status"] == Status.USAGE and "tools cannot be set" in answer["message"]
    (by_default,) = await run_many(
        [{"prompt": "x", "backend": "failer"}], defaults={"tools": [add]}
    )
    assert by_default["status"] == Status.USAGE


@pytest.mark.slow
def test_a_run_many_file_naming_tools_is_refused(tmp_path: Path) -> None:
    import subprocess
    import sys

    requests = tmp_path / "requests.jsonl"
    line = {"prompt": "x", "backend": "failer", "cwd": str(tmp_path), "tools": ["os:system"]}
    requests.write_text(json.dumps(line) + "\n")
    for trusted in ([], ["--trusted-input"]):
        proc = subprocess.run(
            [sys.executable, "-m", "coding_genesis._cli.main", "run-many", str(requests), *trusted],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )
        (answer,) = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
        assert answer["status"] == Status.USAGE and "tools" in answer["message"], answer
