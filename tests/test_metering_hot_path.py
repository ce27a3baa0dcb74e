"""Metering's hot path keeps every guarantee: per-message usage is translated
only when something hears it (and the result is the same either way), the
decoded-events tap dispatches by event type, and a per-run budget charged
lazily (below every threshold) still warns, stops and reports what it charged."""

from __future__ import annotations

from typing import Any

import pytest

from coding_genesis.backends.claude import ClaudeTranslator
from coding_genesis.budget import Budget, Usage
from coding_genesis.events import EventKind, UsageEvent
from coding_genesis.stop import StopHandle
from tests.support import EventLog, FakeCLI, QuietObserver
from tests.test_metering import message, tool_result

pytestmark = pytest.mark.anyio


def _script(messages: int, *, result: bool = True) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = [{"init": True}]
    for n in range(1, messages + 1):
        steps += [message(n), tool_result(n)]
    if result:
        steps.append({"result": "done"})
    return steps


def test_the_translator_makes_per_message_usage_only_when_asked() -> None:
    line = message(1)["emit"]
    on = ClaudeTranslator()
    usage = [e for e in on.translate(line) if isinstance(e, UsageEvent)]
    assert len(usage) == 1
    assert usage[0].payload() == {
        "usage": line["message"]["usage"],
        "model": line["message"]["model"],
        "message_id": "msg_1",
    }
    assert usage[0] == UsageEvent(
        line["message"]["usage"], model=line["message"]["model"], message_id="msg_1"
    )
    assert [e.kind for e in on.translate(line)] == [EventKind.TOOL_CALL]  # a repeat: no usage

    off = ClaudeTranslator()
    off.live_usage = False
    assert [e.kind for e in off.translate(line)] == [EventKind.TOOL_CALL]


async def test_unheard_per_message_usage_changes_nothing_in_the_result(
    fake_claude: FakeCLI,
) -> None:
    """metering=False and nobody subscribed: no per-message usage events are
    made; the result is the one a listened-to run gives."""
    fake_claude.script(_script(3))
    quiet = await fake_claude.agent(metering=False).run("go")
    heard_agent = fake_claude.agent(metering=False)
    log = EventLog(heard_agent)
    heard = await heard_agent.run("go")
    assert [e["message_id"] for e in log.of("usage") if e.get("message_id")] == [
        "msg_1",
        "msg_2",
        "msg_3",
    ]
    for key in ("status", "usage", "cost_usd", "tool_calls", "num_turns", "lines", "message"):
        assert quiet[key] == heard[key], key
    assert quiet["usage"] == {"input_tokens": 3, "output_tokens": 5}  # the CLI's own total


async def test_result_usage_is_the_clis_total_never_one_message(fake_claude: FakeCLI) -> None:
    """A run without the CLI's result line: ``usage`` stays unset (a message's
    usage is not the run's), metering counts the messages."""
    fake_claude.script(_script(2, result=False))
    result = await fake_claude.agent().run("go")
    assert result["usage"] is None
    assert result["metering"]["tokens"]["input"] == 2000
    assert result["metering"]["turns"] == 2


class _TypeCounter(QuietObserver):
    """An observer with a ``decoded_handlers`` dispatch: hears only its types."""

    event_kinds: frozenset[EventKind] = frozenset()

    def __init__(self, fail: bool = False) -> None:
        self.seen: list[str] = []
        self.fail = fail
        self.decoded_handlers = {"tool_call": self._on, "usage": self._on}

    def _on(self, event: Any) -> None:
        self.seen.append(event._type)
        if self.fail:
            raise RuntimeError("boom")


async def test_the_tap_dispatches_by_type_and_drops_a_failing_handler(
    fake_claude: FakeCLI,
) -> None:
    fake_claude.script(_script(2))
    counter = _TypeCounter()
    result = await fake_claude.agent(observers=[counter], metering=False).run("go")
    assert result["status"] == 0
    assert counter.seen == ["usage", "tool_call", "usage", "tool_call", "usage"]

    both = _TypeCounter()  # with metering: two taps, each hears its own
    result = await fake_claude.agent(observers=[both]).run("go")
    assert both.seen == ["usage", "tool_call", "usage", "tool_call", "usage"]
    assert result["metering"]["turns"] == 2 and result["metering"]["tool_calls"] == 2

    failing = _TypeCounter(fail=True)
    result = await fake_claude.agent(observers=[failing], metering=False).run("go")
    assert result["status"] == 0 and result["message"] == "done"
    assert failing.seen == ["usage"]  # dropped at its first failure


def test_a_per_run_budget_charges_lazily_below_its_thresholds() -> None:
    budget = Budget(max_tokens=1000, max_tool_calls=10, warn_at=(0.5,), per_run=True)
    stop = StopHandle()
    run = budget.open_run("r", stop)
    assert run.below(0.0, 400, 0, 1, 1)  # under 50 % of each: nothing to charge yet
    assert run.below(0.0, 499, 0, 2, 4)
    assert not run.below(0.0, 500, 0, 2, 4)  # reaches the 50 % warning: charged now
    assert [(w.limit, w.fraction) for w in run.charge(Usage(0.0, 500, 0, 2, 4))] == [
        ("max_tokens", 0.5)
    ]
    assert run.below(0.0, 600, 0, 3, 4)  # past the warning, below the limit
    assert not run.below(0.0, 1001, 0, 3, 4)
    run.charge(Usage(0.0, 1001, 0, 3, 4))
    assert stop.request is not None and "max_tokens=1000" in stop.request.message
    field = run.close(stopped_by_us=True)
    assert field["outcome"] == "stopped"
    assert field["charged"]["tokens"] == 1001

    settled = budget.open_run("s", None)
    assert settled.below(0.25, 300, 7, 2, 3)
    field = settled.close(stopped_by_us=False)  # the owed totals are charged on close
    assert field["outcome"] == "ran" and field["exceeded"] is None
    assert field["charged"] == {
        "cost_usd": 0.25,
        "tokens": 300,
        "cache_tokens": 7,
        "turns": 2,
        "tool_calls": 3,
    }


def test_a_shared_budget_is_charged_at_once() -> None:
    """A shared pot is never charged lazily: other runs must see each charge."""
    pot = Budget(max_tokens=1000)
    run = pot.open_run("a", None)
    assert not run.below(0.0, 10, 0, 1, 0)
    run.charge(Usage(tokens=10))
    assert pot.spent["tokens"] == 10


async def test_a_per_run_budget_reports_the_runs_whole_usage(fake_claude: FakeCLI) -> None:
    fake_claude.script(_script(3))
    budget = Budget(max_tokens=10**9, max_tool_calls=10**6, per_run=True)
    result = await fake_claude.agent(budget=budget).run("go")
    assert result["status"] == 0
    charged = result["budget"]["charged"]
    assert charged["tool_calls"] == 3 and charged["turns"] == 3
    assert charged["tokens"] == 8  # the CLI's own total at the end (3 in + 5 out)
    assert result["budget"]["outcome"] == "ran"
