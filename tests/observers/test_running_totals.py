"""A run's share of a CLI session's running totals (``usage.RunningTotals``), and the two
translators that report them: claude's ``total_cost_usd``/``modelUsage`` (running across
turns and ``--resume``) and codex exec's thread usage (running across ``resume``).  The real
CLIs are in ``tests/real_cli/test_session_records.py``."""

from __future__ import annotations

from typing import Any

import pytest

from coding_genesis.backends.claude import ClaudeBackend, recorded_total, running_total
from coding_genesis.backends.codex import CodexBackend
from coding_genesis.events import UsageEvent
from coding_genesis.usage import RunningTotals, Tokens


def test_a_share_is_the_total_less_the_last_one_seen() -> None:
    totals = RunningTotals()
    assert totals.share("claude", "s1", {"cost": 0.2}) == {"cost": 0.2}  # a new session
    assert totals.share("claude", "s1", {"cost": 0.5}) == pytest.approx({"cost": 0.3})
    assert totals.share("claude", "s2", {"cost": 0.5}) == {"cost": 0.5}  # another session
    assert totals.share("codex", "s1", {"cost": 0.5}) == {"cost": 0.5}  # another CLI
    assert totals.share("claude", "s1", {"cost": 0.1}) == {"cost": 0.1}  # went down: a new count
    assert totals.share("claude", None, {"cost": 0.7}) == {"cost": 0.7}  # no session: itself
    totals.seed("claude", "s3", {"cost": 1.0})
    assert totals.share("claude", "s3", {"cost": 1.25}) == pytest.approx({"cost": 0.25})
    assert totals.last("claude", "s3") == {"cost": 1.25}


def test_it_is_bounded() -> None:
    totals = RunningTotals(size=2)
    for name in ("a", "b", "c"):
        totals.share("x", name, {"n": 1})
    assert totals.last("x", "a") is None and totals.last("x", "c") == {"n": 1}


def _claude_result(session: str, cost: float, tokens: int) -> dict[str, Any]:
    return {
        "type": "result",
        "subtype": "success",
        "session_id": session,
        "result": "ok",
        "usage": {"input_tokens": 12, "output_tokens": 7},
        "total_cost_usd": cost,
        "modelUsage": {
            "m": {
                "inputTokens": tokens,
                "outputTokens": tokens * 7 // 12,
                "costUSD": cost,
                "contextWindow": 9,
            }
        },
    }


def _usage(events: Any) -> Any:
    """The result's usage event (its ``by_model`` checked to be there)."""
    (usage,) = [e for e in events if isinstance(e, UsageEvent) and e.by_model]
    return usage


def test_claudes_running_cost_becomes_each_turns_share() -> None:
    totals = RunningTotals()
    shares = []
    for turn, (cost, tokens) in enumerate([(0.2, 12), (0.4, 24), (0.6, 36)]):
        translator = ClaudeBackend().translator()
        translator.totals = totals
        event = _usage(translator.translate(_claude_result("s", cost, tokens)))
        shares.append((event.cost_usd, event.by_model["m"]["inputTokens"]))
        assert event.by_model["m"]["contextWindow"] == 9, turn  # not a counter: kept
    assert shares == [(0.2, 12), (pytest.approx(0.2), 12), (pytest.approx(0.2), 12)]
    # a replay (no totals) reports what the CLI said
    plain = ClaudeBackend().translator()
    assert _usage(plain.translate(_claude_result("s", 0.6, 36))).cost_usd == 0.6


def test_what_the_run_log_knows_seeds_claudes_totals() -> None:
    totals = RunningTotals()
    totals.seed("claude", "s", recorded_total(0.4, {"m": (Tokens(24, 14, 0, 0), 0.4)}))
    assert recorded_total(0.4, {"m": (Tokens(24, 14, 0, 0), 0.4)}) == running_total(
        0.4, {"m": {"inputTokens": 24, "outputTokens": 14, "cacheReadInputTokens": 0,
                    "cacheCreationInputTokens": 0, "costUSD": 0.4}}
    )  # fmt: skip
    translator = ClaudeBackend().translator()
    translator.totals = totals
    event = _usage(translator.translate(_claude_result("s", 0.6, 36)))
    assert event.cost_usd == pytest.approx(0.2) and event.by_model["m"]["inputTokens"] == 12


def test_codex_exec_resume_reports_its_own_share_of_the_thread() -> None:
    totals = RunningTotals()
    seen = []
    for total in (12, 24, 36):
        translator = CodexBackend().translator()
        translator.totals = totals
        translator.translate({"type": "thread.started", "thread_id": "t1"})
        done = {"type": "turn.completed", "usage": {"input_tokens": total, "output_tokens": 7}}
        (usage,) = [e for e in translator.translate(done) if isinstance(e, UsageEvent)]
        assert usage.usage is not None
        seen.append(usage.usage["input_tokens"])
    assert seen == [12, 12, 12]
