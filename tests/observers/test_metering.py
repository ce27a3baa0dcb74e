"""Metering and budgets with fake CLIs that stream usage: cost with its
provenance, live budget stops (cost, tokens, turns, tool calls) that stop the
whole tree within one event, and shared budgets over a batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis._observers.prices import ModelPrice, PriceTable, context_window
from coding_genesis.batch import RunSpec, run_many
from coding_genesis.budget import Budget
from coding_genesis.errors import ConfigError
from tests.support import FAKE_BIN, EventLog, FakeCLI, QuietObserver, present
from tests.tree_support import assert_tree_gone, run_pids, wait_for_record

pytestmark = pytest.mark.anyio

HOLDER = {"setsid": True, "ignore_sigterm": True, "hold_stdout": True, "sleep": 600}
SONNET = "claude-sonnet-4-5-20250929"  # $3 in / $15 out per million tokens


def message(n: int, *, inp: int = 1000, out: int = 1000, tool: bool = True) -> dict[str, Any]:
    """A claude assistant line with its own usage (one turn), calling a tool."""
    content: list[dict[str, Any]] = (
        [{"type": "tool_use", "id": f"tool_{n}", "name": "Bash", "input": {"command": f"step {n}"}}]
        if tool
        else [{"type": "text", "text": f"text {n}"}]
    )
    return {
        "emit": {
            "type": "assistant",
            "message": {
                "id": f"msg_{n}",
                "type": "message",
                "role": "assistant",
                "model": SONNET,
                "content": content,
                "usage": {
                    "input_tokens": inp,
                    "output_tokens": out,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                },
            },
            "session_id": "sess-1",
        }
    }


def spending_fakes(tmp_path: Any, count: int, *, messages: int) -> list[FakeCLI]:
    """``count`` fake claudes, each sending ``messages`` tool-calling messages (1000 + 1000
    tokens each) 0.3 s apart, then its result: a batch that spends as it goes."""
    fakes = [FakeCLI(tmp_path) for _ in range(count)]
    for fake in fakes:
        fake.script(
            [{"init": True}]
            + [s for n in range(1, messages + 1) for s in (message(n), {"sleep": 0.3})]
            + [{"result": "done"}]
        )
    return fakes


def tool_result(n: int) -> dict[str, Any]:
    return {
        "emit": {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"tool_{n}", "content": "ok"}],
            },
        }
    }


def streaming_script(messages: int = 5) -> list[dict[str, Any]]:
    """init, a grandchild ignoring SIGTERM and holding stdout, then one message (1000 in, 1000 out:
    $0.018) every 0.2 s, then a hang: only a stop ends it."""
    steps: list[dict[str, Any]] = [
        {"init": True},
        {"grandchild": HOLDER},
        {"await_records": {"key": "grandchild", "count": 1}},
    ]
    for n in range(1, messages + 1):
        steps += [message(n), {"sleep": 0.05}, tool_result(n), {"sleep": 0.2}]
    steps.append({"hang": True})
    return steps


def msg_ids(log: EventLog) -> list[str]:
    return [e["message_id"] for e in log.of("usage") if e.get("message_id")]


async def _stopped_run(fake: FakeCLI, budget: Budget) -> tuple[dict[str, Any], EventLog]:
    fake.script(streaming_script())
    agent = fake.agent(budget=budget, timeout=20.0, grace=0.5)
    log = EventLog(agent)
    result = dict(await agent.run("do the task"))
    return result, log


def _assert_budget_stop(result: dict[str, Any], fake: FakeCLI, limit: str) -> None:
    assert result["status"] == 1, result["message"]
    assert result["error"] == "budget_exceeded"
    assert result["stop_reason"] == "requested"
    assert result["failure"]["category"] == "budget_exceeded"
    assert result["failure"]["retryable"] is False
    assert limit in result["message"] and "over" in result["message"]
    assert result["budget"]["outcome"] == "stopped"
    assert result["budget"]["exceeded"]["limit"] == limit
    assert result["budget"]["exceeded"]["over"] > 0
    assert result["signals_sent"] == ["SIGTERM", "SIGKILL"]  # the timeout's stop path
    pids = run_pids(fake)
    assert len(pids["main"]) == 1 and len(pids["grandchild"]) == 1
    assert_tree_gone(fake)


@pytest.mark.slow
@pytest.mark.timeout(30)
async def test_max_cost_stops_within_one_event_and_keeps_partial_work(
    fake_claude: FakeCLI,
) -> None:
    # $0.018 per message: the 2nd message ($0.036) crosses $0.03.
    result, log = await _stopped_run(fake_claude, Budget(max_cost_usd=0.03))
    _assert_budget_stop(result, fake_claude, "max_cost_usd")
    assert msg_ids(log) == ["msg_1", "msg_2"]  # nothing after the crossing event
    assert result["tool_calls"] == 2  # the partial work is in the result
    assert result["session_id"]  # from the init line
    assert result["budget"]["exceeded"]["used"] == pytest.approx(0.036)
    assert result["cost_usd"] == pytest.approx(0.036)
    assert result["cost_source"] == "computed"
    assert result["metering"]["tokens"]["input"] == 2000
    assert result["metering"]["tokens"]["output"] == 2000
    budget_events = log.of("budget")
    assert [e["level"] for e in budget_events] == ["warning", "exceeded"]  # 50 % at $0.018
    assert budget_events[0]["fraction"] == 0.5


@pytest.mark.slow
@pytest.mark.timeout(30)
async def test_max_tokens_stop(fake_claude: FakeCLI) -> None:
    # 2000 tokens per message: the 3rd message (6000) crosses 5000.
    result, log = await _stopped_run(fake_claude, Budget(max_tokens=5000))
    _assert_budget_stop(result, fake_claude, "max_tokens")
    assert msg_ids(log) == ["msg_1", "msg_2", "msg_3"]
    assert result["budget"]["exceeded"] == {
        "limit": "max_tokens",
        "max": 5000,
        "used": 6000,
        "over": 1000,
    }


@pytest.mark.slow
@pytest.mark.timeout(30)
async def test_max_turns_stop(fake_claude: FakeCLI) -> None:
    result, log = await _stopped_run(fake_claude, Budget(max_turns=2))
    _assert_budget_stop(result, fake_claude, "max_turns")
    assert msg_ids(log) == ["msg_1", "msg_2", "msg_3"]
    assert result["metering"]["turns"] == 3


@pytest.mark.slow
@pytest.mark.timeout(30)
async def test_max_tool_calls_stop(fake_claude: FakeCLI) -> None:
    result, log = await _stopped_run(fake_claude, Budget(max_tool_calls=1))
    _assert_budget_stop(result, fake_claude, "max_tool_calls")
    assert [e["id"] for e in log.of("tool_call")] == ["tool_1", "tool_2"]
    assert result["metering"]["latency"]["tool_calls"][0]["name"] == "Bash"


@pytest.mark.slow
async def test_claude_reported_cost_and_per_model_usage(fake_claude: FakeCLI) -> None:
    """The result's own cost wins: ``reported``; per-model figures and the
    context window come from ``modelUsage``."""
    fake_claude.script(
        [
            {"init": True},
            message(1, tool=False),
            {
                "emit": {
                    "type": "result",
                    "subtype": "success",
                    "is_error": False,
                    "result": "done",
                    "session_id": "sess-1",
                    "num_turns": 1,
                    "total_cost_usd": 0.5,
                    "usage": {"input_tokens": 1000, "output_tokens": 1000},
                    "modelUsage": {
                        f"{SONNET}[1m]": {
                            "inputTokens": 1000,
                            "outputTokens": 1000,
                            "cacheReadInputTokens": 0,
                            "cacheCreationInputTokens": 0,
                            "costUSD": 0.5,
                            "contextWindow": 1000000,
                        }
                    },
                }
            },
        ]
    )
    result = await fake_claude.agent().run("hi")
    assert result["status"] == 0, result["message"]
    assert result["cost_usd"] == 0.5 and result["cost_source"] == "reported"
    metering = present(result["metering"])
    assert metering["by_model"][f"{SONNET}[1m]"]["cost_usd"] == 0.5
    assert metering["context"]["used_tokens"] == 1000
    assert metering["context"]["window"] == 1_000_000
    assert metering["latency"]["first_event_s"] is not None
    assert metering["latency"]["first_text_s"] is not None
    assert "budget" in result and result["budget"] is None


@pytest.mark.slow
async def test_codex_cost_is_computed_from_its_tokens(fake_codex: FakeCLI) -> None:
    fake_codex.script(
        [
            {"emit": {"type": "thread.started", "thread_id": "th-1"}},
            {"emit": {"type": "turn.started"}},
            {
                "emit": {
                    "type": "item.completed",
                    "item": {"id": "item_0", "type": "agent_message", "text": "done"},
                }
            },
            {
                "emit": {
                    "type": "turn.completed",
                    "usage": {
                        "input_tokens": 10000,
                        "cached_input_tokens": 4000,
                        "output_tokens": 2000,
                        "reasoning_output_tokens": 500,
                    },
                }
            },
        ]
    )
    result = await fake_codex.agent(model="gpt-5").run("hi")
    assert result["status"] == 0, result["message"]
    # gpt-5: $1.25 in, $0.125 cached, $10 out per million tokens.
    expected = (6000 * 1.25 + 4000 * 0.125 + 2000 * 10.0) / 1e6
    assert result["cost_source"] == "computed"
    assert result["cost_usd"] == pytest.approx(expected)
    assert present(result["metering"])["tokens"] == {
        "input": 6000,
        "output": 2000,
        "cache_read": 4000,
        "cache_write": 0,
        "total": 8000,
    }
    assert present(result["metering"])["prices"]["sources"]
    assert present(result["metering"])["context"]["window"] == 400_000


@pytest.mark.slow
async def test_unknown_model_cost_is_unknown_and_prices_override(fake_codex: FakeCLI) -> None:
    usage = {"input_tokens": 1000, "cached_input_tokens": 0, "output_tokens": 1000}
    fake_codex.script(
        [
            {"emit": {"type": "thread.started", "thread_id": "th-1"}},
            {"emit": {"type": "turn.completed", "usage": usage}},
        ]
    )
    result = await fake_codex.agent(model="house-model-1").run("hi")
    assert result["cost_source"] == "unknown" and result["cost_usd"] is None
    assert any("cost unknown" in w for w in result["warnings"])
    priced = await fake_codex.agent(
        model="house-model-1", prices={"house-model": {"input": 1.0, "output": 2.0}}
    ).run("hi")
    assert priced["cost_source"] == "computed"
    assert priced["cost_usd"] == pytest.approx(0.003)


@pytest.mark.slow
async def test_shared_budget_stops_a_batch_of_twenty(tmp_path: Any) -> None:
    """20 requests, 4 at a time, one $0.05 pot: every run spends $0.018 per
    message; once the pot is spent the runs in flight are stopped and the
    queued ones are never started.  Every result says which and why."""
    fakes = spending_fakes(tmp_path, 20, messages=3)
    budget = Budget(max_cost_usd=0.05)
    specs = [
        RunSpec.model_validate(
            {
                "prompt": "work",
                "backend": "claude",
                "cli_path": str(FAKE_BIN / "claude"),
                "env": fake.env(),
                "timeout": 20.0,
                "grace": 0.5,
                "budget": budget,
            }
        )
        for fake in fakes
    ]
    results = await run_many(specs, concurrency=4)
    outcomes = [r["budget"]["outcome"] for r in results]
    assert outcomes.count("ran") == 0
    assert "stopped" in outcomes and "not_started" in outcomes
    for r in results:
        assert r["error"] == "budget_exceeded", r["message"]
        # Issue 28: a run the spent budget never started has its own name.
        never_started = r["budget"]["outcome"] == "not_started"
        assert r["failure"]["category"] == ("not_started" if never_started else "budget_exceeded")
        assert r["budget"]["reason"]
        assert r["budget"]["shared"] is True
    never = [r for r in results if r["budget"]["outcome"] == "not_started"]
    assert all(r["pid"] is None for r in never)
    assert all("nothing was started" in r["budget"]["reason"] for r in never)
    stopped = [r for r in results if r["budget"]["outcome"] == "stopped"]
    assert len(stopped) == 20 - len(never) and all(r["pid"] for r in stopped)
    # A run stopped just after its spawn may not have got as far as recording itself.
    assert len([f for f in fakes if run_pids(f)["main"]]) <= len(stopped)
    assert budget.exhausted and budget.spent["exceeded"]["limit"] == "max_cost_usd"
    for fake in fakes:
        assert_tree_gone(fake)


@pytest.mark.slow
async def test_shared_budget_between_agents_in_threads(tmp_path: Any) -> None:
    """Two agents in two threads, one budget: the pot is charged by both and
    a run in the other thread is stopped when it is spent."""
    budget = Budget(max_tokens=9000)
    fakes = [FakeCLI(tmp_path), FakeCLI(tmp_path)]
    for fake in fakes:
        fake.script(streaming_script(messages=4))
    agents = [fake.agent(budget=budget, timeout=20.0) for fake in fakes]
    results: list[dict[str, Any]] = []

    def run(agent: CodingGenesisAgent) -> None:
        results.append(dict(agent.run_sync("work")))

    async with anyio.create_task_group() as tg:
        for agent in agents:
            tg.start_soon(anyio.to_thread.run_sync, run, agent)
    assert [r["error"] for r in results] == ["budget_exceeded", "budget_exceeded"]
    assert sorted(r["budget"]["outcome"] for r in results) == ["stopped", "stopped"]
    assert budget.spent["tokens"] > 9000
    for fake in fakes:
        assert_tree_gone(fake)


def test_budget_and_price_validation() -> None:
    with pytest.raises(ConfigError):
        Budget()
    with pytest.raises(ConfigError):
        Budget(max_cost_usd=-1)
    with pytest.raises(ConfigError):
        Budget(max_turns=1.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        Budget(max_tokens=10, warn_at=(1.5,))
    with pytest.raises(ConfigError):
        CodingGenesisAgent("claude", budget="1 dollar")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        CodingGenesisAgent("claude", prices={"m": {"input": 1}})
    with pytest.raises(ConfigError):
        PriceTable({"m": {"input": 1, "output": 2, "bogus": 3}})
    table = PriceTable({"claude-sonnet-4": ModelPrice(1.0, 2.0)})
    assert table.lookup("claude-sonnet-4-5-20250929") == ModelPrice(1.0, 2.0)
    assert table.lookup("claude-opus-4-1-20250805") is not None
    assert context_window("claude-opus-4-8[1m]") == 1_000_000


@pytest.mark.slow
async def test_budget_refuses_runs_once_spent(fake_claude: FakeCLI) -> None:
    """A spent shared budget: the next run of the same agent starts nothing."""
    fake_claude.script(streaming_script(messages=2))
    budget = Budget(max_turns=1)
    agent = fake_claude.agent(budget=budget)
    first = await agent.run("one")
    assert present(first["budget"])["outcome"] == "stopped"
    await wait_for_record(fake_claude, "argv")
    before = len(run_pids(fake_claude)["main"])
    second = await agent.run("two")
    assert second["error"] == "budget_exceeded"
    assert present(second["budget"])["outcome"] == "not_started"
    assert second["pid"] is None
    assert len(run_pids(fake_claude)["main"]) == before


def test_codex_recording_cost_is_computed_and_claude_recording_reported() -> None:
    """The real CLIs' recordings, replayed: codex's cost computed from its
    tokens (the recording's model, gpt-5.5, priced as gpt-5), claude's as it
    reported it, with its per-model figures and 1M context window."""
    from tests.support import RECORDINGS

    codex = CodingGenesisAgent("codex", model="gpt-5.5", ledger=False).replay(
        (RECORDINGS / "codex_shell.jsonl").read_bytes()
    )
    assert codex["cost_source"] == "computed"
    assert present(codex["metering"])["tokens"]["total"] == 24 + 14
    assert codex["cost_usd"] == pytest.approx((24 * 1.25 + 14 * 10.0) / 1e6)
    claude = CodingGenesisAgent("claude", ledger=False).replay(
        (RECORDINGS / "claude_bash_allowed.jsonl").read_bytes()
    )
    assert claude["cost_source"] == "reported" and claude["cost_usd"] == 0.00047
    assert present(claude["metering"])["by_model"]["claude-opus-4-8[1m]"]["cost_usd"] == 0.00047
    assert present(claude["metering"])["context"]["window"] == 1_000_000
    assert present(claude["metering"])["turns"] == 2


def test_budget_accounting_warnings_cache_and_refunds() -> None:
    """The pot itself: warnings once per fraction, cache tokens only when
    asked, a lower figure (a reported cost below the estimate) is refunded."""
    from coding_genesis._supervision.stop import StopHandle
    from coding_genesis.budget import Usage

    budget = Budget(max_tokens=1000, warn_at=(0.5, 0.8))
    stop = StopHandle()
    run = budget.open_run("r1", stop)
    assert [(w.limit, w.fraction) for w in run.charge(Usage(tokens=400, cache_tokens=900))] == []
    assert [(w.fraction) for w in run.charge(Usage(tokens=850))] == [0.5, 0.8]
    assert run.charge(Usage(tokens=900)) == []  # each warning once
    assert not stop.requested
    run.charge(Usage(tokens=1001))
    assert stop.request is not None and stop.request.error == "budget_exceeded"
    assert (
        "max_tokens=1000 (used 1001 tokens, 1 token over)" in stop.request.message
    )  # issue 28: singular
    assert budget.spent["tokens"] == 1001

    cached = Budget(max_tokens=1000, include_cache=True).open_run("r2", None)
    cached.charge(Usage(tokens=400, cache_tokens=700))
    assert cached.exceeded is not None and cached.exceeded.used == 1100

    pot = Budget(max_cost_usd=1.0)
    first = pot.open_run("a", None)
    first.charge(Usage(cost_usd=0.9))
    first.charge(Usage(cost_usd=0.5))  # the CLI reported less than our estimate
    assert pot.spent["cost_usd"] == pytest.approx(0.5)
    assert not pot.exhausted


async def test_a_failing_decoded_tap_never_breaks_a_run(fake_claude: FakeCLI) -> None:
    """An observer whose ``decoded`` raises is dropped for the run; the run and
    metering go on (observers never break a run)."""

    class Broken(QuietObserver):
        def __init__(self) -> None:
            self.calls = 0

        def decoded(self, event: Any) -> None:
            self.calls += 1
            raise RuntimeError("boom")

    fake_claude.script([{"init": True}, message(1, tool=False), {"result": "done"}])
    broken = Broken()
    result = await fake_claude.agent(observers=[broken]).run("hi")
    assert result["status"] == 0 and result["message"] == "done"
    assert broken.calls == 1  # dropped at its first failure
    assert present(result["metering"])["turns"] == 1  # metering, another observer, went on


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_stopped_run_has_metering_s_usage_and_says_so(tmp_path: Path) -> None:
    """Issue 28: a run stopped by its budget before the CLI's total has ``usage`` from metering
    (not None while metering holds the tokens), ``usage_source`` says so, and a single agent's
    budget is no "shared budget"."""
    fake = FakeCLI(tmp_path)
    result, _ = await _stopped_run(fake, Budget(max_tool_calls=1))
    assert result["error"] == "budget_exceeded"
    assert result["usage_source"] == "metering"
    tokens = present(result["metering"])["tokens"]
    assert present(result["usage"])["input_tokens"] == tokens["input"] > 0
    assert present(result["usage"])["output_tokens"] == tokens["output"] > 0
    assert "shared" not in result["message"] and present(result["budget"])["shared"] is False
    assert "(used 2 tool calls, 1 tool call over)" in result["message"]

    fake.script([{"answer": "ok"}])  # the fake CLI's answer reports its own usage: 3 in, 5 out
    done = await fake.agent().run("hi")
    assert done["usage_source"] == "cli" and present(done["usage"])["output_tokens"] == 5
    fake.script([{"init": True}, {"exit": 1}])  # no usage at all
    failed = await fake.agent().run("hi")
    assert failed["usage_source"] == "unknown" and failed["usage"] is None
