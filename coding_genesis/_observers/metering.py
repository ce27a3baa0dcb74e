"""Metering: usage, cost with provenance, context use and latency of every run,
and the budget checks, as an observer of the run's events.

The agent adds a :class:`MeteringObserver` to every run (``metering=False``
turns it off).  It reads the run's events only:

* tokens: input, output, cache reads, cache writes, per model where the CLI
  says which (claude: per message, then ``modelUsage`` at the end; codex: per
  turn, input including its cached part, which we count as cache reads);
* ``cost_usd`` with ``cost_source``: ``reported`` (the CLI's own figure,
  claude), ``computed`` (tokens × :mod:`coding_genesis._observers.prices`, codex), or
  ``unknown`` (no price known for the model); summed over the run's attempts;
* context-window use (the last request's prompt tokens / the model's window);
* latency: time to the first CLI event and to the first text after the
  spawn, output tokens per second, each tool call's duration.

When usage arrives, per backend (so when a budget can act):

=========  ===============================================================
claude     per message (each ``assistant`` line): stopped within one event
codex      per turn (``turn.completed``), i.e. at the end of ``codex exec``
others     whenever their translator emits a usage event (often at the end)
=========  ===============================================================

Turns and tool calls are counted as their events arrive, for every backend.
With a :class:`~coding_genesis.budget.Budget` the run is charged on each of
those events and stopped through its stop handle when a limit is crossed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from coding_genesis._observers.prices import (
    PRICES_AS_OF,
    PRICES_SOURCES,
    ModelPrice,
    PriceTable,
    context_window,
)
from coding_genesis._pipeline.tally import MAX_TOOL_TIMINGS
from coding_genesis._util.numbers import is_bad_number, safe_count
from coding_genesis.budget import Budget, BudgetRun, Usage, amount_text
from coding_genesis.events import Event, EventKind, TextEvent
from coding_genesis.observer import AttemptTally, Observer, RunInfo, RunObserver
from coding_genesis.run_events import BudgetEvent
from coding_genesis.usage import Tokens, normalize_usage

__all__ = ["MeteringObserver"]


class _Attempt:
    """One attempt's usage."""

    __slots__ = (
        "by_model",
        "final",
        "final_by_model",
        "folded",
        "live_cost",
        "live_messages",
        "live_tokens",
        "messages",
        "reported_cost",
        "turn_tokens",
    )

    def __init__(self) -> None:
        #: Running sums of the messages and turns so far (O(1) per event, for budgets).
        self.live_tokens = Tokens()
        self.live_cost = 0.0
        #: message id -> (its tokens, its cost), for replacing a repeat (budgets only).
        self.live_messages: dict[str, tuple[Tokens, float]] = {}
        #: message id -> (model, the CLI's usage dict), normalized only at the end.
        self.messages: dict[str, tuple[str | None, Mapping[str, Any]]] = {}
        #: model -> the tokens of messages folded by the translator.
        self.folded: dict[str | None, Tokens] = {}
        #: Usage of events without a message id (codex turns), summed.
        self.turn_tokens = Tokens()
        #: The CLI's own total at the end (claude's result), authoritative.
        self.final: Tokens | None = None
        self.final_by_model: dict[str, tuple[Tokens, float | None, int | None]] | None = None
        self.reported_cost: float | None = None
        self.by_model: dict[str, Tokens] = {}

    def tokens_by_model(self, default_model: str | None) -> dict[str | None, Tokens]:
        if self.final_by_model:
            return {m: t for m, (t, _c, _w) in self.final_by_model.items()}
        out: dict[str | None, Tokens] = {}
        for model, usage in self.messages.values():
            out.setdefault(model or default_model, Tokens()).add(normalize_usage(usage))
        for model, tokens in self.folded.items():
            out.setdefault(model or default_model, Tokens()).add(tokens)
        if self.turn_tokens.prompt or self.turn_tokens.output:
            out.setdefault(default_model, Tokens()).add(self.turn_tokens)
        if self.final is not None and not self.final_by_model:
            return {default_model if len(out) != 1 else next(iter(out)): self.final}
        return out


