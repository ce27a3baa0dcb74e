"""Metering's hot path keeps every guarantee: per-message usage is translated
only when something hears it (and the result is the same either way), the
decoded-events tap dispatches by event type, and a per-run budget charged
lazily (below every threshold) still warns, stops and reports what it charged."""

from __future__ import annotations

from typing import Any

import pytest

from coding_genesis._supervision.stop import StopHandle
from coding_genesis.backends.claude import ClaudeTranslator
from coding_genesis.budget import Budget, Usage
from coding_genesis.events import EventKind, UsageEvent
from tests.observers.test_metering import message, tool_result
from tests.support import EventLog, FakeCLI, QuietObserver, present

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
    off.message_usage = "off"
    assert [e.kind for e in off.translate(line)] == [EventKind.TOOL_CALL]


@pytest.mark.slow
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


@pytest.mark.slow
async def test_result_usage_is_the_clis_total_never_one_message(fake_claude: FakeCLI) -> None:
    """A run without the CLI's result line: a message's usage is not the run's; metering
    counts the messages, and (issue 28) ``usage`` is metering's sum of both, saying so."""
    fake_claude.script(_script(2, result=False))
    result = await fake_claude.agent().run("go")
    assert result["usage_source"] == "metering"
    assert present(result["usage"])["input_tokens"] == 2000  # both messages, not one's 1000
    assert present(result["metering"])["tokens"]["input"] == 2000
    assert present(result["metering"])["turns"] == 2


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


@pytest.mark.slow
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
    assert (
        present(result["metering"])["turns"] == 2 and present(result["metering"])["tool_calls"] == 2
    )

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


@pytest.mark.slow
async def test_a_per_run_budget_reports_the_runs_whole_usage(fake_claude: FakeCLI) -> None:
    fake_claude.script(_script(3))
    budget = Budget(max_tokens=10**9, max_tool_calls=10**6, per_run=True)
    result = await fake_claude.agent(budget=budget).run("go")
    assert result["status"] == 0
    charged = present(result["budget"])["charged"]
    assert charged["tool_calls"] == 3 and charged["turns"] == 3
    assert charged["tokens"] == 8  # the CLI's own total at the end (3 in + 5 out)
    assert present(result["budget"])["outcome"] == "ran"


# -- folded per-message usage: metering's figures for a dict store per line --


def _two_model_script(messages: int, *, result: bool) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = [{"init": True}]
    for n in range(1, messages + 1):
        line = message(n, inp=100 * n, out=10 * n)
        if n % 3 == 0:
            line["emit"]["message"]["model"] = "claude-haiku-4-5"
        steps += [line, line, tool_result(n)]  # claude repeats a message's usage per line
    if result:
        steps.append({"result": "done"})
    return steps


@pytest.mark.slow
@pytest.mark.parametrize("result_line", [True, False])
async def test_folded_usage_gives_the_figures_live_usage_gives(
    fake_claude: FakeCLI, result_line: bool
) -> None:
    """metering alone folds a claude run's per-message usage in the
    translator; a usage subscriber makes it live.  Both answer the same
    tokens, models, turns, context and cost (with and without the CLI's
    result line, whose absence leaves only the messages to count)."""
    fake_claude.script(_two_model_script(7, result=result_line))
    folded = await fake_claude.agent().run("go")
    live_agent = fake_claude.agent()
    log = EventLog(live_agent)
    live = await live_agent.run("go")
    assert len([e for e in log.of("usage") if e.get("message_id")]) == 7  # live: one each
    assert folded["status"] == live["status"]
    for key in ("tokens", "by_model", "turns", "tool_calls", "context"):
        assert present(folded["metering"])[key] == present(live["metering"])[key], key
    assert folded["cost_usd"] == live["cost_usd"]
    assert folded["cost_source"] == live["cost_source"]
    assert folded["usage"] == live["usage"]
    assert present(folded["metering"])["turns"] == 7
    if not result_line:  # only the messages to count: both models, summed
        assert set(present(folded["metering"])["by_model"]) == {
            message(1)["emit"]["message"]["model"],
            "claude-haiku-4-5",
        }
        assert present(folded["metering"])["tokens"]["input"] == sum(100 * n for n in range(1, 8))
        assert (
            present(folded["metering"])["context"]["used_tokens"] == 700
        )  # the last message's prompt


