"""Step definitions for budgets (tests/features/budget.feature); the agent,
its fake CLI and the common steps come from agent_steps' ``world``."""

from __future__ import annotations

import pytest
from pytest_bdd import given, parsers, then

from coding_genesis.budget import Budget, Usage
from tests.steps.agent_steps import World
from tests.tree_support import assert_tree_gone, run_pids


@given(parsers.parse("a CodingGenesisAgent with a budget of {usd:g} USD"))
def agent_with_budget(world: World, usd: float) -> None:
    world.kwargs["budget"] = Budget(max_cost_usd=usd)
    world.kwargs["grace"] = 0.5


@given("the subprocess streams messages costing 0.018 USD each and never finishes")
def streaming_messages(world: World) -> None:
    from tests.observers.test_metering import streaming_script

    world.steps = streaming_script()


@given("the budget was already spent by another run")
def budget_spent(world: World) -> None:
    budget = world.kwargs["budget"]
    assert isinstance(budget, Budget)
    budget.open_run("another run", None).charge(Usage(cost_usd=1.0))
    world.steps = [{"answer": "should never run"}]


@then("the run is stopped right after the message that crossed the budget")
def stopped_after_crossing(world: World) -> None:
    assert world.response is not None and world.log is not None
    assert world.response["stop_reason"] == "requested"
    messages = [e["message_id"] for e in world.log.of("usage") if e.get("message_id")]
    assert messages == ["msg_1", "msg_2"]


@then("the process tree is gone, its grandchild included")
def tree_gone(world: World) -> None:
    assert world.fake is not None
    assert len(run_pids(world.fake).get("grandchild", [])) == 1
    assert_tree_gone(world.fake)


@then(parsers.parse('the response says the limit "{limit}" was exceeded by {over:g} USD'))
def exceeded_by(world: World, limit: str, over: float) -> None:
    assert world.response is not None
    exceeded = world.response["budget"]["exceeded"]
    assert exceeded["limit"] == limit
    assert exceeded["over"] == pytest.approx(over)
    assert limit in world.response["message"]


@then(parsers.parse("the response keeps the partial work of {count:d} tool calls"))
def partial_work(world: World, count: int) -> None:
    assert world.response is not None
    assert world.response["tool_calls"] == count
    assert world.response["tool_usage"] == {"Bash": count}


@then(parsers.parse('the failure is "{category}" and not retryable'))
def failure_not_retryable(world: World, category: str) -> None:
    assert world.response is not None
    failure = world.response["failure"]
    assert failure["category"] == category
    assert failure["retryable"] is False
    assert world.response["error_context"]["error_type"] == category


@then("nothing was started")
def nothing_started(world: World) -> None:
    assert world.response is not None and world.fake is not None
    assert world.response["pid"] is None
    assert world.response["budget"]["outcome"] == "not_started"
    assert not world.fake.records()