class _MeterRun(RunObserver):
    """Watches one run (all its attempts)."""

    #: The published events metering needs (coding_genesis.observer); the
    #: run's own events come through :meth:`decoded`.
    event_kinds = frozenset({EventKind.RUN_STARTED})

    def __init__(self, info: RunInfo, prices: PriceTable, budget: Budget | None) -> None:
        #: The decoded-events handlers' dispatch (coding_genesis.observer): event
        #: type -> handler, read by the decoder once per type and attempt.
        #: Usage and the model come as events; what the tally folds anyway
        #: (tool calls and their times, first events) comes with
        #: :meth:`attempt_decoded`.  A budget counts tool calls as they come.
        self.decoded_handlers: dict[str, Callable[[Any], None]] = {
            "usage": self._on_usage,
            "session": self._on_session,
        }
        if budget is not None:
            self.decoded_handlers["tool_call"] = self._on_tool_call
        #: Per-message usage: live for a budget (checked on each), else folded
        #: by the translator and given at the end of the stream.
        self.message_usage = "live" if budget is not None else "folded"
        self._info = info
        self._prices = prices
        self._model: str | None = info.model
        self._attempts: list[_Attempt] = []
        self._turns = 0
        self._tool_calls = 0
        self._spawned: float | None = None
        self._first_event: float | None = None
        self._first_text: float | None = None
        self._last_event: float | None = None
        self._tool_timings: list[dict[str, Any]] = []
        self._tool_time = 0.0
        self._tool_count = 0
        #: (model, usage dict) of the last message or turn: its prompt is the context in use.
        self._last_prompt: tuple[str | None, Mapping[str, Any]] | None = None
        self._publish = info.publish
        self._budget: BudgetRun | None = (
            budget.open_run(info.run_id, info.stop, info.session) if budget is not None else None
        )

    # -- events ---------------------------------------------------------
    #
    # ``event`` gets the events published on the agent's bus: only
    # ``run_started`` is asked for (``event_kinds``), which starts an attempt.
    # ``decoded`` gets the attempt's decoded events straight from the decoder,
    # unstamped and before redaction (see coding_genesis.observer): the hot
    # path: the decoder calls the handler for each type.  Nothing read leaves metering
    # but numbers, ids and names, and the response is redacted as a whole.

    def event(self, event: Event) -> None:
        if event.kind is EventKind.RUN_STARTED:
            self._attempts.append(_Attempt())
            if self._spawned is None:
                self._spawned = event.ts

    def decoded(self, event: Event) -> None:
        handler = self.decoded_handlers.get(event._type)
        if handler is not None:
            handler(event)

    def attempt_decoded(self, tally: AttemptTally) -> None:
        """An attempt's stream is decoded: its first events' and tool calls'
        times, and its tool calls (a budget counted them already)."""
        if tally.first_seen:
            if self._first_event is None:
                self._first_event = min(tally.first_seen.values())
            text = tally.first_seen.get(TextEvent)
            if text is not None and self._first_text is None:
                self._first_text = text
            self._last_event = tally.now
        if self._budget is None:
            self._tool_calls += tally.tool_calls
        self._tool_time += tally.tool_time
        self._tool_count += tally.tool_timed
        room = MAX_TOOL_TIMINGS - len(self._tool_timings)
        self._tool_timings += [
            {"id": tool_id, "name": name, "duration_s": round(duration, 6)}
            for tool_id, name, duration in tally.tool_timings[: max(room, 0)]
        ]

    def _attempt(self) -> _Attempt:
        if not self._attempts:  # a replay: no run_started
            self._attempts.append(_Attempt())
        return self._attempts[-1]

    def _on_usage(self, event: Any) -> None:
        attempt = self._attempt()
        message_id = event.message_id
        usage = event.usage
        if (
            message_id is not None
            and type(usage) is dict
            and event.cost_usd is None
            and not event.by_model
        ):
            # The hot path (claude, per message): keep the dict; it is read at
            # the end, or now for a budget.  The same as _usage does for it.
            messages = attempt.messages
            if message_id not in messages:
                self._turns += 1
            messages[message_id] = self._last_prompt = (event.model, usage)
            if self._budget is not None:
                self._live_message(attempt, message_id, event.model, usage)
                self._charge()
            return
        if self._usage(attempt, event) and self._budget is not None:
            self._charge()

    def _on_tool_call(self, event: Any) -> None:
        self._tool_calls += 1
        self._charge()

    def _on_session(self, event: Any) -> None:
        if event.model and self._model is None:
            self._model = event.model

    def _usage(self, attempt: _Attempt, event: Any) -> bool:
        usage = event.usage
        if event.by_model:
            per_model: dict[str, tuple[Tokens, float | None, int | None]] = {}
            for model, data in event.by_model.items():
                if isinstance(data, Mapping):
                    cost = data.get("costUSD")
                    window = data.get("contextWindow")
                    per_model[str(model)] = (
                        normalize_usage(data),
                        float(cost)
                        if isinstance(cost, int | float) and not is_bad_number(cost)
                        else None,
                        safe_count(window) or None,
                    )
            attempt.final_by_model = per_model
        if event.cost_usd is not None:
            attempt.reported_cost = float(event.cost_usd)
        if type(usage) is not dict and not isinstance(usage, Mapping):  # dict: the fast check
            return event.cost_usd is not None
        if event.messages:  # claude's messages, folded by its translator
            tokens = normalize_usage(usage)
            attempt.folded.setdefault(event.model, Tokens()).add(tokens)
            attempt.live_tokens.add(tokens)
            attempt.live_cost += self._price(event.model, tokens)
            self._turns += event.messages
            return True
        message_id = event.message_id
        if message_id is not None:
            # The hot path: keep the dict; it is read at the end, or now for a budget.
            model = event.model
            old = attempt.messages.get(message_id)
            if old is None:
                self._turns += 1
            attempt.messages[message_id] = (model, usage)
            self._last_prompt = (model, usage)
            if self._budget is not None:
                self._live_message(attempt, message_id, model, usage)
        elif event.cost_usd is not None or event.by_model:
            attempt.final = normalize_usage(usage)  # claude's result: the attempt's total
        else:
            tokens = normalize_usage(usage)
            attempt.turn_tokens.add(tokens)  # codex: one turn
            attempt.live_tokens.add(tokens)
            attempt.live_cost += self._price(None, tokens)
            self._turns += 1
            self._last_prompt = (None, usage)
        return True

    def _live_message(
        self, attempt: _Attempt, message_id: str, model: str | None, usage: Mapping[str, Any]
    ) -> None:
        """A message's usage into the attempt's running sums (budgets only)."""
        live = attempt.live_messages
        before = live.get(message_id)
        if before is not None:  # the same message again: replace its figures
            attempt.live_tokens.add(before[0], -1)
            attempt.live_cost -= before[1]
        tokens = normalize_usage(usage)
        cost = self._price(model, tokens)
        live[message_id] = (tokens, cost)
        attempt.live_tokens.add(tokens)
        attempt.live_cost += cost

    # -- figures --------------------------------------------------------

    def _figures(self) -> tuple[Tokens, dict[str, dict[str, Any]], float | None, str | None]:
        """Total tokens, per model, cost and its source."""
        total = Tokens()
        models: dict[str, dict[str, Any]] = {}
        cost = 0.0
        sources: set[str] = set()
        for attempt in self._attempts:
            by_model = attempt.tokens_by_model(self._model)
            attempt_cost: float | None = 0.0
            attempt_source = "reported" if attempt.reported_cost is not None else "computed"
            for model, tokens in by_model.items():
                total.add(tokens)
                name = model or "unknown"
                entry = models.setdefault(name, {"tokens": Tokens(), "cost_usd": 0.0})
                entry["tokens"].add(tokens)
                model_cost: float | None = None
                if attempt.final_by_model and model in attempt.final_by_model:
                    model_cost = attempt.final_by_model[model][1]
                if model_cost is None and attempt.reported_cost is None:
                    price = self._prices.lookup(model)
                    if price is not None:
                        model_cost = price.cost(
                            tokens.input, tokens.output, tokens.cache_read, tokens.cache_write
                        )
                    elif tokens.prompt or tokens.output:
                        attempt_cost = None
                if model_cost is not None and entry["cost_usd"] is not None:
                    entry["cost_usd"] += model_cost
                elif (tokens.prompt or tokens.output) and attempt.reported_cost is None:
                    entry["cost_usd"] = None
                if attempt_cost is not None and attempt.reported_cost is None:
                    attempt_cost += model_cost or 0.0
            if attempt.reported_cost is not None:
                attempt_cost = attempt.reported_cost
            if attempt_cost is None:
                sources.add("unknown")
            elif by_model or attempt.reported_cost is not None:
                sources.add(attempt_source)
                cost += attempt_cost
        if "unknown" in sources:
            return total, self._model_dicts(models), None, "unknown"
        if not sources:
            return total, self._model_dicts(models), None, None
        source = "reported" if sources == {"reported"} else "computed"
        return total, self._model_dicts(models), round(cost, 8), source

    @staticmethod
    def _model_dicts(models: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {
            m: {
                **e["tokens"].to_dict(),
                "cost_usd": round(e["cost_usd"], 8) if e["cost_usd"] is not None else None,
            }
            for m, e in models.items()
        }

    def _price(self, model: str | None, tokens: Tokens) -> float:
        price = self._prices.lookup(model or self._model)
        if price is None:
            return 0.0  # unknown price: counts nothing live (cost_source says unknown)
        return price.cost(tokens.input, tokens.output, tokens.cache_read, tokens.cache_write)

    def _charge(self) -> None:
        """Charge the budget with the run's usage so far: the CLI's own totals
        where an attempt reported them, else the running sums (O(attempts))."""
        budget = self._budget
        assert budget is not None
        tokens = cache = 0
        cost = 0.0
        for attempt in self._attempts:
            t = attempt.final if attempt.final is not None else attempt.live_tokens
            tokens += t.input + t.output
            cache += t.cache_read + t.cache_write
            if attempt.reported_cost is not None:
                cost += attempt.reported_cost
            elif attempt.final is not None:
                cost += self._price(None, attempt.final)
            else:
                cost += attempt.live_cost
        if budget.below(cost, tokens, cache, self._turns, self._tool_calls):
            return  # reaches no threshold: charged on close (see BudgetRun.below)
        warnings = budget.charge(Usage(cost, tokens, cache, self._turns, self._tool_calls))
        publish = self._publish
        if publish is None or (not warnings and budget.exceeded is None):
            return  # the usual case: nothing to say
        for warning in warnings:
            publish(
                BudgetEvent(
                    "warning",
                    warning.limit,
                    f"{warning.limit}: {warning.fraction:.0%} used "
                    f"({amount_text(warning.limit, warning.used)} of "
                    f"{amount_text(warning.limit, warning.max)})",
                    {"used": warning.used, "max": warning.max, "fraction": warning.fraction},
                )
            )
        exceeded = budget.exceeded
        if exceeded is not None and budget.reason and not getattr(self, "_told", False):
            self._told = True
            publish(
                BudgetEvent(
                    "exceeded",
                    exceeded.limit,
                    budget.reason,
                    {"used": exceeded.used, "max": exceeded.max, "over": exceeded.over},
                )
            )

    def _context(self) -> dict[str, Any] | None:
        if self._last_prompt is None:
            return None
        model, last = self._last_prompt
        used = normalize_usage(last).prompt
        model = model or self._model
        window: int | None = None
        for attempt in self._attempts:
            if attempt.final_by_model:
                for name, (_t, _c, w) in attempt.final_by_model.items():
                    if w and (model is None or name.startswith(model) or model.startswith(name)):
                        window = w
        if window is None and self._info.model:
            window = context_window(self._info.model, None)
        if window is None and model:
            window = self._window(model)
        if not window:
            return {"model": model, "used_tokens": used, "window": None, "fraction": None}
        return {
            "model": model,
            "used_tokens": used,
            "window": window,
            "fraction": round(used / window, 6),
        }

    def _window(self, model: str) -> int | None:
        if self._model and "[" in self._model and self._model.startswith(model):
            return context_window(self._model)
        price: ModelPrice | None = self._prices.lookup(model)
        return price.context_window if price is not None else None

    # -- observer protocol ------------------------------------------------

    def stdout(self, chunk: bytes) -> None:
        pass

    def flush(self) -> None:
        pass

    def response_fields(self) -> Mapping[str, Any]:
        total, models, cost, source = self._figures()
        spawned = self._spawned
        end = self._last_event or time.time()
        latency: dict[str, Any] = {
            "first_event_s": _since(spawned, self._first_event),
            "first_text_s": _since(spawned, self._first_text),
            "tokens_per_s": (
                round(total.output / (end - spawned), 3)
                if spawned is not None and end > spawned and total.output
                else None
            ),
            "tool_calls_timed": self._tool_count,
            "tool_time_s": round(self._tool_time, 6),
            "tool_calls": list(self._tool_timings),
        }
        metering: dict[str, Any] = {
            "tokens": total.to_dict(),
            "by_model": models,
            "turns": self._turns,
            "tool_calls": self._tool_calls,
            "context": self._context(),
            "latency": latency,
        }
        if source == "computed":
            metering["prices"] = {"as_of": PRICES_AS_OF, "sources": list(PRICES_SOURCES)}
        fields: dict[str, Any] = {"metering": metering, "cost_source": source or "unknown"}
        if source is not None and source != "unknown":
            fields["cost_usd"] = cost
        elif source == "unknown":
            fields["cost_usd"] = None
            fields["warnings"] = [
                "cost unknown: no price for model "
                f"{self._model or 'unknown'!s} (give prices= to price it)"
            ]
        if self._budget is not None:
            fields["budget"] = self._budget_field()
        return fields

    def _budget_field(self) -> dict[str, Any]:
        assert self._budget is not None
        stop = self._info.stop
        stopped = stop is not None and stop.request is not None and self._spawned is not None
        return self._budget.close(stopped)

    def finish(self, response: Mapping[str, Any]) -> None:
        pass


def _since(start: float | None, then: float | None) -> float | None:
    if start is None or then is None:
        return None
    return round(max(0.0, then - start), 6)


class MeteringObserver(Observer):
    """Meters every run of an agent (see the module docstring)."""

    #: Writes nothing: it watches replays too (``agent.replay``, ``genesis replay``).
    replays = True

    def __init__(
        self,
        prices: Mapping[str, Any] | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.prices = PriceTable(prices)
        self.budget = budget
        if budget is not None:
            budget.hold()  # one more agent holds it (see Budget.shared_by_many)

    def __repr__(self) -> str:
        return f"MeteringObserver(budget={self.budget!r})"

    def start(self, run: RunInfo) -> _MeterRun:
        return _MeterRun(run, self.prices, self.budget)