def test_the_folding_translator_is_bounded_and_sums_what_it_lets_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from coding_genesis.backends import claude

    monkeypatch.setattr(claude, "MAX_FOLDED", 3)
    translator = ClaudeTranslator()
    translator.message_usage = "folded"
    for n in range(1, 11):
        line = message(n, inp=n, out=2 * n)["emit"]
        assert [e.kind for e in translator.translate(line)] == [EventKind.TOOL_CALL]
        assert len(translator._messages) <= 4
    events = [e for e in translator.flush() if isinstance(e, UsageEvent)]
    model = message(1)["emit"]["message"]["model"]
    assert [(e.model, e.messages, e.message_id) for e in events] == [
        (model, 9, None),
        (model, None, "msg_10"),
    ]
    summed = events[0].usage
    assert summed is not None
    assert (summed["input_tokens"], summed["output_tokens"]) == (45, 90)
    assert events[0].payload()["messages"] == 9
    assert translator.flush() == []  # given once


def test_a_hostile_message_id_is_folded_not_fatal() -> None:
    translator = ClaudeTranslator()
    translator.message_usage = "folded"
    line = message(1)["emit"]
    line["message"]["id"] = ["not", "hashable"]
    assert [e.kind for e in translator.translate(line)] == [EventKind.TOOL_CALL]
    (last,) = translator.flush()
    assert isinstance(last, UsageEvent)
    assert last.message_id == "" and last.usage == line["message"]["usage"]


# -- the decoder's routes ----------------------------------------------------


def _lines(*objs: dict[str, Any]) -> bytes:
    import orjson

    return b"".join(orjson.dumps(o) + b"\n" for o in objs)


class _Routes:
    """Routes whose handlers the test changes (bumping the version)."""

    def __init__(self) -> None:
        self.version = 0
        self.by_type: dict[type, list[Any]] = {}
        self.failures: list[Any] = []

    def handlers(self, event_type: type) -> list[Any]:
        return list(self.by_type.get(event_type, ()))

    def failed(self, handler: Any) -> None:
        self.failures.append(handler)
        self.by_type = {t: [h for h in hs if h is not handler] for t, hs in self.by_type.items()}
        self.version += 1


def test_routes_follow_who_hears_and_a_failing_handler_is_not_the_lines_fault() -> None:
    from coding_genesis._pipeline.decode import Decoder
    from coding_genesis._pipeline.tally import RunTally
    from coding_genesis.events import TextEvent, ToolCallEvent

    heard: list[str] = []
    routes = _Routes()
    routes.by_type[ToolCallEvent] = [lambda e: heard.append(f"a:{e.id}")]
    clock = iter([10.0, 12.5, 13.0, 14.0]).__next__
    tally = RunTally("/tmp")
    decoder = Decoder(ClaudeTranslator(), tally, routes=routes, clock=clock)

    decoder.feed(_lines(message(1)["emit"]))  # at 10.0
    # Who hears changes between chunks: the next chunk takes the new routes.
    routes.by_type[ToolCallEvent] = [lambda e: heard.append(f"b:{e.id}")]
    routes.by_type[TextEvent] = [lambda e: heard.append(f"text:{e.text}")]
    routes.version += 1
    decoder.feed(_lines(tool_result(1)["emit"], message(2)["emit"], message(3, tool=False)["emit"]))

    def boom(event: Any) -> None:
        heard.append("boom")
        raise RuntimeError("handler bug")

    routes.by_type[ToolCallEvent] = [boom, lambda e: heard.append(f"c:{e.id}")]
    routes.version += 1
    decoder.feed(_lines(message(4)["emit"], message(5)["emit"]))  # at 13.0
    decoder.feed(b"")

    assert heard == ["a:tool_1", "b:tool_2", "text:text 3", "boom", "c:tool_4", "c:tool_5"]
    assert routes.failures == [boom]
    assert decoder.skipped == 0 and decoder.errors == 0  # the lines were fine
    assert tally.tool_calls == 4
    # The tally times tool calls by the chunks' clock, and knows each type's first event.
    assert tally.tool_timings == [("tool_1", "Bash", 2.5)]
    assert tally.first_seen[ToolCallEvent] == 10.0 and tally.first_seen[TextEvent] == 12.5


@pytest.mark.slow
async def test_a_subscriber_that_joins_mid_run_hears_the_rest(fake_claude: FakeCLI) -> None:
    fake_claude.script(
        [
            {"init": True},
            message(1),
            {"sleep": 0.3},  # the next lines come in another chunk
            tool_result(1),
            message(2, tool=False),
            {"result": "done"},
        ]
    )
    agent = fake_claude.agent()
    late: list[str] = []

    def first(event: Any) -> None:
        if not late:
            late.append("joined")
            agent._bus.subscribe(lambda e: late.append(e.to_dict()["text"]), kinds=[EventKind.TEXT])

    agent._bus.subscribe(first, kinds=[EventKind.TOOL_CALL])
    result = await agent.run("go")
    assert result["status"] == 0
    assert late == ["joined", "text 2"]
    timing = present(result["metering"])["latency"]["tool_calls"]
    assert [t["id"] for t in timing] == ["tool_1"]
    assert timing[0]["duration_s"] >= 0.25  # the call and its result were 0.3 s apart
